// Serialization.cpp - backend metadata (c10::BackendMeta) of openreg tensors,
// and the pair of functions that torch.save and torch.load call to store it
// in and restore it from a checkpoint. Registered once, at load time.
#include "runtime/Serialization.h"

#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <map>
#include <string>

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: BACKEND_META_FIELDS
// What openreg keeps beside a tensor, as a vendor keeps its own fields (a
// tiled storage format, the version of a packed layout): a set of named
// flags, each set or absent. Their names are the keys a checkpoint stores;
// version_number and format_number are the fields PyTorch's own
// reference-backend tests set (torch._utils.set_tensor_metadata).
constexpr const char* kTiled = "openreg.tiled";
constexpr const char* kFields[] = {kTiled, "version_number", "format_number"};

struct OpenRegBackendMeta final : c10::BackendMeta {
  std::map<std::string, bool> fields;  // only keys of kFields
  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>& /*self*/) const override {
    auto copy = c10::make_intrusive<OpenRegBackendMeta>();
    copy->fields = fields;
    return copy;
  }
};
// LITERALINCLUDE END: BACKEND_META_FIELDS

OpenRegBackendMeta* metaOf(const at::Tensor& tensor) {
  return dynamic_cast<OpenRegBackendMeta*>(tensor.unsafeGetTensorImpl()->get_backend_meta());
}

// The tensor's metadata, made (empty) if it has none yet.
OpenRegBackendMeta& ensureMeta(const at::Tensor& tensor) {
  if (OpenRegBackendMeta* meta = metaOf(tensor)) return *meta;
  tensor.unsafeGetTensorImpl()->set_backend_meta(c10::make_intrusive<OpenRegBackendMeta>());
  return *metaOf(tensor);
}

// LITERALINCLUDE START: BACKEND_META_SERIALIZATION
// torch.save (and torch._utils.get_tensor_metadata) asks for the fields
// that are set; torch.load (and set_tensor_metadata) hands back a map from
// which openreg takes its own keys and leaves any other (a checkpoint of a
// newer version may carry fields this one does not know).
void saveMeta(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  if (OpenRegBackendMeta* meta = metaOf(tensor)) metadata.insert(meta->fields.begin(), meta->fields.end());
}

void loadMeta(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  for (const char* key : kFields) {
    auto found = metadata.find(key);
    if (found != metadata.end()) ensureMeta(tensor).fields[key] = found->second;
  }
}

const bool registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &saveMeta, &loadMeta);
  return true;
}();
// LITERALINCLUDE END: BACKEND_META_SERIALIZATION

}  // namespace

void setLayoutTag(const at::Tensor& tensor, bool tiled) { ensureMeta(tensor).fields[kTiled] = tiled; }

bool layoutTag(const at::Tensor& tensor) {
  OpenRegBackendMeta* meta = metaOf(tensor);
  if (meta == nullptr) return false;
  auto found = meta->fields.find(kTiled);
  return found != meta->fields.end() && found->second;
}

}  // namespace torch_openreg
