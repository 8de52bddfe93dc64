// OperatorCall.cpp - see OperatorCall.h.
#include "aten/OperatorCall.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch_openreg/Kernel.h>

#include <string>

#include "aten/kernels/Launch.h"
#include "runtime/Generator.h"

namespace torch_openreg {
namespace {

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

bool isResizeRefusal(const c10::Error& error) { return dynamic_cast<const DeviceViewResized*>(&error) != nullptr; }

at::Tensor toMeta(const at::Tensor& t) {
  // CPU scalars stay: TensorIterator accepts them beside any device.
  if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// Note [An out= operator without a Meta kernel]
// A few out= forms have no Meta kernel where their functional twin has one:
// _scaled_mm.out, which the code Inductor generates for float8 training
// calls. Without a Meta answer every call would run synchronously, and
// timing-only mode could not run it at all. The twin's answer is the out=
// kernel's: it resizes each out= tensor to the twin's result (a dtype that
// differs is left to the CPU kernel to accept or refuse).
std::shared_ptr<const Stack> inferOnFunctionalTwin(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const auto& schema = op.schema();
  if (op.hasKernelForDispatchKey(c10::DispatchKey::Meta)) return nullptr;  // its own Meta kernel refused
  std::optional<c10::OperatorHandle> functional = c10::Dispatcher::singleton().findOp({schema.name(), ""});
  if (!functional || !functional->hasSchema() || !isOutVariantOf(schema, functional->schema())) return nullptr;
  size_t inputs = functional->schema().arguments().size();
  std::shared_ptr<const Stack> answer = inferOnMeta(*functional, args.slice(0, inputs));
  if (answer == nullptr || answer->size() != args.size() - inputs) return nullptr;
  auto results = std::make_shared<Stack>();
  for (size_t i = 0; i < answer->size(); ++i) {
    const at::Tensor& computed = (*answer)[i].toTensor();
    at::Tensor out = toMeta(args[inputs + i].toTensor());
    if (out.scalar_type() != computed.scalar_type()) return nullptr;
    if (out.sizes() != computed.sizes()) out.resize_(computed.sizes());
    results->push_back(std::move(out));
  }
  return results;
}

// args with each tensor replaced by a meta tensor of its sizes and strides.
std::shared_ptr<Stack> onMeta(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  auto meta = std::make_shared<Stack>();
  for (size_t i = 0; i < args.size(); ++i) {
    meta->push_back(isGeneratorArgument(schema.arguments()[i]) ? c10::IValue() : mapTensors(args[i], toMeta));
  }
  return meta;
}

}  // namespace

std::string metaRefusal(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::Meta)) return "";
  std::shared_ptr<Stack> meta = onMeta(op.schema(), args);
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), meta.get());
    return "";
  } catch (const c10::NotImplementedError&) {
    return "";
  } catch (const std::exception& error) {
    std::string message = error.what();  // a Python meta function's NotImplementedError arrives as text
    return message.rfind("NotImplementedError", 0) == 0 ? "" : message.substr(0, message.find('\n'));
  }
}

std::shared_ptr<const Stack> inferOnMeta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  std::shared_ptr<Stack> meta = onMeta(op.schema(), args);
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), meta.get());
    return meta;
  } catch (const std::exception&) {
    // No Meta kernel, a data-dependent result, or a Python meta function
    // that refused: the CPU kernel will say whether it was a real error.
    return inferOnFunctionalTwin(op, args);
  }
}

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

std::string operatorName(const c10::OperatorHandle& op) {
  const auto& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

bool isGeneratorArgument(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

bool isOutArgument(const c10::Argument& argument) {
  const c10::AliasInfo* alias = argument.alias_info();
  return alias != nullptr && alias->isWrite() && argument.kwarg_only();
}

Signature readSignature(const c10::FunctionSchema& schema) {
  Signature signature;
  for (const c10::Argument& result : schema.returns()) {
    int written = -1;
    const c10::AliasInfo* alias = result.alias_info();
    if (alias != nullptr && !alias->isWrite()) signature.returnsView = true;
    if (alias != nullptr && alias->isWrite()) {
      for (size_t i = 0; i < schema.arguments().size(); ++i) {
        const c10::AliasInfo* argAlias = schema.arguments()[i].alias_info();
        if (argAlias != nullptr && argAlias->isWrite() && argAlias->beforeSets() == alias->beforeSets()) {
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

KernelArguments::KernelArguments(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                                 c10::DeviceIndex device, c10::ArrayRef<c10::IValue> outputs) {
  size_t count = args.size() + outputs.size();
  template_.reserve(count);
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
      placeholder_.push_back(isOpenRegTensor(t));
      if (isOpenRegTensor(t)) {
        deviceTensors_.push_back(t);
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

Stack KernelArguments::cpuStack(const std::vector<at::Tensor>& views) const {
  Stack stack;
  stack.reserve(template_.size());
  size_t slot = 0, view = 0;
  for (const c10::IValue& arg : template_) {
    stack.push_back(mapTensors(arg, [&](const at::Tensor& t) { return placeholder_[slot++] ? views[view++] : t; }));
  }
  for (const auto& [index, seed] : seeds_) stack[index] = at::detail::createCPUGenerator(seed.value());
  return stack;
}

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

bool attemptQuietly(c10::function_ref<void()> attempt, c10::function_ref<bool(const c10::Error&)> isRefusal) {
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

// Some CPU out= kernels resize their output on the way (mse_loss.out does,
// to hold an intermediate), which a view of device memory cannot allow:
// those run again with temporary outputs, copied into the device outputs.
Stack runOnCpu(const c10::OperatorHandle& op, const KernelArguments& operands, const std::vector<at::Tensor>& views) {
  const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
  Stack stack = operands.cpuStack(views);
  if (attemptQuietly([&] { op.redispatchBoxed(cpu, &stack); }, isResizeRefusal)) return stack;
  Stack targets = operands.cpuStack(views);
  Stack temporaries = targets;
  std::vector<size_t> outputs = useTemporaryOutputs(op.schema(), temporaries);
  Stack results = temporaries;
  op.redispatchBoxed(cpu, &results);
  for (size_t i : outputs) targets[i].toTensor().copy_(temporaries[i].toTensor());
  return results;
}

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

}  // namespace torch_openreg
