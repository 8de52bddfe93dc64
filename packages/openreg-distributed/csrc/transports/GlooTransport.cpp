// GlooTransport.cpp - collectives and messages over a ProcessGroupGloo on
// pinned host staging (GlooTransport.h). An exchange is one rendezvous
// (which names late ranks and catches mismatches, as over IPC), then one
// gloo broadcast when a single rank contributes, or one all-gather.
#include "GlooTransport.h"

#include <ATen/ops/empty.h>

#include <algorithm>

namespace occl {

namespace {

// Turns gloo's failure into occl's, naming the collective and the peer(s)
// it was exchanging with; only the first line of gloo's message (its
// backtrace says nothing to the user).
template <typename F>
void runGloo(const CollectiveName& name, const std::string& peers, F&& call) {
  try {
    call();
  } catch (const std::exception& e) {
    std::string message = e.what();
    throw CollectiveError("occl: " + name.str() + " failed in the gloo transport with " + peers + ": " +
                          message.substr(0, std::min<size_t>(message.find('\n'), 400)) +
                          ". A rank that died leaves the group unusable: destroy it and restart the job.");
  }
}

}  // namespace

GlooTransport::GlooTransport(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             c10::intrusive_ptr<c10d::Backend> gloo)
    : size_(size), rendezvous_(store->clone(), rank, size, "occl/gloo"), gloo_(std::move(gloo)) {}

at::Tensor GlooTransport::staging(int64_t bytes) const {
  return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
}

// LITERALINCLUDE START: OCCL_GLOO_EXCHANGE
Contributions GlooTransport::exchange(const CollectiveName& name, const Contribution& mine,
                                      std::chrono::milliseconds timeout) {
  int64_t bytes = packedBytes(mine.tensors);
  std::vector<std::string> records =
      rendezvous_.meet(name, joinFields({mine.signature, joinInts(mine.extras), std::to_string(bytes)}), timeout);
  Contributions all;
  std::vector<int64_t> sizes;
  std::vector<int> contributors;
  for (int r = 0; r < size_; ++r) {
    std::vector<std::string> fields = splitFields(records[r]);
    fields.resize(3);
    all.extras.push_back(splitInts(fields[1]));
    sizes.push_back(std::stoll(fields[2]));
    if (sizes.back() > 0) contributors.push_back(r);
  }
  if (mine.checkExtras) mine.checkExtras(all.extras);
  all.bytes.assign(size_, at::empty({0}, at::kByte));
  if (contributors.empty()) return all;
  int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  at::Tensor local = staging(largest);
  packInto(local, mine.tensors);
  if (contributors.size() == 1) {  // a broadcast: only the root has something to say
    c10d::BroadcastOptions options;
    options.rootRank = contributors[0];
    options.timeout = timeout;
    std::vector<at::Tensor> tensors{local};
    std::string root = "root rank " + std::to_string(contributors[0]);
    runGloo(name, root, [&] { gloo_->broadcast(tensors, options)->wait(); });
    all.bytes[contributors[0]] = local;
    return all;
  }
  at::Tensor gathered = staging(largest * size_);
  c10d::AllgatherOptions options;
  options.timeout = timeout;
  runGloo(name, "every rank", [&] { gloo_->_allgather_base(gathered, local, options)->wait(); });
  for (int r = 0; r < size_; ++r) all.bytes[r] = gathered.narrow(0, r * largest, sizes[r]);
  return all;
}
// LITERALINCLUDE END: OCCL_GLOO_EXCHANGE

void GlooTransport::finishSends(bool all) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto done = [&](auto& entry) {
    if (!all && !entry.first->isCompleted()) return false;
    try {
      entry.first->wait();
    } catch (const std::exception&) {
      // The receiver reports the failure, naming the collective.
    }
    return true;
  };
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(), done), sends_.end());
}

void GlooTransport::send(const CollectiveName& name, const at::Tensor& tensor, int dst, int tag,
                         std::chrono::milliseconds timeout) {
  finishSends(false);
  at::Tensor copy = staging(static_cast<int64_t>(tensor.nbytes()));
  if (tensor.numel() > 0) unpack(copy, 0, tensor.scalar_type(), {tensor.numel()}).copy_(tensor.reshape(-1));
  std::vector<at::Tensor> tensors{copy};
  // Not waited for here: gloo completes a send only once it is received, and
  // waiting would deadlock two ranks that both send before they receive.
  c10::intrusive_ptr<c10d::Work> work;
  runGloo(name, "rank " + std::to_string(dst), [&] { work = gloo_->send(tensors, dst, tag); });
  std::lock_guard<std::mutex> lock(mutex_);
  sends_.emplace_back(work, copy);
}

int GlooTransport::recv(const CollectiveName& name, const at::Tensor& into, int src, int tag,
                        std::chrono::milliseconds timeout) {
  at::Tensor copy = staging(static_cast<int64_t>(into.nbytes()));
  std::vector<at::Tensor> tensors{copy};
  int from = src;
  runGloo(name, src < 0 ? std::string("any rank") : "rank " + std::to_string(src), [&] {
    auto work = src < 0 ? gloo_->recvAnysource(tensors, tag) : gloo_->recv(tensors, src, tag);
    if (!work->wait(timeout)) throw std::runtime_error("timed out after " + std::to_string(timeout.count()) + " ms");
    if (src < 0) from = work->sourceRank();
  });
  if (into.numel() > 0) into.view(-1).copy_(unpack(copy, 0, into.scalar_type(), {into.numel()}));
  return from;
}

// Nothing of this process is read by peers in place: only the sends in
// flight must finish (each bounded by gloo's timeout).
void GlooTransport::shutdown(const CollectiveName& last, std::chrono::milliseconds wait) { finishSends(true); }

}  // namespace occl
