// ActivityRecording.h - the runtime's activity records of a region together
// with the operators that queued the work, for tools that model the device
// (openreg-perf), without a profiler session: torch.openreg.record_activity().
// Not here: the Kineto profiler (Profiler.cpp), which makes a trace of the
// same records.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>
#include <openreg/openreg.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torch_openreg {

// One argument of a recorded operator call, as torch.profiler's
// record_shapes describes it (structured_input_shapes(), dtypes(),
// concrete_inputs()): a tensor's sizes and dtype, a tensor list's sizes, or
// the value of a scalar or a list of scalars; anything else (None, a string,
// a device, an undefined tensor) is kOther.
struct RecordedArgument {
  enum Kind { kTensor, kTensorList, kScalar, kScalarList, kOther };
  Kind kind = kOther;
  std::vector<std::vector<int64_t>> sizes;  // kTensor: one entry; kTensorList: one per tensor
  c10::ScalarType dtype = c10::ScalarType::Undefined;  // kTensor
  bool channelsLast = false;  // kTensor: laid out channels-last (its suggest_memory_format)
  c10::IValue value;  // kScalar, kScalarList
};

// A distinct operator call: equal calls (a loop makes the same calls every
// step) share one record.
struct OperatorRecord {
  std::string name;  // "aten::addmm", "c10d::allreduce_", ...
  std::vector<RecordedArgument> arguments;
  std::vector<RecordedArgument> outputs;  // what the call returned, described as its arguments are
};

struct ActivityRecordingResult {
  std::vector<orActivity> activity;  // oldest first
  std::vector<OperatorRecord> calls;  // the distinct calls of launchingCalls
  // (id, index into calls) of every call that queued device work; the id is
  // the external correlation id of the launch records of that work.
  std::vector<std::pair<uint64_t, size_t>> launchingCalls;
  std::vector<uint64_t> operatorStartsNs;  // every operator recorded, in order
  // The operators recorded that no other recorded operator called (the
  // calls Python makes, and autograd's engine), in order.
  std::vector<uint64_t> outermostStartsNs;
  std::vector<std::pair<uint64_t, uint64_t>> simulatorIntervalsNs;  // Note [The simulator's own transfers]
  std::string droppedMessage;  // empty unless the runtime dropped records (ActivityDrain)
};

// Note [The simulator's own transfers]
// An operator the executor runs synchronously (its first call with new
// dtypes, or a result whose size depends on the data) computes its results
// on the host and copies them to the device: work of the simulator that a
// real device does not do. The operators called while a SimulatorTransfers
// lives on a thread are recorded under the name kSimulatorTransfer, and not
// among the operator starts, and the time it lives is recorded as one of the
// simulator's own intervals (so a host wait in it, the executor checking a
// first call, is the simulator's too), so that a tool modelling a real
// device (openreg-perf) can leave their work and waits out.
inline constexpr const char* kSimulatorTransfer = "openreg::simulator_transfer";

class SimulatorTransfers {
 public:
  SimulatorTransfers();
  ~SimulatorTransfers();
  SimulatorTransfers(const SimulatorTransfers&) = delete;
  SimulatorTransfers& operator=(const SimulatorTransfers&) = delete;

 private:
  uint64_t startNs_ = 0;  // the outermost scope's, on the runtime's clock
};

// Starts recording: the runtime's activity records (an ActivityDrain), and
// every operator that takes an openreg tensor or device. Throws if a
// recording or a profiler session already collects the runtime's records.
void startActivityRecording();

// Waits for every device, stops recording and returns what it recorded.
// Throws if no recording was started.
ActivityRecordingResult stopActivityRecording();

}  // namespace torch_openreg
