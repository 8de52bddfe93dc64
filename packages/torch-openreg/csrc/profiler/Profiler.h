// Profiler.h - what the rest of the backend needs of the Kineto activity
// profiler (Profiler.cpp), which registers itself with PyTorch.
#pragma once

#include <openreg/openreg.h>

#include <vector>

namespace torch_openreg {

// The runtime's activity records (orActivity, oldest first) of the last
// profiling session that recorded openreg activity, as it drained them:
// launches, device work, event records and waits, host synchronisations.
// For tools that replay the device's timeline (openreg-perf), through
// torch.openreg.profiler_activity().
std::vector<orActivity> lastSessionRecords();

}  // namespace torch_openreg
