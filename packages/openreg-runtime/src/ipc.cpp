// ipc.cpp - interprocess device memory: orIpcGetMemHandle, orIpcOpenMemHandle,
// orIpcCloseMemHandle, and the tables of exported and opened allocations.
//
// Not here: the files, locks and mappings themselves (the platform files), or
// any transport of handles between processes (that is the caller's).
#include <cstring>
#include <random>

#include "runtime.h"

// LITERALINCLUDE START: OR_IPC_NOTE
// Note [How device memory crosses processes]
// A device's bytes live in one memfd per device (Note [Device memory is never
// host-mapped]). A handle names that memfd by the exporter's pid and file
// descriptor, plus the allocation's offset and size; the importer reopens the
// memfd through /proc/<pid>/fd/<fd> (on Linux; macOS and Windows name their
// files instead: Note [Interprocess memory on macOS], Note [Interprocess
// memory on Windows]) and maps the allocation's pages twice,
// like a device of its own: a PROT_NONE view whose addresses it hands out and
// a read-write alias that only copies and kernels reach. Both processes then
// share the same physical pages: a copy into imported memory is one memcpy
// between two host aliases, with no staging buffer.
//
// The exporter must not reuse the range while an importer still maps it, so
// each exported allocation has a lease (platform_<os>.cpp): a small file
// holding a random nonce, which every importer holds a shared lock on while
// the memory is open. orFree of an exported allocation empties the lease,
// then asks whether anyone holds it; if so, the range stays reserved (and
// counted as used) and ipcReclaim releases it once the last importer has
// closed it, exited or been killed: the kernel drops an importer's lock with
// its file. As on CUDA, the bytes outlive the exporter's free until the last
// close, and nothing is ever reused while mapped elsewhere. The lease also
// records what was exported (the nonce, the allocation's offset and size):
// the inodes in the handle make a stale handle fail to open instead of
// opening whatever file now sits at that number, and the record makes a
// forged or corrupted one fail instead of opening memory it does not name.
// LITERALINCLUDE END: OR_IPC_NOTE

namespace openreg::rt {
namespace {

constexpr uint32_t kHandleMagic = 0x4f524950;  // "ORIP"
constexpr uint16_t kHandleVersion = 1;

// The bytes of an orIpcMemHandle_t.
struct HandleData {
  uint32_t magic;
  uint16_t version;
  uint16_t device;      // the exporter's device index, for messages
  int32_t pid;
  int32_t memoryFd;     // the device's memfd in the exporter
  int32_t leaseFd;
  uint32_t reserved;
  uint64_t memoryInode;
  uint64_t leaseInode;
  uint64_t nonce;
  uint64_t offset;      // of the allocation in the device's memfd
  uint64_t size;
};
static_assert(sizeof(HandleData) == OR_IPC_HANDLE_SIZE, "orIpcMemHandle_t layout");

// What a lease holds: the one allocation a handle may open.
struct LeaseRecord {
  uint64_t nonce;
  uint64_t offset;
  uint64_t size;
};

// An allocation of this process that another process may have open.
struct Export {
  int device = 0;
  int leaseFd = -1;
  uint64_t nonce = 0;
  bool freed = false;  // orFree was called; waiting for importers to close
};

// An allocation of another process opened here.
struct Import {
  int device = 0;       // this process's current device at open
  size_t size = 0;
  DeviceMapping views;  // page-aligned; the allocation starts inside
  int leaseFd = -1;     // our shared lock on the exporter's lease
};

std::mutex ipcMutex;
std::map<const char*, Export> exportsByBase;
std::map<const char*, Import> importsByBase;
std::atomic<int> deferredFrees{0};  // exports freed but still open elsewhere
// Lets locate() skip the lock for the pointers of a process that opened none.
std::atomic<int> importCount{0};

uint64_t randomNonce() {
  std::random_device source;
  return (static_cast<uint64_t>(source()) << 32) ^ source();
}

// The import holding ptr, or end(). Caller holds ipcMutex.
std::map<const char*, Import>::iterator findImportLocked(const void* ptr) {
  auto p = static_cast<const char*>(ptr);
  auto it = importsByBase.upper_bound(p);
  if (it == importsByBase.begin()) return importsByBase.end();
  --it;
  return p < it->first + it->second.size ? it : importsByBase.end();
}

orError_t decodeHandle(const orIpcMemHandle_t& handle, HandleData* data) {
  std::memcpy(data, handle.reserved, sizeof(*data));
  if (data->magic != kHandleMagic || data->version != kHandleVersion || data->size == 0 ||
      data->offset + data->size < data->offset) {
    return fail(orErrorInvalidValue,
                "orIpcOpenMemHandle: the handle is not the bytes written by "
                "orIpcGetMemHandle (corrupted in transit, or of another runtime version)");
  }
  return orSuccess;
}

// Maps the exporter's allocation once the lease is held.
orError_t mapImport(const HandleData& data, int leaseFd, void** devPtr) {
  std::string error;
  int memoryFd = platformOpenPeerFile(data.pid, data.memoryFd, data.memoryInode, &error);
  if (memoryFd < 0) {
    return fail(orErrorInvalidResourceHandle, "orIpcOpenMemHandle: " + error);
  }
  Import import;
  import.device = currentDevice();
  import.size = data.size;
  import.leaseFd = leaseFd;
  bool mapped = platformMapPeerRange(memoryFd, data.offset, data.size, &import.views, &error);
  platformCloseFile(memoryFd);  // the mappings keep the file alive
  if (!mapped) return fail(orErrorMemoryAllocation, "orIpcOpenMemHandle: " + error);
  char* base = import.views.device + data.offset % platformPageSize();
  std::lock_guard<std::mutex> lock(ipcMutex);
  importsByBase[base] = import;
  importCount.fetch_add(1);
  *devPtr = base;
  return orSuccess;
}

}  // namespace

bool ipcFindImport(const void* ptr, int* device, char** base, size_t* size) {
  if (importCount.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(ipcMutex);
  auto it = findImportLocked(ptr);
  if (it == importsByBase.end()) return false;
  *device = it->second.device;
  *base = const_cast<char*>(it->first);
  *size = it->second.size;
  return true;
}

char* ipcTranslateImport(const void* ptr, size_t count) {
  std::lock_guard<std::mutex> lock(ipcMutex);
  auto it = findImportLocked(ptr);
  if (it == importsByBase.end()) return nullptr;
  size_t offset = static_cast<const char*>(ptr) - it->first;
  if (count > it->second.size - offset) return nullptr;
  const DeviceMapping& views = it->second.views;
  return views.host + (static_cast<const char*>(ptr) - views.device);
}

orError_t ipcBeforeFree(void* ptr, bool* deferred) {
  *deferred = false;
  std::lock_guard<std::mutex> lock(ipcMutex);
  auto it = exportsByBase.find(static_cast<const char*>(ptr));
  if (it == exportsByBase.end()) return orSuccess;
  Export& exported = it->second;
  if (exported.freed) {
    return fail(orErrorInvalidDevicePointer,
                format("orFree: %p was freed already (its bytes stay reserved until "
                       "every process that opened it with orIpcOpenMemHandle closes it)",
                       ptr));
  }
  // Revoke first, then look for holders: see platformHoldLease.
  platformRevokeLease(exported.leaseFd);
  if (platformLeaseInUse(exported.leaseFd)) {
    exported.freed = true;
    deferredFrees.fetch_add(1);
    *deferred = true;
    return orSuccess;
  }
  platformCloseFile(exported.leaseFd);
  exportsByBase.erase(it);
  return orSuccess;
}

void ipcReclaim() {
  if (deferredFrees.load(std::memory_order_relaxed) == 0) return;  // the common case
  std::vector<std::pair<void*, int>> released;  // (base, device)
  {
    std::lock_guard<std::mutex> lock(ipcMutex);
    for (auto it = exportsByBase.begin(); it != exportsByBase.end();) {
      if (!it->second.freed || platformLeaseInUse(it->second.leaseFd)) {
        ++it;
        continue;
      }
      platformCloseFile(it->second.leaseFd);
      released.emplace_back(const_cast<char*>(it->first), it->second.device);
      deferredFrees.fetch_sub(1);
      it = exportsByBase.erase(it);
    }
  }
  for (auto [base, device] : released) runtime().devices[device]->memory.release(base);
}

}  // namespace openreg::rt

using namespace openreg::rt;

extern "C" {

orError_t orIpcGetMemHandle(orIpcMemHandle_t* handle, void* devPtr) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (handle == nullptr) return fail(orErrorInvalidValue, "orIpcGetMemHandle: handle is NULL");
  if (devPtr == nullptr) return fail(orErrorInvalidValue, "orIpcGetMemHandle: devPtr is NULL");
  ipcReclaim();
  Location where = locate(devPtr);
  if (where.type == orMemoryTypeDevice && !runtime().devices[where.device]->memory.inRange(devPtr)) {
    return fail(orErrorInvalidValue,
                format("orIpcGetMemHandle: %p was opened with orIpcOpenMemHandle; openreg "
                       "does not export such memory again: export the original allocation "
                       "in the process that allocated it", devPtr));
  }
  if (where.inDeviceRange && where.type != orMemoryTypeDevice) {
    return fail(orErrorInvalidDevicePointer,
                format("orIpcGetMemHandle: %p on openreg device %d is freed or was never "
                       "allocated", devPtr, where.device));
  }
  if (!where.inDeviceRange) {
    return fail(orErrorInvalidValue,
                format("orIpcGetMemHandle: %p is not device memory from orMalloc", devPtr));
  }
  const DeviceMapping& mapping = runtime().devices[where.device]->memory.mapping();
  std::lock_guard<std::mutex> lock(ipcMutex);
  Export& exported = exportsByBase[where.base];
  if (exported.freed) {
    return fail(orErrorInvalidDevicePointer,
                format("orIpcGetMemHandle: %p was freed (its bytes stay reserved only "
                       "until the processes that opened it close it)", devPtr));
  }
  if (exported.leaseFd < 0) {  // first export of this allocation
    std::string error;
    exported.device = where.device;
    exported.nonce = randomNonce();
    LeaseRecord record{exported.nonce, static_cast<uint64_t>(where.base - mapping.device), where.size};
    exported.leaseFd = platformCreateLease(&record, sizeof(record), &error);
    if (exported.leaseFd < 0) {
      exportsByBase.erase(where.base);
      return fail(orErrorMemoryAllocation, "orIpcGetMemHandle: " + error);
    }
  }
  HandleData data{};
  data.magic = kHandleMagic;
  data.version = kHandleVersion;
  data.device = static_cast<uint16_t>(where.device);
  data.pid = platformProcessId();
  data.memoryFd = mapping.fd;
  data.leaseFd = exported.leaseFd;
  data.memoryInode = platformFileInode(mapping.fd);
  data.leaseInode = platformFileInode(exported.leaseFd);
  data.nonce = exported.nonce;
  data.offset = static_cast<uint64_t>(where.base - mapping.device);
  data.size = where.size;
  std::memcpy(handle->reserved, &data, sizeof(data));
  return orSuccess;
}

// LITERALINCLUDE START: OR_IPC_OPEN
orError_t orIpcOpenMemHandle(void** devPtr, orIpcMemHandle_t handle, unsigned int flags) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (devPtr == nullptr) return fail(orErrorInvalidValue, "orIpcOpenMemHandle: devPtr is NULL");
  if (flags != 0) {
    return fail(orErrorInvalidValue,
                format("orIpcOpenMemHandle: unknown flags 0x%x (pass 0)", flags));
  }
  HandleData data;
  if ((status = decodeHandle(handle, &data)) != orSuccess) return status;
  if (data.pid == platformProcessId()) {
    return fail(orErrorNotPermitted,
                "orIpcOpenMemHandle: the handle was exported by this process; use the "
                "original device pointer (a process cannot open its own handle, as on CUDA)");
  }
  std::string error;
  int leaseFd = platformOpenPeerFile(data.pid, data.leaseFd, data.leaseInode, &error);
  LeaseRecord exported{};
  if (leaseFd >= 0 && (!platformHoldLease(leaseFd, &exported, sizeof(exported)) || exported.nonce != data.nonce)) {
    platformCloseFile(leaseFd);
    leaseFd = -1;
    error = "the allocation was freed by the exporting process";
  }
  if (leaseFd < 0) {
    return fail(orErrorInvalidResourceHandle,
                format("orIpcOpenMemHandle: stale handle of %llu bytes on device %d of "
                       "process %d: %s", static_cast<unsigned long long>(data.size),
                       data.device, data.pid, error.c_str()));
  }
  if (exported.offset != data.offset || exported.size != data.size) {
    platformCloseFile(leaseFd);
    return fail(orErrorInvalidValue,
                format("orIpcOpenMemHandle: the handle names %llu bytes at offset %llu of device %d of process %d, "
                       "but that process exported %llu bytes at offset %llu under it: a forged or corrupted "
                       "handle (pass the bytes orIpcGetMemHandle wrote, unchanged)",
                       static_cast<unsigned long long>(data.size), static_cast<unsigned long long>(data.offset),
                       data.device, data.pid, static_cast<unsigned long long>(exported.size),
                       static_cast<unsigned long long>(exported.offset)));
  }
  status = mapImport(data, leaseFd, devPtr);
  if (status != orSuccess) platformCloseFile(leaseFd);  // drops our lock
  return status;
}
// LITERALINCLUDE END: OR_IPC_OPEN

orError_t orIpcCloseMemHandle(void* devPtr) {
  orError_t status = ensureInit();
  if (status != orSuccess || devPtr == nullptr) return status;
  if (runningStream() != nullptr) {  // it would wait for the kernel's own stream
    return fail(orErrorNotPermitted,
                "orIpcCloseMemHandle: called from inside a kernel, it would wait for "
                "the kernel's own stream; close the memory from the host");
  }
  {
    std::lock_guard<std::mutex> lock(ipcMutex);
    if (importsByBase.count(static_cast<const char*>(devPtr)) == 0) {
      return fail(orErrorInvalidValue,
                  format("orIpcCloseMemHandle: %p is not a pointer returned by "
                         "orIpcOpenMemHandle, or was closed already (memory from orMalloc "
                         "is freed with orFree)", devPtr));
    }
  }
  // Queued copies and kernels on any device may still use the memory. A
  // sticky error does not stop the close: the mapping must never be lost.
  for (auto& device : runtime().devices) device->synchronize();
  Import import;
  {
    std::lock_guard<std::mutex> lock(ipcMutex);
    auto it = importsByBase.find(static_cast<const char*>(devPtr));
    if (it == importsByBase.end()) {
      return fail(orErrorInvalidValue,
                  format("orIpcCloseMemHandle: %p closed twice concurrently", devPtr));
    }
    import = it->second;
    importsByBase.erase(it);
    importCount.fetch_sub(1);
  }
  // Unmapped before the lock is dropped: once the exporter sees no lock, no
  // mapping of ours remains.
  platformUnmapPeerRange(import.views);
  platformCloseFile(import.leaseFd);
  return orSuccess;
}

}  // extern "C"
