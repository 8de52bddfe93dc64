// TestingHooks.h - speed layer: the hooks its tests observe it through
// (torch_openreg._C._testing), installed with the layer (FastPaths.cpp).
#pragma once

namespace torch_openreg::fast {

// testing: the PyObject* of torch_openreg._C._testing.
void addTestingHooks(void* testing);

}  // namespace torch_openreg::fast
