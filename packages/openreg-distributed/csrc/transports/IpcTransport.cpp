// IpcTransport.cpp - collectives and messages through device memory shared
// with the runtime's IPC calls. See Note [The IPC mailbox].
#include "IpcTransport.h"

#include <openreg/openreg.hpp>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace occl {

// Note [The IPC mailbox]
// Each rank owns one device buffer, its mailbox, exported once with
// orIpcGetMemHandle; peers open it once (orIpcOpenMemHandle) and keep it
// open. A collective is: copy this rank's contribution into its mailbox,
// post where the bytes are through the control block (no store round trip:
// Note [The control block]), wait for every rank's, then read the peers'
// mailboxes directly. The mailbox has two halves and collective seq writes
// half seq % 2: a rank starting collective seq has seen every rank arrive
// at seq - 1, so every rank has finished reading half seq % 2 (written at
// seq - 2). No "done" step is needed, but one: a rank that exits right
// after a collective takes its mailbox with it, and a peer that had not yet
// opened it then cannot. So when a mailbox is read for the first time (the
// first collective, or after it grew), the ranks leave that collective
// together, once every one has opened it. Growing the mailbox happens on the
// host (a kernel may not allocate or free device memory); the outgrown one
// stays allocated until shutdown, since a peer may still be reading it.
// An algorithm may skip the mailbox and read the peers' tensors where they
// lie (meetInPlace); it then owes the peers a last meeting before its
// tensors change again (fast/IpcAllreduce.cpp).
// Sends use per-(peer, tag) slots announced through the store instead: a
// slot is reused once the receiver has posted that it is done with it, so
// a send never waits for its receiver.

namespace {

std::string toHex(const std::string& handle) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : handle) {
    auto byte = static_cast<unsigned char>(c);
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

std::string fromHex(const std::string& hex) {
  TORCH_CHECK(hex.size() == 2 * OR_IPC_HANDLE_SIZE, "occl: malformed IPC handle in the store");
  std::string handle(OR_IPC_HANDLE_SIZE, '\0');
  for (size_t i = 0; i < handle.size(); ++i) handle[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return handle;
}

orIpcMemHandle_t handleOf(const std::string& bytes) {
  orIpcMemHandle_t handle;
  TORCH_CHECK(bytes.size() == sizeof(handle.reserved), "occl: malformed IPC handle");
  std::memcpy(handle.reserved, bytes.data(), bytes.size());
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
      control_(store->clone(), rank, size),
      kernelSide_(store->clone(), rank, size, "occl/ipc"),
      hostSide_(store->clone(), rank, size, "occl/ipc"),
      mailboxesRead_(size) {}

IpcTransport::~IpcTransport() { shutdown({"destroy", 0, ""}, std::chrono::milliseconds(0)); }

SharedBuffer IpcTransport::allocate(int64_t bytes) {
  SharedBuffer buffer;
  buffer.bytes = bytes;
  openreg::check(orMalloc(&buffer.device, static_cast<size_t>(bytes)));
  orIpcMemHandle_t handle;
  openreg::check(orIpcGetMemHandle(&handle, buffer.device));
  buffer.handle.assign(handle.reserved, sizeof(handle.reserved));
  return buffer;
}

void IpcTransport::reserve(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  control_.allocate();
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
      openreg::check(orIpcOpenMemHandle(&device, handleOf(handle), 0));
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
  Share share{mine.signature, mine.extras, mailbox.handle};
  share.bytes = packedBytes(mine.tensors);
  share.offset = (name.seq % 2) * (mailbox.bytes / 2);
  if (share.bytes > 0) packInto(hostBytes(mailbox.device, share.offset, share.bytes), mine.tensors);
  std::vector<Share> shares = control_.meet(name, share, timeout);
  Contributions all;
  for (const Share& theirs : shares) all.extras.push_back(theirs.extras);
  if (mine.checkExtras) mine.checkExtras(all.extras);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      all.bytes.push_back(hostBytes(mailbox.device, share.offset, share.bytes));
    } else {
      all.bytes.push_back(shares[r].bytes ? peerBytes(name, r, shares[r].memory, shares[r].offset, shares[r].bytes)
                                          : at::empty({0}, at::kByte));
    }
  }
  // Every rank sees the same shares, so all decide alike whether to leave together.
  bool firstRead = false;
  for (int r = 0; r < size_; ++r) {
    if (shares[r].bytes == 0 || mailboxesRead_[r] == shares[r].memory) continue;
    mailboxesRead_[r] = shares[r].memory;
    firstRead = true;
  }
  if (firstRead) control_.leave(name, "opened the mailboxes read for the first time", timeout);
  return all;
}
// LITERALINCLUDE END: OCCL_IPC_EXCHANGE

std::optional<Share> IpcTransport::locate(const at::Tensor& deviceTensor) {
  void* device = deviceTensor.data_ptr();
  orPointerAttributes attributes;
  orIpcMemHandle_t handle;
  if (orPointerGetAttributes(&attributes, device) != orSuccess || attributes.type != orMemoryTypeDevice ||
      orIpcGetMemHandle(&handle, device) != orSuccess) {
    (void)orGetLastError();  // not exportable (memory opened from a peer): the caller takes the mailbox
    return std::nullopt;
  }
  Share where;
  where.memory.assign(handle.reserved, sizeof(handle.reserved));
  where.offset = static_cast<char*>(device) - static_cast<char*>(attributes.base);
  where.bytes = static_cast<int64_t>(deviceTensor.nbytes());
  return where;
}

std::vector<at::Tensor> IpcTransport::meetInPlace(const CollectiveName& name, const std::string& signature,
                                                  const at::Tensor& view, const Share& where,
                                                  std::chrono::milliseconds timeout) {
  Share mine = where;
  mine.signature = signature;
  std::vector<Share> shares = control_.meet(name, mine, timeout);
  std::vector<at::Tensor> all;
  for (int r = 0; r < size_; ++r) {
    all.push_back(r == rank_ ? at::from_blob(view.data_ptr(), {where.bytes}, at::kByte)
                             : peerBytes(name, r, shares[r].memory, shares[r].offset, shares[r].bytes));
  }
  return all;
}

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
  kernelSide_.post(channelKey(rank_, dst, tag, message), joinFields({signature, toHex(slot->buffer.handle),
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
    into.view(-1).copy_(unpack(peerBytes(name, from, fromHex(fields[1]), 0, bytes), 0, into.scalar_type(), {into.numel()}));
  }
  kernelSide_.post(channelKey(from, rank_, tag, received_[{from, tag}]++) + "/done", "");
  return from;
}

void IpcTransport::waitForReceivers(std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (auto& [key, channel] : channels_) {
    auto [dst, tag] = key;
    for (auto& slot : channel.slots) {
      if (slot->lastMessage < 0) continue;
      std::string done = channelKey(rank_, dst, tag, slot->lastMessage) + "/done";
      try {
        while (!control_.aborted() && !hostSide_.consume(done) && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      } catch (const std::exception&) {
        return;  // the store is gone with the peers: nobody is left to read
      }
      slot->lastMessage = -1;
    }
  }
}

void IpcTransport::shutdown(const CollectiveName& last, std::chrono::milliseconds wait) {
  if (shutDown_) return;
  shutDown_ = true;
  // A peer that has opened this rank's memory keeps it alive (orFree defers
  // to the last importer's close), but one still behind in the last
  // collective may have yet to open it, and a message not yet received
  // would be lost: wait for both, through shared memory (no store meeting).
  if (wait.count() > 0) {
    control_.awaitPeersFinished(last.seq, wait);
    waitForReceivers(wait);
  }
  // Errors are ignored: nothing is left to report them to, and the process
  // is leaving the group whatever happens.
  for (auto& [handle, device] : opened_) (void)orIpcCloseMemHandle(device);
  opened_.clear();
  control_.release();
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
