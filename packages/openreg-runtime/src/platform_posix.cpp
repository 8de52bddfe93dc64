// platform_posix.cpp - the part of the runtime's platform layer that Linux and
// macOS share: host pages, fork, the two views of a device file, the alias
// windows' retirement, and the fault handler. platform_linux.cpp and
// platform_macos.cpp hold what differs; platform_windows.cpp is all of it for
// Windows.
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "platform_posix.h"

namespace openreg::rt {

bool platformMapBothViews(int fd, size_t offset, size_t size, DeviceMapping* out, std::string* error) {
  // LITERALINCLUDE START: OR_DEVICE_VIEWS
  // Both views share the file's pages. The device view is mapped with no
  // access at all, so the host can never read or write through it.
  void* dev = mmap(nullptr, size, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, static_cast<off_t>(offset));
  void* host = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd,
                    static_cast<off_t>(offset));
  // LITERALINCLUDE END: OR_DEVICE_VIEWS
  if (dev == MAP_FAILED || host == MAP_FAILED) {
    *error = format("cannot map %zu bytes: %s", size, strerror(errno));
    if (dev != MAP_FAILED) munmap(dev, size);
    if (host != MAP_FAILED) munmap(host, size);
    return false;
  }
  *out = DeviceMapping{static_cast<char*>(dev), static_cast<char*>(host), size, -1};
  return true;
}

size_t platformPageSize() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

void* platformAllocateHost(size_t size) {
  void* ptr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

void platformFreeHost(void* ptr, size_t size) { munmap(ptr, size); }

void platformOnFork(void (*child)()) { pthread_atfork(nullptr, nullptr, child); }

int platformProcessId() { return static_cast<int>(getpid()); }

void platformRevokeLease(int fd) {
  // Emptied, it no longer holds the record: an importer that locks it from
  // now on sees the export is gone (platformHoldLease).
  int ignored = ftruncate(fd, 0);
  (void)ignored;
}

bool platformMapPeerRange(int fd, size_t offset, size_t length, DeviceMapping* out, std::string* error) {
  // mmap maps whole pages; the caller adds offset % page to the views.
  size_t page = platformPageSize();
  size_t begin = offset / page * page;
  size_t size = (offset + length + page - 1) / page * page - begin;
  if (platformMapBothViews(fd, begin, size, out, error)) return true;
  *error = "another process's device memory: " + *error;
  return false;
}

void platformUnmapPeerRange(const DeviceMapping& mapping) {
  munmap(mapping.device, mapping.size);
  munmap(mapping.host, mapping.size);
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
// Linux raises SIGSEGV for an access to a page mapped with no access; macOS
// raises SIGBUS.
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
