"""The kit's groups: one file of the suite each, required or gated by a capability.

A required group is what every PrivateUse1 backend must do (PyTorch relies
on it without asking). A capability-gated group checks a feature a backend
may leave out (pinned memory, autocast, Inductor, graphs, distributed, ...):
when the backend does not register it, capabilities.py says why and each of
the group's tests is skipped with that reason, which the report lists.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    name: str  # suite/test_<name>.py
    capability: str | None  # None: required; else the capability (capabilities.CHECKS) that gates it
    checks: str  # what it checks, for the report and --list-groups

    @property
    def required(self) -> bool:
        return self.capability is None

    @property
    def file(self) -> str:
        return f"test_{self.name}.py"


# LITERALINCLUDE START: CONFORMANCE_GROUPS
GROUPS = [
    Group("device", None, "torch.accelerator: count, current device, device_index errors, synchronize, capability"),
    Group("streams", None, "streams and events: ordering, cross-stream waits, elapsed_time, query, synchronize"),
    Group("guard", "multiple_devices", "the device guard seen from Python: switching, restoring, per-device streams"),
    Group("allocator", None, "caching allocator: statistics, empty_cache, out-of-memory, back to baseline"),
    Group("pinned", "pinned_memory", "pinned host memory: pin_memory, is_pinned, asynchronous copies"),
    Group("rng", None, "generators: seeding, state save and restore, fork_rng, per-device state"),
    Group("serialization", None, "torch.save and torch.load: map_location, shared storage, backend metadata"),
    Group("dlpack", "dlpack", "DLPack: the device in the capsule, round trips sharing memory"),
    Group("autograd", None, "autograd on the device: gradients match the CPU's"),
    Group("autocast", "autocast", "autocast policy: PyTorch's autocast_test_lists, lower precision and float32 ops"),
    Group("grad_scaler", "grad_scaler", "torch.amp.GradScaler: unscale, skipped steps, scale updates"),
    Group("compile", None, "torch.compile: Dynamo on the device against eager"),
    Group("inductor", "inductor", "torch.compile with Inductor's backend for the device"),
    Group("aot_inductor", "aot_inductor", "AOTInductor: a package compiled, loaded and run on the device"),
    Group("profiler", "profiler", "torch.profiler: the device's activities and kernels"),
    Group("graphs", "graphs", "torch.accelerator.Graph: capture and replay"),
    Group("distributed", "distributed", "the device's c10d backend: every collective on 2 ranks, DDP and FSDP2 steps"),
    Group("onnx", "onnx", "ONNX export of a model on the device, run by onnxruntime"),
    Group("operators", None, "PyTorch's OpInfo and ModuleInfo databases: the device against the CPU"),
    Group("pytorch_files", "pytorch_tests", "PyTorch's own device-generic test files, from a PyTorch checkout"),
]
# LITERALINCLUDE END: CONFORMANCE_GROUPS

BY_NAME = {group.name: group for group in GROUPS}


def group_of_file(file_name: str) -> Group:
    """The group of a suite file (test_<name>.py)."""
    return BY_NAME[file_name.removeprefix("test_").removesuffix(".py")]
