"""Streams and events of torch.openreg: thin subclasses of torch.Stream and
torch.Event that default to the current openreg device, plus the
current/default stream functions of the torch.cuda API.

The work itself is done by the device guard (csrc/runtime/Guard.cpp): these
classes only choose the device.
"""

from typing import Any

import openreg_runtime
import torch

import torch_openreg._C as _C
from torch_openreg.openreg.utils import _device_index

_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1, as torch.Stream(device_type=...) expects


class Stream(torch.Stream):
    """An in-order queue of work on an openreg device.

    ``Stream(device=None, priority=0)`` takes a stream from the device's pool
    (lower priority numbers run first, as on CUDA: 0 normal, -1 high).
    """

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if kwargs:  # (stream_id, device_index, device_type): wrap an existing stream
            return super().__new__(cls, **kwargs)
        index = _device_index(device, optional=True, default_current=True)
        return super().__new__(cls, device=torch.device("openreg", index), priority=priority)

    @property
    def priority(self) -> int:
        """The stream's priority, as torch.cuda.Stream.priority: 0 normal, -1 high."""
        return openreg_runtime.stream_get_priority(self.native_handle)


# LITERALINCLUDE START: OPENREG_EVENT
class _OpenRegEventType(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "openreg"


class Event(metaclass=_OpenRegEventType):
    """A point in a stream's work that can be waited for and timed.

    ``Event(enable_timing=False, blocking=False)`` returns a plain torch.Event
    on the current openreg device, not a subclass: torch.Event.elapsed_time
    accepts only exact torch.Event objects. isinstance(e, torch.openreg.Event)
    holds for every openreg torch.Event. Timing is off unless
    ``enable_timing=True``, as for torch.cuda.Event.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            raise NotImplementedError("openreg does not support interprocess events")
        return torch.Event(device=torch.device("openreg", _C._current_device()),
                           enable_timing=enable_timing, blocking=blocking)
# LITERALINCLUDE END: OPENREG_EVENT


def _wrap(stream_id: int, index: int) -> Stream:
    return Stream(stream_id=stream_id, device_index=index, device_type=_PRIVATEUSE1)


def current_stream(device: Any = None) -> Stream:
    """The calling thread's current stream on ``device`` (its default stream until set)."""
    index = _device_index(device, optional=True, default_current=True)
    return _wrap(_C._current_stream(index), index)


def default_stream(device: Any = None) -> Stream:
    """The default stream of ``device``."""
    index = _device_index(device, optional=True, default_current=True)
    return _wrap(_C._default_stream(index), index)


def _check_openreg_stream(stream: torch.Stream) -> None:
    if stream.device_type != _PRIVATEUSE1:
        raise ValueError(f"expected an openreg stream, got a stream of {stream.device}")


def set_stream(stream: torch.Stream) -> None:
    """Make ``stream`` the calling thread's current stream, and its device the
    current device, as torch.cuda.set_stream and torch.accelerator.set_stream do."""
    if stream is None:
        return
    _check_openreg_stream(stream)
    _C._exchange_stream(stream.stream_id, stream.device_index)  # checks the stream first
    _C._set_device(stream.device_index)


class StreamContext:
    """Context manager that makes ``stream`` current (and its device current),
    restoring both on exit. ``None`` does nothing."""

    def __init__(self, stream: torch.Stream | None):
        if stream is not None:
            _check_openreg_stream(stream)
        self.stream = stream
        self.previous_stream: int | None = None
        self.previous_device = -1

    def __enter__(self):
        if self.stream is None:
            return self.stream
        index = self.stream.device_index
        self.previous_device = _C._exchange_device(index)
        self.previous_stream = _C._exchange_stream(self.stream.stream_id, index)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            _C._exchange_stream(self.previous_stream, self.stream.device_index)
            _C._set_device(self.previous_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.openreg.stream(s):`` runs the block's work on ``s``."""
    return StreamContext(stream)
