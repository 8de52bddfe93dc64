// ActivityRecording.cpp - see ActivityRecording.h.
#include "profiler/ActivityRecording.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <string_view>
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
struct Recording {
  std::mutex mutex;  // everything below: every thread's operators
  bool active = false;
  at::CallbackHandle callback = at::INVALID_CALLBACK_HANDLE;
  std::unique_ptr<ActivityDrain> drain;
  // Never reset: an operator still running when a recording stops keeps
  // its id on the runtime's stack, so the next recording must not reuse it.
  uint64_t nextId = 1;
  std::vector<OperatorRecord> operators;
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

RecordedArgument describe(const c10::IValue& value) {
  RecordedArgument argument;
  if (value.isTensor() && value.toTensor().defined()) {
    argument.kind = RecordedArgument::kTensor;
    argument.sizes.push_back(value.toTensor().sizes().vec());
    argument.dtype = value.toTensor().scalar_type();
  } else if (value.isTensorList()) {
    argument.kind = RecordedArgument::kTensorList;
    for (const at::Tensor& tensor : value.toTensorList().vec()) argument.sizes.push_back(tensor.sizes().vec());
  } else if (value.isScalar()) {
    argument.kind = RecordedArgument::kScalar;
    argument.value = value;
  } else if (value.isIntList() || value.isDoubleList() || value.isBoolList()) {
    argument.kind = RecordedArgument::kScalarList;
    argument.value = value;
  }
  return argument;
}

// Marks a call whose id was pushed, so that its end pops it (and, for a
// multi-tensor call, leaves it), and finds its record to note the outputs in.
struct PushedId final : at::ObserverContext {
  uint64_t id = 0;
  size_t index = 0;  // of its record in Recording::operators
  bool multiTensor = false;
};

thread_local int insideMultiTensorCalls = 0;

bool isMultiTensor(const at::RecordFunction& call) {
  return std::string_view(call.name()).rfind("aten::_foreach_", 0) == 0;
}

std::unique_ptr<at::ObserverContext> onOperatorStart(const at::RecordFunction& call) {
  if (insideMultiTensorCalls > 0) return nullptr;
  c10::ArrayRef<const c10::IValue> inputs = call.inputs();
  bool touchesOpenReg = false;
  for (const c10::IValue& input : inputs) touchesOpenReg = touchesOpenReg || isOpenReg(input);
  if (!touchesOpenReg) return nullptr;
  OperatorRecord record;
  record.name = call.name();
  orTraceGetTimestamp(&record.startNs);
  record.arguments.reserve(inputs.size());
  for (const c10::IValue& input : inputs) record.arguments.push_back(describe(input));
  Recording& state = recording();
  auto pushed = std::make_unique<PushedId>();
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.active) return nullptr;
    pushed->id = record.id = state.nextId++;
    pushed->index = state.operators.size();
    state.operators.push_back(std::move(record));
  }
  orTracePushExternalCorrelationId(pushed->id);
  pushed->multiTensor = isMultiTensor(call);
  insideMultiTensorCalls += pushed->multiTensor ? 1 : 0;
  return pushed;
}

void onOperatorEnd(const at::RecordFunction& call, at::ObserverContext* context) {
  if (context == nullptr) return;
  auto* pushed = static_cast<PushedId*>(context);
  orTracePopExternalCorrelationId(nullptr);
  insideMultiTensorCalls -= pushed->multiTensor ? 1 : 0;
  std::vector<RecordedArgument> outputs;
  for (const c10::IValue& output : call.outputs()) outputs.push_back(describe(output));
  Recording& state = recording();
  std::lock_guard<std::mutex> lock(state.mutex);
  // The recording may have stopped (and another started) while the call ran.
  if (state.active && pushed->index < state.operators.size() && state.operators[pushed->index].id == pushed->id) {
    state.operators[pushed->index].outputs = std::move(outputs);
  }
}

}  // namespace

void startActivityRecording() {
  Recording& state = recording();
  std::lock_guard<std::mutex> lock(state.mutex);
  TORCH_CHECK(!state.active, "torch.openreg.record_activity(): a recording is already running; they do not nest");
  auto drain = std::make_unique<ActivityDrain>("torch.openreg.record_activity()", "its records");
  std::string busy = drain->start();
  TORCH_CHECK(busy.empty(), "torch.openreg.record_activity() cannot start: ", busy);
  state.drain = std::move(drain);
  state.operators.clear();
  state.active = true;
  state.callback = at::addGlobalCallback(at::RecordFunctionCallback(onOperatorStart, onOperatorEnd)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
}

ActivityRecordingResult stopActivityRecording() {
  Recording& state = recording();
  std::unique_ptr<ActivityDrain> drain;
  std::vector<OperatorRecord> operators;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    TORCH_CHECK(state.active, "torch.openreg.record_activity(): no recording is running");
    at::removeCallback(state.callback);
    state.active = false;
    drain = std::move(state.drain);
    operators = std::move(state.operators);
  }
  ActivityRecordingResult result;
  result.activity = drain->stop();
  result.droppedMessage = drain->droppedMessage();
  std::unordered_set<uint64_t> launched;
  for (const orActivity& record : result.activity) {
    if (record.kind == orActivityKindLaunch && record.externalCorrelationId != 0) {
      launched.insert(record.externalCorrelationId);
    }
  }
  result.operatorStartsNs.reserve(operators.size());
  for (OperatorRecord& record : operators) {
    result.operatorStartsNs.push_back(record.startNs);
    if (launched.count(record.id) != 0) result.operators.push_back(std::move(record));
  }
  return result;
}

}  // namespace torch_openreg
