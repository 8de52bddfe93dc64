"""torch.openreg: the device module of the openreg backend.

A superset of the upstream reference module and of the commonly used
``torch.cuda`` API: device management, streams and events, synchronisation,
random number generation, memory statistics, device properties, lazy
initialisation and fork poisoning. Device arguments accept an index, a
string ("openreg:1") or a torch.device, and default to the current device.
"""

import atexit
import os
import threading
import warnings
from typing import Any

import openreg_runtime
import torch

import torch_openreg._C as _C
from torch_openreg import _extensions
from torch_openreg.openreg.memory import (
    empty_cache,
    get_per_process_memory_fraction,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from torch_openreg.openreg.profiler import (
    SIMULATOR_TRANSFER,
    ActivityRecord,
    ActivityRecording,
    OperatorRecord,
    profiler_activity,
    record_activity,
)
from torch_openreg.openreg.random import (
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_openreg.openreg.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
from torch_openreg.openreg.utils import _device_index

__all__ = [
    "ActivityRecord", "ActivityRecording", "Event", "OperatorRecord", "OutOfMemoryError", "SIMULATOR_TRANSFER",
    "Stream", "StreamContext",
    "current_device", "current_stream",
    "default_generators", "default_stream", "device", "device_count", "device_of",
    "device_executor_enabled", "empty_cache", "executor_counts", "extensions", "fallback_counts",
    "get_amp_supported_dtype",
    "get_device_capability", "get_device_name", "get_device_properties", "get_fallback_mode",
    "get_per_process_memory_fraction",
    "get_rng_state", "get_rng_state_all", "init", "initial_seed", "is_available",
    "is_initialized", "is_timing_only", "is_timing_only_strict", "manual_seed", "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_reserved",
    "memory_stats", "memory_summary", "meta_disagreements", "profiler_activity",
    "record_activity",    "reset_accumulated_memory_stats", "reset_fallback_counts",
    "reset_peak_memory_stats", "seed", "seed_all", "set_device", "set_device_executor_enabled",
    "set_fallback_mode", "set_per_process_memory_fraction",
    "set_rng_state", "set_timing_only", "set_rng_state_all", "set_stream", "stream", "synchronize",
    "values_read_as_nan",
]

OutOfMemoryError = torch.OutOfMemoryError

# ------------------------------------------------------------ initialisation

_initialized = False
_in_bad_fork = False
_init_lock = threading.Lock()


# LITERALINCLUDE START: LAZY_INIT_AND_FORK
def _after_fork_in_child() -> None:
    # Like CUDA: a child forked from a parent that used the device cannot use
    # it (the runtime's worker threads do not survive fork).
    global _initialized, _in_bad_fork
    if is_initialized():
        _initialized = False
        _in_bad_fork = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_in_bad_fork() -> bool:
    """Whether this is a child forked after openreg was initialised (torch.manual_seed asks)."""
    return _in_bad_fork


def _lazy_init() -> None:
    global _initialized
    if _initialized:
        return
    if _in_bad_fork:
        # The upstream reference backend's words, which its users and tests know.
        raise RuntimeError(
            "Cannot re-initialize OpenReg in forked subprocess. To use OpenReg with "
            "multiprocessing, you must use the 'spawn' start method"
        )
    with _init_lock:
        if not is_available():
            _C._check_device_index(0)  # raises, with the runtime's reason (a bad setting)
        _initialized = True
# LITERALINCLUDE END: LAZY_INIT_AND_FORK


def init() -> None:
    """Initialise openreg eagerly (it otherwise happens on first use)."""
    _lazy_init()


def is_initialized() -> bool:
    """Whether openreg has been initialised in this process."""
    if _in_bad_fork:
        return False
    return _initialized or any(_C._has_primary_context(i) for i in range(device_count()))


# Note [Autograd's device threads at exit]
# Backward on a device other than the CPU runs on an autograd thread of that
# device, and every backward() stores a Python object (the caller's context
# variables) in the state that thread keeps until it next takes work. When
# the program ends right after a backward, the thread may let go of that
# object while the interpreter is shutting down: it then asks for the GIL,
# Python ends the thread from inside C++ code that cannot unwind, and the
# process aborts ("terminate called without an active exception"; PyTorch's
# own race, CUDA's device threads have it too). At exit, while other threads
# may still take the GIL, each device's autograd thread is handed one more
# tiny backward, through the engine directly so that it stores no Python
# object: by the time it is done, the thread has let go of the last one.
# The backward is of a clone: an operator whose output the device executor
# works out with a Python meta function (x * 1 was) imports torch._dynamo
# the first time, which added a second to the exit of every program.
def _settle_autograd_threads_at_exit() -> None:
    if not is_initialized():
        return
    from torch.autograd.variable import Variable

    for index in range(device_count()):
        if not _C._has_primary_context(index):
            continue  # never used: no autograd thread either
        try:
            leaf = torch.zeros((), device=torch.device("openreg", index), requires_grad=True)
            root = leaf.clone()
            Variable._execution_engine.run_backward((root,), (torch.ones_like(root),), False, False, (), True, True)
        except Exception:  # noqa: BLE001  (a device left faulted by the program: nothing to settle)
            pass


atexit.register(_settle_autograd_threads_at_exit)


# ------------------------------------------------------------------- devices


def is_available() -> bool:
    """Whether at least one openreg device exists. Never initialises a device."""
    return device_count() > 0


def device_count() -> int:
    """Number of openreg devices (OPENREG_DEVICE_COUNT, default 2)."""
    return _C._device_count()


def current_device() -> int:
    """Index of the calling thread's current openreg device."""
    _lazy_init()
    return _C._current_device()


def set_device(device: Any) -> None:
    """Make ``device`` the calling thread's current openreg device."""
    index = _device_index(device, optional=True)
    if index >= 0:
        _lazy_init()
        _C._set_device(index)


class device:
    """Context manager that makes ``device`` current, then restores the previous one.

    ``None`` or a negative index leaves the current device alone.
    """

    def __init__(self, device: Any):
        self.idx = _device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            _lazy_init()
            self.prev_idx = _C._exchange_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of tensor ``obj`` current (no-op for CPU tensors)."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "openreg" else -1)


def synchronize(device: Any = None) -> None:
    """Wait for all work queued on every stream of ``device``."""
    _lazy_init()
    _C._synchronize(_device_index(device, optional=True, default_current=True))


class _DeviceProperties:
    """Properties of an openreg device, as ``torch.openreg.get_device_properties`` returns."""

    def __init__(self, fields: dict):
        self.name: str = fields["name"]
        self.total_memory: int = fields["total_memory"]
        self.major: int = fields["major"]
        self.minor: int = fields["minor"]
        self.multi_processor_count: int = fields["multi_processor_count"]

    def __repr__(self) -> str:
        return (f"_DeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device: Any = None) -> _DeviceProperties:
    """Name, total memory, capability and processor count of ``device``."""
    _lazy_init()
    index = _device_index(device, optional=True, default_current=True)
    _C._check_device_index(index)  # also for -1, which means no device elsewhere
    # The runtime's own bindings already describe a device.
    return _DeviceProperties(openreg_runtime.get_device_properties(index))


def get_device_name(device: Any = None) -> str:
    """Name of ``device``."""
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """Compute capability ``(major, minor)`` of ``device``."""
    props = get_device_properties(device)
    return props.major, props.minor


# -------------------------------------------------------------------- autocast

_warned_no_cast_policy = False


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes ``torch.autocast("openreg")`` accepts.

    The cast policies themselves come from the openreg-amp layer; without it,
    autocast warns once and runs every operator in full precision.
    """
    global _warned_no_cast_policy
    if "amp" not in _extensions.status() and not _warned_no_cast_policy:
        _warned_no_cast_policy = True
        warnings.warn("torch.autocast('openreg'): no cast policy is installed (install "
                      "torch-openreg[amp]); operators run in full precision.", UserWarning,
                      stacklevel=3)
    return [torch.float16, torch.bfloat16]


# --------------------------------------------------------- fallback, extensions


def fallback_counts() -> dict[str, int]:
    """Calls per operator that ran through the CPU fallback, since start or the last reset."""
    return dict(_C._fallback_counts())


def reset_fallback_counts() -> None:
    """Forget the fallback counts and the device executor's counts."""
    _C._reset_fallback_counts()
    _C._reset_executor_counts()


def set_device_executor_enabled(enabled: bool) -> None:
    """Turn the generic device executor on or off (OPENREG_DEVICE_EXECUTOR=0 starts
    with it off). Off, every operator without an openreg kernel takes the classic
    CPU fallback: a switch for telling an executor problem from an operator problem."""
    _C._set_executor_enabled(bool(enabled))


def device_executor_enabled() -> bool:
    """Whether the generic device executor runs operators that have no openreg kernel."""
    return _C._executor_enabled()


def executor_counts() -> dict[str, tuple[int, int]]:
    """Calls per operator run by the generic device executor, as (asynchronous,
    synchronising) counts; synchronising calls are those whose output shape
    depends on the data or whose result is not a tensor."""
    return {name: tuple(pair) for name, pair in _C._executor_counts().items()}


# LITERALINCLUDE START: SET_TIMING_ONLY
def set_timing_only(enabled: bool, strict: bool = False) -> None:
    """Switches timing-only mode on or off for the whole process (the runtime's Note [Timing-only
    mode]): programs run for their shapes, allocations, streams and events, their kernels and copies
    compute nothing, and device memory is never touched, so a device larger than this machine's
    memory can be used (OPENREG_DEVICE_MEMORY). A floating-point value read to the host (.item(),
    float(t), .cpu(), print(t)) reads as NaN, with a warning once per line that reads it; an integer
    or boolean value (int(t) of an integer t, bool(t > 0), an operator whose output shape depends on the data) raises,
    naming the operator (Note [Values read in timing-only mode]); print(t) formats a copy on the host
    (Note [Printing a tensor in timing-only mode] in torch_openreg/_printing.py). strict=True raises
    for every read.
    Waits for the work already queued first. OPENREG_TIMING_ONLY=1 starts the process in it;
    openreg_perf.simulate(..., execute=False) uses it for its region."""
    _lazy_init()
    _C._set_strict_value_reads(bool(strict))
    openreg_runtime.set_timing_only(bool(enabled))


def is_timing_only() -> bool:
    """Whether timing-only mode is on (set_timing_only)."""
    _lazy_init()
    return openreg_runtime.get_timing_only()


def is_timing_only_strict() -> bool:
    """Whether every read of a value raises in timing-only mode (set_timing_only's strict)."""
    return _C._strict_value_reads()


def values_read_as_nan() -> int:
    """How many reads of a value to the host NaN stood for in timing-only mode, since the process
    started (set_timing_only)."""
    return _C._values_read_as_nan()
# LITERALINCLUDE END: SET_TIMING_ONLY


def meta_disagreements() -> dict[str, tuple[int, str]]:
    """Operators whose Meta kernel promised other output shapes or dtypes
    than their CPU kernel produced, as (calls found to disagree, the first
    difference in words). The device executor runs them synchronously from
    then on, sized by the CPU kernel (Note [A Meta kernel that disagrees
    with the CPU] in csrc/aten/Executor.cpp)."""
    return {name: tuple(found) for name, found in _C._meta_disagreements().items()}


def set_fallback_mode(mode: str) -> None:
    """What an operator without an openreg kernel does: 'warn' (once per operator,
    the default), 'silent', or 'error' (raise NotImplementedError)."""
    _C._set_fallback_mode(mode)


def get_fallback_mode() -> str:
    """The current fallback mode ('warn', 'silent' or 'error')."""
    return _C._get_fallback_mode()


def extensions() -> dict[str, str]:
    """Layer packages found through the 'torch_openreg.extensions' entry points,
    each 'loaded' or 'failed: <reason>'."""
    return _extensions.status()


def __getattr__(name: str) -> Any:
    # Inductor's backend for the device, read by Inductor when it first
    # compiles (torch_openreg/_compile/__init__.py): imported only then.
    from torch_openreg import _compile

    if name in _compile.INDUCTOR_BACKEND_ATTRIBUTES:
        return _compile.inductor_backend(name)
    raise AttributeError(f"module 'torch.openreg' has no attribute {name!r}")
