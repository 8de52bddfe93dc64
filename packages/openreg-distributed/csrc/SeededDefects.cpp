// SeededDefects.cpp - occl with one contract broken on purpose, so that the
// conformance kit's negative controls can show the kit catches it.
// registration.py builds it (_C._seeded_defect_backend, bound here) instead of
// OcclBackend only when the test-only environment variable
// TORCH_OPENREG_SEEDED_DEFECT is "allreduce-drops-a-rank"; a vendor leaves
// this file and its binding out.
#include "Module.h"

namespace occl {
namespace {

// all_reduce without the last rank's contribution: that rank zeroes its
// input (on its current stream, before the collective) and goes on.
class AllreduceDropsARank final : public OcclBackend {
 public:
  using OcclBackend::OcclBackend;

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    if (getRank() == getSize() - 1) {
      for (at::Tensor& tensor : tensors) tensor.zero_();
    }
    return OcclBackend::allreduce(tensors, opts);
  }
};

void bindSeededDefects(pybind11::module_& module) {
  module.def("_seeded_defect_backend", [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                          double timeoutSeconds, std::string group, pybind11::object makeGloo) {
    auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeoutSeconds * 1000));
    c10::intrusive_ptr<OcclBackend> backend = c10::make_intrusive<AllreduceDropsARank>(
        store, rank, size, timeout, std::move(group), transportFactory(std::move(makeGloo)));
    return backend;
  });
}

const ModuleBinding binding(&bindSeededDefects);

}  // namespace
}  // namespace occl
