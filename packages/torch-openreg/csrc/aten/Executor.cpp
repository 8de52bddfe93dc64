// Executor.cpp - the generic device executor behind openreg's global
// fallback: one boxed kernel that runs any ATen operator with a CPU kernel
// on device memory, asynchronously, without copying its operands.
//
// Not here: the classic copy-to-the-CPU fallback (Fallback.cpp), used for
// what this declines, and the hand-written kernels (native/), which win over
// this wherever they are registered.
#include "aten/Executor.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/env.h>
#include <c10/util/overflows.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "aten/Fallback.h"
#include "aten/native/Launch.h"
#include "aten/native/RawKey.h"
#include "runtime/Check.h"
#include "runtime/Generator.h"
#include "runtime/Stream.h"

// LITERALINCLUDE START: EXECUTOR_NOTE
// Note [The device executor]
// An operator without an openreg kernel arrives here with its boxed
// arguments. The executor
//  1. asks the operator's Meta kernel what it returns (shapes, strides,
//     dtypes) from meta copies of the operands: no data, no device work;
//  2. allocates those outputs on the device (or, for in-place and out=
//     operators, resizes the tensors they write);
//  3. queues a kernel on the current stream that wraps every device operand
//     and output in a CPU view of its translated memory (Note [Running CPU
//     kernels on device memory] in native/Launch.h) and calls the
//     operator's CPU kernel on them;
//  4. returns the outputs at once, like a CUDA launch.
// View operators return views made with as_strided from the Meta result.
// When the output shape depends on the data (nonzero, masked_select,
// unique, boolean indexing) or the result is not a tensor (equal), there is
// no Meta answer: the kernel then keeps the CPU results and the host waits
// for it, as CUDA synchronises for the same operators. A CPU kernel's error
// in that case is raised on the host as it is, without faulting the device.
// Random operators get a private CPU generator seeded from the openreg
// generator at launch (Note [Random numbers on openreg streams]).
// LITERALINCLUDE END: EXECUTOR_NOTE

namespace torch_openreg {
namespace {

using Stack = torch::jit::Stack;

bool isOpenReg(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// Rebuilds an argument with fn applied to every tensor inside it (a tensor,
// a list of tensors, a list of optional tensors), always in the same order.
template <typename Fn>
c10::IValue mapTensors(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) return fn(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : value.toTensorList()) out.push_back(fn(t));
    return out;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (std::optional<at::Tensor> t : value.toOptionalTensorList()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(fn(*t)) : std::nullopt);
    }
    return out;
  }
  return value;
}

bool isGeneratorArgument(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

// What an operator's schema says about its results.
struct Signature {
  bool returnsView = false;       // a result aliases an input without writing it
  bool returnsNonTensor = false;  // bool, int, float, Scalar, ...
  std::vector<int> writtenArgument;  // per result: the argument it is (-1: new)
};

Signature readSignature(const c10::FunctionSchema& schema) {
  Signature signature;
  for (const c10::Argument& result : schema.returns()) {
    int written = -1;
    const c10::AliasInfo* alias = result.alias_info();
    if (alias != nullptr && !alias->isWrite()) signature.returnsView = true;
    if (alias != nullptr && alias->isWrite()) {
      for (size_t i = 0; i < schema.arguments().size(); ++i) {
        const c10::AliasInfo* argAlias = schema.arguments()[i].alias_info();
        if (argAlias != nullptr && argAlias->isWrite() &&
            argAlias->beforeSets() == alias->beforeSets()) {
          written = static_cast<int>(i);
        }
      }
    }
    c10::TypeKind kind = result.type()->kind();
    bool tensorLike = kind == c10::TypeKind::TensorType || kind == c10::TypeKind::ListType ||
                      kind == c10::TypeKind::OptionalType;
    if (!tensorLike) signature.returnsNonTensor = true;
    signature.writtenArgument.push_back(written);
  }
  return signature;
}

// The operands of one call, ready for a kernel: device tensors become
// placeholders (their views are rebuilt inside the kernel from DeviceViews
// taken now), CPU tensors are copied (the caller may change them before the
// kernel runs), generators become seeds. outputs, if any, follow args (the
// out= arguments of an out= twin).
class KernelArguments {
 public:
  KernelArguments(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                  c10::DeviceIndex device, c10::ArrayRef<c10::IValue> outputs = {}) {
    size_t count = args.size() + outputs.size();
    template_.reserve(count);
    views_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const c10::IValue& arg = i < args.size() ? args[i] : outputs[i - args.size()];
      if (isGeneratorArgument(schema.arguments()[i])) {
        std::optional<at::Generator> gen;
        if (arg.isGenerator()) gen = arg.toGenerator();
        seeds_.push_back({i, drawKernelSeed(gen, device)});
        template_.push_back(c10::IValue());
        continue;
      }
      template_.push_back(mapTensors(arg, [&](const at::Tensor& t) {
        placeholder_.push_back(isOpenReg(t));
        if (isOpenReg(t)) {
          describeInto(views_.emplace_back(), t);
          return at::Tensor();
        }
        if (!t.defined() || !t.device().is_cpu()) return t;
        at::Tensor copy = t.clone();
        // A Python number keeps its weaker role in type promotion.
        if (t.unsafeGetTensorImpl()->is_wrapped_number()) copy.unsafeGetTensorImpl()->set_wrapped_number(true);
        return copy;
      }));
    }
  }

  // Kernel only: the CPU stack for the operator's CPU kernel.
  Stack cpuStack() const {
    Stack stack;
    stack.reserve(template_.size());
    size_t slot = 0, view = 0;
    for (const c10::IValue& arg : template_) {
      stack.push_back(mapTensors(arg, [&](const at::Tensor& t) {
        return placeholder_[slot++] ? cpuView(views_[view++]) : t;
      }));
    }
    for (const auto& [index, seed] : seeds_) stack[index] = at::detail::createCPUGenerator(seed);
    return stack;
  }

 private:
  std::vector<c10::IValue> template_;
  std::vector<bool> placeholder_;
  std::vector<DeviceView> views_;
  std::vector<std::pair<size_t, uint64_t>> seeds_;
};

// An out= argument: written, and keyword-only.
bool isOutArgument(const c10::Argument& argument) {
  const c10::AliasInfo* alias = argument.alias_info();
  return alias != nullptr && alias->isWrite() && argument.kwarg_only();
}

// Kernel only: replaces the out= arguments with empty CPU tensors for the
// CPU kernel to size and fill. Returns their positions.
std::vector<size_t> useTemporaryOutputs(const c10::FunctionSchema& schema, Stack& stack) {
  std::vector<size_t> outputs;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (isOutArgument(schema.arguments()[i]) && stack[i].isTensor()) {
      stack[i] = at::empty({0}, stack[i].toTensor().options());
      outputs.push_back(i);
    }
  }
  return outputs;
}

// Holds back the warnings raised on this thread while it lives; passOn()
// releases them. (c10's warning handler is per thread, so this only sees
// the warnings of the kernel running here.)
class WarningsOnHold : public c10::WarningHandler {
 public:
  WarningsOnHold() : outer_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~WarningsOnHold() override { c10::WarningUtils::set_warning_handler(outer_); }
  WarningsOnHold(const WarningsOnHold&) = delete;
  WarningsOnHold& operator=(const WarningsOnHold&) = delete;

  void process(const c10::Warning& warning) override { held_.push_back(warning); }
  void passOn() {
    c10::WarningUtils::set_warning_handler(outer_);
    for (const c10::Warning& warning : held_) outer_->process(warning);
    held_.clear();
  }

 private:
  c10::WarningHandler* outer_;
  std::vector<c10::Warning> held_;
};

// Runs attempt(), a CPU kernel that may refuse what another route accepts.
// Returns true if it ran. Returns false if it threw an error that isRefusal
// accepts: the caller then takes the other route, and the warnings the
// attempt raised on its way to the error (that it is resizing its output,
// say) are dropped, since the user never asked for that attempt. Any other
// error is the user's: it is rethrown, with its warnings.
template <typename Attempt, typename IsRefusal>
bool attemptQuietly(Attempt attempt, IsRefusal isRefusal) {
  WarningsOnHold warnings;
  try {
    attempt();
  } catch (const c10::Error& error) {
    if (isRefusal(error)) return false;
    warnings.passOn();
    throw;
  }
  warnings.passOn();
  return true;
}

bool isResizeRefusal(const c10::Error& error) {
  return std::string(error.what_without_backtrace()).find("not resizable") != std::string::npos;
}

// Kernel only: calls the CPU kernel on views of the device operands. Some
// CPU out= kernels resize their output on the way (mse_loss.out does, to
// hold an intermediate), which a view of device memory cannot allow: those
// run again with temporary outputs, copied into the device outputs after.
Stack runOnCpu(const c10::OperatorHandle& op, const KernelArguments& operands) {
  Stack stack = operands.cpuStack();
  if (attemptQuietly([&] { op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack); },
                     isResizeRefusal)) {
    return stack;
  }
  Stack views = operands.cpuStack();
  Stack temporaries = views;
  std::vector<size_t> outputs = useTemporaryOutputs(op.schema(), temporaries);
  Stack results = temporaries;
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &results);
  for (size_t i : outputs) views[i].toTensor().copy_(temporaries[i].toTensor());
  return results;
}

at::Tensor toMeta(const at::Tensor& t) {
  // CPU scalars stay: TensorIterator accepts them beside any device.
  if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// Runs the Meta kernel; false if there is none or it cannot know the answer.
bool runMeta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, Stack* meta) {
  const auto& schema = op.schema();
  for (size_t i = 0; i < args.size(); ++i) {
    meta->push_back(isGeneratorArgument(schema.arguments()[i]) ? c10::IValue()
                                                                : mapTensors(args[i], toMeta));
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), meta);
    return true;
  } catch (const std::exception&) {
    // No Meta kernel, a data-dependent result, or a Python meta function
    // that refused: the CPU kernel will say whether it was a real error.
    return false;
  }
}

// LITERALINCLUDE START: EXECUTOR_SHAPE_CACHE
// Note [Caching shape inference]
// Many Meta kernels are Python functions (PyTorch's reference
// implementations), which cost tens of microseconds a call. What they
// compute depends only on the operator and the metadata of its arguments, so
// the answer is cached under a key that spells out exactly that: each
// tensor's dtype, sizes, strides and kind (device tensor, CPU scalar with its
// value, other CPU tensor), and every other argument's value. A training
// loop asks the same questions at every step, so after the first step no
// Meta kernel runs. "No answer" (data-dependent shapes) is cached too.
// The key is binary (raw integers, not text): building it allocates nothing
// once the per-thread buffer has grown, which keeps a cache hit cheap
// (appendRaw and appendInts, native/RawKey.h).

void appendKey(std::string& key, const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (!t.defined()) {
      key += 'U';
      return;
    }
    bool cpuScalar = t.device().is_cpu() && t.dim() == 0;
    key += cpuScalar ? (t.unsafeGetTensorImpl()->is_wrapped_number() ? 'W' : 'S') : (t.is_cpu() ? 'C' : 'D');
    appendRaw(key, t.scalar_type());
    appendInts(key, t.sizes());
    appendInts(key, t.strides());
    // A CPU scalar's value can decide the result dtype: its bytes are part of it.
    if (cpuScalar) key.append(static_cast<const char*>(t.const_data_ptr()), t.element_size());
  } else if (value.isTensorList() || value.isOptionalTensorList()) {
    key += '[';
    mapTensors(value, [&](const at::Tensor& t) {
      appendKey(key, t);
      return t;
    });
    key += ']';
  } else if (value.isInt()) {
    key += 'i';
    appendRaw(key, value.toInt());
  } else if (value.isDouble()) {
    key += 'd';
    appendRaw(key, value.toDouble());  // the bits: exact
  } else if (value.isBool()) {
    key += value.toBool() ? 'T' : 'F';
  } else if (value.isNone()) {
    key += 'N';
  } else if (value.isIntList()) {
    key += 'l';
    appendInts(key, value.toDimVector());
  } else {
    key += 'x';
    key += c10::str(value);  // strings, devices, nested lists: rare
    key += '\0';
  }
}

struct ShapeCache {
  static constexpr size_t kMaxEntries = size_t{1} << 16;
  std::mutex mutex;
  // Shared so that a hit hands the answer out without copying it; null
  // means "no answer".
  std::unordered_map<std::string, std::shared_ptr<const Stack>> answers;
};

// The Meta kernel's results for op on args, or null when there is none.
std::shared_ptr<const Stack> inferOnMeta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  static ShapeCache* cache = new ShapeCache();  // never destroyed: used until exit
  thread_local std::string key;
  key.clear();
  appendRaw(key, &op.schema());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!isGeneratorArgument(op.schema().arguments()[i])) appendKey(key, args[i]);
  }
  {
    std::lock_guard<std::mutex> lock(cache->mutex);
    auto found = cache->answers.find(key);
    if (found != cache->answers.end()) return found->second;
  }
  auto meta = std::make_shared<Stack>();
  std::shared_ptr<const Stack> answer = runMeta(op, args, meta.get()) ? std::move(meta) : nullptr;
  std::lock_guard<std::mutex> lock(cache->mutex);
  if (cache->answers.size() >= ShapeCache::kMaxEntries) cache->answers.clear();
  cache->answers.emplace(key, answer);
  return answer;
}
// LITERALINCLUDE END: EXECUTOR_SHAPE_CACHE

std::atomic<bool> enabled{c10::utils::get_env("OPENREG_DEVICE_EXECUTOR") != "0"};

// LITERALINCLUDE START: EXECUTOR_OUT_VARIANT
// Note [Writing results straight into device memory]
// A functional operator's CPU kernel returns new CPU tensors, which would
// then be copied into the device outputs: a second pass over the data and a
// fresh host allocation per call. Most functional operators have an out=
// twin (add.Tensor and add.out) taking the same arguments plus one out=
// tensor per result; the executor calls that twin with the device outputs,
// so the CPU kernel writes the results where they belong.
bool isOutVariantOf(const c10::FunctionSchema& out, const c10::FunctionSchema& functional) {
  const auto& inputs = functional.arguments();
  const auto& results = functional.returns();
  if (out.arguments().size() != inputs.size() + results.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::Argument& a = out.arguments()[i];
    if (a.name() != inputs[i].name() || *a.type() != *inputs[i].type() || a.alias_info()) return false;
  }
  for (size_t i = inputs.size(); i < out.arguments().size(); ++i) {
    const c10::Argument& a = out.arguments()[i];
    if (!isOutArgument(a) || a.type()->kind() != c10::TypeKind::TensorType) return false;
  }
  return true;
}

std::optional<c10::OperatorHandle> findOutVariant(const c10::FunctionSchema& functional) {
  if (functional.is_mutable() || functional.returns().empty()) return std::nullopt;
  for (const c10::Argument& result : functional.returns()) {
    if (result.type()->kind() != c10::TypeKind::TensorType || result.alias_info()) return std::nullopt;
  }
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name != functional.name()) continue;
    std::optional<c10::OperatorHandle> candidate = dispatcher.findOp(name);
    // Only a kernel registered for the CPU itself writes into out=: the
    // autogenerated out= forms (relu.out) run the functional kernel and copy.
    if (candidate && candidate->hasSchema() && isOutVariantOf(candidate->schema(), functional) &&
        candidate->hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
      return candidate;
    }
  }
  return std::nullopt;
}
// LITERALINCLUDE END: EXECUTOR_OUT_VARIANT

// Whether an operator's Meta kernel promises the results its CPU kernel
// produces (see metaAgreementWithCpu).
enum class MetaAgreement { Always, Never, InFloat32AndFloat64 };

// LITERALINCLUDE START: EXECUTOR_DTYPES_CHECKED
// Note [Dtypes a CPU kernel does not implement]
// A CPU kernel picks its loop by dtype when it runs (AT_DISPATCH), and
// refuses a dtype it has no loop for: `F.silu` of an integer tensor. The
// Meta kernel does not know that. CUDA refuses at the call, since its
// dtype dispatch runs on the host before the launch; queued on openreg, the
// refusal would be a sticky device error. So the first call of an operator
// with each combination of argument dtypes (its tensors' dtypes, in order,
// and its dtype= arguments) runs synchronously (counted as "sync"), and a
// refusal is the caller's error, raised at the call with the CPU's message;
// once a combination has run, its calls are queued.
bool isDtypeArgument(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  if (type->kind() == c10::TypeKind::ScalarTypeType) return true;
  auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::ScalarTypeType;
}

std::vector<size_t> dtypeArgumentsOf(const c10::FunctionSchema& schema) {
  std::vector<size_t> positions;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (isDtypeArgument(schema.arguments()[i])) positions.push_back(i);
  }
  return positions;
}
// LITERALINCLUDE END: EXECUTOR_DTYPES_CHECKED

// What the executor derives once per operator from its (immutable) schema,
// how often it ran the operator, and with which dtypes.
struct OperatorInfo {
  std::string name;   // "aten::add.out", for the counts
  std::string label;  // "aten::add", the kernel's name in errors and traces
  Signature signature;
  bool hasCpuKernel = false;
  MetaAgreement meta = MetaAgreement::Always;
  std::optional<c10::OperatorHandle> outVariant;  // Note [Writing results straight into device memory]
  std::vector<size_t> dtypeArguments;  // positions of its dtype= arguments
  std::atomic<int64_t> async{0};
  std::atomic<int64_t> sync{0};

  // Whether a call with these argument dtypes has run before
  // (Note [Dtypes a CPU kernel does not implement]).
  bool ranWith(const std::string& dtypes) {
    std::lock_guard<std::mutex> lock(ranMutex);
    return ranDtypes.count(dtypes) != 0;
  }
  void markRanWith(const std::string& dtypes) {
    std::lock_guard<std::mutex> lock(ranMutex);
    ranDtypes.insert(dtypes);
  }

  std::mutex ranMutex;
  std::unordered_set<std::string> ranDtypes;
};

// Operators whose Meta kernel promises results that their CPU kernel does
// not produce. A device output cannot be resized or retyped once the kernel
// is queued, so such calls run synchronously and take the CPU kernel's
// results.
MetaAgreement metaAgreementWithCpu(const c10::FunctionSchema& schema) {
  const std::string& name = schema.name();
  // offset2bag is empty on the CPU when no backward needs it.
  if (name == "aten::_embedding_bag_forward_only" || name == "aten::_embedding_bag") return MetaAgreement::Never;
  // In float16 and bfloat16 the CPU keeps layer and batch norm statistics
  // in the input's dtype, where Meta (like CUDA) promises float32; the CPU's
  // backward then refuses float32 statistics. Group norm is the other way
  // round, with float32 weights on a float16 or bfloat16 input.
  if (name == "aten::native_layer_norm" || name == "aten::native_group_norm" || name == "aten::native_batch_norm" ||
      name == "aten::_native_batch_norm_legit" || name == "aten::_batch_norm_with_update") {
    return MetaAgreement::InFloat32AndFloat64;
  }
  return MetaAgreement::Always;
}

bool metaAgrees(const OperatorInfo& info, c10::ArrayRef<c10::IValue> args) {
  switch (info.meta) {
    case MetaAgreement::Always:
      return true;
    case MetaAgreement::Never:
      return false;
    case MetaAgreement::InFloat32AndFloat64:
      return !at::isReducedFloatingType(args[0].toTensor().scalar_type());
  }
  return false;
}

std::shared_mutex infosMutex;
std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OperatorInfo>> infos;

OperatorInfo& infoOf(const c10::OperatorHandle& op) {
  const c10::FunctionSchema* schema = &op.schema();
  {
    std::shared_lock<std::shared_mutex> lock(infosMutex);
    auto found = infos.find(schema);
    if (found != infos.end()) return *found->second;
  }
  auto info = std::make_unique<OperatorInfo>();
  info->name = operatorName(op);
  info->label = schema->operator_name().name;
  info->signature = readSignature(*schema);
  info->hasCpuKernel = op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU);
  info->outVariant = findOutVariant(*schema);
  info->meta = metaAgreementWithCpu(*schema);
  info->dtypeArguments = dtypeArgumentsOf(*schema);
  std::unique_lock<std::shared_mutex> lock(infosMutex);
  return *infos.emplace(schema, std::move(info)).first->second;  // keeps a racing first entry
}

// Copies a CPU result tensor into the matching device output view. A CPU
// kernel may return an empty tensor where the Meta kernel promised a shape
// (native_batch_norm's saved statistics outside training): those outputs
// carry no information and are left as allocated.
void storeTensor(const at::Tensor& cpu, const at::Tensor& device) {
  if (!cpu.defined() || (cpu.numel() == 0 && device.numel() != 0)) return;
  device.copy_(cpu);
}

void storeResult(const c10::IValue& cpu, const c10::IValue& device) {
  if (cpu.isTensor()) {
    storeTensor(cpu.toTensor(), device.toTensor());
    return;
  }
  if (cpu.isTensorList()) {
    auto from = cpu.toTensorList();
    auto to = device.toTensorList();
    for (size_t i = 0; i < from.size(); ++i) storeTensor(from.get(i), to.get(i));
  }
}

// Queues a functional operator as its out= twin, writing into the fresh
// device outputs results (Note [Writing results straight into device memory]).
void launchIntoOutputs(const c10::OperatorHandle& op, const OperatorInfo& info, c10::ArrayRef<c10::IValue> args,
                       const std::vector<c10::IValue>& results, c10::DeviceIndex device) {
  const c10::OperatorHandle& out = *info.outVariant;
  auto operands = std::make_shared<KernelArguments>(out.schema(), args, device, results);
  launchKernel(info.label.c_str(), device, [op, out, operands, argc = args.size()] {
    Stack cpu = operands->cpuStack();
    // Some out= kernels refuse what their functional twin accepts (they
    // resize an output, or check dtypes more strictly): then run the twin,
    // which raises the user's error if there is one.
    auto anyError = [](const c10::Error&) { return true; };
    if (attemptQuietly([&] { out.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu); }, anyError)) {
      return;
    }
    Stack views = operands->cpuStack();
    Stack functional(views.begin(), views.begin() + static_cast<std::ptrdiff_t>(argc));
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &functional);
    for (size_t i = 0; i < functional.size(); ++i) {
      storeTensor(functional[i].toTensor(), views[argc + i].toTensor());
    }
  });
}

// Queues op as it is; its CPU results are copied into the fresh device
// outputs, described by fresh (in order) and laid out as freshLayout.
void launchAndCopyResults(const c10::OperatorHandle& op, const OperatorInfo& info, c10::ArrayRef<c10::IValue> args,
                          std::vector<DeviceView> fresh, std::vector<c10::IValue> freshLayout,
                          c10::DeviceIndex device) {
  auto operands = std::make_shared<KernelArguments>(op.schema(), args, device);
  launchKernel(info.label.c_str(), device,
               [op, operands, fresh = std::move(fresh), freshLayout = std::move(freshLayout)] {
                 Stack cpu = runOnCpu(op, *operands);
                 size_t next = 0;
                 for (size_t i = 0; i < freshLayout.size(); ++i) {
                   if (freshLayout[i].isNone()) continue;  // written in place by the CPU kernel
                   storeResult(cpu[i], mapTensors(freshLayout[i], [&](const at::Tensor& t) {
                                 return t.defined() ? cpuView(fresh[next++]) : t;
                               }));
                 }
               });
}

bool allDefinedTensors(const std::vector<c10::IValue>& values) {
  return std::all_of(values.begin(), values.end(),
                     [](const c10::IValue& v) { return v.isTensor() && v.toTensor().defined(); });
}

// LITERALINCLUDE START: EXECUTOR_ASYNC
void runAsync(const c10::OperatorHandle& op, Stack* stack, const OperatorInfo& info, const Stack& meta,
              c10::DeviceIndex device) {
  const Signature& signature = info.signature;
  const auto& schema = op.schema();
  size_t argc = schema.arguments().size();
  auto args = torch::jit::last(*stack, argc);
  // Outputs: written arguments (resized as the Meta kernel resized them), or
  // fresh device tensors shaped like the Meta results.
  std::vector<c10::IValue> results;
  std::vector<DeviceView> fresh;
  std::vector<c10::IValue> freshLayout;  // per result: views of fresh outputs
  results.reserve(meta.size());
  freshLayout.reserve(meta.size());
  for (size_t i = 0; i < meta.size(); ++i) {
    int written = signature.writtenArgument[i];
    if (written >= 0) {
      at::Tensor target = args[written].toTensor();
      if (target.sizes() != meta[i].toTensor().sizes()) target.resize_(meta[i].toTensor().sizes());
      results.push_back(target);
      freshLayout.push_back(c10::IValue());
      continue;
    }
    results.push_back(mapTensors(meta[i], [&](const at::Tensor& m) {
      if (!m.defined()) return m;
      at::Tensor out = at::empty_strided(m.sizes(), m.strides(),
                                         m.options().device(c10::DeviceType::PrivateUse1, device));
      describeInto(fresh.emplace_back(), out);
      return out;
    }));
    // The kernel sees where the outputs are, never the tensors themselves:
    // a tensor released on a worker could need the GIL the host holds.
    freshLayout.push_back(meta[i]);
  }
  if (info.outVariant && allDefinedTensors(results)) {
    launchIntoOutputs(op, info, args, results, device);
  } else {
    launchAndCopyResults(op, info, args, std::move(fresh), std::move(freshLayout), device);
  }
  torch::jit::drop(*stack, argc);
  for (c10::IValue& result : results) stack->push_back(std::move(result));
}
// LITERALINCLUDE END: EXECUTOR_ASYNC

// The output depends on the data: run the CPU kernel on the device's
// stream, wait for it, and bring the (small) results over. out= arguments
// are sized on the host afterwards, since only the CPU kernel knew the size.
void runSync(const c10::OperatorHandle& op, Stack* stack, const OperatorInfo& info,
             c10::DeviceIndex device) {
  const Signature& signature = info.signature;
  const auto& schema = op.schema();
  size_t argc = schema.arguments().size();
  auto args = torch::jit::last(*stack, argc);
  auto operands = std::make_shared<KernelArguments>(schema, args, device);
  auto results = std::make_shared<Stack>();
  auto failure = std::make_shared<std::exception_ptr>();
  launchKernel(info.label.c_str(), device, [op, operands, results, failure] {
    try {
      *results = operands->cpuStack();
      useTemporaryOutputs(op.schema(), *results);
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), results.get());
    } catch (...) {
      *failure = std::current_exception();  // the caller's error, not a device fault
    }
  });
  OPENREG_CHECK(orStreamSynchronize(nativeStream(currentStream(device))));
  if (*failure) std::rethrow_exception(*failure);
  c10::Device target(c10::DeviceType::PrivateUse1, device);
  std::vector<c10::IValue> deviceResults;
  for (size_t i = 0; i < results->size(); ++i) {
    int written = signature.writtenArgument[i];
    if (written >= 0) {
      if (isOutArgument(schema.arguments()[written])) {
        at::Tensor out = args[written].toTensor();
        const at::Tensor& computed = (*results)[i].toTensor();
        if (out.sizes() != computed.sizes()) out.resize_(computed.sizes());
        out.copy_(computed);
      }
      deviceResults.push_back(args[written]);
      continue;
    }
    deviceResults.push_back(mapTensors((*results)[i], [&](const at::Tensor& t) {
      return t.defined() ? t.to(target) : t;
    }));
  }
  torch::jit::drop(*stack, argc);
  for (c10::IValue& result : deviceResults) stack->push_back(std::move(result));
}

// A view operator: the Meta kernel's view of a meta copy tells the sizes,
// strides and offset; the same view of the real input is then exact.
bool runView(const c10::OperatorHandle& op, Stack* stack, const Stack& meta) {
  const auto& schema = op.schema();
  auto args = torch::jit::last(*stack, schema.arguments().size());
  if (meta.size() != 1 || !meta[0].isTensor() || !args[0].isTensor()) return false;
  const at::Tensor& input = args[0].toTensor();
  const at::Tensor& view = meta[0].toTensor();
  if (!isOpenReg(input) || view.scalar_type() != input.scalar_type()) return false;
  at::Tensor result =
      at::as_strided(input, view.sizes(), view.strides(), input.storage_offset() + view.storage_offset());
  torch::jit::drop(*stack, schema.arguments().size());
  stack->push_back(std::move(result));
  return true;
}

// LITERALINCLUDE START: EXECUTOR_REFUSALS
// Note [Arguments a queued kernel could refuse]
// The Meta kernel checks shapes and dtypes on the host, but a few refusals
// happen only inside the CPU kernel: a dtype that few CPU kernels implement
// (float8 and float4, the bit-packed types, unsigned types beyond uint8),
// and a Scalar argument that overflows a tensor's dtype (Scalar::to<T> is
// checked: `x.half().clamp(min=-1e6)`). Queued, such a refusal would be a
// sticky device error where CUDA raises at the call. So those calls run
// synchronously, and a refusal is the caller's error. The scalar check is
// against every non-bool tensor's dtype, so it may send a call that the CPU
// would accept the synchronous way too; that costs time, never a result.
// Only arguments the schema types as Scalar are converted that way; int
// and float arguments (a dim, an eps) are not.
bool fewCpuKernelsAccept(at::ScalarType dtype) {
  return c10::isFloat8Type(dtype) || dtype == at::ScalarType::Float4_e2m1fn_x2 || c10::isBitsType(dtype) ||
         c10::isBarebonesUnsignedType(dtype);
}

// Whether a schema type is Scalar, Scalar? or Scalar[].
bool holdsScalars(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::NumberType) return true;
  if (auto optional = type->cast<c10::OptionalType>()) return holdsScalars(optional->getElementType());
  if (auto list = type->cast<c10::ListType>()) return holdsScalars(list->getElementType());
  return false;
}

// dtypes: those of the non-bool tensor operands.
bool kernelMightRefuse(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                       c10::ArrayRef<at::ScalarType> dtypes) {
  if (std::any_of(dtypes.begin(), dtypes.end(), fewCpuKernelsAccept)) return true;
  auto refused = [&](const c10::IValue& value) {
    if (!value.isScalar()) return false;  // None
    at::Scalar scalar = value.toScalar();
    if (scalar.isBoolean() || scalar.isSymbolic()) return false;  // a bool never overflows
    auto overflowsDtype = [&](at::ScalarType dtype) { return scalarOverflows(scalar, dtype); };
    return std::any_of(dtypes.begin(), dtypes.end(), overflowsDtype);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (!holdsScalars(schema.arguments()[i].type())) continue;
    if (args[i].isList() ? std::any_of(args[i].toListRef().begin(), args[i].toListRef().end(), refused)
                         : refused(args[i])) {
      return true;
    }
  }
  return false;
}
// LITERALINCLUDE END: EXECUTOR_REFUSALS

}  // namespace

bool scalarOverflows(const at::Scalar& scalar, at::ScalarType dtype) {
  try {
    return AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(at::kHalf, at::kBFloat16, at::kComplexHalf, dtype, "overflows", [&] {
      if (scalar.isComplex()) return c10::overflows<scalar_t>(scalar.toComplexDouble());
      if (scalar.isFloatingPoint()) return c10::overflows<scalar_t>(scalar.toDouble());
      return c10::overflows<scalar_t>(scalar.toLong());
    });
  } catch (const c10::Error&) {
    return true;  // a dtype or value this cannot judge: let the CPU kernel decide, synchronously
  }
}

bool runOnDevice(const c10::OperatorHandle& op, Stack* stack) {
  if (!enabled.load()) return false;
  const auto& schema = op.schema();
  auto args = torch::jit::last(*stack, schema.arguments().size());
  std::optional<c10::DeviceIndex> device;
  c10::SmallVector<at::ScalarType, 4> operandDtypes;  // for kernelMightRefuse
  std::string dtypes;  // Note [Dtypes a CPU kernel does not implement]
  for (const c10::IValue& arg : args) {
    mapTensors(arg, [&](const at::Tensor& t) {
      if (!device.has_value() && isOpenReg(t)) device = t.device().index();
      if (t.defined() && t.scalar_type() != at::kBool) operandDtypes.push_back(t.scalar_type());
      dtypes += t.defined() ? static_cast<char>(t.scalar_type()) : 'U';
      return t;
    });
  }
  if (!device.has_value()) return false;  // no device operand to run next to
  // Without a CPU kernel there is nothing to run (the accelerator-only
  // operators, e.g. cuDNN's): say so here, not as a device fault later.
  OperatorInfo& info = infoOf(op);
  TORCH_CHECK_NOT_IMPLEMENTED(info.hasCpuKernel, "openreg has no kernel for ", schema.operator_name(),
                              ", and PyTorch has no CPU kernel for the device executor to run");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, *device));
  std::shared_ptr<const Stack> meta;
  if (!info.signature.returnsNonTensor && metaAgrees(info, args)) meta = inferOnMeta(op, args);
  bool inferred = meta != nullptr;
  if (info.signature.returnsView) return inferred && runView(op, stack, *meta);
  for (size_t i : info.dtypeArguments) dtypes += args[i].isInt() ? static_cast<char>(args[i].toInt()) : 'N';
  bool ranBefore = info.ranWith(dtypes);
  bool async = inferred && ranBefore && !kernelMightRefuse(schema, args, operandDtypes);
  if (async) {
    runAsync(op, stack, info, *meta, *device);
  } else {
    runSync(op, stack, info, *device);  // raises the CPU kernel's refusal, if any
    if (!ranBefore) info.markRanWith(dtypes);
  }
  ++(async ? info.async : info.sync);
  return true;
}

bool executorEnabled() { return enabled.load(); }
void setExecutorEnabled(bool on) { enabled.store(on); }

std::string operatorName(const c10::OperatorHandle& op) {
  const auto& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

std::map<std::string, ExecutorCounts> executorCounts() {
  std::map<std::string, ExecutorCounts> counts;
  std::shared_lock<std::shared_mutex> lock(infosMutex);
  for (const auto& [schema, info] : infos) {
    ExecutorCounts c{info->async.load(), info->sync.load()};
    if (c.async != 0 || c.sync != 0) counts[info->name] = c;
  }
  return counts;
}

void resetExecutorCounts() {
  std::shared_lock<std::shared_mutex> lock(infosMutex);
  for (const auto& [schema, info] : infos) {
    info->async.store(0);
    info->sync.store(0);
  }
}

// LITERALINCLUDE START: EXECUTOR_REPLACES_COMPOSITES
// Note [Composite kernels the executor replaces]
// A few operators have a CompositeExplicitAutograd kernel written in terms
// of other operators, which PyTorch gives every backend without a kernel of
// its own: native_layer_norm becomes batch_norm and addcmul, native_group_norm
// a chain of reductions, addr an outer product and an add. The CPU (like
// CUDA) has a fused kernel for each, and the decompositions round
// differently and cost several launches. Registered here, these operators
// run the CPU's kernel through the executor instead. (Structured operators'
// functional kernels are composite too, but they call the out= kernel.)
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"native_layer_norm", "native_group_norm", "addr", "addr.out"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&globalFallbackKernel>());
  }
}
// LITERALINCLUDE END: EXECUTOR_REPLACES_COMPOSITES

}  // namespace torch_openreg
