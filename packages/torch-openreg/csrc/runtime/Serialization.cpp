// Serialization.cpp - backend metadata (c10::BackendMeta) of openreg tensors,
// and the pair of functions that torch.save and torch.load call to store it
// in and restore it from a checkpoint. Registered once, at load time.
#include "runtime/Serialization.h"

#include <torch/csrc/jit/serialization/pickler_helper.h>

namespace torch_openreg {
namespace {

constexpr const char* kTiledKey = "openreg.tiled";

struct OpenRegBackendMeta final : c10::BackendMeta {
  explicit OpenRegBackendMeta(bool tiled) : tiled(tiled) {}
  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>& /*self*/) const override {
    return c10::make_intrusive<OpenRegBackendMeta>(tiled);
  }
  bool tiled;
};

// LITERALINCLUDE START: BACKEND_META_SERIALIZATION
void saveMeta(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  auto* meta = dynamic_cast<OpenRegBackendMeta*>(tensor.unsafeGetTensorImpl()->get_backend_meta());
  if (meta != nullptr) metadata[kTiledKey] = meta->tiled;
}

void loadMeta(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  auto found = metadata.find(kTiledKey);
  if (found != metadata.end()) setLayoutTag(tensor, found->second);
}

const bool registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &saveMeta, &loadMeta);
  return true;
}();
// LITERALINCLUDE END: BACKEND_META_SERIALIZATION

}  // namespace

void setLayoutTag(const at::Tensor& tensor, bool tiled) {
  tensor.unsafeGetTensorImpl()->set_backend_meta(c10::make_intrusive<OpenRegBackendMeta>(tiled));
}

bool layoutTag(const at::Tensor& tensor) {
  auto* meta = dynamic_cast<OpenRegBackendMeta*>(tensor.unsafeGetTensorImpl()->get_backend_meta());
  return meta != nullptr && meta->tiled;
}

}  // namespace torch_openreg
