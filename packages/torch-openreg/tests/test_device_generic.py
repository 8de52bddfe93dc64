"""openreg through PyTorch's own device-generic test machinery: test classes
written once for any device, instantiated for openreg by
instantiate_device_type_tests(..., only_for="openreg") over PyTorch's OpInfo
(op_db) and ModuleInfo (module_db) databases, each comparing openreg with
the CPU as PyTorch's TestCommon.test_compare_cpu and TestModule do.

Every OpInfo and every ModuleInfo is compared, in float32. The device's
configuration is PyTorch's: PrivateUse1TestBase.set_test_configs with
op_allowlist (None: every operator), op_overrides (per operator, as
DecorateInfo: here the operators whose values cannot be compared, each with
its reason) and test_exclusions (whole tests; none). A vendor points the same
file at its device by changing nothing but its configuration
(docs/operators/reusing-pytorch-tests.md).

The test classes are not named TestCommon and TestModule, so that the
databases' decorators for those (expected failures of CUDA's comparisons
among them) do not apply: every exclusion here is openreg's own, with its
reason. tests/test_opinfo.py runs the same database further: more dtypes,
backward, and PyTorch's sample counts.
"""

from __future__ import annotations

import copy
import itertools
import sys
import unittest

import pytest
import torch
from torch.testing._internal import common_utils
from torch.testing._internal.common_device_type import (
    PrivateUse1TestBase,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import TrainEvalMode, module_db, modules
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.opinfo import core as opinfo_core
from torch.testing._internal.opinfo.core import DecorateInfo
from torch.utils._pytree import tree_leaves, tree_map

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def running_test_function():
    """The test function whose frame is on the stack, as PyTorch's
    common_utils.extract_test_fn finds it, without reading source lines.

    The machinery looks for the running test three times per test (to track
    the sample being run, for its failure message) through inspect.stack(),
    which reads the source line of every frame: 0.1 s a test, most of this
    file's run. Walking the frames finds the same function."""
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

# LITERALINCLUDE START: DEVICE_GENERIC_CONFIG
# Every OpInfo of op_db and every ModuleInfo of module_db is compared with the
# CPU. The operators whose comparison means nothing on openreg, by reason:
NOT_COMPARABLE = {
    # openreg's generator is a stream of its own, as CUDA's is: the same seed
    # gives other values than the CPU's (test_random.py checks distributions).
    "random values": [
        "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
        "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randint_like", "randn_like",
        "nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout2d",
        "nn.functional.dropout3d", "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.fractional_max_pool3d", "nn.functional.multi_head_attention_forward",
        "nn.functional.rrelu", "nn.functional.scaled_dot_product_attention",
    ],
    # The values of memory never written are undefined, on any device.
    "uninitialized memory": [
        "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
    ],
    # The sample reads storage outside its view, which a copy to the CPU
    # does not carry.
    "storage beyond the view": ["as_strided.partial_views"],
    # openreg registers no sparse kernels (the SparsePrivateUse1 key); the
    # dispatcher refuses, naming the key.
    "sparse layouts": ["sparse.sampled_addmm", "to_sparse"],
}
OP_OVERRIDES = {
    name: [DecorateInfo(unittest.skip(f"not comparable with the CPU: {reason}"), "TestOpenRegOps", "test_compare_cpu")]
    for reason, names in NOT_COMPARABLE.items() for name in names
}
EXCLUSIONS = {}  # test class name -> test names (or "*"): no whole test needs excluding

PrivateUse1TestBase.set_test_configs(op_allowlist=None, op_overrides=OP_OVERRIDES, test_exclusions=EXCLUSIONS)
# LITERALINCLUDE END: DEVICE_GENERIC_CONFIG


def to_cpu(value):
    return tree_map(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, value)


# The first samples of each OpInfo (test_opinfo.py runs more of them).
SAMPLES = 4


class TestOpenRegOps(TestCase):
    @ops(op_db, allowed_dtypes=(torch.float32,))
    def test_compare_cpu(self, device, dtype, op):
        # As TestCommon.test_compare_cpu: the same samples on the device and
        # on the CPU, results compared with the OpInfo's tolerances.
        for sample in itertools.islice(op.sample_inputs(device, dtype, requires_grad=False), SAMPLES):
            cpu = sample.transform(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x)
            expected = op(cpu.input, *cpu.args, **cpu.kwargs)
            got = op(sample.input, *sample.args, **sample.kwargs)
            self.assertEqual(to_cpu(got), expected, exact_device=False)


def on_device(value, device):
    """A module's constructor or forward arguments moved to device: tensors
    as new leaves that keep requires_grad, modules (a TransformerEncoder's
    layer) as moved copies."""
    def move(x):
        if isinstance(x, torch.Tensor):
            return x.detach().to(device).requires_grad_(x.requires_grad)
        if isinstance(x, torch.nn.Module):
            return copy.deepcopy(x).to(device)
        return x
    return tree_map(move, value)


def tensors_in(value) -> list[torch.Tensor]:
    return [x for x in tree_leaves(value) if isinstance(x, torch.Tensor)]


class TestOpenRegModules(TestCase):
    @modules(module_db, allowed_dtypes=(torch.float32,), train_eval_mode=TrainEvalMode.train_and_eval)
    def test_forward_and_backward_match_cpu(self, device, dtype, module_info, training):
        # As TestModule.test_cpu_gpu_parity: every input of the ModuleInfo,
        # made on the CPU; one module there and one on the device with the
        # same parameters and buffers; outputs, and the gradients of the
        # parameters and of the inputs, compared.
        inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype, requires_grad=True,
                                                training=training)
        for module_input in inputs:
            if module_input.forward_input is None:
                continue
            constructor, forward = module_input.constructor_input, module_input.forward_input
            reference = module_info.module_cls(*constructor.args, **constructor.kwargs).to(dtype).train(training)
            moved_constructor = on_device((constructor.args, constructor.kwargs), device)
            moved = module_info.module_cls(*moved_constructor[0], **moved_constructor[1]).to(device, dtype)
            moved.train(training)
            cpu_args, cpu_kwargs = forward.args, forward.kwargs
            args, kwargs = on_device((cpu_args, cpu_kwargs), device)
            if isinstance(reference, torch.nn.modules.lazy.LazyModuleMixin):
                # A lazy module makes its parameters at its first call.
                with torch.no_grad():
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
            # A reduction's sums may run in another order than the CPU's (one
            # thread on a small kernel's stream worker, a team of them on the
            # CPU): float32 rounding, hence a tolerance.
            for (name, p), q in zip(reference.named_parameters(), moved.parameters(), strict=True):
                if p.grad is not None:
                    self.assertEqual(q.grad.cpu(), p.grad, exact_device=False, atol=1e-5, rtol=1e-4,
                                     msg=f"gradient of {name}")
            for index, (x, y) in enumerate(zip(tensors_in((cpu_args, cpu_kwargs)), tensors_in((args, kwargs)),
                                               strict=True)):
                if x.grad is not None:
                    self.assertEqual(y.grad.cpu(), x.grad, exact_device=False, atol=1e-5, rtol=1e-4,
                                     msg=f"gradient of input {index}")


def test_every_excluded_operator_is_in_op_db():
    # A misspelt or renamed operator would be compared, and fail: this names it.
    assert set(OP_OVERRIDES) <= {op.full_name for op in op_db}


# LITERALINCLUDE START: DEVICE_GENERIC_INSTANTIATE
instantiate_device_type_tests(TestOpenRegOps, globals(), only_for="openreg")
instantiate_device_type_tests(TestOpenRegModules, globals(), only_for="openreg")
# LITERALINCLUDE END: DEVICE_GENERIC_INSTANTIATE
