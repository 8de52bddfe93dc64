"""Where a region's device memory goes: its peak per device, split into parameters, gradients,
optimizer state and the rest (activations, inputs, temporaries) where the program's structure says
which tensor is which: the modules it calls and the optimizers it steps, seen through PyTorch's global
module and optimizer hooks, and the accumulation of each parameter's gradient in the backward pass.
None of them changes what the program computes (unlike module backward hooks, which wrap outputs).
Not a memory profiler: it samples at those moments only, and says how much of the peak fell between
two samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import openreg_runtime
import torch
from torch.nn.modules import module as module_hooks
from torch.optim import optimizer as optimizer_hooks
from torch.utils._python_dispatch import is_traceable_wrapper_subclass


@dataclass
class MemorySplit:
    """One device's memory at the region's busiest sampled moment, in bytes (allocated, as the
    caching allocator counts it), beside the region's peaks."""

    peak_allocated: int = 0  # the allocator's peak over the region
    peak_reserved: int = 0  # what the caching allocator held from the device at most
    sampled: int = 0  # allocated at the busiest sampled moment, split below
    parameters: int = 0
    gradients: int = 0
    optimizer_state: int = 0

    @property
    def activations(self) -> int:
        """Everything else allocated at that moment: activations, inputs, other tensors."""
        return max(0, self.sampled - self.parameters - self.gradients - self.optimizer_state)

    @property
    def between_samples(self) -> int:
        """How far the peak rose above every sample: temporaries inside an operator or module."""
        return max(0, self.peak_allocated - self.sampled)


def _holding_memory(tensor: torch.Tensor):
    """The plain tensors that hold tensor's memory: itself, or the inner tensors of a wrapper subclass
    (FSDP2's parameters are DTensors, each holding this rank's shard), which has no storage of its own."""
    if is_traceable_wrapper_subclass(tensor):
        inner_names, _ = tensor.__tensor_flatten__()
        for name in inner_names:
            inner = getattr(tensor, name)
            if isinstance(inner, torch.Tensor):  # not the metadata a subclass may list beside (its mesh)
                yield from _holding_memory(inner)
    else:
        yield tensor


def _bytes_by_device(tensors) -> dict[int, int]:
    """Each openreg storage counted once, by device."""
    seen, total = set(), {}
    plain = (inner for tensor in tensors if tensor is not None for inner in _holding_memory(tensor))
    for tensor in plain:
        if tensor.device.type != "openreg":
            continue
        storage = tensor.untyped_storage()
        if storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        total[tensor.device.index] = total.get(tensor.device.index, 0) + storage.nbytes()
    return total


def _is_fsdp_module(module) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a build of PyTorch without distributed
        return False
    return isinstance(module, FSDPModule)


def _state_bytes(optimizers: list) -> dict[int, int]:
    return _bytes_by_device(value for optimizer in optimizers for per_parameter in optimizer.state.values()
                            for value in per_parameter.values() if isinstance(value, torch.Tensor))


@dataclass
class MemoryWatch:
    """Samples every openreg device's allocated memory at module and optimizer boundaries."""

    devices: list[int]
    splits: dict[int, MemorySplit] = field(default_factory=dict)
    _parameters: dict[int, torch.nn.Parameter] = field(default_factory=dict)
    _modules: set = field(default_factory=set)
    _optimizers: list = field(default_factory=list)
    _handles: list = field(default_factory=list)
    sharded_by_fsdp: bool = False  # an FSDP2 module (torch.distributed.fsdp.fully_shard) ran in the region
    # (start, end) of every sample, on the runtime's clock: host time the program did not spend
    # (Note [How the host is replayed] in timeline.py takes it back out).
    pauses_ns: list = field(default_factory=list)

    def __enter__(self) -> MemoryWatch:
        self.splits = {device: MemorySplit() for device in self.devices}
        sample_module = lambda module, *args: self._sample(module)  # noqa: E731
        self._handles = [
            module_hooks.register_module_forward_pre_hook(sample_module),
            module_hooks.register_module_forward_hook(sample_module),
            optimizer_hooks.register_optimizer_step_pre_hook(lambda opt, *args: self._sample(optimizer=opt)),
            optimizer_hooks.register_optimizer_step_post_hook(lambda opt, *args: self._sample(optimizer=opt)),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._sample()
        for device, split in self.splits.items():
            split.peak_allocated = torch.openreg.max_memory_allocated(device)
            split.peak_reserved = torch.openreg.max_memory_reserved(device)

    def _sample(self, module=None, optimizer=None) -> None:
        start = openreg_runtime.trace_get_timestamp()
        self._take_sample(module, optimizer)
        self.pauses_ns.append((start, openreg_runtime.trace_get_timestamp()))

    def _take_sample(self, module, optimizer) -> None:
        if module is not None and id(module) not in self._modules:
            # Recursively: a module may use a child's parameters without calling it (attention's
            # output projection).
            self._modules.add(id(module))
            self.sharded_by_fsdp = self.sharded_by_fsdp or _is_fsdp_module(module)
            # Not the tensors torch.func.functional_call puts in a parameter's place (MAML's adapted
            # weights): computed, not the model's own, and kept alive by nothing but their call.
            for parameter in (p for p in module.parameters() if p.is_leaf):
                if id(parameter) not in self._parameters and parameter.requires_grad:
                    # The backward pass's moments: each gradient as it is accumulated.
                    self._handles.append(parameter.register_post_accumulate_grad_hook(lambda p: self._sample()))
                self._parameters[id(parameter)] = parameter
        if optimizer is not None and not any(seen is optimizer for seen in self._optimizers):
            # Its state existed before this first step of the region (only steps make it), so the
            # samples before, which could not tell it from the rest, held it too (less what they
            # counted already: an optimizer may share another's state).
            counted = _state_bytes(self._optimizers)
            self._optimizers.append(optimizer)
            earlier = _state_bytes(self._optimizers)
            for device, split in self.splits.items():
                if split.sampled > 0:
                    split.optimizer_state += earlier.get(device, 0) - counted.get(device, 0)
        # Most samples find no device busier than before: they read one figure per device.
        busiest = {}
        for device, split in self.splits.items():
            allocated = torch.openreg.memory_allocated(device)
            if allocated > split.sampled:
                busiest[device] = allocated
        if busiest:
            self._split(busiest)

    def _split(self, busiest: dict[int, int]) -> None:
        """Splits what each of the devices holds (busiest: device -> bytes allocated) at this moment."""
        parameters = list(self._parameters.values())
        weights = _bytes_by_device(parameters)
        gradients = _bytes_by_device(parameter.grad for parameter in parameters)
        state = _state_bytes(self._optimizers)
        for device, allocated in busiest.items():
            split = self.splits[device]
            split.sampled, split.parameters = allocated, weights.get(device, 0)
            split.gradients, split.optimizer_state = gradients.get(device, 0), state.get(device, 0)
