// platform_linux.cpp - what the runtime asks of Linux beyond what
// platform_posix.cpp shares with macOS: a memfd per device, page release by
// punching holes, the leases and /proc paths that let another process open
// device memory (IPC), and the kernel alias windows.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "platform_posix.h"

namespace openreg::rt {

bool platformMapDevice(int device, size_t size, DeviceMapping* out,
                       std::string* error) {
  // LITERALINCLUDE START: OR_DEVICE_MAPPING
  // The device's bytes are an anonymous memory file, mapped twice.
  std::string name = format("openreg-device-%d", device);
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    *error = format("memfd for device %d: %s", device, strerror(errno));
    if (fd >= 0) close(fd);
    return false;
  }
  if (!platformMapBothViews(fd, 0, size, out, error)) {
    *error = format("device %d: %s", device, error->c_str());
    close(fd);
    return false;
  }
  out->fd = fd;
  return true;
  // LITERALINCLUDE END: OR_DEVICE_MAPPING
}

void platformReleasePages(const DeviceMapping& mapping, size_t offset,
                          size_t length) {
  // Punching a hole frees the memfd's pages; later reads see zeros.
  fallocate(mapping.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            static_cast<off_t>(offset), static_cast<off_t>(length));
}

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

}  // namespace openreg::rt
