#pragma once

// Note [Platform calls] (as in torch-openreg's runtime/Platform.h): every
// call occl makes to the operating system goes through this header, to
// platform_posix.cpp; a Windows build adds platform_windows.cpp beside it.
// No other file includes a system header (tools/layering.py, rule 5).

#include <cstdint>

namespace occl::platform {

int32_t processId();

// Whether process pid is gone (exited, or a zombie waiting to be reaped):
// lets a rank tell a peer that exited from one that is late.
bool processExited(int32_t pid);

}  // namespace occl::platform
