// ExecutorRules.h - what the device executor knows about each operator, and
// the rules that make a call run synchronously instead of being queued:
// the cases where a queued CPU kernel could refuse what the host accepted,
// or produce what the Meta kernel did not promise. Not how calls run
// (Executor.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "aten/OperatorCall.h"

namespace torch_openreg {

// Whether an operator's Meta kernel promises the results its CPU kernel
// produces. A device output cannot be resized or retyped once the kernel is
// queued, so calls it does not promise run synchronously.
// StatisticsLikeCpu: Meta's answer holds once the statistics (every
// floating result after the first) are what the CPU kernel makes of them
// (withCpuStatistics).
enum class MetaAgreement { Always, Never, InFloat32AndFloat64, StatisticsLikeCpu };

// What the executor derives once per operator from its (immutable) schema,
// how often it ran the operator, and with which dtypes.
struct OperatorInfo {
  std::string name;   // "aten::add.out", for the counts
  std::string label;  // "aten::add", the kernel's name in errors and traces
  Signature signature;
  bool hasCpuKernel = false;
  MetaAgreement meta = MetaAgreement::Always;
  std::vector<size_t> dtypeArguments;  // positions of its dtype= arguments
  // Positions of the arguments it writes without reading: out= results, the
  // self of fill_ and its kin (Note [Memory timing-only mode never computed]).
  std::vector<size_t> overwrittenArguments;
  // The out= twin that a speed layer runs instead (SpeedLayer.h); empty on
  // the plain path.
  std::optional<c10::OperatorHandle> outVariant;
  std::atomic<int64_t> async{0};
  std::atomic<int64_t> sync{0};
  // Note [A Meta kernel that disagrees with the CPU]: set once a first
  // synchronous call produced what the Meta kernel did not promise.
  std::atomic<bool> metaDistrusted{false};
  std::atomic<int64_t> metaDisagreements{0};
  std::string firstDisagreement;  // written once, before metaDistrusted is set

  // Whether a call with these argument dtypes has run before
  // (Note [Dtypes a CPU kernel does not implement]).
  bool ranWith(const std::string& dtypes);
  void markRanWith(const std::string& dtypes);

 private:
  std::mutex ranMutex_;
  std::unordered_set<std::string> ranDtypes_;
};

// The operator's info, made on its first call and kept for the process.
OperatorInfo& infoOf(const c10::OperatorHandle& op);

// Calls info.fn(each info) under the registry's lock (for the counts).
void forEachOperatorInfo(const std::function<void(OperatorInfo&)>& fn);

// Whether the Meta kernel's answer holds for these arguments.
bool metaAgrees(const OperatorInfo& info, c10::ArrayRef<c10::IValue> args);

// For a StatisticsLikeCpu operator, Meta's answer with the statistics as
// the CPU kernel makes them: in the weight's dtype (the input's without a
// weight), and empty outside training; any other answer as it is.
std::shared_ptr<const Stack> withCpuStatistics(const OperatorInfo& info, const c10::FunctionSchema& schema,
                                                     c10::ArrayRef<c10::IValue> args,
                                                     std::shared_ptr<const Stack> meta);

// Whether the queued CPU kernel could refuse these arguments where the Meta
// kernel accepted them (Note [Arguments a queued kernel could refuse]).
// dtypes: those of the non-bool tensor operands.
bool kernelMightRefuse(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                       c10::ArrayRef<at::ScalarType> dtypes);

// Whether Scalar::to<dtype>() would refuse scalar, as a CPU kernel converts
// a Scalar argument (also true when that cannot be judged here: a quantized
// dtype, a uint64 beyond int64).
bool scalarOverflows(const at::Scalar& scalar, at::ScalarType dtype);

}  // namespace torch_openreg
