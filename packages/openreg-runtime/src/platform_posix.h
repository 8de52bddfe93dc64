// platform_posix.h - what platform_linux.cpp and platform_macos.cpp share,
// from platform_posix.cpp: both map a device's memory as a file twice, and
// differ in what that file is (a memfd, a named POSIX shared memory object)
// and in how other processes find it and lock its leases.
#pragma once

#include "runtime.h"

namespace openreg::rt {

// Both views of [offset, offset + size) of fd, size and offset multiples of
// the page: the device's, with no access at all, and the host's, read-write
// (Note [Device memory is never host-mapped] in memory.cpp). out->fd is -1;
// on failure, error says what could not be mapped.
bool platformMapBothViews(int fd, size_t offset, size_t size, DeviceMapping* out, std::string* error);

}  // namespace openreg::rt
