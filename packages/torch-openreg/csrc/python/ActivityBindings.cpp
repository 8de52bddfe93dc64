// ActivityBindings.cpp - torch_openreg._C's part for
// torch.openreg.record_activity() (profiler/ActivityRecording.h): the
// runtime's records of a region with the operator calls that queued them,
// as Python reads them. Added to the module by a ModuleBinding (Module.h).
#include <pybind11/complex.h>
#include <torch/csrc/utils/pybind.h>

#include <complex>
#include <string>
#include <vector>

#include "profiler/ActivityRecording.h"
#include "python/Module.h"

namespace py = pybind11;

namespace torch_openreg {
namespace {

py::object scalarValue(const c10::IValue& value) {
  if (value.isBool()) return py::bool_(value.toBool());
  if (value.isInt()) return py::int_(value.toInt());
  if (value.isDouble()) return py::float_(value.toDouble());
  if (value.isComplexDouble()) return py::cast(static_cast<std::complex<double>>(value.toComplexDouble()));
  py::list list;  // a list of scalars
  for (const c10::IValue& element : value.toListRef()) list.append(scalarValue(element));
  return list;
}

// Appends one argument (or output) to the lists torch.profiler's
// record_shapes gives (structured_input_shapes(), dtypes(), concrete_inputs());
// values may be null (outputs: their values are not recorded).
void appendArgument(const RecordedArgument& argument, py::list& shapes, py::list& dtypes, py::list* values) {
  py::object value = py::none();
  switch (argument.kind) {
    case RecordedArgument::kTensor:
      shapes.append(py::cast(argument.sizes[0]));
      dtypes.append(std::string(c10::scalarTypeToTypeMeta(argument.dtype).name()));
      break;
    case RecordedArgument::kTensorList:
      shapes.append(py::cast(argument.sizes));
      dtypes.append("TensorList");
      break;
    case RecordedArgument::kScalar:
    case RecordedArgument::kScalarList:
      shapes.append(py::list());
      dtypes.append(argument.kind == RecordedArgument::kScalar ? "Scalar" : "ScalarList");
      if (values != nullptr) value = scalarValue(argument.value);
      break;
    case RecordedArgument::kOther:
      shapes.append(py::list());
      dtypes.append("");
      break;
  }
  if (values != nullptr) values->append(value);
}

// (name, shapes, dtypes, concrete inputs, output shapes, output dtypes,
// whether a tensor argument is channels-last).
py::tuple operatorTuple(const OperatorRecord& record) {
  py::list shapes, dtypes, values, outputShapes, outputDtypes;
  bool channelsLast = false;
  for (const RecordedArgument& argument : record.arguments) {
    appendArgument(argument, shapes, dtypes, &values);
    channelsLast = channelsLast || argument.channelsLast;
  }
  for (const RecordedArgument& output : record.outputs) appendArgument(output, outputShapes, outputDtypes, nullptr);
  return py::make_tuple(record.name, shapes, dtypes, values, outputShapes, outputDtypes, channelsLast);
}

// (ids, calls): calls[i] is the call that ids[i] names; equal calls share
// one tuple (operatorTuple), as they share one OperatorRecord.
py::tuple operatorCalls(const ActivityRecordingResult& result) {
  std::vector<py::object> tuples(result.calls.size());
  py::list ids, calls;
  for (const auto& [id, index] : result.launchingCalls) {
    if (!tuples[index]) tuples[index] = operatorTuple(result.calls[index]);
    ids.append(id);
    calls.append(tuples[index]);
  }
  return py::make_tuple(ids, calls);
}

void bindActivityRecording(py::module_ m) {
  m.def("_start_activity_recording", [] { startActivityRecording(); });
  // Without the GIL while it waits for the devices (a kernel may need it).
  m.def("_stop_activity_recording", [] {
    ActivityRecordingResult result;
    {
      py::gil_scoped_release released;
      result = stopActivityRecording();
    }
    py::bytes activity(reinterpret_cast<const char*>(result.activity.data()),
                       result.activity.size() * sizeof(orActivity));
    return py::make_tuple(activity, sizeof(orActivity), operatorCalls(result),
                          py::cast(result.operatorStartsNs), py::cast(result.outermostStartsNs),
                          py::cast(result.simulatorIntervalsNs), result.droppedMessage);
  });
}

const ModuleBinding binding(&bindActivityRecording);

}  // namespace
}  // namespace torch_openreg
