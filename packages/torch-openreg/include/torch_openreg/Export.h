// Export.h - TORCH_OPENREG_API marks what libtorch_openreg.so exports: the
// public kernel API of this folder. Everything else in the library is hidden
// (built with -fvisibility=hidden; on Windows a DLL exports only what is
// marked), so layer packages cannot come to depend on torch-openreg's
// private sources by accident.
#pragma once

#if defined(_WIN32)
#if defined(TORCH_OPENREG_BUILDING_LIBRARY)
#define TORCH_OPENREG_API __declspec(dllexport)
#else
#define TORCH_OPENREG_API __declspec(dllimport)
#endif
#else
#define TORCH_OPENREG_API __attribute__((visibility("default")))
#endif
