// Export.h - TORCH_OPENREG_API marks what libtorch_openreg.so exports: the
// public kernel API of this folder. Everything else in the library is hidden
// (built with -fvisibility=hidden), so layer packages cannot come to depend
// on torch-openreg's private sources by accident.
#pragma once

#define TORCH_OPENREG_API __attribute__((visibility("default")))
