// platform_macos.cpp - what the runtime asks of macOS beyond what
// platform_posix.cpp shares with Linux: a named POSIX shared memory object per
// device, leases as locked files, and the kernel alias windows.
//
// What macOS does differently (the guide's runtime/platforms page):
// - device memory is a POSIX shared memory object, not a memfd: macOS has no
//   anonymous memory files, and no /proc to reopen another process's, so it
//   has a name another process can open (Note [Interprocess memory on macOS]);
// - a shared memory object's pages cannot be given back while it is mapped
//   (no hole punching): freed device memory keeps its pages until the process
//   exits, and the device's capacity still bounds them;
// - a host access to device memory raises SIGBUS rather than SIGSEGV
//   (platform_posix.cpp's handler catches both).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "platform_posix.h"

namespace openreg::rt {

// LITERALINCLUDE START: OR_IPC_MACOS
// Note [Interprocess memory on macOS]
// Linux names a device's memory and an export's lease by the exporter's pid
// and file descriptor, reopened through /proc. Here both have names made of
// the exporter's pid and an id counting this process's objects, and the
// "inode" of a handle is that id: a device's memory is the shared memory
// object "/openreg-<pid>-<id>", a lease the file /tmp/openreg-<pid>-<id>.lease.
// Importers hold a shared flock on the lease while the memory is open; flock
// belongs to the importer's open file, so the kernel drops it when the
// importer closes it, exits or is killed, and the exporter asks whether an
// exclusive lock would be refused, as with Linux's OFD locks. The exporter
// removes its names when it closes a lease and when it exits. A process
// killed with SIGKILL cannot remove them: its shared memory objects then
// keep their pages until the machine restarts, as POSIX shared memory does
// everywhere, and an importer refuses a handle whose exporter has exited.
// LITERALINCLUDE END: OR_IPC_MACOS

namespace {

constexpr int kMaxDevices = 64;
struct DeviceFile {
  int fd = -1;
  char* host = nullptr;
  size_t size = 0;
};
// Written as each device starts (under the runtime's initialisation), read
// by the alias windows afterwards.
DeviceFile devices[kMaxDevices];

struct Named {
  uint64_t id = 0;
  std::string name;
  bool isLease = false;  // a file; otherwise a shared memory object
};
std::mutex namesMutex;
std::map<int, Named> names;  // this process's named objects, by descriptor
std::atomic<uint64_t> nextId{1};

std::string memoryName(int pid, uint64_t id) {
  return format("/openreg-%d-%llu", pid, static_cast<unsigned long long>(id));
}
std::string leaseName(int pid, uint64_t id) {
  return format("/tmp/openreg-%d-%llu.lease", pid, static_cast<unsigned long long>(id));
}

void removeName(const Named& named) {
  if (named.isLease) {
    unlink(named.name.c_str());
  } else {
    shm_unlink(named.name.c_str());
  }
}

void removeAllNames() {
  std::lock_guard<std::mutex> lock(namesMutex);
  for (const auto& [fd, named] : names) removeName(named);
}

void remember(int fd, Named named) {
  static const bool removedAtExit = std::atexit(removeAllNames) == 0;
  (void)removedAtExit;
  std::lock_guard<std::mutex> lock(namesMutex);
  names[fd] = std::move(named);
}

bool processIsAlive(int pid) { return kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

bool platformMapDevice(int device, size_t size, DeviceMapping* out, std::string* error) {
  if (device >= kMaxDevices) {
    *error = format("at most %d devices", kMaxDevices);
    return false;
  }
  uint64_t id = nextId.fetch_add(1);
  std::string name = memoryName(platformProcessId(), id);
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    *error = format("shared memory %s for device %d: %s", name.c_str(), device, strerror(errno));
    if (fd >= 0) close(fd);
    shm_unlink(name.c_str());
    return false;
  }
  if (!platformMapBothViews(fd, 0, size, out, error)) {
    *error = format("device %d: %s", device, error->c_str());
    close(fd);
    shm_unlink(name.c_str());
    return false;
  }
  remember(fd, Named{id, name, false});  // shm_open's descriptor is close-on-exec already (POSIX)
  devices[device] = DeviceFile{fd, out->host, size};
  out->fd = fd;
  return true;
}

void platformReleasePages(const DeviceMapping&, size_t, size_t) {
  // A shared memory object cannot punch holes: the pages stay with the
  // device, which reuses them (see the top of this file).
}

// ---------------------------------------------------------- interprocess memory

int platformCreateLease(const void* record, size_t bytes, std::string* error) {
  uint64_t id = nextId.fetch_add(1);
  std::string name = leaseName(platformProcessId(), id);
  int fd = open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || pwrite(fd, record, bytes, 0) != static_cast<ssize_t>(bytes)) {
    *error = format("cannot create the IPC lease file %s: %s", name.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    unlink(name.c_str());
    return -1;
  }
  remember(fd, Named{id, name, true});
  return fd;
}

bool platformLeaseInUse(int fd) {
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return true;  // refused (or cannot tell): keep it
  flock(fd, LOCK_UN);
  return false;
}

bool platformHoldLease(int fd, void* record, size_t bytes) {
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) return false;
  // Locked first, read second: the exporter revokes first and looks for
  // locks second, so one of the two always sees the other.
  return pread(fd, record, bytes, 0) == static_cast<ssize_t>(bytes);
}

uint64_t platformFileInode(int fd) {
  std::lock_guard<std::mutex> lock(namesMutex);
  auto found = names.find(fd);
  return found == names.end() ? 0 : found->second.id;
}

int platformOpenPeerFile(int pid, int, uint64_t id, std::string* error) {
  // One counter numbers both kinds of object, so only one of the names exists.
  std::string memory = memoryName(pid, id), lease = leaseName(pid, id);
  int opened = shm_open(memory.c_str(), O_RDWR, 0);
  if (opened < 0) opened = open(lease.c_str(), O_RDWR | O_CLOEXEC);
  if (opened >= 0 && processIsAlive(pid)) return opened;
  if (opened >= 0) close(opened);
  *error = format("cannot open %s or %s: the exporting process (%d) has exited, or freed the allocation, "
                  "or belongs to another user", memory.c_str(), lease.c_str(), pid);
  return -1;
}

void platformCloseFile(int fd) {
  if (fd < 0) return;
  std::lock_guard<std::mutex> lock(namesMutex);
  auto found = names.find(fd);
  if (found != names.end()) {
    removeName(found->second);
    names.erase(found);
  }
  close(fd);
}

// ------------------------------------------- kernel alias windows (debugging)

char* platformOpenAliasWindow(char* alias, size_t count, AliasWindow* window) {
  for (const DeviceFile& device : devices) {
    if (device.host == nullptr || alias < device.host || alias >= device.host + device.size) continue;
    // A second mapping of the same pages of the device's shared memory object.
    size_t page = platformPageSize(), offset = static_cast<size_t>(alias - device.host);
    size_t first = offset / page * page;
    size_t size = std::min(device.size - first, (offset - first + std::max<size_t>(count, 1) + page - 1) / page * page);
    void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, device.fd, static_cast<off_t>(first));
    if (mapped == MAP_FAILED) return nullptr;
    *window = AliasWindow{mapped, size};
    return static_cast<char*>(mapped) + (offset - first);
  }
  return nullptr;
}

}  // namespace openreg::rt
