"""Memory statistics of torch.openreg, read from the caching device allocator
(csrc/runtime/DeviceAllocator.cpp) under the same keys as torch.cuda's."""

from collections import OrderedDict
from typing import Any

import torch_openreg._C as _C
from torch_openreg.openreg.utils import _device_index


def _index(device: Any) -> int:
    return _device_index(device, optional=True, default_current=True)


def memory_stats(device: Any = None) -> "OrderedDict[str, int]":
    """All allocator statistics of ``device``, e.g. ``allocated_bytes.all.current``."""
    return OrderedDict(sorted(_C._memory_stats(_index(device)).items()))


def memory_allocated(device: Any = None) -> int:
    """Bytes currently held by tensors on ``device`` (memory_stats' allocated_bytes.all.current)."""
    return _C._memory_bytes(_index(device))[0]


def max_memory_allocated(device: Any = None) -> int:
    """Peak of memory_allocated since start or the last reset_peak_memory_stats."""
    return _C._memory_bytes(_index(device))[1]


def memory_reserved(device: Any = None) -> int:
    """Bytes the allocator holds from the device, in use or cached."""
    return _C._memory_bytes(_index(device))[2]


def max_memory_reserved(device: Any = None) -> int:
    """Peak of memory_reserved since start or the last reset_peak_memory_stats."""
    return _C._memory_bytes(_index(device))[3]


def reset_peak_memory_stats(device: Any = None) -> None:
    """Make every peak statistic equal to its current value."""
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Zero the accumulated (allocated/freed totals and counter) statistics."""
    _C._reset_accumulated_memory_stats(_index(device))


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Cap the memory the caching allocator reserves from ``device`` at
    ``fraction`` times its total memory, as ``torch.cuda``'s does: a request
    that would need a new segment past the cap raises ``torch.OutOfMemoryError``
    (after the cached segments were given back). ``fraction`` is a float in
    [0, 1]; ``device`` defaults to the current device."""
    # torch.cuda's checks, in its order and with its messages.
    index = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, index)


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction set_per_process_memory_fraction set for ``device`` (1.0 until it is set)."""
    return _C._get_memory_fraction(_index(device))


def empty_cache() -> None:
    """Return every cached, unused block of every device to the runtime, and the
    host memory cached for kernels' own allocations to the C library."""
    _C._empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """``(free, total)`` bytes of ``device`` as the runtime sees them."""
    return tuple(_C._mem_get_info(_index(device)))


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator statistics of ``device``."""
    stats = memory_stats(device)
    rows = [("Allocated memory", "allocated_bytes", True), ("Active memory", "active_bytes", True),
            ("Requested memory", "requested_bytes", True), ("Reserved memory", "reserved_bytes", True),
            ("Non-releasable memory", "inactive_split_bytes", True),
            ("Allocations", "allocation", False), ("Active allocs", "active", False),
            ("Device reserved segments", "segment", False)]
    pools = ["all"] if abbreviated else ["all", "large_pool", "small_pool"]

    def show(value: int, is_bytes: bool) -> str:
        if not is_bytes:
            return str(value)
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(value) < 1024 or unit == "GiB":
                return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
            value /= 1024
        return str(value)

    index = _index(device)
    lines = [f"openreg memory summary, device {index}",
             f"{'metric':<26}{'pool':<12}{'current':>14}{'peak':>14}{'allocated':>14}{'freed':>14}"]
    for title, key, is_bytes in rows:
        for pool in pools:
            prefix = f"{key}.{pool}."
            values = [show(stats[prefix + field], is_bytes) for field in ("current", "peak", "allocated", "freed")]
            lines.append(f"{title:<26}{pool:<12}" + "".join(f"{v:>14}" for v in values))
    lines.append(f"OOMs: {stats['num_ooms']}   allocation retries: {stats['num_alloc_retries']}")
    return "\n".join(lines)
