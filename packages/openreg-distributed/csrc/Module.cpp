// Module.cpp - openreg_distributed._C: the Python face of OcclBackend, a
// pybind11 subclass of torch's c10d.Backend, so that the ProcessGroup made
// by init_process_group() drives it from C++. Not here: registering the
// backend with torch.distributed (openreg_distributed/registration.py).
#include <torch/csrc/utils/pybind.h>

#include "Module.h"
#include "SpeedLayer.h"
#include "transports/GlooTransport.h"
#include "transports/IpcTransport.h"

namespace py = pybind11;

namespace {

// A Python callable kept by C++: copied and dropped only with the GIL held.
std::shared_ptr<py::object> keepCallable(py::object callable) {
  return std::shared_ptr<py::object>(new py::object(std::move(callable)), [](py::object* held) {
    py::gil_scoped_acquire gil;
    delete held;
  });
}

}  // namespace

// LITERALINCLUDE START: OCCL_TRANSPORT_FACTORY
// makeGloo(store, rank, size, timeout_seconds) -> torch.distributed.ProcessGroupGloo,
// or None for the IPC transport. Splits of the group call it again.
occl::TransportFactory occl::transportFactory(py::object makeGloo) {
  if (makeGloo.is_none()) {
    return [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds) {
      return std::make_shared<occl::IpcTransport>(store, rank, size);
    };
  }
  auto callable = keepCallable(std::move(makeGloo));
  return [callable](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout) {
    c10::intrusive_ptr<c10d::Backend> gloo;
    {
      py::gil_scoped_acquire gil;
      gloo = (*callable)(store, rank, size, timeout.count() / 1000.0).cast<c10::intrusive_ptr<c10d::Backend>>();
    }
    return std::make_shared<occl::GlooTransport>(store, rank, size, std::move(gloo));
  };
}
// LITERALINCLUDE END: OCCL_TRANSPORT_FACTORY

occl::ModuleBinding::ModuleBinding(void (*bindInto)(py::module_&)) { moduleBindings().push_back(bindInto); }

std::vector<void (*)(py::module_&)>& occl::moduleBindings() {
  static std::vector<void (*)(py::module_&)> bindings;
  return bindings;
}

PYBIND11_MODULE(_C, m) {
  py::module_::import("torch.distributed");  // registers c10d.Backend, our base class, with pybind11
  py::class_<occl::OcclBackend, c10d::Backend, c10::intrusive_ptr<occl::OcclBackend>>(m, "OcclBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeoutSeconds,
                       std::string group, py::object makeGloo) {
             auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeoutSeconds * 1000));
             return c10::make_intrusive<occl::OcclBackend>(store, rank, size, timeout, std::move(group),
                                                           occl::transportFactory(std::move(makeGloo)));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_seconds"), py::arg("group"),
           py::arg("make_gloo") = py::none())
      // split_group deep-copies a backend's Python `options`; c10d's base
      // Options cannot be copied that way, and None makes the split take
      // them from getBackendOptions() instead.
      .def_property_readonly("options", [](const occl::OcclBackend&) { return py::none(); })
      .def("perform_nocolor_split", &occl::OcclBackend::performNocolorSplit, py::arg("device"),
           "Called by c10d on the ranks outside a new subgroup; occl needs nothing from them")
      .def_property_readonly("transport", &occl::OcclBackend::transportName,
                             "\"ipc\" (device memory shared on one host) or \"gloo\" (pinned host staging)");
  // Whether a speed layer sits at the plain allreduce's seam (SpeedLayer.h).
  m.def("_speed_layer_installed", [] { return occl::allreduceSpeedLayer() != nullptr; });
  for (auto bind : occl::moduleBindings()) bind(m);
}
