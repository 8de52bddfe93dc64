// ModuleInit.cpp - torch_openreg._C, the Python module: a shell whose
// loading loads libtorch_openreg.so (and so registers the backend), and
// whose contents come from there (Module.cpp).
#include "python/Module.h"

PYBIND11_MODULE(_C, m) { torch_openreg::bindModule(m); }
