"""Dynamo's and Inductor's view of the openreg runtime: the DeviceInterface
registered for "openreg" (current device, streams and events, synchronize,
properties, dtype queries), all delegated to torch.openreg. Not here: code
generation (inductor.py).
"""

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface

import torch_openreg._C as _C


# LITERALINCLUDE START: DEVICE_INTERFACE
class OpenRegInterface(DeviceInterface):
    """torch.openreg as Dynamo and Inductor query a device. Streams and
    events are the real ones (torch.Stream / torch.Event subclasses, which
    Dynamo can trace); get_raw_stream is the runtime's stream handle."""

    device = torch.openreg.device
    Stream = torch.openreg.Stream

    class Event(torch.Event):
        """An event on the current openreg device (torch.openreg.Event returns
        plain torch.Event objects; Dynamo needs a class to subclass)."""

        def __new__(cls, enable_timing: bool = False, blocking: bool = False, **kwargs: Any):
            return super().__new__(cls, device=torch.device("openreg", torch.openreg.current_device()),
                                   enable_timing=enable_timing, blocking=blocking)

    class Worker:
        """Queries that Inductor's compile workers make; the openreg runtime
        answers them in any process, so they go straight to torch.openreg."""

        @staticmethod
        def set_device(device: int) -> None:
            torch.openreg.set_device(device)

        @staticmethod
        def current_device() -> int:
            return torch.openreg.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            return torch.openreg.get_device_properties(device)

    current_device = staticmethod(torch.openreg.current_device)
    set_device = staticmethod(torch.openreg.set_device)
    device_count = staticmethod(torch.openreg.device_count)
    is_available = staticmethod(torch.openreg.is_available)
    stream = staticmethod(torch.openreg.stream)
    current_stream = staticmethod(torch.openreg.current_stream)
    set_stream = staticmethod(torch.openreg.set_stream)
    synchronize = staticmethod(torch.openreg.synchronize)
    get_device_capability = staticmethod(torch.openreg.get_device_capability)
    memory_allocated = staticmethod(torch.openreg.memory_allocated)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return _C._exchange_device(device) if device >= 0 else -1

    @staticmethod
    def exchange_device(device: int) -> int:
        return _C._exchange_device(device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _C._exchange_stream(stream_id, device_index)

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return get_raw_stream(device_idx)

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> Any:
        major, minor = torch.openreg.get_device_capability(device)
        return major * 10 + minor

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True  # the device runs PyTorch's CPU kernels, which have bfloat16

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return True  # every dtype the CPU kernels have
# LITERALINCLUDE END: DEVICE_INTERFACE


def get_raw_stream(device_index: int) -> int:
    """The runtime handle (orStream_t) of the current stream of a device."""
    return torch.openreg.current_stream(device_index).native_handle
