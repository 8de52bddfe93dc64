// Kernel.h - torch-openreg's public kernel API: what a package outside
// torch-openreg (openreg-amp, openreg-distributed, a vendor's extension)
// needs to run its own code as a kernel over openreg tensors. Not here: how
// torch-openreg registers or speeds up its own operators (private sources).
//
// Build against it with torch_openreg.get_include() and link
// libtorch_openreg.so from torch_openreg.get_library_dir().
#pragma once

#include <ATen/core/Tensor.h>
#include <openreg/openreg.h>

#include <functional>
#include <optional>
#include <vector>

#include <torch_openreg/Check.h>
#include <torch_openreg/Export.h>
#include <torch_openreg/Version.h>

namespace torch_openreg {

// LITERALINCLUDE START: KERNEL_API
// A kernel body. It runs later, on the stream's worker thread, and receives
// one CPU tensor per launched tensor, in order: same sizes, strides, dtype
// and conjugate/negative bits, over the device memory as the runtime
// translates it for the kernel. The views are valid only while the body
// runs; the body must not keep them, nor touch any other openreg tensor.
using KernelBody = std::function<void(std::vector<at::Tensor>& views)>;

// Queues body as a kernel named `name` on the current openreg stream of the
// first tensor's device, after the work queued there before, and returns at
// once. Other tensors may be on other openreg devices: the kernel reaches
// them as a CUDA kernel reaches peer memory (the operator checks devices,
// as PyTorch's generated code does for CUDA kernels). The launched tensors
// may be freed before the kernel runs: the caching allocator hands their
// memory only to work queued after it on that stream, as CUDA's does.
// Checked on the host, raising c10::Error:
//  - tensors holds at least one tensor, every one a defined openreg tensor;
//  - the runtime accepted the launch (OPENREG_CHECK): a sticky error left
//    by an earlier kernel on the device is reported here.
// An exception thrown by body fails the kernel; its message, naming the
// kernel, is raised by the next synchronising call on the device, as a
// device-side assertion is on CUDA. Thread-safe.
//   name     in: names the kernel in errors and traces (copied)
//   tensors  in: the operands and outputs, read and written by body
//   body     in: moved into the kernel
// Related: currentNativeStream, openreg::launch (openreg.hpp) for kernels
// over raw device memory.
TORCH_OPENREG_API void launchKernel(const char* name, const std::vector<at::Tensor>& tensors, KernelBody body);

// The current openreg stream of device as the runtime's handle, for calling
// libopenreg directly (orMemcpyAsync, orEventRecord, ...). torch-openreg
// owns the handle; it stays valid until the process exits.
//   device  in: an openreg device index, or -1 for the current device
// Returns the handle; raises c10::Error for an index that is no openreg
// device. Related: getStreamFromExternal, launchKernel.
TORCH_OPENREG_API orStream_t currentNativeStream(c10::DeviceIndex device);

// Whether t is a defined tensor on an openreg device.
inline bool isOpenRegTensor(const at::Tensor& t) { return t.defined() && t.device().is_privateuseone(); }

// The c10::Stream of a native stream the caller created on device
// (orStreamCreateWithPriority), as at::cuda::getStreamFromExternal is for
// CUDA: made current (c10::StreamGuard), torch's work queues on it. The
// caller destroys it (orStreamDestroy, which waits for its work) when torch
// no longer queues on it; tensors recorded on it (record_stream) may outlive
// it: the caching allocator then has nothing to wait for. A package that
// needs a stream no one else queues on (a collective library's comm stream)
// makes its own.
// Checked, raising c10::Error: device is an openreg device and the stream
// is a live stream of it. Thread-safe. Since API 1.1.
//   stream  in: created by the caller, still live
//   device  in: the device stream belongs to
// Returns the c10::Stream (a value; it owns nothing). Related:
// currentNativeStream, orStreamCreateWithPriority.
TORCH_OPENREG_API c10::Stream getStreamFromExternal(orStream_t stream, c10::DeviceIndex device);

// Whether torch-openreg's speed layers run: built in (not built with
// -DOPENREG_SPEED_LAYERS=OFF) and not turned off (OPENREG_FAST_PATHS=0).
// A package with speed layers of its own follows it, so one switch turns
// every layer off. Constant once torch-openreg has loaded; thread-safe.
// Returns the answer. Related: Note [Deletable speed layers]. Since API 1.2.
TORCH_OPENREG_API bool fastPathsEnabled();

// In timing-only mode (torch.openreg.set_timing_only) kernels compute
// nothing, so a read of a tensor to the host (.item()) gets NaN or raises
// (Note [Values read in timing-only mode]). A kernel whose one-element
// result the program's control flow reads, and whose value the mode's
// assumptions fix, states that value after launching: reads of t get it
// until other work is queued over t. Outside timing-only mode, and for
// memory the mode did not allocate, it does nothing. openreg-amp states
// found_inf = 0 after GradScaler's non-finite check: no gradient overflows,
// so GradScaler steps. Checked, raising c10::Error: t is an openreg tensor
// of one element. Thread-safe. Since API 1.4.
//   t      in: the kernel's one-element result
//   value  in: what reads of t get
// Related: launchKernel, torch.openreg.set_timing_only.
TORCH_OPENREG_API void stateTimingOnlyValue(const at::Tensor& t, double value);

// Values the host knows in timing-only mode (Note [Values the host knows in
// timing-only mode]): a copy from the host that fills a block of at most
// kLargestKnownValues bytes, and values stated for a block. A package that
// computes a tensor's values on the host while its kernel runs in timing-
// only mode (occl's collectives on metadata) reads its inputs' with
// knownValues and states its outputs' with stateKnownValues, so the
// program's reads of them get the values. Since API 1.5.
constexpr int64_t kLargestKnownValues = int64_t{1} << 20;

// The values of t as the host knows them in timing-only mode: a new CPU
// tensor of t's dtype, sizes and strides. nullopt outside timing-only mode,
// for a tensor whose values the host does not know, or one with the
// conjugate or negative bit. Thread-safe. Since API 1.5.
//   t  in: an openreg tensor
// Returns the values, or nullopt. Related: stateKnownValues.
TORCH_OPENREG_API std::optional<at::Tensor> knownValues(const at::Tensor& t);

// States, in timing-only mode, that t holds `values`: reads of t get them
// until other work is queued over t. It applies to memory the mode
// allocated (computed memory keeps its own values): either t fills its
// block, of at most kLargestKnownValues bytes, or the host already knows
// the rest of the block. Otherwise, and outside timing-only mode, it does
// nothing. Checked, raising c10::Error: t is an openreg tensor and values
// a host tensor of its shape (cast to t's dtype). Thread-safe. Since API
// 1.5.
//   t       in: the tensor whose values are stated
//   values  in: its values
// Related: knownValues, stateTimingOnlyValue.
TORCH_OPENREG_API void stateKnownValues(const at::Tensor& t, const at::Tensor& values);
// LITERALINCLUDE END: KERNEL_API

}  // namespace torch_openreg
