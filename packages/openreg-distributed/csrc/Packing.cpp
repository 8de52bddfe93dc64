// Packing.cpp - how a rank's tensors are laid out in the bytes it shares
// (declared in Transport.h): one after the other at kAlignment boundaries.
// Both transports pack and unpack through these. Not here: where the bytes
// live (device memory shared over IPC, or a pinned staging buffer).
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include "Transport.h"

namespace occl {

namespace {

int64_t aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

int64_t packedBytes(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const at::Tensor& t : tensors) total += aligned(static_cast<int64_t>(t.nbytes()));
  return total;
}

at::Tensor unpack(const at::Tensor& bytes, int64_t offset, c10::ScalarType dtype, at::IntArrayRef sizes) {
  int64_t count = c10::multiply_integers(sizes);
  int64_t size = count * c10::elementSize(dtype);
  TORCH_CHECK(offset + size <= bytes.numel(), "occl: a peer's contribution is ", bytes.numel(),
              " bytes, too small for ", sizes, " ", dtype, " at byte ", offset);
  if (count == 0) return at::empty(sizes, at::TensorOptions().dtype(dtype));
  return at::from_blob(static_cast<char*>(bytes.data_ptr()) + offset, sizes, at::TensorOptions().dtype(dtype));
}

void packInto(const at::Tensor& bytes, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    unpack(bytes, offset, t.scalar_type(), t.sizes()).copy_(t);
    offset += aligned(static_cast<int64_t>(t.nbytes()));
  }
}

}  // namespace occl
