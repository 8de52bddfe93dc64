// AotLaunch.cpp - torch_openreg_launch_kernel, the C entry through which a
// model compiled ahead of time (AOTInductor) launches its kernels on openreg
// (include/torch_openreg/AotLaunch.h): the C++ wrapper's counterpart of
// torch_openreg._C._launch_compiled_kernel. Not here: loading the model
// (AotRunner.cpp) or the launch itself (CompiledKernel.cpp, shared with
// torch.compile).
#include "compile/CompiledKernel.h"

#include <torch/csrc/inductor/aoti_torch/utils.h>
#include <torch_openreg/AotLaunch.h>

#include <string>
#include <vector>

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: AOT_LAUNCH_KERNEL
// Sorts the C arguments as the Python launch sorts the wrapper's, then queues
// the kernel. Runs on the thread that runs the model, without the GIL.
void launchFromC(const char* name, TorchOpenRegKernelEntry entry, const TorchOpenRegKernelArg* args,
                 int64_t numArgs) {
  TORCH_CHECK_VALUE(name != nullptr && entry != nullptr, "torch_openreg_launch_kernel: no kernel name or entry");
  std::vector<at::Tensor> tensors;
  std::vector<CompiledArg> layout;
  layout.reserve(numArgs);
  for (int64_t i = 0; i < numArgs; ++i) {
    const TorchOpenRegKernelArg& arg = args[i];
    CompiledArg out{CompiledArg::Kind::Int};
    switch (arg.kind) {
      case TORCH_OPENREG_ARG_TENSOR:
        TORCH_CHECK_VALUE(arg.tensor != nullptr, "compiled openreg kernel ", name, ": argument ", i,
                          " is a null tensor handle");
        out = tensorArg(name, i, *torch::aot_inductor::tensor_handle_to_tensor_pointer(arg.tensor), tensors);
        break;
      case TORCH_OPENREG_ARG_INT: out.intValue = arg.int_value; break;
      case TORCH_OPENREG_ARG_FLOAT:
        out.kind = CompiledArg::Kind::Float;
        out.floatValue = arg.float_value;
        break;
      default:
        TORCH_CHECK_VALUE(false, "compiled openreg kernel ", name, ": argument ", i, " has unknown kind ", arg.kind);
    }
    layout.push_back(std::move(out));
  }
  launchCompiledEntry(name, entry, tensors, std::move(layout));
}
// LITERALINCLUDE END: AOT_LAUNCH_KERNEL

}  // namespace
}  // namespace torch_openreg

// Errors become the shim's error code and message, which the generated
// wrapper's AOTI_TORCH_ERROR_CODE_CHECK turns into an exception of the model.
AOTITorchError torch_openreg_launch_kernel(const char* name, TorchOpenRegKernelEntry entry,
                                           const TorchOpenRegKernelArg* args, int64_t num_args) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ torch_openreg::launchFromC(name, entry, args, num_args); });
}
