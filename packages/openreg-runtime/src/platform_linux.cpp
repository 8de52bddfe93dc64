// platform_linux.cpp - every OS-specific piece of the runtime: memfd and mmap
// for device memory, page release, the fault handler, host pages, fork.
//
// A port to macOS or Windows replaces this file and nothing else.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

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

// ------------------------------------------------------------ fault handler

namespace {

constexpr int kMaxDevices = 64;
struct Range {
  uintptr_t begin;
  uintptr_t end;
};
// Written once before the handler is installed, read-only afterwards, so the
// handler can read it without locks.
Range faultRanges[kMaxDevices];
int faultRangeCount = 0;
struct sigaction previousSegv;
struct sigaction previousBus;

// The handler may only use async-signal-safe calls: write(2), no stdio.
void writeText(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

void writeNumber(uintptr_t value, int base) {
  char digits[32];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0 && n < 32);
  char out[34];
  int k = 0;
  if (base == 16) {
    out[k++] = '0';
    out[k++] = 'x';
  }
  while (n > 0) out[k++] = digits[--n];
  ssize_t ignored = write(STDERR_FILENO, out, k);
  (void)ignored;
}

// LITERALINCLUDE START: OR_FAULT_HANDLER
void onFault(int signo, siginfo_t* info, void* context) {
  auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (int d = 0; d < faultRangeCount; ++d) {
    if (address < faultRanges[d].begin || address >= faultRanges[d].end) continue;
    writeText("openreg: host code accessed device memory at address ");
    writeNumber(address, 16);
    writeText(" (openreg device ");
    writeNumber(static_cast<uintptr_t>(d), 10);
    writeText(", offset ");
    writeNumber(address - faultRanges[d].begin, 16);
    writeText("). Device memory is reachable only through orMemcpy/orMemset "
              "or from inside a kernel via orKernelTranslatePointer; copy the "
              "data to the host first.\n");
    break;
  }
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
  faultRangeCount = 0;
  for (const DeviceMapping& m : devices) {
    if (faultRangeCount == kMaxDevices) break;
    auto begin = reinterpret_cast<uintptr_t>(m.device);
    faultRanges[faultRangeCount++] = Range{begin, begin + m.size};
  }
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = onFault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &previousSegv);
  sigaction(SIGBUS, &action, &previousBus);
}

}  // namespace openreg::rt
