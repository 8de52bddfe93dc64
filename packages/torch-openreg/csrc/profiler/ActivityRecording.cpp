// ActivityRecording.cpp - see ActivityRecording.h.
#include "profiler/ActivityRecording.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <complex>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "profiler/ActivityDrain.h"

namespace torch_openreg {
namespace {

// Note [How a recording names the operator of each launch]
// A global RecordFunction callback sees every operator call with its
// arguments. For a call that takes an openreg tensor (alone or in a list)
// or an openreg device, it notes the arguments' shapes, dtypes and scalar
// values, and pushes the call's id as the runtime's external correlation id
// (orTracePushExternalCorrelationId) until the call returns, when it notes
// what the call returned the same way: each Launch record names the
// innermost such call, as a profiler's operator would be.
// Calls that touch no openreg device cost only the callback's test, and
// nothing keeps a tensor alive: a record holds sizes, not tensors.
// A multi-tensor operator (_foreach_*) is one call of a real device's library
// (CUDA launches a few multi_tensor_apply kernels for it), but openreg runs it
// as PyTorch's per-tensor loop: the operators inside it are not recorded, so
// every launch of the loop names the _foreach_ call that made it.
// A call that begins while no recorded call of its thread runs is noted as
// outermost: one Python or autograd's engine made, which costs a real host
// more than the calls inside it (openreg-perf's [host]).

// Note [Equal calls are described once]
// A training loop makes the same calls every step, and a recording is meant
// to cost the program little (openreg-perf's timing-only mode must not cost
// more than running the program). So a call is first written as a key of
// bytes, in a buffer its thread reuses: its name, and for each argument what
// RecordedArgument would hold. A key seen before costs a hash lookup; only a
// new one is described as an OperatorRecord. The call's end does the same
// with the key of its arguments' record and what it returned. A recorded
// call then allocates nothing but its ObserverContext (and, amortised, its
// entry in Recording::calls).
struct RecordedCall {
  uint64_t id = 0;  // the external correlation id of the work it queued
  uint64_t startNs = 0;  // orTraceGetTimestamp clock
  size_t record = 0;  // its OperatorRecord: arguments only until it returns, then with its outputs
  bool outermost = false;  // no recorded call of its thread was running when it began
  bool simulatorTransfer = false;  // Note [The simulator's own transfers]
};

struct Recording {
  std::mutex mutex;  // everything below: every thread's operators
  bool active = false;
  at::CallbackHandle callback = at::INVALID_CALLBACK_HANDLE;
  std::unique_ptr<ActivityDrain> drain;
  // Never reset: an operator still running when a recording stops keeps
  // its id on the runtime's stack, so the next recording must not reuse it.
  uint64_t nextId = 1;
  std::vector<RecordedCall> calls;
  std::vector<OperatorRecord> records;  // distinct, by key (Note [Equal calls are described once])
  std::unordered_map<std::string, size_t> recordByKey;
  std::vector<std::pair<uint64_t, uint64_t>> simulatorIntervals;  // (start, end) of outermost SimulatorTransfers
};

Recording& recording() {
  static auto* instance = new Recording();  // never destroyed: callbacks may outlive exit
  return *instance;
}

bool isOpenReg(const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& tensor = value.toTensor();
    return tensor.defined() && tensor.device().is_privateuseone();
  }
  if (value.isDevice()) return value.toDevice().is_privateuseone();
  if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) {
      if (isOpenReg(element)) return true;
    }
  }
  return false;
}

// A list of optional tensors (index's Tensor?[] indices: x[mask], x[:, idx])
// is recorded as a tensor list; a None in it has no sizes, as an undefined
// tensor in a TensorList has none.
bool isOptionalTensorList(const c10::IValue& value) {
  if (!value.isList()) return false;
  bool anyTensor = false;
  for (const c10::IValue& element : value.toListRef()) {
    if (!element.isTensor() && !element.isNone()) return false;
    anyTensor = anyTensor || element.isTensor();
  }
  return anyTensor;
}

RecordedArgument::Kind kindOf(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor().defined() ? RecordedArgument::kTensor : RecordedArgument::kOther;
  if (value.isTensorList() || isOptionalTensorList(value)) return RecordedArgument::kTensorList;
  // A symbolic scalar (under tracing) has no value to record.
  if (value.isSymInt() || value.isSymFloat() || value.isSymBool()) return RecordedArgument::kOther;
  if (value.isScalar()) return RecordedArgument::kScalar;
  if (value.isIntList() || value.isDoubleList() || value.isBoolList()) return RecordedArgument::kScalarList;
  return RecordedArgument::kOther;
}

// A device's convolution library may convert other layouts to this one.
bool isChannelsLast(const at::Tensor& tensor) {
  c10::MemoryFormat format = tensor.suggest_memory_format();
  return format == c10::MemoryFormat::ChannelsLast || format == c10::MemoryFormat::ChannelsLast3d;
}

// A tensor list may hold undefined tensors (or, a list of optional tensors,
// None): they have no sizes.
c10::IntArrayRef sizesOf(const c10::IValue& tensor) {
  return tensor.isTensor() && tensor.toTensor().defined() ? tensor.toTensor().sizes() : c10::IntArrayRef();
}

RecordedArgument describe(const c10::IValue& value) {
  RecordedArgument argument;
  argument.kind = kindOf(value);
  switch (argument.kind) {
    case RecordedArgument::kTensor:
      argument.sizes.push_back(value.toTensor().sizes().vec());
      argument.dtype = value.toTensor().scalar_type();
      argument.channelsLast = isChannelsLast(value.toTensor());
      break;
    case RecordedArgument::kTensorList:
      for (const c10::IValue& tensor : value.toListRef()) argument.sizes.push_back(sizesOf(tensor).vec());
      break;
    case RecordedArgument::kScalar:
    case RecordedArgument::kScalarList:
      argument.value = value;
      break;
    case RecordedArgument::kOther:
      break;
  }
  return argument;
}

// Keys hold values' bytes: exact (two doubles that print alike are different
// keys), and cheaper to build than text.
template <typename T>
void appendBytes(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void appendSizes(std::string& key, c10::IntArrayRef sizes) {
  appendBytes(key, sizes.size());
  key.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int64_t));
}

void appendScalars(std::string& key, const c10::IValue& value) {
  if (value.isList()) {
    appendBytes(key, value.toListRef().size());
    for (const c10::IValue& element : value.toListRef()) appendScalars(key, element);
    return;
  }
  // A letter for the scalar's type, then its value: 2 and 2.0 are different
  // keys. (Not IValue::tagKind(), which makes a string per scalar.)
  if (value.isDouble()) {
    key += 'd';
    appendBytes(key, value.toDouble());
  } else if (value.isComplexDouble()) {
    key += 'c';
    appendBytes(key, static_cast<std::complex<double>>(value.toComplexDouble()));
  } else if (value.isBool()) {
    key += 'b';
    appendBytes(key, int64_t{value.toBool()});
  } else {
    key += 'i';
    appendBytes(key, value.toInt());
  }
}

// What describe(value) would record, as bytes: equal keys, equal records.
void appendKey(std::string& key, const c10::IValue& value) {
  RecordedArgument::Kind kind = kindOf(value);
  appendBytes(key, kind);
  switch (kind) {
    case RecordedArgument::kTensor:
      appendBytes(key, value.toTensor().scalar_type());
      appendBytes(key, isChannelsLast(value.toTensor()));
      appendSizes(key, value.toTensor().sizes());
      break;
    case RecordedArgument::kTensorList:
      appendBytes(key, value.toListRef().size());
      for (const c10::IValue& tensor : value.toListRef()) appendSizes(key, sizesOf(tensor));
      break;
    case RecordedArgument::kScalar:
    case RecordedArgument::kScalarList:
      appendScalars(key, value);
      break;
    case RecordedArgument::kOther:
      break;
  }
}

// The index of key's record in state.records, made by makeRecord() if the
// key is new. The caller holds state.mutex.
template <typename MakeRecord>
size_t recordOf(Recording& state, const std::string& key, MakeRecord makeRecord) {
  auto found = state.recordByKey.find(key);
  if (found != state.recordByKey.end()) return found->second;
  state.records.push_back(makeRecord());
  state.recordByKey.emplace(key, state.records.size() - 1);
  return state.records.size() - 1;
}

thread_local std::string scratchKey;  // reused: a recorded call allocates no key

// Marks a call whose id was pushed, so that its end pops it (and, for a
// multi-tensor call, leaves it), and finds its RecordedCall.
struct PushedId final : at::ObserverContext {
  uint64_t id = 0;
  size_t index = 0;  // of its RecordedCall in Recording::calls
  size_t arguments = 0;  // its OperatorRecord without outputs, in Recording::records
  bool multiTensor = false;
};

thread_local int insideMultiTensorCalls = 0;
thread_local int simulatorTransfersOpen = 0;  // SimulatorTransfers alive on this thread
thread_local int recordedCallsRunning = 0;  // this thread's, begun and not yet returned

bool isMultiTensor(const at::RecordFunction& call) {
  return std::string_view(call.name()).rfind("aten::_foreach_", 0) == 0;
}

// Set while this thread runs a callback: an operator that reading a tensor
// dispatches (a subclass's sizes) is not recorded, so the callback neither
// takes Recording::mutex twice nor overwrites its own scratchKey.
thread_local bool insideCallback = false;

struct InsideCallback {
  InsideCallback() { insideCallback = true; }
  ~InsideCallback() { insideCallback = false; }
};

std::unique_ptr<at::ObserverContext> onOperatorStart(const at::RecordFunction& call) {
  // A multi-tensor call's own operators are not recorded, the simulator's
  // transfers inside it are (Note [The simulator's own transfers]).
  if ((insideMultiTensorCalls > 0 && simulatorTransfersOpen == 0) || insideCallback) return nullptr;
  InsideCallback inside;
  c10::ArrayRef<const c10::IValue> inputs = call.inputs();
  bool touchesOpenReg = false;
  for (const c10::IValue& input : inputs) touchesOpenReg = touchesOpenReg || isOpenReg(input);
  if (!touchesOpenReg) return nullptr;
  RecordedCall recorded;
  orTraceGetTimestamp(&recorded.startNs);
  recorded.outermost = recordedCallsRunning == 0;
  recorded.simulatorTransfer = simulatorTransfersOpen > 0;
  const char* name = recorded.simulatorTransfer ? kSimulatorTransfer : call.name();
  std::string& key = scratchKey;
  key.assign(name);
  for (const c10::IValue& input : inputs) appendKey(key, input);
  auto pushed = std::make_unique<PushedId>();
  {
    Recording& state = recording();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.active) return nullptr;
    recorded.record = recordOf(state, key, [&] {
      OperatorRecord record;
      record.name = name;
      for (const c10::IValue& input : inputs) record.arguments.push_back(describe(input));
      return record;
    });
    pushed->id = recorded.id = state.nextId++;
    pushed->index = state.calls.size();
    pushed->arguments = recorded.record;
    state.calls.push_back(recorded);
  }
  orTracePushExternalCorrelationId(pushed->id);
  ++recordedCallsRunning;
  pushed->multiTensor = isMultiTensor(call);
  insideMultiTensorCalls += pushed->multiTensor ? 1 : 0;
  return pushed;
}

void onOperatorEnd(const at::RecordFunction& call, at::ObserverContext* context) {
  if (context == nullptr) return;
  InsideCallback inside;
  auto* pushed = static_cast<PushedId*>(context);
  orTracePopExternalCorrelationId(nullptr);
  --recordedCallsRunning;
  insideMultiTensorCalls -= pushed->multiTensor ? 1 : 0;
  std::string& key = scratchKey;  // its arguments' record, then its outputs
  key.assign("->");
  appendBytes(key, pushed->arguments);
  for (const c10::IValue& output : call.outputs()) appendKey(key, output);
  Recording& state = recording();
  std::lock_guard<std::mutex> lock(state.mutex);
  // The recording may have stopped (and another started) while the call ran.
  if (!state.active || pushed->index >= state.calls.size() || state.calls[pushed->index].id != pushed->id) return;
  state.calls[pushed->index].record = recordOf(state, key, [&] {
    OperatorRecord record = state.records[pushed->arguments];
    for (const c10::IValue& output : call.outputs()) record.outputs.push_back(describe(output));
    return record;
  });
}

}  // namespace

SimulatorTransfers::SimulatorTransfers() {
  if (simulatorTransfersOpen++ == 0) orTraceGetTimestamp(&startNs_);
}

SimulatorTransfers::~SimulatorTransfers() {
  if (--simulatorTransfersOpen > 0) return;
  uint64_t endNs = 0;
  orTraceGetTimestamp(&endNs);
  Recording& state = recording();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.active) state.simulatorIntervals.emplace_back(startNs_, endNs);
}

void startActivityRecording() {
  Recording& state = recording();
  std::lock_guard<std::mutex> lock(state.mutex);
  TORCH_CHECK(!state.active, "torch.openreg.record_activity(): a recording is already running; they do not nest");
  auto drain = std::make_unique<ActivityDrain>("torch.openreg.record_activity()", "its records");
  std::string busy = drain->start();
  TORCH_CHECK(busy.empty(), "torch.openreg.record_activity() cannot start: ", busy);
  state.drain = std::move(drain);
  state.calls.clear();
  state.records.clear();
  state.recordByKey.clear();
  state.simulatorIntervals.clear();
  state.active = true;
  state.callback = at::addGlobalCallback(at::RecordFunctionCallback(onOperatorStart, onOperatorEnd)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
}

ActivityRecordingResult stopActivityRecording() {
  Recording& state = recording();
  std::unique_ptr<ActivityDrain> drain;
  std::vector<RecordedCall> calls;
  ActivityRecordingResult result;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    TORCH_CHECK(state.active, "torch.openreg.record_activity(): no recording is running");
    at::removeCallback(state.callback);
    state.active = false;
    drain = std::move(state.drain);
    calls = std::move(state.calls);
    result.calls = std::move(state.records);
    result.simulatorIntervalsNs = std::move(state.simulatorIntervals);
    state.recordByKey.clear();
  }
  result.activity = drain->stop();
  result.droppedMessage = drain->droppedMessage();
  std::unordered_set<uint64_t> launched;
  for (const orActivity& record : result.activity) {
    if (record.kind == orActivityKindLaunch && record.externalCorrelationId != 0) {
      launched.insert(record.externalCorrelationId);
    }
  }
  result.operatorStartsNs.reserve(calls.size());
  for (const RecordedCall& call : calls) {
    if (!call.simulatorTransfer) result.operatorStartsNs.push_back(call.startNs);
    if (call.outermost) result.outermostStartsNs.push_back(call.startNs);
    if (launched.count(call.id) != 0) result.launchingCalls.emplace_back(call.id, call.record);
  }
  return result;
}

}  // namespace torch_openreg
