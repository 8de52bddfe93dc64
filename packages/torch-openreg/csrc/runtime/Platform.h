#pragma once

// LITERALINCLUDE START: PLATFORM_CALLS
// Note [Platform calls]
// Every call torch-openreg makes to the operating system goes through this
// header, to platform_posix.cpp (Linux and macOS); a Windows build adds a
// platform_windows.cpp beside it and nothing else changes. No other file
// includes a system header (unistd.h, pthread.h, dlfcn.h, ...):
// tools/layering.py's rule 5 checks it, so the rest stays portable C++
// that MSVC, Clang and GCC all compile.
// LITERALINCLUDE END: PLATFORM_CALLS

#include <string>

namespace torch_openreg::platform {

// Whether the calling thread is the process's first (Python's main thread).
bool onMainThread();

// prepare runs in the forking thread before a fork, parent and child after
// it in each process. Where the platform has no fork (Windows), nothing.
void aroundFork(void (*prepare)(), void (*parent)(), void (*child)());

// Loads a shared library, calls its exported function `int name()` and
// unloads it: the function's result, or -1 when the library has no such
// symbol. Throws (c10::Error) when the library cannot be loaded, naming
// what (the library's role) and why.
int callLibraryFunction(const std::string& library, const char* name, const char* what);

}  // namespace torch_openreg::platform
