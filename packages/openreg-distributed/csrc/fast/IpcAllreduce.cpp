// fast/IpcAllreduce.cpp - the in-place allreduce over IPC (IpcAllreduce.h).
#include "IpcAllreduce.h"

#include <ATen/ATen.h>
#include <torch_openreg/Kernel.h>

#include <algorithm>
#include <cstring>

#include "../transports/IpcTransport.h"
#include "../Reduce.h"

namespace occl::fast {

namespace {

// torch-openreg's switch over every speed layer (OPENREG_FAST_PATHS=0, or
// a torch-openreg built without its own), followed here.
bool layerEnabled() { return torch_openreg::fastPathsEnabled(); }

// Chunk r of n near-equal chunks of a flat tensor (the last may be shorter
// or empty). Every rank cuts the same way.
at::Tensor chunkOf(const at::Tensor& flat, int r, int n) {
  int64_t per = (flat.numel() + n - 1) / n;
  int64_t first = std::min(flat.numel(), per * r);
  return flat.narrow(0, first, std::min(flat.numel(), first + per) - first);
}

// Elements reduced per block: the block just read is still in cache when
// it is copied, and a block no larger than ATen's grain size runs on this
// thread alone (intra-op threads would fight the peer ranks for the cores:
// measured many times slower on a loaded machine).
constexpr int64_t kBlockElements = at::internal::GRAIN_SIZE;

}  // namespace

// Note [The in-place allreduce]
// The tensor is cut into one chunk per rank. Rank r alone touches chunk r,
// in every rank's tensor: block by block, it reduces the ranks' blocks (in
// rank order, as the plain path does, so the bits are the same) into rank
// 0's block, then copies that, still in cache, into the other ranks'. Each byte is read once and written once, as a memcpy of
// the tensor would, and all ranks work at once with no mailbox. No rank
// reads or writes a chunk another rank writes, so the only meetings are
// arriving (every tensor is ready) and leaving (nobody touches a peer's
// tensor any more): a rank's stream must not move on, and change its
// tensor, before every peer has left.
// LITERALINCLUDE START: OCCL_IPC_ALLREDUCE
std::optional<CollectiveBody> inPlaceAllreduce(Transport& transport, const at::Tensor& tensor,
                                               const std::string& signature, const c10d::ReduceOp& op,
                                               const at::Tensor& factor) {
  auto* ipc = dynamic_cast<IpcTransport*>(&transport);
  if (!layerEnabled() || ipc == nullptr || static_cast<int64_t>(tensor.nbytes()) < kInPlaceAllreduceMinBytes) {
    return std::nullopt;
  }
  std::optional<Share> where = ipc->locate(tensor);
  if (!where) return std::nullopt;
  return [=, where = *where](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views,
                             std::chrono::milliseconds timeout) {
    auto& ipc = static_cast<IpcTransport&>(transport);
    at::Tensor mine = views[0].view(-1);
    std::vector<at::Tensor> chunks;  // chunk `rank` of every rank's tensor
    // Its own signature: a rank on the plain path would wait for other steps.
    std::vector<at::Tensor> all = ipc.meetInPlace(name, signature + " in place", views[0], where, timeout);
    for (const at::Tensor& bytes : all) {
      at::Tensor flat = unpack(bytes, 0, mine.scalar_type(), {mine.numel()});
      chunks.push_back(chunkOf(flat, ipc.rank(), static_cast<int>(all.size())));
    }
    std::vector<at::Tensor> parts(chunks.size());
    for (int64_t first = 0; first < chunks[0].numel(); first += kBlockElements) {
      int64_t length = std::min(kBlockElements, chunks[0].numel() - first);
      for (size_t r = 0; r < chunks.size(); ++r) parts[r] = chunks[r].narrow(0, first, length);
      // Into rank 0's block, which is read first (reduceInto reads each
      // part once, in rank order), then copied from cache to the others.
      reduceInto(parts[0], parts, op, factor);
      for (size_t r = 1; r < parts.size(); ++r) std::memcpy(parts[r].data_ptr(), parts[0].data_ptr(), parts[0].nbytes());
    }
    ipc.control().leave(name, "wrote its reduced chunk to every rank", timeout);
  };
}
// LITERALINCLUDE END: OCCL_IPC_ALLREDUCE

// Installed at the plain path's seam when the library loads (SpeedLayer.h).
const InstallAllreduceSpeedLayer install(&inPlaceAllreduce);

}  // namespace occl::fast
