"""Required: PyTorch's operator and module databases, the device against the CPU.

Test classes written once for any device, instantiated for the device under
test by instantiate_device_type_tests(..., only_for=DEVICE) over op_db
(every OpInfo: its first samples, in float32, or in the one dtype PyTorch's
OpDTypes.any_one picks for an operator without float32) and module_db (every
ModuleInfo: forward and backward, train and eval), each result compared with
the same computation on the CPU, as PyTorch's TestCommon.test_compare_cpu and
TestModule.test_cpu_gpu_parity do.

A vendor configures it the way PyTorch configures a device's tests
(DeviceTypeTestBase.set_test_configs), through the overrides file
(--overrides): NOT_COMPARABLE, {reason: [OpInfo names]}, the operators whose
values cannot be compared with the CPU's (random numbers, uninitialized
memory), skipped with that reason; OP_ALLOWLIST and TEST_EXCLUSIONS as
set_test_configs takes them. Two settings widen the comparison:
COMPARED_DTYPES (PyTorch's dtype names; default ("float32",)) compares the
operators in each of those dtypes their OpInfo supports, and
COMPARE_GRADIENTS (default False) adds TestConformanceGradients, the
float32 gradients of every OpInfo that supports autograd.
"""

from __future__ import annotations

import copy
import itertools
import sys
import unittest

import pytest
import torch
from openreg_conformance import plugin
from torch.testing._internal import common_utils
from torch.testing._internal.common_cuda import with_tf32_off
from torch.testing._internal.common_device_type import (
    OpDTypes,
    get_device_type_test_bases,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import TrainEvalMode, module_db, modules
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.opinfo import core as opinfo_core
from torch.testing._internal.opinfo.core import DecorateInfo
from torch.utils._pytree import tree_leaves, tree_map

DEVICE = plugin.device_type()
SAMPLES = 4  # the first samples of each OpInfo
SETTINGS = plugin.overrides()
COMPARED_DTYPES = tuple(getattr(torch, name) for name in getattr(SETTINGS, "COMPARED_DTYPES", ("float32",)))
COMPARE_GRADIENTS = bool(getattr(SETTINGS, "COMPARE_GRADIENTS", False))


def running_test_function():
    """The test function whose frame is on the stack, as PyTorch's
    common_utils.extract_test_fn finds it, without reading source lines.

    PyTorch's machinery looks for the running test three times per test (to
    name the sample in a failure) through inspect.stack(), which reads the
    source line of every frame: 0.1 s a test, most of this file's time.
    Walking the frames finds the same function."""
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, unittest.TestCase):
            *_, class_name, test_name = candidate.id().rsplit(".", 2)
            if class_name == type(candidate).__name__ and test_name.startswith("test"):
                return getattr(candidate, test_name).__func__
        frame = frame.f_back
    return None


common_utils.extract_test_fn = opinfo_core.extract_test_fn = running_test_function


# LITERALINCLUDE START: CONFORMANCE_OPERATORS_CONFIG
def configure(device_type: str) -> None:
    """Applies the overrides file to the device's test base, as set_test_configs takes it."""
    overrides = plugin.overrides()
    not_comparable = getattr(overrides, "NOT_COMPARABLE", {}) or {}
    op_overrides = {
        name: [DecorateInfo(unittest.skip(f"not comparable with the CPU: {reason}"), test_class)
               for test_class in ("TestConformanceOps", "TestConformanceGradients")]
        for reason, names in not_comparable.items() for name in names
    }
    known = {op.full_name for op in op_db}
    unknown = sorted(set(op_overrides) - known)
    if unknown:
        raise ValueError(f"the overrides file names operators op_db does not have: {unknown}")
    configs = dict(op_overrides=op_overrides, op_allowlist=getattr(overrides, "OP_ALLOWLIST", None),
                   test_exclusions=getattr(overrides, "TEST_EXCLUSIONS", None))
    for base in get_device_type_test_bases():
        if base.device_type not in (device_type, "privateuse1"):
            continue
        if hasattr(base, "set_test_configs"):
            base.set_test_configs(**configs)
        elif any(configs.values()):  # an older torch (2.11's CUDATestBase): nothing to apply them with
            pytest.skip(f"the overrides file needs {base.__name__}.set_test_configs, which torch "
                        f"{torch.__version__} lacks", allow_module_level=True)
# LITERALINCLUDE END: CONFORMANCE_OPERATORS_CONFIG


def to_cpu(value):
    return tree_map(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, value)


def tolerances(dtype: torch.dtype) -> dict:
    """PyTorch's test_compare_cpu tolerances (1e-3), widened to the dtype's
    own relative resolution where that is coarser (one rounding of a
    bfloat16 result is 0.4 %); 8-bit floats compare bit for bit, as
    assertEqual requires of them."""
    if dtype.is_floating_point and dtype.itemsize == 1:
        return {"atol": 0.0, "rtol": 0.0}
    from torch.testing._comparison import default_tolerances

    rtol, _ = default_tolerances(dtype)
    return {"atol": 1e-3, "rtol": max(1e-3, rtol)}


def without_float32(op) -> bool:
    return torch.float32 not in op.supported_dtypes(DEVICE or "cpu")


class TestConformanceOps(TestCase):
    # As PyTorch's TestCommon.test_compare_cpu: the same samples on the device
    # and on the CPU, each result through the sample's output_process_fn_grad
    # (which fixes the signs of singular vectors, say), compared.
    @ops(op_db, allowed_dtypes=COMPARED_DTYPES)
    @with_tf32_off
    def test_compare_cpu(self, device, dtype, op):
        self.compare_outputs(device, dtype, op)

    # Operators without float32 (integer or complex ones), in one dtype they have.
    @ops([op for op in op_db if without_float32(op)], dtypes=OpDTypes.any_one)
    def test_compare_cpu_in_its_own_dtype(self, device, dtype, op):
        self.compare_outputs(device, dtype, op)

    def compare_outputs(self, device, dtype, op):
        for sample in itertools.islice(op.sample_inputs(device, dtype, requires_grad=False), SAMPLES):
            cpu = sample.transform(to_cpu)
            expected = sample.output_process_fn_grad(op(cpu.input, *cpu.args, **cpu.kwargs))
            got = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
            self.assertEqual(to_cpu(got), expected, exact_device=False, **tolerances(dtype),
                             msg=f"contract: {op.full_name} on the device computes what it computes on the CPU")


def leaf_on_cpu(x):
    if not isinstance(x, torch.Tensor):
        return x
    return x.detach().cpu().requires_grad_(x.requires_grad)


# LITERALINCLUDE START: CONFORMANCE_GRADIENTS
def gradients(op, sample) -> list | None:
    """The gradients of the sum of every differentiable output (real and
    imaginary parts of a complex one) with respect to every input that
    requires grad; None when the sample has no such output or input."""
    outputs = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
    differentiable = [t for t in tensors_in(outputs) if t.requires_grad]
    inputs = [t for t in tensors_in((sample.input, sample.args, sample.kwargs)) if t.requires_grad]
    if not differentiable or not inputs:
        return None
    total = sum(torch.real(t).sum() + torch.imag(t).sum() if t.is_complex() else t.sum() for t in differentiable)
    return list(torch.autograd.grad(total, inputs, allow_unused=True))
# LITERALINCLUDE END: CONFORMANCE_GRADIENTS


class TestConformanceGradients(TestCase):
    # Backward of every OpInfo that supports autograd: the gradients the
    # device computes equal the CPU's, for the same samples.
    @ops([op for op in op_db if op.supports_autograd], allowed_dtypes=(torch.float32,))
    @with_tf32_off
    def test_gradients_match_cpu(self, device, dtype, op):
        for sample in itertools.islice(op.sample_inputs(device, dtype, requires_grad=True), SAMPLES):
            expected = gradients(op, sample.transform(leaf_on_cpu))
            got = gradients(op, sample)
            self.assertEqual(to_cpu(got), expected, exact_device=False, **tolerances(dtype),
                             msg=f"contract: {op.full_name}'s gradients on the device are the CPU's")


def on_device(value, device):
    def move(x):
        if isinstance(x, torch.Tensor):
            return x.detach().to(device).requires_grad_(x.requires_grad)
        if isinstance(x, torch.nn.Module):
            return copy.deepcopy(x).to(device)
        return x
    return tree_map(move, value)


def tensors_in(value) -> list[torch.Tensor]:
    return [x for x in tree_leaves(value) if isinstance(x, torch.Tensor)]


# A module's float32 parameter and input gradients; a device's fused recurrent and attention kernels sum
# over time steps and heads in their own order (an H200's cuDNN RNN, GRU, LSTM and MultiheadAttention
# weight gradients differ from the CPU's by up to 6.7e-5, 2.5e-4 relative).
GRADIENT_TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}
FUSED_GRADIENT_TOLERANCE = {"atol": 1e-4, "rtol": 1e-3}
FUSED_MODULES = (torch.nn.RNN, torch.nn.GRU, torch.nn.LSTM, torch.nn.MultiheadAttention)


class TestConformanceModules(TestCase):
    # As PyTorch's TestModule.test_cpu_gpu_parity (TF32 off there too).
    @modules(module_db, allowed_dtypes=(torch.float32,), train_eval_mode=TrainEvalMode.train_and_eval)
    @with_tf32_off
    def test_forward_and_backward_match_cpu(self, device, dtype, module_info, training):
        inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype, requires_grad=True,
                                                training=training)
        for module_input in inputs:
            if module_input.forward_input is None:
                continue
            constructor, forward = module_input.constructor_input, module_input.forward_input
            reference = module_info.module_cls(*constructor.args, **constructor.kwargs).to(dtype).train(training)
            moved_args, moved_kwargs = on_device((constructor.args, constructor.kwargs), device)
            moved = module_info.module_cls(*moved_args, **moved_kwargs).to(device, dtype).train(training)
            cpu_args, cpu_kwargs = forward.args, forward.kwargs
            args, kwargs = on_device((cpu_args, cpu_kwargs), device)
            if isinstance(reference, torch.nn.modules.lazy.LazyModuleMixin):
                with torch.no_grad():  # a lazy module makes its parameters at its first call
                    reference(*cpu_args, **cpu_kwargs)
                    moved(*args, **kwargs)
            moved.load_state_dict(reference.state_dict())
            expected, got = reference(*cpu_args, **cpu_kwargs), moved(*args, **kwargs)
            self.assertEqual(to_cpu(got), to_cpu(expected), exact_device=False)
            if not training:
                continue
            expected_outputs = [t for t in tensors_in(expected) if t.requires_grad]
            got_outputs = [t for t in tensors_in(got) if t.requires_grad]
            if not expected_outputs:
                continue
            sum(t.float().sum() for t in expected_outputs).backward()
            sum(t.float().sum() for t in got_outputs).backward()
            # Reductions may sum in another order than the CPU's: float32 rounding.
            tolerance = FUSED_GRADIENT_TOLERANCE if issubclass(module_info.module_cls, FUSED_MODULES) else \
                GRADIENT_TOLERANCE
            for (name, p), q in zip(reference.named_parameters(), moved.parameters(), strict=True):
                if p.grad is not None:
                    self.assertEqual(q.grad.cpu(), p.grad, exact_device=False, **tolerance,
                                     msg=f"gradient of {name}")
            for index, (x, y) in enumerate(zip(tensors_in((cpu_args, cpu_kwargs)), tensors_in((args, kwargs)),
                                               strict=True)):
                if x.grad is not None:
                    self.assertEqual(y.grad.cpu(), x.grad, exact_device=False, **tolerance,
                                     msg=f"gradient of input {index}")


# LITERALINCLUDE START: CONFORMANCE_OPERATORS_INSTANTIATE
if DEVICE is not None:  # the device under test (--conformance-device)
    configure(DEVICE)
    instantiate_device_type_tests(TestConformanceOps, globals(), only_for=DEVICE)
    instantiate_device_type_tests(TestConformanceModules, globals(), only_for=DEVICE)
    if COMPARE_GRADIENTS:
        instantiate_device_type_tests(TestConformanceGradients, globals(), only_for=DEVICE)
    else:
        del TestConformanceGradients  # not asked for: no tests, rather than tests skipped
# LITERALINCLUDE END: CONFORMANCE_OPERATORS_INSTANTIATE
