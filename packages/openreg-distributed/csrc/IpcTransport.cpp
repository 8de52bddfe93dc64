// IpcTransport.cpp - collectives and messages through device memory shared
// with the runtime's IPC calls. See Note [The IPC mailbox].
#include "IpcTransport.h"

#include <openreg/openreg.hpp>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cstring>

namespace occl {

// Note [The IPC mailbox]
// Each rank owns one device buffer, its mailbox, exported once with
// orIpcGetMemHandle; peers open it once (orIpcOpenMemHandle) and keep it
// open. A collective is: copy this rank's contribution into its mailbox,
// post a record (the mailbox handle and where the bytes are) to the store,
// wait for every rank's record, then read the peers' mailboxes directly.
// The mailbox has two halves and collective seq writes half seq % 2: a rank
// starting collective seq has seen every rank post seq - 1, so every rank
// has finished reading half seq % 2 (written at seq - 2). No "done" round
// trip is needed. Growing the mailbox happens on the host (a kernel may not
// allocate or free device memory); the outgrown one stays allocated until
// shutdown, since a peer may still be reading it.
// Sends use per-(peer, tag) slots instead: a slot is reused once the
// receiver has posted that it is done with it, so a send never waits for
// its receiver.

namespace {

std::string toHex(const orIpcMemHandle_t& handle) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : handle.reserved) {
    auto byte = static_cast<unsigned char>(c);
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

orIpcMemHandle_t fromHex(const std::string& hex) {
  orIpcMemHandle_t handle;
  TORCH_CHECK(hex.size() == 2 * sizeof(handle.reserved), "occl: malformed IPC handle in the store");
  for (size_t i = 0; i < sizeof(handle.reserved); ++i) {
    handle.reserved[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return handle;
}

at::Tensor hostBytes(void* device, int64_t offset, int64_t bytes) {
  if (bytes == 0) return at::empty({0}, at::kByte);
  void* host = openreg::translate(static_cast<char*>(device) + offset, static_cast<size_t>(bytes));
  return at::from_blob(host, {bytes}, at::kByte);
}

}  // namespace

IpcTransport::IpcTransport(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size)
    : rank_(rank),
      size_(size),
      kernelSide_(store->clone(), rank, size, "occl/ipc"),
      hostSide_(store->clone(), rank, size, "occl/ipc") {}

IpcTransport::~IpcTransport() { shutdown({"destroy", 0, ""}, std::chrono::milliseconds(0)); }

SharedBuffer IpcTransport::allocate(int64_t bytes) {
  SharedBuffer buffer;
  buffer.bytes = bytes;
  openreg::check(orMalloc(&buffer.device, static_cast<size_t>(bytes)));
  orIpcMemHandle_t handle;
  openreg::check(orIpcGetMemHandle(&handle, buffer.device));
  buffer.handle = toHex(handle);
  return buffer;
}

void IpcTransport::reserve(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t half = mailbox_.bytes / 2;
  if (bytes <= half) return;
  half = std::max<int64_t>({bytes, 2 * half, 1 << 16});
  half = (half + kAlignment - 1) / kAlignment * kAlignment;
  if (mailbox_.device) retired_.push_back(mailbox_);
  mailbox_ = allocate(2 * half);
}

void IpcTransport::reserveSend(int dst, int tag, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Channel& channel = channels_[{dst, tag}];
  Slot* chosen = nullptr;
  for (auto& slot : channel.slots) {
    bool busy = std::any_of(channel.reserved.begin(), channel.reserved.end(),
                            [&](const auto& entry) { return entry.second == slot.get(); });
    if (busy || slot->buffer.bytes < bytes) continue;
    std::string done = channelKey(rank_, dst, tag, slot->lastMessage) + "/done";
    if (slot->lastMessage < 0 || hostSide_.consume(done)) {
      chosen = slot.get();
      break;
    }
  }
  if (chosen == nullptr) {
    channel.slots.push_back(std::make_unique<Slot>());
    chosen = channel.slots.back().get();
    chosen->buffer = allocate(std::max<int64_t>(bytes, 1 << 16));
  }
  chosen->lastMessage = channel.nextMessage++;
  channel.reserved.emplace_back(chosen->lastMessage, chosen);
}

at::Tensor IpcTransport::peerBytes(const CollectiveName& name, int peer, const std::string& handle, int64_t offset,
                                   int64_t bytes) {
  try {
    auto found = opened_.find(handle);
    if (found == opened_.end()) {
      void* device = nullptr;
      openreg::check(orIpcOpenMemHandle(&device, fromHex(handle), 0));
      found = opened_.emplace(handle, device).first;
    }
    return hostBytes(found->second, offset, bytes);
  } catch (const c10::Error& e) {
    throw CollectiveError("occl: " + name.str() + ": cannot read the shared device memory of rank " +
                          std::to_string(peer) + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {  // the runtime's own errors
    throw CollectiveError("occl: " + name.str() + ": cannot read the shared device memory of rank " +
                          std::to_string(peer) + ": " + e.what());
  }
}

// LITERALINCLUDE START: OCCL_IPC_EXCHANGE
Contributions IpcTransport::exchange(const CollectiveName& name, const Contribution& mine,
                                     std::chrono::milliseconds timeout) {
  SharedBuffer mailbox;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    mailbox = mailbox_;
  }
  int64_t bytes = packedBytes(mine.tensors);
  int64_t offset = (name.seq % 2) * (mailbox.bytes / 2);
  if (bytes > 0) packInto(hostBytes(mailbox.device, offset, bytes), mine.tensors);
  std::string record = joinFields({mine.signature, joinInts(mine.extras), mailbox.handle, std::to_string(offset),
                                   std::to_string(bytes)});
  std::vector<std::string> records = kernelSide_.meet(name, record, timeout);
  Contributions all;
  for (int r = 0; r < size_; ++r) {
    std::vector<std::string> fields = splitFields(records[r]);
    fields.resize(5);
    all.extras.push_back(splitInts(fields[1]));
    int64_t theirOffset = std::stoll(fields[3]), theirBytes = std::stoll(fields[4]);
    if (r == rank_) {
      all.bytes.push_back(hostBytes(mailbox.device, offset, bytes));
    } else {
      all.bytes.push_back(theirBytes ? peerBytes(name, r, fields[2], theirOffset, theirBytes)
                                     : at::empty({0}, at::kByte));
    }
  }
  return all;
}
// LITERALINCLUDE END: OCCL_IPC_EXCHANGE

std::string IpcTransport::channelKey(int src, int dst, int tag, int64_t message) const {
  return "p2p/" + std::to_string(src) + "/" + std::to_string(dst) + "/" + std::to_string(tag) + "/" +
         std::to_string(message);
}

void IpcTransport::send(const CollectiveName& name, const at::Tensor& tensor, int dst, int tag,
                        std::chrono::milliseconds timeout) {
  std::pair<int64_t, Slot*> reserved;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Channel& channel = channels_[{dst, tag}];
    TORCH_INTERNAL_ASSERT(!channel.reserved.empty(), "occl: send without reserveSend");
    reserved = channel.reserved.front();
    channel.reserved.pop_front();
  }
  auto [message, slot] = reserved;
  int64_t bytes = static_cast<int64_t>(tensor.nbytes());
  if (bytes > 0) packInto(hostBytes(slot->buffer.device, 0, bytes), {tensor});
  std::string signature = std::string(c10::toString(tensor.scalar_type())) + "[" + std::to_string(tensor.numel()) + "]";
  kernelSide_.post(channelKey(rank_, dst, tag, message), joinFields({signature, slot->buffer.handle,
                                                                     std::to_string(bytes)}));
}

int IpcTransport::recv(const CollectiveName& name, const at::Tensor& into, int src, int tag,
                       std::chrono::milliseconds timeout) {
  std::vector<int> sources;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && (src < 0 || r == src)) sources.push_back(r);
  }
  std::vector<std::string> keys;
  for (int s : sources) keys.push_back(channelKey(s, rank_, tag, received_[{s, tag}]));
  std::string record;
  int from = sources[kernelSide_.takeAny(name, keys, sources, &record, timeout)];
  std::vector<std::string> fields = splitFields(record);
  fields.resize(3);
  std::string signature = std::string(c10::toString(into.scalar_type())) + "[" + std::to_string(into.numel()) + "]";
  if (fields[0] != signature) {
    throw CollectiveError("occl: " + name.str() + ": rank " + std::to_string(from) + " sent " + fields[0] +
                          " but rank " + std::to_string(rank_) + " receives into " + signature +
                          "; a send and its recv need the same dtype and number of elements.");
  }
  int64_t bytes = std::stoll(fields[2]);
  if (bytes > 0) {
    into.view(-1).copy_(unpack(peerBytes(name, from, fields[1], 0, bytes), 0, into.scalar_type(), {into.numel()}));
  }
  kernelSide_.post(channelKey(from, rank_, tag, received_[{from, tag}]++) + "/done", "");
  return from;
}

void IpcTransport::shutdown(const CollectiveName& last, std::chrono::milliseconds wait) {
  if (shutDown_) return;
  shutDown_ = true;
  // A peer may still be reading this rank's mailbox or send slots for the
  // last collective (it finishes after us): meet once more before freeing.
  // Bounded: a peer that never comes costs `wait`, then we free anyway (a
  // peer that already opened the memory keeps it alive: see orFree).
  bool exported = mailbox_.device != nullptr || !channels_.empty();
  if (exported && wait.count() > 0) {
    try {
      hostSide_.meet(last, "destroy", wait);
    } catch (const std::exception&) {
    }
  }
  // Errors are ignored: nothing is left to report them to, and the process
  // is leaving the group whatever happens.
  for (auto& [handle, device] : opened_) (void)orIpcCloseMemHandle(device);
  opened_.clear();
  std::vector<SharedBuffer> owned = retired_;
  if (mailbox_.device) owned.push_back(mailbox_);
  for (auto& [key, channel] : channels_) {
    for (auto& slot : channel.slots) owned.push_back(slot->buffer);
  }
  for (SharedBuffer& buffer : owned) (void)orFree(buffer.device);
  retired_.clear();
  channels_.clear();
  mailbox_ = SharedBuffer();
}

}  // namespace occl
