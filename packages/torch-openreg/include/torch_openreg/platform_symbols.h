// platform_symbols.h - how a model's library finds torch-openreg's functions
// in the process (AotLaunch.h): the one public header that calls the
// operating system (Note [Platform calls] in csrc/runtime/Platform.h).
#pragma once

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

// LITERALINCLUDE START: AOT_FIND_SYMBOL
// Finds a symbol of the torch-openreg library the process has already
// loaded (importing torch_openreg, or linking the library, loads it; this
// only finds it again: RTLD_NOLOAD, GetModuleHandle), so a model's library
// needs no link to it. Returns NULL when the library is not loaded or lacks
// the symbol.
static inline void* torch_openreg_find_symbol(const char* symbol) {
#if defined(_WIN32)
  HMODULE library = GetModuleHandleA("torch_openreg.dll");
  return library ? (void*)GetProcAddress(library, symbol) : NULL;
#else
#if defined(__APPLE__)
  void* library = dlopen("libtorch_openreg.dylib", RTLD_NOW | RTLD_NOLOAD);
#else
  void* library = dlopen("libtorch_openreg.so", RTLD_NOW | RTLD_NOLOAD);
#endif
  return library ? dlsym(library, symbol) : NULL;
#endif
}
// LITERALINCLUDE END: AOT_FIND_SYMBOL
