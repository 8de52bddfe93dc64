"""Needs autocast: CUDA's cast policy, from PyTorch's own test data.

Every entry of torch.testing._internal.autocast_test_lists.AutocastTestLists
(the lists PyTorch's test_cuda.py checks CUDA's autocast with) runs on the
device under torch.autocast in the device's autocast dtype: the lower
precision lists give that dtype, the float32 lists float32, and each result
equals a control run whose inputs were cast by hand outside autocast.
"""

from __future__ import annotations

import collections.abc

import pytest
import torch
from torch.testing._internal.autocast_test_lists import AutocastTestLists

pytestmark = pytest.mark.conformance_capability("autocast")

# list name -> (module holding the function besides the Tensor method, dtype of the control run:
# None means the autocast dtype).
LISTS = {
    "torch_fp16": (torch, None),
    "torch_fp32": (torch, torch.float32),
    "torch_need_autocast_promote": (torch, torch.float32),
    "torch_expect_builtin_promote": (torch, torch.float32),
    "methods_expect_builtin_promote": (None, torch.float32),
    "nn_fp16": (torch._C._nn, None),
    "nn_fp32": (torch._C._nn, torch.float32),
    "linalg_fp16": (torch._C._linalg, None),
    "methods_fp16": (None, None),
    "methods_fp32": (None, torch.float32),
}
# Operators that exist only with cuDNN, and the einsum entry whose operands
# sit where the lists keep their ROCm flag (PyTorch's own tests skip it).
CUDNN_ONLY = {"cudnn_convolution", "cudnn_convolution_transpose"}
MALFORMED = {"einsum"}


def entries() -> list:
    lists = AutocastTestLists(torch.device("cpu"))  # names and positions only

    def marks(op):
        if op in MALFORMED:
            return [pytest.mark.skip(reason="the upstream list's einsum entry is malformed")]
        return []
    # Named by list and operator (pytest numbers a repeated one), not by position, which releases change.
    return [pytest.param(name, index, id=f"{name}-{entry[0]}", marks=marks(entry[0]))
            for name in LISTS for index, entry in enumerate(getattr(lists, name))]


def in_dtype(value, dtype, only_half=False):
    if isinstance(value, torch.Tensor):
        cast = value.dtype == torch.float16 if only_half else value.is_floating_point()
        return value.to(dtype) if cast else value
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v, dtype, only_half) for v in value)
    return value


def identical(first, second) -> bool:
    if isinstance(first, torch.Tensor):
        return first.dtype == second.dtype and torch.equal(first.cpu(), second.cpu())
    if isinstance(first, collections.abc.Iterable) and not isinstance(first, str):
        return all(identical(f, s) for f, s in zip(first, second, strict=True))
    return first == second


@pytest.mark.parametrize(("list_name", "index"), entries())
def test_the_cast_policy(device, device_type, list_name, index):
    amp_dtype = torch.get_autocast_dtype(device_type)
    torch.manual_seed(index)
    op, args, *extra = getattr(AutocastTestLists(device), list_name)[index]
    if op in CUDNN_ONLY and device_type != "cuda":
        pytest.skip("a cuDNN operator, which only CUDA has")
    args = in_dtype(args, amp_dtype, only_half=True)  # the lists' float16 inputs, in the device's dtype
    kwargs = extra[0] if extra and isinstance(extra[0], dict) else {}
    expected_dtype = extra[0] if extra and isinstance(extra[0], torch.dtype) else None
    module, control_dtype = LISTS[list_name]
    control_dtype = control_dtype or amp_dtype
    function = getattr(module, op) if module is not None and hasattr(module, op) else getattr(torch.Tensor, op)
    # As test_cuda.py runs them: cuDNN (where there is one) deterministic, so convolutions compare bit for bit.
    with torch.backends.cudnn.flags(enabled=True, deterministic=True), torch.autocast(device_type, dtype=amp_dtype):
        output = function(*args, **kwargs)
        with torch.autocast(device_type, enabled=False):
            control = function(*in_dtype(args, control_dtype), **kwargs)
    expected_dtype = expected_dtype or control_dtype
    if isinstance(output, torch.Tensor):
        assert output.dtype == expected_dtype, (
            f"contract: under autocast({device_type!r}, {amp_dtype}), {op} runs in {expected_dtype} "
            f"(PyTorch's {list_name}); it gave {output.dtype}")
    assert identical(output, control), f"contract: autocast's {op} equals the same op on inputs cast by hand"


def test_banned_operators_are_refused(device, device_type):
    for op, args, module in AutocastTestLists(device).banned:
        with torch.autocast(device_type), pytest.raises(RuntimeError, match="unsafe to autocast"):
            getattr(module, op)(*args)


def test_a_disabled_region_runs_in_float32(device, device_type):
    a = torch.randn(8, 8, device=device)
    with torch.autocast(device_type):
        assert (a @ a).dtype == torch.get_autocast_dtype(device_type)
        with torch.autocast(device_type, enabled=False):
            assert (a @ a).dtype == torch.float32, "contract: autocast(enabled=False) turns the policy off"
