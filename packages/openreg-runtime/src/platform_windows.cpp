// platform_windows.cpp - every OS-specific piece of the runtime on Windows:
// a page-file-backed section for device memory, page release, the fault
// handler (a vectored exception handler), host pages, and the alias windows
// of OPENREG_CHECK_ALIASES. platform_linux.cpp and platform_macos.cpp, with
// platform_posix.cpp, are the same for Linux and macOS.
//
// What Windows does differently (the guide's runtime/platforms page):
// - device memory: the host's view is a view of a section committed when the
//   device starts, so a device's capacity counts against the system's commit
//   limit (RAM plus page file) while only the pages written use RAM; the
//   device's own addresses are a reservation with no access, which is all the
//   Linux device view is used for (nothing is ever read through it);
// - freed pages are offered back with MEM_RESET: the OS may take them, and
//   their bytes are undefined until written (Linux punches a hole: zeros);
// - there is no fork, so nothing to do after one;
// - interprocess memory names its sections instead of reopening file
//   descriptors through /proc (Note [Interprocess memory on Windows]).
#include <windows.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "runtime.h"

namespace openreg::rt {

namespace {

constexpr int kMaxDevices = 64;
struct Section {
  HANDLE handle = nullptr;
  char* host = nullptr;
  size_t size = 0;
};
// Written as each device starts (under the runtime's initialisation), read
// by the alias windows afterwards.
Section sections[kMaxDevices];

const SYSTEM_INFO& systemInfo() {
  static const SYSTEM_INFO info = [] {
    SYSTEM_INFO found;
    GetSystemInfo(&found);
    return found;
  }();
  return info;
}

// Where a view of a section may start: a multiple of this (64 KiB).
size_t allocationGranularity() { return systemInfo().dwAllocationGranularity; }

std::string lastErrorText(const char* what) {
  return format("%s failed (Windows error %lu)", what, static_cast<unsigned long>(GetLastError()));
}

}  // namespace

// LITERALINCLUDE START: OR_IPC_WINDOWS
// Note [Interprocess memory on Windows]
// Linux names a device's memory and an export's lease by the exporter's pid
// and file descriptor, reopened through /proc. Here both are named sections,
// "Local\openreg-<pid>-<id>", the id counting this process's sections, and
// the "file descriptors" of runtime.h are indexes into a table of this
// process's section handles. A lease is in use while another process holds a
// handle to it: a section lives while any process holds one, and the OS
// closes a process's handles when it exits or is killed, so the exporter asks
// by closing its own handle and opening the name again; if nobody else held
// it, the name is gone. Revoking a lease zeroes its record, which an importer
// reads after opening it (platformHoldLease).
// LITERALINCLUDE END: OR_IPC_WINDOWS

namespace {

struct NamedSection {
  HANDLE handle = nullptr;
  uint64_t id = 0;  // in the name, and what platformFileInode reports
  int pid = 0;      // the process that created it
};
std::mutex tableMutex;
std::vector<NamedSection> table;  // index = the "file descriptor"; a null handle is a free slot
std::atomic<uint64_t> nextId{1};

std::wstring sectionName(int pid, uint64_t id) {
  return L"Local\\openreg-" + std::to_wstring(pid) + L"-" + std::to_wstring(id);
}

int remember(NamedSection section) {
  std::lock_guard<std::mutex> lock(tableMutex);
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].handle == nullptr) {
      table[i] = section;
      return static_cast<int>(i);
    }
  }
  table.push_back(section);
  return static_cast<int>(table.size() - 1);
}

NamedSection entry(int fd) {
  std::lock_guard<std::mutex> lock(tableMutex);
  return fd >= 0 && static_cast<size_t>(fd) < table.size() ? table[fd] : NamedSection{};
}

// A new named section of `bytes` bytes, committed: its table index, or -1.
int createNamedSection(size_t bytes, std::string* error) {
  uint64_t id = nextId.fetch_add(1);
  int pid = platformProcessId();
  HANDLE handle = CreateFileMappingW(INVALID_HANDLE_VALUE, nullptr, PAGE_READWRITE | SEC_COMMIT,
                                     static_cast<DWORD>(uint64_t{bytes} >> 32),
                                     static_cast<DWORD>(bytes & 0xffffffffu), sectionName(pid, id).c_str());
  if (handle == nullptr) {
    *error = lastErrorText(format("a section of %zu bytes", bytes).c_str());
    return -1;
  }
  return remember(NamedSection{handle, id, pid});
}

bool copySection(HANDLE handle, void* to, const void* from, size_t bytes) {
  void* view = MapViewOfFile(handle, FILE_MAP_ALL_ACCESS, 0, 0, bytes);
  if (view == nullptr) return false;
  std::memcpy(to != nullptr ? to : view, from != nullptr ? from : view, bytes);
  UnmapViewOfFile(view);
  return true;
}

}  // namespace

bool platformMapDevice(int device, size_t size, DeviceMapping* out, std::string* error) {
  if (device >= kMaxDevices) {
    *error = format("at most %d devices", kMaxDevices);
    return false;
  }
  // Named (Note [Interprocess memory on Windows]): another process opens it by its name.
  int fd = createNamedSection(size, error);
  if (fd < 0) {
    *error = format("device %d: %s", device, error->c_str());
    return false;
  }
  HANDLE section = entry(fd).handle;
  void* host = MapViewOfFile(section, FILE_MAP_ALL_ACCESS, 0, 0, size);
  // The device's addresses: reserved, never accessible, never backed.
  void* dev = VirtualAlloc(nullptr, size, MEM_RESERVE, PAGE_NOACCESS);
  if (host == nullptr || dev == nullptr) {
    *error = lastErrorText(format("mapping %zu bytes for device %d", size, device).c_str());
    if (host != nullptr) UnmapViewOfFile(host);
    if (dev != nullptr) VirtualFree(dev, 0, MEM_RELEASE);
    platformCloseFile(fd);
    return false;
  }
  sections[device] = Section{section, static_cast<char*>(host), size};
  *out = DeviceMapping{static_cast<char*>(dev), static_cast<char*>(host), size, fd};
  return true;
}

void platformReleasePages(const DeviceMapping& mapping, size_t offset, size_t length) {
  VirtualAlloc(mapping.host + offset, length, MEM_RESET, PAGE_READWRITE);
}

size_t platformPageSize() { return systemInfo().dwPageSize; }

void* platformAllocateHost(size_t size) {
  return VirtualAlloc(nullptr, size, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void platformFreeHost(void* ptr, size_t) { VirtualFree(ptr, 0, MEM_RELEASE); }

void platformOnFork(void (*)()) {}  // Windows has no fork

// ---------------------------------------------------------- interprocess memory

int platformCreateLease(const void* record, size_t bytes, std::string* error) {
  int fd = createNamedSection(bytes, error);
  if (fd >= 0 && !copySection(entry(fd).handle, nullptr, record, bytes)) {
    *error = lastErrorText("writing the IPC lease");
    platformCloseFile(fd);
    return -1;
  }
  return fd;
}

void platformRevokeLease(int fd) {
  NamedSection lease = entry(fd);
  void* view = MapViewOfFile(lease.handle, FILE_MAP_ALL_ACCESS, 0, 0, 0);
  if (view == nullptr) return;
  MEMORY_BASIC_INFORMATION info;
  if (VirtualQuery(view, &info, sizeof(info)) != 0) std::memset(view, 0, info.RegionSize);
  UnmapViewOfFile(view);
}

bool platformLeaseInUse(int fd) {
  NamedSection lease = entry(fd);
  if (lease.handle == nullptr) return false;
  CloseHandle(lease.handle);
  HANDLE again = OpenFileMappingW(FILE_MAP_ALL_ACCESS, FALSE, sectionName(lease.pid, lease.id).c_str());
  std::lock_guard<std::mutex> lock(tableMutex);
  table[fd].handle = again;  // null when nobody held it: the slot is free
  return again != nullptr;
}

uint64_t platformFileInode(int fd) { return entry(fd).id; }

int platformProcessId() { return static_cast<int>(GetCurrentProcessId()); }

int platformOpenPeerFile(int pid, int, uint64_t inode, std::string* error) {
  HANDLE handle = OpenFileMappingW(FILE_MAP_ALL_ACCESS, FALSE, sectionName(pid, inode).c_str());
  if (handle == nullptr) {
    *error = format("cannot open the section of process %d: the exporting process has exited, or freed the "
                    "allocation (Windows error %lu)", pid, static_cast<unsigned long>(GetLastError()));
    return -1;
  }
  return remember(NamedSection{handle, inode, pid});
}

bool platformHoldLease(int fd, void* record, size_t bytes) {
  return copySection(entry(fd).handle, record, nullptr, bytes);
}

void platformCloseFile(int fd) {
  std::lock_guard<std::mutex> lock(tableMutex);
  if (fd < 0 || static_cast<size_t>(fd) >= table.size() || table[fd].handle == nullptr) return;
  CloseHandle(table[fd].handle);
  table[fd] = NamedSection{};
}

// Views start at multiples of the allocation granularity (64 KiB), the
// caller's offsets at multiples of a page: both views are returned moved up
// by the difference, and their true starts are found again by rounding down.
bool platformMapPeerRange(int fd, size_t offset, size_t length, DeviceMapping* out, std::string* error) {
  size_t granularity = allocationGranularity(), page = platformPageSize();
  size_t begin = offset / granularity * granularity;
  size_t shift = offset / page * page - begin;
  size_t size = offset + length - begin;
  void* host = MapViewOfFile(entry(fd).handle, FILE_MAP_ALL_ACCESS, static_cast<DWORD>(uint64_t{begin} >> 32),
                             static_cast<DWORD>(begin & 0xffffffffu), size);
  void* dev = VirtualAlloc(nullptr, size, MEM_RESERVE, PAGE_NOACCESS);
  if (host == nullptr || dev == nullptr) {
    *error = lastErrorText(format("mapping %zu bytes of another process's device memory", size).c_str());
    if (host != nullptr) UnmapViewOfFile(host);
    if (dev != nullptr) VirtualFree(dev, 0, MEM_RELEASE);
    return false;
  }
  *out = DeviceMapping{static_cast<char*>(dev) + shift, static_cast<char*>(host) + shift, size - shift, -1};
  return true;
}

void platformUnmapPeerRange(const DeviceMapping& mapping) {
  auto start = [](char* shifted) {
    auto address = reinterpret_cast<uintptr_t>(shifted);
    return reinterpret_cast<void*>(address / allocationGranularity() * allocationGranularity());
  };
  UnmapViewOfFile(start(mapping.host));
  VirtualFree(start(mapping.device), 0, MEM_RELEASE);
}

// ------------------------------------------- kernel alias windows (debugging)

char* platformOpenAliasWindow(char* alias, size_t count, AliasWindow* window) {
  for (const Section& section : sections) {
    if (section.host == nullptr || alias < section.host || alias >= section.host + section.size) continue;
    // A second view of the same section pages; views start at multiples of
    // the allocation granularity (64 KiB).
    size_t offset = static_cast<size_t>(alias - section.host);
    size_t first = offset / allocationGranularity() * allocationGranularity();
    size_t size = std::min(section.size - first, offset - first + std::max<size_t>(count, 1));
    void* mapped = MapViewOfFile(section.handle, FILE_MAP_ALL_ACCESS, static_cast<DWORD>(uint64_t{first} >> 32),
                                 static_cast<DWORD>(first & 0xffffffffu), size);
    if (mapped == nullptr) return nullptr;
    *window = AliasWindow{mapped, size};
    return static_cast<char*>(mapped) + (offset - first);
  }
  return nullptr;
}

void platformRetireAliasWindow(const AliasWindow& window, const char* kernel) {
  // Unmapped, then reserved with no access at the same addresses, so no
  // later mapping takes them while the window is in quarantine.
  UnmapViewOfFile(window.begin);
  VirtualAlloc(window.begin, window.size, MEM_RESERVE, PAGE_NOACCESS);
  quarantineAliasWindow(window, kernel, [](void* begin, size_t) { VirtualFree(begin, 0, MEM_RELEASE); });
}

// ------------------------------------------------------------ fault handler

namespace {

// The handler runs on the faulting thread, possibly inside the allocator:
// no heap, no stdio.
void writeText(const char* text) {
  DWORD written = 0;
  WriteFile(GetStdHandle(STD_ERROR_HANDLE), text, static_cast<DWORD>(std::strlen(text)), &written, nullptr);
}

// LITERALINCLUDE START: OR_FAULT_HANDLER_WINDOWS
LONG CALLBACK onFault(EXCEPTION_POINTERS* exception) {
  const EXCEPTION_RECORD* record = exception->ExceptionRecord;
  if (record->ExceptionCode == EXCEPTION_ACCESS_VIOLATION && record->NumberParameters >= 2) {
    describeFault(static_cast<uintptr_t>(record->ExceptionInformation[1]), writeText);
  }
  // Named, not handled: the next handler (a debugger, the default one that
  // ends the process) sees the access violation as it was.
  return EXCEPTION_CONTINUE_SEARCH;
}
// LITERALINCLUDE END: OR_FAULT_HANDLER_WINDOWS

}  // namespace

void platformInstallFaultHandler(const std::vector<DeviceMapping>& devices) {
  setFaultRanges(devices);
  static void* installed = AddVectoredExceptionHandler(1, onFault);
  (void)installed;
}

}  // namespace openreg::rt
