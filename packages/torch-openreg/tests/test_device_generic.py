"""openreg through PyTorch's own device-generic test machinery: test classes
written once for any device, instantiated for openreg by
instantiate_device_type_tests(..., only_for="openreg") over PyTorch's OpInfo
(op_db) and ModuleInfo (module_db) databases, each comparing openreg with
the CPU as PyTorch's TestCommon.test_compare_cpu and TestModule do.

The device's configuration is PyTorch's: PrivateUse1TestBase.set_test_configs
with op_allowlist (the operators this file covers), op_overrides (tolerances
or expected failures per operator, as DecorateInfo) and test_exclusions (test
names skipped on openreg, each with its reason below). A vendor points the
same file at its device by changing nothing but its configuration
(docs/operators/reusing-pytorch-tests.md).

tests/test_opinfo.py is the exhaustive operator run (every OpInfo, several
dtypes, backward); this file is the example of the machinery, over a set of
the commonest operators and modules, in float32.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_device_type import (
    PrivateUse1TestBase,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import TrainEvalMode, module_db, modules
from torch.testing._internal.common_utils import TestCase
from torch.utils._pytree import tree_map

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# LITERALINCLUDE START: DEVICE_GENERIC_CONFIG
# The operators and modules compared here (OpInfo.full_name, ModuleInfo's
# class name): what models are made of.
OPERATORS = [
    "abs", "add", "addmm", "amax", "argmax", "bmm", "cat", "clamp", "cos", "cumsum", "div.no_rounding_mode", "exp",
    "gather", "index_select", "log", "log_softmax", "matmul", "max.reduction_with_dim", "mean", "mm", "mul", "neg",
    "nn.functional.conv2d", "nn.functional.cross_entropy", "nn.functional.embedding", "nn.functional.gelu",
    "nn.functional.layer_norm", "nn.functional.linear", "nn.functional.relu", "nn.functional.silu", "pow",
    "reshape", "rsqrt", "sigmoid", "sin", "softmax", "sqrt", "stack", "sub", "sum", "tanh", "topk", "transpose",
    "where",
]
MODULES = {
    "Linear", "Bilinear", "Conv1d", "Conv2d", "ConvTranspose2d", "BatchNorm2d", "LayerNorm", "GroupNorm",
    "Embedding", "LSTM", "GRU", "MultiheadAttention", "TransformerEncoderLayer", "MaxPool2d", "AvgPool2d",
    "ReLU", "GELU", "Softmax", "CrossEntropyLoss", "MSELoss",
}
EXCLUSIONS = {}  # test class name -> test names (or "*"), each with its reason: none are needed today

PrivateUse1TestBase.set_test_configs(op_allowlist=OPERATORS, op_overrides=None, test_exclusions=EXCLUSIONS)
# LITERALINCLUDE END: DEVICE_GENERIC_CONFIG


def to_cpu(value):
    return tree_map(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, value)


def to_device(value, device):
    return tree_map(lambda x: x.detach().to(device) if isinstance(x, torch.Tensor) else x, value)


class TestOpenRegOps(TestCase):
    @ops([op for op in op_db if op.full_name in OPERATORS], allowed_dtypes=(torch.float32,))
    def test_compare_cpu(self, device, dtype, op):
        # As TestCommon.test_compare_cpu: the same samples on the device and
        # on the CPU, results compared with the OpInfo's tolerances.
        for sample in list(op.sample_inputs(device, dtype, requires_grad=False))[:4]:
            cpu = sample.transform(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x)
            expected = op(cpu.input, *cpu.args, **cpu.kwargs)
            got = op(sample.input, *sample.args, **sample.kwargs)
            self.assertEqual(to_cpu(got), expected, exact_device=False)


class TestOpenRegModules(TestCase):
    @modules([info for info in module_db if info.module_cls.__name__ in MODULES], allowed_dtypes=(torch.float32,),
             train_eval_mode=TrainEvalMode.train_and_eval)
    def test_forward_and_backward_match_cpu(self, device, dtype, module_info, training):
        # As TestModule: each constructor of the ModuleInfo's inputs, one
        # module on each side with the same parameters, forward outputs and
        # parameter gradients compared.
        inputs = module_info.module_inputs_func(module_info, device=device, dtype=dtype, requires_grad=True,
                                                training=training)
        for module_input in inputs[:3]:
            if module_input.forward_input is None:
                continue
            args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
            torch.manual_seed(0)
            reference = module_info.module_cls(*args, **kwargs).to(dtype).train(training)
            moved = module_info.module_cls(*args, **kwargs).to(dtype).train(training).to(device)
            moved.load_state_dict(reference.state_dict())
            forward_args = module_input.forward_input.args
            forward_kwargs = module_input.forward_input.kwargs
            cpu_args = tree_map(lambda x: x.detach().cpu().requires_grad_(x.requires_grad)
                                if isinstance(x, torch.Tensor) else x, forward_args)
            expected, got = reference(*cpu_args, **to_cpu(forward_kwargs)), moved(*forward_args, **forward_kwargs)
            self.assertEqual(to_cpu(got), to_cpu(expected), exact_device=False)
            outputs = [t for t in torch.utils._pytree.tree_leaves((expected, got)) if isinstance(t, torch.Tensor)]
            if not all(t.requires_grad for t in outputs) or not training:
                continue
            half = len(outputs) // 2
            sum(t.float().sum() for t in outputs[:half]).backward()
            sum(t.float().sum() for t in outputs[half:]).backward()
            for (name, p), q in zip(reference.named_parameters(), moved.parameters(), strict=True):
                # A reduction's sums may run in another order than the CPU's
                # (one thread on a small kernel's stream worker, a team of
                # them on the CPU): float32 rounding, hence a tolerance.
                if p.grad is not None:
                    self.assertEqual(q.grad.cpu(), p.grad, exact_device=False, atol=1e-5, rtol=1e-4,
                                     msg=f"gradient of {name}")


def test_every_configured_name_is_in_pytorch_s_databases():
    # A misspelt name would drop its tests silently.
    assert set(OPERATORS) <= {op.full_name for op in op_db}
    assert MODULES <= {info.module_cls.__name__ for info in module_db}


# LITERALINCLUDE START: DEVICE_GENERIC_INSTANTIATE
instantiate_device_type_tests(TestOpenRegOps, globals(), only_for="openreg")
instantiate_device_type_tests(TestOpenRegModules, globals(), only_for="openreg")
# LITERALINCLUDE END: DEVICE_GENERIC_INSTANTIATE
