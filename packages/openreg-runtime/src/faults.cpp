// faults.cpp - what the fault handlers of every platform share: naming a
// host access to device memory, or to a kernel's alias after the kernel
// returned (OPENREG_CHECK_ALIASES). Each platform_<os>.cpp catches the fault
// its own way (a SIGSEGV/SIGBUS handler, a vectored exception handler) and
// calls describeFault with the faulting address and its way to write.
// Everything here may run inside that handler: no heap, no locks, no stdio.
#include <atomic>
#include <cstring>
#include <mutex>

#include "runtime.h"

namespace openreg::rt {

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

// Retired windows, newest last, for the handler to name: kept inaccessible
// until kQuarantine newer ones push them out.
constexpr int kQuarantine = 1024;
struct RetiredWindow {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  char kernel[64] = {};
};
RetiredWindow retiredWindows[kQuarantine];
std::mutex retireMutex;
uint64_t retiredCount = 0;

void writeNumber(uintptr_t value, int base, void (*write)(const char*)) {
  char digits[32];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0 && n < 32);
  char out[35];
  int k = 0;
  if (base == 16) {
    out[k++] = '0';
    out[k++] = 'x';
  }
  while (n > 0) out[k++] = digits[--n];
  out[k] = '\0';
  write(out);
}

}  // namespace

void setFaultRanges(const std::vector<DeviceMapping>& devices) {
  faultRangeCount = 0;
  for (const DeviceMapping& m : devices) {
    if (faultRangeCount == kMaxDevices) break;
    auto begin = reinterpret_cast<uintptr_t>(m.device);
    faultRanges[faultRangeCount++] = Range{begin, begin + m.size};
  }
}

// LITERALINCLUDE START: OR_FAULT_MESSAGE
void describeFault(uintptr_t address, void (*write)(const char*)) {
  for (int d = 0; d < faultRangeCount; ++d) {
    if (address < faultRanges[d].begin || address >= faultRanges[d].end) continue;
    write("openreg: host code accessed device memory at address ");
    writeNumber(address, 16, write);
    write(" (openreg device ");
    writeNumber(static_cast<uintptr_t>(d), 10, write);
    write(", offset ");
    writeNumber(address - faultRanges[d].begin, 16, write);
    write("). Device memory is reachable only through orMemcpy/orMemset "
          "or from inside a kernel via orKernelTranslatePointer; copy the "
          "data to the host first.\n");
    return;
  }
  for (const RetiredWindow& window : retiredWindows) {
    if (address < window.begin.load() || address >= window.end.load()) continue;
    write("openreg: host code accessed address ");
    writeNumber(address, 16, write);
    write(", which kernel '");
    write(window.kernel);
    write("' got from orKernelTranslatePointer, after that kernel returned: a host alias of device "
          "memory is valid only while its kernel runs (caught by OPENREG_CHECK_ALIASES=1).\n");
    return;
  }
}
// LITERALINCLUDE END: OR_FAULT_MESSAGE

void quarantineAliasWindow(const AliasWindow& window, const char* kernel, void (*release)(void*, size_t)) {
  std::lock_guard<std::mutex> lock(retireMutex);
  RetiredWindow& slot = retiredWindows[retiredCount++ % kQuarantine];
  uintptr_t oldBegin = slot.begin.load(), oldEnd = slot.end.load();
  slot.end.store(0);  // the handler skips the slot while it changes
  if (oldEnd != 0) release(reinterpret_cast<void*>(oldBegin), oldEnd - oldBegin);
  std::strncpy(slot.kernel, kernel, sizeof(slot.kernel) - 1);
  slot.begin.store(reinterpret_cast<uintptr_t>(window.begin));
  slot.end.store(reinterpret_cast<uintptr_t>(window.begin) + window.size);
}

}  // namespace openreg::rt
