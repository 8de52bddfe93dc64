// Graph.h - what the rest of the backend asks of graph capture (Graph.cpp
// holds torch.accelerator.Graph's implementation, registered with PyTorch).
#pragma once

#include <c10/core/Device.h>

namespace torch_openreg {

// Whether the calling thread's current stream on device is capturing a
// graph: work queued now is recorded, not run, and nothing may wait for it.
bool streamIsCapturing(c10::DeviceIndex device);

}  // namespace torch_openreg
