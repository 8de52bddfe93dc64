// Version.h - the version of torch-openreg's public kernel API (the headers
// in include/torch_openreg/ and what libtorch_openreg.so exports for them).
// A layer package checks it at compile time:
//   static_assert(TORCH_OPENREG_API_VERSION_MAJOR == 1, "built for API 1");
#pragma once

// LITERALINCLUDE START: KERNEL_API_VERSION
// Bump MAJOR when a change can break a package built against the previous
// headers: a declaration removed or changed, a semantic promise withdrawn,
// the library's ABI changed (a type's layout, an exported signature). Reset
// MINOR to 0 then.
#define TORCH_OPENREG_API_VERSION_MAJOR 1
// Bump MINOR when something is added that old packages do not use: a new
// function, a new overload, a new optional behaviour. Packages built against
// an older MINOR keep working.
#define TORCH_OPENREG_API_VERSION_MINOR 5
// LITERALINCLUDE END: KERNEL_API_VERSION
