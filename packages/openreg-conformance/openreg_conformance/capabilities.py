"""Which optional features a backend registers, asked the way PyTorch asks.

Each check takes the device type ("openreg", "cuda", ...) and returns None
when the feature is there, or the reason it is not, which becomes the skip
reason of every test of the groups it gates. A check asks whether the
feature is *registered*, never whether it works: a registered feature that
misbehaves must fail its tests, not be skipped.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import torch

BUILT_IN_DISPATCH_NAMES = {"cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "hpu": "HPU", "mtia": "MTIA", "cpu": "CPU"}


def dispatch_name(device_type: str) -> str:
    """The backend's name in dispatch keys: "CUDA" for cuda, "PrivateUse1" for a renamed PrivateUse1."""
    if device_type in BUILT_IN_DISPATCH_NAMES:
        return BUILT_IN_DISPATCH_NAMES[device_type]
    if device_type == torch._C._get_privateuse1_backend_name():
        return "PrivateUse1"
    raise ValueError(f"{device_type!r} is neither a built-in device type nor the name PrivateUse1 was renamed to "
                     f"({torch._C._get_privateuse1_backend_name()!r}): is the backend's package installed and loaded?")


def has_kernel(operator: str, dispatch_key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(operator, dispatch_key)


def device_capability(index: int = 0) -> tuple[dict | None, str | None]:
    """(torch.accelerator.get_device_capability(index), None), or (None, why not): the installed torch
    lacks the API, or the backend's hooks do not report capabilities, which PyTorch's default hook says
    by raising (torch 2.11's CUDA backend does)."""
    if not hasattr(torch.accelerator, "get_device_capability"):
        return None, f"torch {torch.__version__} lacks torch.accelerator.get_device_capability"
    try:
        return torch.accelerator.get_device_capability(index), None
    except RuntimeError as error:
        if "doesn't support getting device capabilities" not in str(error):
            raise
        return None, f"the backend does not report device capabilities ({error})"


def multiple_devices(device_type: str) -> str | None:
    count = torch.accelerator.device_count()
    return None if count >= 2 else f"the backend has {count} device; these contracts need two"


def pinned_memory(device_type: str) -> str | None:
    try:
        torch.empty(1).pin_memory()
    except RuntimeError as error:
        return f"pinning host memory failed: {str(error).splitlines()[0]}"
    return None


def dlpack(device_type: str) -> str | None:
    try:
        torch.empty(1, device=device_type).__dlpack_device__()
    except (RuntimeError, BufferError, TypeError, ValueError) as error:
        return f"the backend's tensors have no DLPack device: {str(error).splitlines()[0]}"
    return None


# LITERALINCLUDE START: CONFORMANCE_AUTOCAST_CAPABILITY
def autocast(device_type: str) -> str | None:
    # Registered means: autocast is available for the device and at least
    # one operator of the lower-precision list has a kernel on the device's
    # autocast key. (A backend whose mm alone runs in float32 registers
    # autocast and fails the group; it is not skipped.)
    if not torch.amp.is_autocast_available(device_type):
        return "torch.amp.is_autocast_available() is False for the device"
    key = "Autocast" + dispatch_name(device_type)
    if not any(has_kernel(op, key) for op in ("aten::mm", "aten::matmul", "aten::linear", "aten::conv2d")):
        return f"the backend registers no autocast kernels (no mm, matmul, linear or conv2d on {key})"
    return None
# LITERALINCLUDE END: CONFORMANCE_AUTOCAST_CAPABILITY


def grad_scaler(device_type: str) -> str | None:
    reason = autocast(device_type)
    if reason is not None:
        return f"no autocast, so no mixed-precision training to scale ({reason})"
    return None


def inductor(device_type: str) -> str | None:
    from torch._inductor.codegen.common import get_scheduling_for_device, init_backend_registration

    init_backend_registration()
    if get_scheduling_for_device(device_type) is None:
        return "the backend registers no Inductor backend (torch._inductor.codegen.common.register_backend_for_device)"
    return None


def aot_inductor(device_type: str) -> str | None:
    reason = inductor(device_type)
    if reason is not None:
        return reason
    from torch._inductor.codegen.common import get_wrapper_codegen_for_device

    if get_wrapper_codegen_for_device(device_type, cpp_wrapper=True) is None:
        return "the backend registers no C++ wrapper for Inductor, which AOTInductor needs"
    return None


def profiler_activity(device_type: str):
    """The ProfilerActivity of the device's kernels (CUDA's for cuda, PrivateUse1's for a renamed one)."""
    name = dispatch_name(device_type)
    return getattr(torch.profiler.ProfilerActivity, name, None)


def profiler(device_type: str) -> str | None:
    activity = profiler_activity(device_type)
    if activity is None or activity not in torch.profiler.supported_activities():
        return "torch.profiler.supported_activities() has no activity for the device"
    return None


def graphs(device_type: str) -> str | None:
    if not hasattr(torch.accelerator, "Graph"):
        return f"torch {torch.__version__} has no torch.accelerator.Graph"
    try:
        torch.accelerator.Graph()
    except (RuntimeError, NotImplementedError) as error:
        return f"the backend registers no graphs: {str(error).splitlines()[0]}"
    return None


def distributed(device_type: str) -> str | None:
    import torch.distributed as dist

    if torch.accelerator.device_count() < 2:
        return "the group runs 2 ranks, one device each (NCCL refuses two ranks on one GPU); the backend has 1"
    if not dist.is_available():
        return "torch.distributed is not available in this torch build"
    try:
        dist.get_default_backend_for_device(device_type)
    except (RuntimeError, ValueError) as error:
        return f"no c10d backend is registered for the device: {str(error).splitlines()[0]}"
    return None


def onnx(device_type: str) -> str | None:
    missing = [name for name in ("onnx", "onnxscript", "onnxruntime") if importlib.util.find_spec(name) is None]
    return f"{', '.join(missing)} not installed" if missing else None


def pytorch_tests(device_type: str) -> str | None:
    from openreg_conformance import plugin

    if plugin.pytorch_tests_dir() is None:
        return "no PyTorch checkout given (--pytorch-tests DIR, the test/ folder of the torch release installed)"
    return None


CHECKS: dict[str, Callable[[str], str | None]] = {
    "multiple_devices": multiple_devices,
    "pinned_memory": pinned_memory,
    "dlpack": dlpack,
    "autocast": autocast,
    "grad_scaler": grad_scaler,
    "inductor": inductor,
    "aot_inductor": aot_inductor,
    "profiler": profiler,
    "graphs": graphs,
    "distributed": distributed,
    "onnx": onnx,
    "pytorch_tests": pytorch_tests,
}
