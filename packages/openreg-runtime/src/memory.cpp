// memory.cpp - device memory (orMalloc/orFree), pinned host memory, pointer
// attributes, and the synchronous and asynchronous copies and memsets.
//
// This is the raw runtime allocator only: every orMalloc is a free-list
// search under a lock. Caching is the job of the layer above.
#include <algorithm>
#include <cstring>

#include "runtime.h"

// LITERALINCLUDE START: OR_MEMORY_MODEL_NOTE
// Note [Device memory is never host-mapped]
// Each device owns one memory file of its capacity (a memfd on Linux),
// mapped twice: a "device" view with PROT_NONE, whose addresses orMalloc
// hands out, and a read-write "host alias" of the same pages. Host code that
// dereferences a device pointer touches the PROT_NONE view and faults,
// always, at no run-time cost, the way a stray host access to GPU memory
// does; the platform's fault handler names the device and offset. Copies and
// kernels reach the bytes by offset arithmetic (alias = host + (ptr -
// device)), and only after checking that the range lies inside a live
// allocation. Freeing punches the pages out of the file, so freed memory goes
// back to the OS. (What macOS and Windows do instead: the platform files.)
// LITERALINCLUDE END: OR_MEMORY_MODEL_NOTE

namespace openreg::rt {

namespace {
size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t roundDown(size_t n, size_t to) { return n / to * to; }

std::mutex pinnedMutex;
std::map<uintptr_t, size_t> pinned;  // base -> size, from orMallocHost
}  // namespace

DeviceMemory::DeviceMemory(int device, DeviceMapping mapping)
    : device_(device), mapping_(mapping) {
  addFreeBlock(0, mapping_.size);
}

void DeviceMemory::addFreeBlock(size_t offset, size_t size) {
  free_[offset] = size;
  freeBySize_.insert({size, offset});
}

void DeviceMemory::removeFreeBlock(size_t offset, size_t size) {
  free_.erase(offset);
  freeBySize_.erase({size, offset});
}

size_t DeviceMemory::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

orError_t DeviceMemory::allocate(size_t size, void** out) {
  // A size beyond the capacity must not wrap to a small one when rounded.
  size_t rounded = size > mapping_.size ? size : roundUp(size, kAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  auto best = freeBySize_.lower_bound({rounded, 0});
  if (rounded > mapping_.size - used_ || best == freeBySize_.end()) {
    size_t largest = freeBySize_.empty() ? 0 : freeBySize_.rbegin()->first;
    return fail(orErrorMemoryAllocation,
                format("out of memory on openreg device %d: tried to allocate "
                       "%zu bytes; capacity %zu bytes, %zu in use, largest free "
                       "block %zu (set OPENREG_DEVICE_MEMORY to change the capacity)",
                       device_, size, mapping_.size, used_, largest));
  }
  auto [blockSize, offset] = *best;
  removeFreeBlock(offset, blockSize);
  if (blockSize > rounded) addFreeBlock(offset + rounded, blockSize - rounded);
  live_[offset] = rounded;
  used_ += rounded;
  *out = mapping_.device + offset;
  return orSuccess;
}

orError_t DeviceMemory::release(void* ptr) {
  size_t offset = static_cast<char*>(ptr) - mapping_.device;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(offset);
  if (it == live_.end()) {
    return fail(orErrorInvalidDevicePointer,
                format("orFree: %p on openreg device %d is not the start of a "
                       "live allocation (double free, or never allocated)",
                       ptr, device_));
  }
  size_t size = it->second;
  live_.erase(it);
  used_ -= size;
  // Coalesce with free neighbours.
  size_t begin = offset, end = offset + size;
  auto next = free_.find(end);
  if (next != free_.end()) {
    end += next->second;
    removeFreeBlock(next->first, next->second);
  }
  auto prev = free_.lower_bound(begin);
  if (prev != free_.begin()) {
    --prev;
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      removeFreeBlock(prev->first, prev->second);
    }
  }
  // Return every page the freed bytes touch that is now wholly free. Done
  // before the block is reusable, so no new owner can see the hole appear.
  size_t page = platformPageSize();
  size_t first = roundDown(offset, page) >= begin ? roundDown(offset, page)
                                                  : roundUp(offset, page);
  size_t last = roundUp(offset + size, page) <= end ? roundUp(offset + size, page)
                                                    : roundDown(offset + size, page);
  if (first < last) platformReleasePages(mapping_, first, last - first);
  addFreeBlock(begin, end - begin);
  return orSuccess;
}

bool DeviceMemory::find(const void* ptr, char** base, size_t* size) const {
  if (!inRange(ptr)) return false;
  size_t offset = static_cast<const char*>(ptr) - mapping_.device;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return false;
  --it;
  if (offset >= it->first + it->second) return false;
  *base = mapping_.device + it->first;
  *size = it->second;
  return true;
}

char* DeviceMemory::translate(const void* ptr, size_t count) const {
  char* base = nullptr;
  size_t size = 0;
  if (!find(ptr, &base, &size)) {
    return inRange(ptr) ? nullptr : ipcTranslateImport(ptr, count);  // opened from another process
  }
  if (count > size - static_cast<size_t>(static_cast<const char*>(ptr) - base)) return nullptr;
  return alias(ptr);
}

Location locate(const void* ptr) {
  Location where;
  for (auto& device : runtime().devices) {
    if (!device->memory.inRange(ptr)) continue;
    where.inDeviceRange = true;
    where.device = device->index;
    if (device->memory.find(ptr, &where.base, &where.size)) {
      where.type = orMemoryTypeDevice;
    }
    return where;
  }
  if (ipcFindImport(ptr, &where.device, &where.base, &where.size)) {
    where.inDeviceRange = true;  // another process's allocation, opened here
    where.type = orMemoryTypeDevice;
    return where;
  }
  std::lock_guard<std::mutex> lock(pinnedMutex);
  auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = pinned.upper_bound(p);
  if (it != pinned.begin()) {
    --it;
    if (p < it->first + it->second) {
      where.type = orMemoryTypeHost;
      where.base = reinterpret_cast<char*>(it->first);
      where.size = it->second;
    }
  }
  return where;
}

namespace {

// One side of a copy or memset, checked against what the runtime knows.
struct Side {
  Location where;
  bool device() const { return where.inDeviceRange; }
  bool pageable() const { return !where.inDeviceRange && where.type != orMemoryTypeHost; }
};

orError_t checkSide(const char* call, const char* role, const void* ptr,
                    size_t count, Side* side) {
  if (ptr == nullptr) return fail(orErrorInvalidValue, format("%s: %s is NULL", call, role));
  side->where = locate(ptr);
  const Location& w = side->where;
  if (w.inDeviceRange && w.type != orMemoryTypeDevice) {
    return fail(orErrorInvalidDevicePointer,
                format("%s: %s %p is freed or was never allocated on openreg "
                       "device %d (use of freed memory?)", call, role, ptr, w.device));
  }
  // Compared as sizes: ptr + count could wrap around for a huge count.
  if (w.base != nullptr &&
      count > w.size - static_cast<size_t>(static_cast<const char*>(ptr) - w.base)) {
    return fail(orErrorInvalidValue,
                format("%s: %zu bytes at %s %p overrun its allocation of %zu bytes "
                       "at %p", call, count, role, ptr, w.size, static_cast<void*>(w.base)));
  }
  return orSuccess;
}

const char* copyName(bool dstDevice, bool srcDevice) {
  if (dstDevice && srcDevice) return "memcpyDtoD";
  if (dstDevice) return "memcpyHtoD";
  if (srcDevice) return "memcpyDtoH";
  return "memcpyHtoH";
}

// The name a copy is traced and reported under: between two devices it
// crosses the device link, not one device's memory ("memcpyPtoP", as
// CUPTI's peer copies), which a tool pricing it must tell apart.
const char* copyName(const Side& dst, const Side& src) {
  if (dst.device() && src.device() && dst.where.device != src.where.device) return "memcpyPtoP";
  return copyName(dst.device(), src.device());
}

orError_t checkKind(const char* call, orMemcpyKind kind, const Side& dst, const Side& src) {
  bool ok = true;
  switch (kind) {
    case orMemcpyHostToHost: ok = !dst.device() && !src.device(); break;
    case orMemcpyHostToDevice: ok = dst.device() && !src.device(); break;
    case orMemcpyDeviceToHost: ok = !dst.device() && src.device(); break;
    case orMemcpyDeviceToDevice: ok = dst.device() && src.device(); break;
    case orMemcpyDefault: break;
    default:
      return fail(orErrorInvalidValue, format("%s: unknown copy kind %d", call, kind));
  }
  if (ok) return orSuccess;
  return fail(orErrorInvalidMemcpyDirection,
              format("%s: the copy kind says %s but the pointers are %s to %s", call,
                     copyName(kind == orMemcpyHostToDevice || kind == orMemcpyDeviceToDevice,
                              kind == orMemcpyDeviceToHost || kind == orMemcpyDeviceToDevice),
                     src.device() ? "device" : "host", dst.device() ? "device" : "host"));
}

// A copy reads or writes both its devices: a faulted one reports its sticky
// error, whichever device's stream the copy is queued on (Note [Sticky errors]).
orError_t checkStickySides(const Side& a, const Side& b) {
  for (const Side* side : {&a, &b}) {
    if (!side->device()) continue;
    orError_t status = runtime().devices[side->where.device]->checkSticky();
    if (status != orSuccess) return status;
  }
  return orSuccess;
}

// Waits for the devices a synchronous copy or memset touches.
orError_t synchronizeDevices(const char* call, const Side& a, const Side& b) {
  for (int device = 0; device < static_cast<int>(runtime().devices.size()); ++device) {
    bool touched = (a.device() && a.where.device == device) ||
                   (b.device() && b.where.device == device);
    if (!touched) continue;
    if (waitsForRunningKernel(device)) return refuseWaitForRunningKernel(call);
    orError_t status = runtime().devices[device]->synchronize();
    if (status != orSuccess) return status;
  }
  return orSuccess;
}

// The single path every copy takes: check, then queue on a stream (the
// stream's worker does the bytes), then wait if the host side is pageable
// or the caller asked for a synchronous copy.
orError_t copy(const char* call, void* dst, const void* src, size_t count,
               orMemcpyKind kind, orStream_t handle, bool synchronous) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (count == 0) return orSuccess;
  Side d, s;
  if ((status = checkSide(call, "dst", dst, count, &d)) != orSuccess) return status;
  if ((status = checkSide(call, "src", src, count, &s)) != orSuccess) return status;
  if ((status = checkKind(call, kind, d, s)) != orSuccess) return status;
  if ((status = checkStickySides(d, s)) != orSuccess) return status;
  if (!d.device() && !s.device()) {
    std::memcpy(dst, src, count);  // host to host: nothing to queue
    return orSuccess;
  }
  if (synchronous && (status = refuseUnsafeCall(d.device() ? d.where.device : s.where.device, call)) != orSuccess) {
    return status;
  }
  if (synchronous && (status = synchronizeDevices(call, d, s)) != orSuccess) return status;
  std::shared_ptr<Stream> stream;
  if (synchronous) {
    int device = d.device() ? d.where.device : s.where.device;
    stream = runtime().devices[device]->defaultStream;
  } else if ((status = findStream(handle, &stream)) != orSuccess) {
    return status;
  }
  bool wait = synchronous || d.pageable() || s.pageable();
  if (wait && waitsForRunningKernel(*stream)) return refuseWaitForRunningKernel(call);
  Op op;
  op.kind = Op::Kind::Copy;
  op.dst = dst;
  op.src = src;
  op.count = count;
  op.name = copyName(d, s);
  return submit(*stream, std::move(op), wait);
}

orError_t memset(const char* call, void* ptr, int value, size_t count,
                 orStream_t handle, bool synchronous) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (count == 0) return orSuccess;
  Side side;
  if ((status = checkSide(call, "devPtr", ptr, count, &side)) != orSuccess) return status;
  if (!side.device()) {
    return fail(orErrorInvalidValue, format("%s: %p is not device memory", call, ptr));
  }
  if (synchronous && (status = refuseUnsafeCall(side.where.device, call)) != orSuccess) return status;
  if (synchronous && (status = synchronizeDevices(call, side, side)) != orSuccess) return status;
  std::shared_ptr<Stream> stream;
  if (synchronous) {
    stream = runtime().devices[side.where.device]->defaultStream;
  } else if ((status = findStream(handle, &stream)) != orSuccess) {
    return status;
  }
  Op op;
  op.kind = Op::Kind::Memset;
  op.dst = ptr;
  op.value = value;
  op.count = count;
  op.name = "memset";
  return submit(*stream, std::move(op), synchronous);
}

}  // namespace

}  // namespace openreg::rt

using namespace openreg::rt;

extern "C" {

orError_t orMalloc(void** devPtr, size_t size) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (devPtr == nullptr) return fail(orErrorInvalidValue, "orMalloc: devPtr is NULL");
  if (size == 0) {
    *devPtr = nullptr;
    return orSuccess;
  }
  ipcReclaim();  // allocations freed while another process had them open
  return runtime().devices[currentDevice()]->memory.allocate(size, devPtr);
}

orError_t orFree(void* devPtr) {
  orError_t status = ensureInit();
  if (status != orSuccess || devPtr == nullptr) return status;
  for (auto& device : runtime().devices) {
    if (!device->memory.inRange(devPtr)) continue;
    if (waitsForRunningKernel(device->index)) return refuseWaitForRunningKernel("orFree");
    if ((status = refuseUnsafeCall(device->index, "orFree")) != orSuccess) return status;
    // As cudaFree: queued work may still use the memory, so wait for it.
    // A sticky error does not stop the free: memory must never be lost.
    device->synchronize();
    bool deferred = false;  // exported and still open in another process
    if ((status = ipcBeforeFree(devPtr, &deferred)) != orSuccess || deferred) return status;
    return device->memory.release(devPtr);
  }
  if (locate(devPtr).inDeviceRange) {
    return fail(orErrorInvalidValue,
                format("orFree: %p was opened with orIpcOpenMemHandle; close it with "
                       "orIpcCloseMemHandle", devPtr));
  }
  return fail(orErrorInvalidValue,
              format("orFree: %p is not device memory (pinned memory is freed "
                     "with orFreeHost)", devPtr));
}

orError_t orMallocHost(void** hostPtr, size_t size) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (hostPtr == nullptr) return fail(orErrorInvalidValue, "orMallocHost: hostPtr is NULL");
  if (size == 0) {
    *hostPtr = nullptr;
    return orSuccess;
  }
  void* ptr = platformAllocateHost(size);
  if (ptr == nullptr) {
    return fail(orErrorMemoryAllocation,
                format("orMallocHost: cannot allocate %zu bytes of pinned host memory", size));
  }
  std::lock_guard<std::mutex> lock(pinnedMutex);
  pinned[reinterpret_cast<uintptr_t>(ptr)] = size;
  *hostPtr = ptr;
  return orSuccess;
}

orError_t orFreeHost(void* hostPtr) {
  orError_t status = ensureInit();
  if (status != orSuccess || hostPtr == nullptr) return status;
  if (runningStream() != nullptr) return refuseWaitForRunningKernel("orFreeHost");  // waits for every device
  size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(pinnedMutex);
    auto it = pinned.find(reinterpret_cast<uintptr_t>(hostPtr));
    if (it == pinned.end()) {
      return fail(orErrorInvalidValue,
                  format("orFreeHost: %p is not the start of live pinned memory "
                         "from orMallocHost (double free?)", hostPtr));
    }
    size = it->second;
  }
  // Any device's queued copies may still read or write the buffer.
  for (auto& device : runtime().devices) device->synchronize();
  {
    std::lock_guard<std::mutex> lock(pinnedMutex);
    if (pinned.erase(reinterpret_cast<uintptr_t>(hostPtr)) == 0) {
      return fail(orErrorInvalidValue, format("orFreeHost: %p freed twice concurrently", hostPtr));
    }
  }
  platformFreeHost(hostPtr, size);
  return orSuccess;
}

orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind) {
  return copy("orMemcpy", dst, src, count, kind, nullptr, true);
}

orError_t orMemcpyAsync(void* dst, const void* src, size_t count,
                        orMemcpyKind kind, orStream_t stream) {
  return copy("orMemcpyAsync", dst, src, count, kind, stream, false);
}

orError_t orMemset(void* devPtr, int value, size_t count) {
  return memset("orMemset", devPtr, value, count, nullptr, true);
}

orError_t orMemsetAsync(void* devPtr, int value, size_t count, orStream_t stream) {
  return memset("orMemsetAsync", devPtr, value, count, stream, false);
}

orError_t orPointerGetAttributes(orPointerAttributes* attributes, const void* ptr) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (attributes == nullptr) {
    return fail(orErrorInvalidValue, "orPointerGetAttributes: attributes is NULL");
  }
  Location where = locate(ptr);
  attributes->type = where.type;
  attributes->device = where.type == orMemoryTypeDevice ? where.device : -1;
  attributes->base = where.base;
  attributes->size = where.size;
  return orSuccess;
}

orError_t orMemGetInfo(size_t* free, size_t* total) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  ipcReclaim();
  const DeviceMemory& memory = runtime().devices[currentDevice()]->memory;
  size_t used = memory.used();
  if (free != nullptr) *free = memory.capacity() - used;
  if (total != nullptr) *total = memory.capacity();
  return orSuccess;
}

}  // extern "C"
