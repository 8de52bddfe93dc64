// platform_linux.cpp - every OS-specific piece of the runtime: memfd and mmap
// for device memory, page release, the fault handler, host pages, fork, and
// the files and locks that let another process open device memory (IPC).
//
// platform_windows.cpp is the same for Windows; a port to macOS adds its own.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime.h"

namespace openreg::rt {

bool platformMapDevice(int device, size_t size, DeviceMapping* out,
                       std::string* error) {
  // LITERALINCLUDE START: OR_DEVICE_MAPPING
  std::string name = format("openreg-device-%d", device);
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    *error = format("memfd for device %d: %s", device, strerror(errno));
    if (fd >= 0) close(fd);
    return false;
  }
  // Both views share the memfd's pages. The device view is mapped with no
  // access at all, so the host can never read or write through it.
  void* dev = mmap(nullptr, size, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  void* host = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_NORESERVE, fd, 0);
  // LITERALINCLUDE END: OR_DEVICE_MAPPING
  if (dev == MAP_FAILED || host == MAP_FAILED) {
    *error = format("mapping %zu bytes for device %d: %s", size, device,
                    strerror(errno));
    if (dev != MAP_FAILED) munmap(dev, size);
    if (host != MAP_FAILED) munmap(host, size);
    close(fd);
    return false;
  }
  *out = DeviceMapping{static_cast<char*>(dev), static_cast<char*>(host), size, fd};
  return true;
}

void platformReleasePages(const DeviceMapping& mapping, size_t offset,
                          size_t length) {
  // Punching a hole frees the memfd's pages; later reads see zeros.
  fallocate(mapping.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            static_cast<off_t>(offset), static_cast<off_t>(length));
}

size_t platformPageSize() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

void* platformAllocateHost(size_t size) {
  void* ptr = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

void platformFreeHost(void* ptr, size_t size) { munmap(ptr, size); }

void platformOnFork(void (*child)()) { pthread_atfork(nullptr, nullptr, child); }

// ---------------------------------------------------------- interprocess memory

// LITERALINCLUDE START: OR_IPC_PLATFORM
// A lease is a memfd holding the export's record (its nonce, offset and size). Importers reopen it through
// /proc/<pid>/fd/<fd>, which gives them an open file description of their own,
// and hold a shared OFD lock on it while the memory is open. Such locks belong
// to the importer's description, so the kernel drops them when the importer
// closes it, exits or is killed: the exporter learns that nobody uses the
// memory any more by asking whether an exclusive lock would conflict.
int platformCreateLease(const void* record, size_t bytes, std::string* error) {
  int fd = memfd_create("openreg-ipc-lease", MFD_CLOEXEC);
  if (fd < 0 || pwrite(fd, record, bytes, 0) != static_cast<ssize_t>(bytes)) {
    *error = format("cannot create the IPC lease file: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

void platformRevokeLease(int fd) {
  // Emptied, it no longer holds the record: an importer that locks it from
  // now on sees the export is gone (platformHoldLease).
  int ignored = ftruncate(fd, 0);
  (void)ignored;
}

bool platformLeaseInUse(int fd) {
  struct flock lock;
  memset(&lock, 0, sizeof(lock));
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return true;  // cannot tell: keep it
  return lock.l_type != F_UNLCK;
}

bool platformHoldLease(int fd, void* record, size_t bytes) {
  struct flock lock;
  memset(&lock, 0, sizeof(lock));
  lock.l_type = F_RDLCK;
  lock.l_whence = SEEK_SET;
  if (fcntl(fd, F_OFD_SETLK, &lock) != 0) return false;
  // Locked first, read second: the exporter revokes first and looks for
  // locks second, so one of the two always sees the other.
  return pread(fd, record, bytes, 0) == static_cast<ssize_t>(bytes);
}
// LITERALINCLUDE END: OR_IPC_PLATFORM

uint64_t platformFileInode(int fd) {
  struct stat info;
  return fstat(fd, &info) == 0 ? static_cast<uint64_t>(info.st_ino) : 0;
}

int platformProcessId() { return static_cast<int>(getpid()); }

int platformOpenPeerFile(int pid, int fd, uint64_t inode, std::string* error) {
  std::string path = format("/proc/%d/fd/%d", pid, fd);
  int opened = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (opened < 0) {
    *error = format("cannot open %s (%s): the exporting process has exited, or "
                    "freed the allocation, or belongs to another user",
                    path.c_str(), strerror(errno));
    return -1;
  }
  if (platformFileInode(opened) != inode) {
    close(opened);
    *error = format("%s is no longer the exported file: the allocation was freed",
                    path.c_str());
    return -1;
  }
  return opened;
}

void platformCloseFile(int fd) {
  if (fd >= 0) close(fd);
}

bool platformMapPeerRange(int fd, size_t offset, size_t length,
                          DeviceMapping* out, std::string* error) {
  // mmap maps whole pages; the caller adds offset % page to the views.
  size_t page = platformPageSize();
  size_t begin = offset / page * page;
  size_t size = (offset + length + page - 1) / page * page - begin;
  // The same two views as a device of this process: see Note [Device memory
  // is never host-mapped] in memory.cpp.
  void* dev = mmap(nullptr, size, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd,
                   static_cast<off_t>(begin));
  void* host = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                    fd, static_cast<off_t>(begin));
  if (dev == MAP_FAILED || host == MAP_FAILED) {
    *error = format("cannot map %zu bytes of another process's device memory: %s",
                    size, strerror(errno));
    if (dev != MAP_FAILED) munmap(dev, size);
    if (host != MAP_FAILED) munmap(host, size);
    return false;
  }
  *out = DeviceMapping{static_cast<char*>(dev), static_cast<char*>(host), size, -1};
  return true;
}

void platformUnmapPeerRange(const DeviceMapping& mapping) {
  munmap(mapping.device, mapping.size);
  munmap(mapping.host, mapping.size);
}

// ------------------------------------------- kernel alias windows (debugging)

char* platformOpenAliasWindow(char* alias, size_t count, AliasWindow* window) {
  size_t page = platformPageSize();
  char* first = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(alias) / page * page);
  size_t size = std::max(page, (static_cast<size_t>(alias - first) + count + page - 1) / page * page);
  // An old size of 0 maps the same shared pages a second time.
  void* mapped = mremap(first, 0, size, MREMAP_MAYMOVE);
  if (mapped == MAP_FAILED) return nullptr;
  *window = AliasWindow{mapped, size};
  return static_cast<char*>(mapped) + (alias - first);
}

void platformRetireAliasWindow(const AliasWindow& window, const char* kernel) {
  // Replaced in place by an inaccessible reservation: no later mapping can
  // take these addresses while the window is in quarantine.
  mmap(window.begin, window.size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  quarantineAliasWindow(window, kernel, [](void* begin, size_t size) { munmap(begin, size); });
}

// ------------------------------------------------------------ fault handler

namespace {

struct sigaction previousSegv;
struct sigaction previousBus;

// The handler may only use async-signal-safe calls: write(2), no stdio.
void writeText(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

// LITERALINCLUDE START: OR_FAULT_HANDLER
void onFault(int signo, siginfo_t* info, void* context) {
  describeFault(reinterpret_cast<uintptr_t>(info->si_addr), writeText);
  // Hand the fault to whoever handled it before us (Python's faulthandler,
  // a sanitizer, or the default action that ends the process): restore their
  // handler and return, so the faulting instruction runs again and faults
  // into it.
  (void)context;
  sigaction(signo, signo == SIGBUS ? &previousBus : &previousSegv, nullptr);
}
// LITERALINCLUDE END: OR_FAULT_HANDLER

}  // namespace

void platformInstallFaultHandler(const std::vector<DeviceMapping>& devices) {
  setFaultRanges(devices);
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = onFault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &previousSegv);
  sigaction(SIGBUS, &action, &previousBus);
}

}  // namespace openreg::rt
