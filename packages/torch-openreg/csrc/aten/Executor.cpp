// Executor.cpp - the generic device executor behind openreg's global
// fallback: one boxed kernel that runs any ATen operator with a CPU kernel
// on device memory, asynchronously, without copying its operands.
//
// Not here: the classic copy-to-the-CPU fallback (Fallback.cpp), used for
// what this declines; the dedicated kernels (kernels/), which win wherever
// they are registered; and the speed layers, which may take over at two
// marked seams (SpeedLayer.h).
#include "aten/Executor.h"

#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/env.h>
#include <torch_openreg/Kernel.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "aten/ExecutorRules.h"
#include "aten/OperatorCall.h"
#include "aten/SpeedLayer.h"
#include "aten/kernels/Launch.h"
#include "profiler/ActivityRecording.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"
#include "runtime/TimingOnlyMemory.h"

// LITERALINCLUDE START: EXECUTOR_NOTE
// Note [The device executor]
// An operator without an openreg kernel arrives here with its boxed
// arguments. The executor
//  1. asks the operator's Meta kernel what it returns (shapes, strides,
//     dtypes) from meta copies of the operands: no data, no device work;
//  2. allocates those outputs on the device (or, for in-place and out=
//     operators, resizes the tensors they write);
//  3. launches a kernel on the current stream (launchKernel) that calls the
//     operator's CPU kernel on CPU views of the device operands and copies
//     its results into the device outputs;
//  4. returns the outputs at once, like a CUDA launch.
// View operators return views made with as_strided from the Meta result.
// When the output shape depends on the data (nonzero, masked_select,
// unique, boolean indexing) or the result is not a tensor (equal), there is
// no Meta answer: the kernel then keeps the CPU results and the host waits
// for it, as CUDA synchronises for the same operators. So does a call the
// queued CPU kernel could refuse (ExecutorRules.h), so that the refusal is
// raised at the call, with the CPU's message, instead of faulting the device.
// Random operators get a private CPU generator seeded from the openreg
// generator at launch (Note [Random numbers on openreg streams]).
// LITERALINCLUDE END: EXECUTOR_NOTE

namespace torch_openreg {
namespace {

std::atomic<bool> enabled{c10::utils::get_env("OPENREG_DEVICE_EXECUTOR") != "0"};

// Whether the calling thread runs a kernel (Python code queued as a kernel
// may call operators on device tensors): it must not wait for its own
// stream. Asked only where the executor would wait.
bool insideKernel() {
  int onWorker = 0;
  if (orKernelIsOnWorker(&onWorker) == orSuccess) return true;
  orGetLastError();  // "not inside a kernel" is the answer, not an error
  return false;
}

// LITERALINCLUDE START: EXECUTOR_ASYNC
// Queues op; the kernel copies its CPU results into the fresh device
// outputs, which follow the operands' views (fresh, in order), laid out per
// result as freshLayout says (None: a result the CPU kernel wrote in place).
void launchAndCopyResults(const c10::OperatorHandle& op, const OperatorInfo& info, c10::ArrayRef<c10::IValue> args,
                          const std::vector<at::Tensor>& fresh, std::vector<c10::IValue> freshLayout,
                          c10::DeviceIndex device) {
  auto operands = std::make_shared<KernelArguments>(op.schema(), args, device);
  std::vector<at::Tensor> tensors = operands->takeDeviceTensors();
  size_t firstFresh = tensors.size();
  tensors.insert(tensors.end(), fresh.begin(), fresh.end());
  launchOwnKernel(info.label.c_str(), tensors,
               [op, operands, firstFresh, freshLayout = std::move(freshLayout)](std::vector<at::Tensor>& views) {
                 Stack cpu = runOnCpu(op, *operands, views);
                 size_t next = firstFresh;
                 for (size_t i = 0; i < freshLayout.size(); ++i) {
                   if (freshLayout[i].isNone()) continue;
                   storeResult(cpu[i], mapTensors(freshLayout[i], [&](const at::Tensor& t) {
                                 return t.defined() ? views[next++] : t;
                               }));
                 }
               });
}

void runAsync(const c10::OperatorHandle& op, Stack* stack, const OperatorInfo& info, const Stack& meta,
              c10::DeviceIndex device) {
  size_t argc = op.schema().arguments().size();
  auto args = torch::jit::last(*stack, argc);
  // Outputs: written arguments (resized as the Meta kernel resized them), or
  // fresh device tensors shaped like the Meta results.
  std::vector<c10::IValue> results;
  std::vector<at::Tensor> fresh;
  std::vector<c10::IValue> freshLayout;  // per result: the Meta result, or None if written in place
  for (size_t i = 0; i < meta.size(); ++i) {
    int written = info.signature.writtenArgument[i];
    if (written >= 0) {
      at::Tensor target = args[written].toTensor();
      if (target.sizes() != meta[i].toTensor().sizes()) target.resize_(meta[i].toTensor().sizes());
      results.push_back(target);
      freshLayout.push_back(c10::IValue());
      continue;
    }
    results.push_back(mapTensors(meta[i], [&](const at::Tensor& m) {
      if (!m.defined()) return m;
      at::Tensor out = at::empty_strided(m.sizes(), m.strides(), m.options().device(c10::kPrivateUse1, device));
      fresh.push_back(out);
      return out;
    }));
    freshLayout.push_back(meta[i]);
  }
  // Speed layer seam: a functional operator with an out= twin may be queued
  // as that twin, writing straight into the outputs (SpeedLayer.h).
  if (!speedLayer().launchIntoOutputs(op, info.outVariant, info.label, args, results, device)) {
    launchAndCopyResults(op, info, args, fresh, std::move(freshLayout), device);
  }
  torch::jit::drop(*stack, argc);
  for (c10::IValue& result : results) stack->push_back(std::move(result));
}
// LITERALINCLUDE END: EXECUTOR_ASYNC

// LITERALINCLUDE START: META_DISAGREEMENT
// Note [A Meta kernel that disagrees with the CPU]
// The asynchronous path sizes the device outputs from the Meta kernel's
// answer before the CPU kernel runs; a Meta kernel that promises another
// shape or dtype than the CPU kernel produces would give every later call a
// plausible wrong result (multilabel_margin_loss of a 1-D input: [1] where
// the CPU returns []). So the first, synchronous call of an operator with
// new dtypes compares the two. Where they differ, the operator never runs
// on a Meta answer again (all its calls run synchronously, sized by the CPU
// kernel), the difference is counted and kept for
// torch.openreg.meta_disagreements(), and a warning names it once.
std::string differenceFromMeta(const Stack& meta, const Stack& cpu) {
  for (size_t i = 0; i < meta.size() && i < cpu.size(); ++i) {
    if (!meta[i].isTensor() || !cpu[i].isTensor()) continue;
    const at::Tensor& promised = meta[i].toTensor();
    const at::Tensor& produced = cpu[i].toTensor();
    if (!promised.defined() || !produced.defined()) continue;
    if (promised.sizes() != produced.sizes() || promised.scalar_type() != produced.scalar_type()) {
      return c10::str("result ", i, ": the Meta kernel promised ", promised.scalar_type(), promised.sizes(),
                      ", the CPU kernel produced ", produced.scalar_type(), produced.sizes());
    }
  }
  return "";
}

void distrustMeta(OperatorInfo& info, const std::string& difference) {
  ++info.metaDisagreements;
  if (info.metaDistrusted.load()) return;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (info.metaDistrusted.load()) return;
  info.firstDisagreement = difference;
  info.metaDistrusted.store(true);
  TORCH_WARN("openreg: ", info.name, " disagrees with its Meta kernel (", difference, "); from now on it runs "
             "synchronously, sized by its CPU kernel (torch.openreg.meta_disagreements() lists such operators)");
}
// LITERALINCLUDE END: META_DISAGREEMENT

// The output depends on the data, or the CPU kernel may refuse the call:
// run the CPU kernel on the device's stream, wait for it, and bring the
// (small) results over. out= arguments are sized on the host afterwards,
// since only the CPU kernel knew the size. meta, if known, is checked
// against what the CPU kernel produced.
void runSync(const c10::OperatorHandle& op, Stack* stack, OperatorInfo& info, c10::DeviceIndex device,
             const Stack* meta) {
  const auto& schema = op.schema();
  size_t argc = schema.arguments().size();
  auto args = torch::jit::last(*stack, argc);
  std::string why = "its output shape depends on the data, or it returns no tensor";
  // A Meta kernel that refuses these arguments (one that takes only the
  // dtypes CUDA's kernel takes) says so in timing-only mode's refusal.
  std::string metaSaid = timingOnly() ? metaRefusal(op, args) : "";
  if (!metaSaid.empty()) {
    why = "its Meta kernel, which gives its output shape without computing, refused these arguments: " + metaSaid;
  }
  checkValuesComputed(info.name + " (" + why + ")");
  TORCH_CHECK(!insideKernel(), "openreg: ", schema.operator_name(), " must wait on the host for its result (its output "
              "shape depends on the data, or the CPU kernel may refuse these arguments), and this call comes from "
              "inside a kernel, which cannot wait for its own stream; call it from the host");
  auto operands = std::make_shared<KernelArguments>(schema, args, device);
  auto results = std::make_shared<Stack>();
  auto failure = std::make_shared<std::exception_ptr>();
  launchKernel(info.label.c_str(), operands->takeDeviceTensors(),
               [op, operands, results, failure](std::vector<at::Tensor>& views) {
                 try {
                   *results = operands->cpuStack(views);
                   useTemporaryOutputs(op.schema(), *results);
                   op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), results.get());
                 } catch (...) {
                   *failure = std::current_exception();  // the caller's error, not a device fault
                 }
               });
  // With its Meta kernel's answer, a real device would have queued the call
  // and gone on: the wait is the executor's check (Note [The simulator's own transfers]).
  std::optional<SimulatorTransfers> checking;
  if (meta != nullptr) checking.emplace();
  OPENREG_CHECK(orStreamSynchronize(currentNativeStream(device)));
  if (*failure) std::rethrow_exception(*failure);
  if (meta != nullptr) {
    std::string difference = differenceFromMeta(*meta, *results);
    if (!difference.empty()) distrustMeta(info, difference);
  }
  c10::Device target(c10::kPrivateUse1, device);
  SimulatorTransfers transfers;  // a real device computes the results where they go
  std::vector<c10::IValue> deviceResults;
  for (size_t i = 0; i < results->size(); ++i) {
    int written = info.signature.writtenArgument[i];
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
  size_t argc = op.schema().arguments().size();
  auto args = torch::jit::last(*stack, argc);
  if (meta.size() != 1 || !meta[0].isTensor() || !args[0].isTensor()) return false;
  const at::Tensor& input = args[0].toTensor();
  const at::Tensor& view = meta[0].toTensor();
  if (!isOpenRegTensor(input) || view.scalar_type() != input.scalar_type()) return false;
  at::Tensor result =
      at::as_strided(input, view.sizes(), view.strides(), input.storage_offset() + view.storage_offset());
  torch::jit::drop(*stack, argc);
  stack->push_back(std::move(result));
  return true;
}

}  // namespace

namespace {

// The arguments op writes without reading them: its out= results and the
// self of fill_ and its kin (OperatorInfo::overwrittenArguments), unless
// another argument reads the same memory, as x.add_(y) run as
// add.out(x, y, out=x) does.
std::vector<at::Tensor> writtenWithoutReading(const OperatorInfo& info, c10::ArrayRef<c10::IValue> args) {
  std::vector<at::Tensor> written;
  for (size_t i : info.overwrittenArguments) {
    if (!args[i].isTensor()) continue;
    const at::Tensor& out = args[i].toTensor();
    bool alsoRead = false;
    for (size_t j = 0; j < args.size(); ++j) {
      if (std::find(info.overwrittenArguments.begin(), info.overwrittenArguments.end(), j) !=
          info.overwrittenArguments.end()) {
        continue;
      }
      mapTensors(args[j], [&](const at::Tensor& t) {
        alsoRead = alsoRead || (t.defined() && out.defined() && t.is_alias_of(out));
        return t;
      });
    }
    if (!alsoRead) written.push_back(out);
  }
  return written;
}

}  // namespace

// LITERALINCLUDE START: EXECUTOR_RUN
bool runOnDevice(const c10::OperatorHandle& op, Stack* stack) {
  if (!enabled.load()) return false;
  const auto& schema = op.schema();
  auto args = torch::jit::last(*stack, schema.arguments().size());
  // One walk over the operands: the device to run on, and the dtypes.
  std::optional<c10::DeviceIndex> device;
  c10::SmallVector<at::ScalarType, 4> operandDtypes;  // non-bool, for kernelMightRefuse
  std::string dtypes;  // Note [Dtypes a CPU kernel does not implement]
  for (const c10::IValue& arg : args) {
    mapTensors(arg, [&](const at::Tensor& t) {
      if (!device.has_value() && isOpenRegTensor(t)) device = t.device().index();
      if (t.defined() && t.scalar_type() != at::kBool) operandDtypes.push_back(t.scalar_type());
      dtypes += t.defined() ? static_cast<char>(t.scalar_type()) : 'U';
      return t;
    });
  }
  if (!device.has_value()) return false;  // no device operand to run next to
  OperatorInfo& info = infoOf(op);
  // Without a CPU kernel there is nothing to run (the accelerator-only
  // operators, e.g. cuDNN's): say so here, not as a device fault later.
  TORCH_CHECK_NOT_IMPLEMENTED(info.hasCpuKernel, "openreg has no kernel for ", schema.operator_name(),
                              ", and PyTorch has no CPU kernel for the device executor to run");
  c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, *device));
  std::shared_ptr<const Stack> meta;
  if (!info.signature.returnsNonTensor && metaAgrees(info, args)) {
    // Speed layer seam: the Meta answer may come from a cache (SpeedLayer.h).
    meta = speedLayer().inferOnMeta(op, args);
    meta = withCpuStatistics(info, schema, args, std::move(meta));
  }
  if (info.signature.returnsView) return meta != nullptr && runView(op, stack, *meta);
  for (size_t i : info.dtypeArguments) dtypes += args[i].isInt() ? static_cast<char>(args[i].toInt()) : 'N';
  bool ranBefore = info.ranWith(dtypes);
  // A graph capture (Graph.cpp), or a kernel launching more work, cannot
  // wait for a first call: it is queued, and a refusal by the CPU kernel
  // becomes a kernel error when it runs.
  // Timing-only mode runs no CPU kernel that could refuse (or check Meta).
  bool noValues = timingOnly();
  bool async = meta != nullptr && (ranBefore || noValues || streamIsCapturing(*device) || insideKernel()) &&
               (noValues || !kernelMightRefuse(schema, args, operandDtypes));
  // Note [Memory timing-only mode never computed]; nothing to work out before timing-only mode marked memory.
  WritesWithoutReading writes(someMemoryMarked() ? writtenWithoutReading(info, args) : std::vector<at::Tensor>{});
  if (async) {
    runAsync(op, stack, info, *meta, *device);
  } else {
    runSync(op, stack, info, *device, meta.get());  // raises the CPU kernel's refusal, if any
    if (!ranBefore) info.markRanWith(dtypes);
  }
  ++(async ? info.async : info.sync);
  return true;
}
// LITERALINCLUDE END: EXECUTOR_RUN

bool executorEnabled() { return enabled.load(); }
void setExecutorEnabled(bool on) { enabled.store(on); }

std::map<std::string, ExecutorCounts> executorCounts() {
  std::map<std::string, ExecutorCounts> counts;
  forEachOperatorInfo([&](OperatorInfo& info) {
    ExecutorCounts c{info.async.load(), info.sync.load()};
    if (c.async != 0 || c.sync != 0) counts[info.name] = c;
  });
  return counts;
}

std::map<std::string, MetaDisagreement> metaDisagreements() {
  std::map<std::string, MetaDisagreement> found;
  forEachOperatorInfo([&](OperatorInfo& info) {
    if (info.metaDistrusted.load()) found[info.name] = {info.metaDisagreements.load(), info.firstDisagreement};
  });
  return found;
}

void resetExecutorCounts() {
  forEachOperatorInfo([](OperatorInfo& info) {
    info.async.store(0);
    info.sync.store(0);
  });
}

}  // namespace torch_openreg
