"""CUDA's cast policy on openreg, checked with PyTorch's own test data:
every entry of torch.testing._internal.autocast_test_lists.AutocastTestLists,
built on the openreg device, runs under torch.autocast("openreg") in float16
and in bfloat16 and must give the expected dtype and, bit for bit, the values
of a control run whose inputs were cast by hand (the method of PyTorch's
TestAutocast). Also the banned operator and the region semantics: weight
cache, nesting, disabled regions, custom_fwd/custom_bwd."""

from __future__ import annotations

import collections.abc

import pytest
import torch
from torch.testing._internal.autocast_test_lists import AutocastTestLists

AMP_DTYPES = [torch.float16, torch.bfloat16]

# Entries that exist only for cuDNN: PyTorch's lists test CUDA's two extra
# registrations cudnn_convolution and cudnn_convolution_transpose, which are
# not in the shared lists of ATen/autocast_mode.h and have no openreg kernel
# (a vendor without cuDNN has no such operators either).
CUDNN_ONLY = {"cudnn_convolution", "cudnn_convolution_transpose"}
# torch_fp16's einsum entry cannot run anywhere: its third element, the
# operands, sits where the lists keep the ROCm skip flag (so PyTorch's own
# test_cuda.py takes the non-empty tuple as "skip"), and its equation has four
# indices for 2-D operands. test_einsum_runs_in_the_autocast_dtype covers it.
NOT_RUNNABLE = {"einsum"}

# list name -> (module whose function is tried besides the Tensor method,
# dtype the control run casts to: None means the autocast dtype).
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


def _entries() -> list:
    # Names and positions only: the lists are rebuilt on openreg in each test.
    lists = AutocastTestLists(torch.device("cpu"))
    def marks(op):
        if op in CUDNN_ONLY:
            return [pytest.mark.skip(reason="cuDNN-only entry")]
        return [pytest.mark.skip(reason="malformed upstream entry")] if op in NOT_RUNNABLE else []
    return [pytest.param(name, index, id=f"{name}-{index}-{entry[0]}", marks=marks(entry[0]))
            for name in LISTS for index, entry in enumerate(getattr(lists, name))]


def _openreg_entry(name: str, index: int, amp_dtype: torch.dtype):
    """(op, args, kwargs, expected output dtype or None) of one list entry, on
    openreg, its low-precision inputs in amp_dtype. The lists hold float16
    inputs, written for float16 autocast; a bfloat16 run gets them in
    bfloat16 (as PyTorch's CPU lists have them), since the promote policy
    refuses a float16 input in a bfloat16 region, on CUDA as here."""
    torch.manual_seed(index)
    entry = getattr(AutocastTestLists(torch.device("openreg")), name)[index]
    op, args, extra = entry[0], _low_precision_as(entry[1], amp_dtype), entry[2:]
    kwargs = extra[0] if extra and isinstance(extra[0], dict) else {}
    out_type = extra[0] if extra and isinstance(extra[0], torch.dtype) else None
    return op, args, kwargs, out_type


def _low_precision_as(value, amp_dtype):
    if isinstance(value, torch.Tensor):
        return value.to(amp_dtype) if value.dtype == torch.float16 else value
    if isinstance(value, (list, tuple)):
        return type(value)(_low_precision_as(v, amp_dtype) for v in value)
    return value


def _cast(value, dtype):
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _identical(first, second) -> bool:
    if isinstance(first, torch.Tensor):
        return first.dtype == second.dtype and torch.equal(first.cpu(), second.cpu())
    if isinstance(first, collections.abc.Iterable) and not isinstance(first, str):
        return all(_identical(f, s) for f, s in zip(first, second, strict=True))
    return first == second


def _calls(op, args, kwargs, module):
    """The variants of op that exist: module.op(*args) and args[0].op(*args[1:])."""
    calls = []
    if module is not None and hasattr(module, op):
        calls.append(lambda a: getattr(module, op)(*a, **kwargs))
    if hasattr(torch.Tensor, op):
        calls.append(lambda a: getattr(a[0], op)(*a[1:], **kwargs))
    assert calls, f"{op} is neither a function of {module} nor a Tensor method"
    return calls


@pytest.mark.parametrize("amp_dtype", AMP_DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize(("list_name", "index"), _entries())
def test_autocast_matches_a_manually_cast_run(list_name, index, amp_dtype):
    module, run_as = LISTS[list_name]
    run_as = run_as or amp_dtype
    op, args, kwargs, out_type = _openreg_entry(list_name, index, amp_dtype)
    out_type = out_type or run_as
    calls = _calls(op, args, kwargs, module)
    with torch.autocast("openreg", dtype=amp_dtype):
        outputs = [call(args) for call in calls]
        with torch.autocast("openreg", enabled=False):
            control = calls[0](_cast(args, run_as))
    for output in outputs:
        if isinstance(output, torch.Tensor):
            assert output.device.type == "openreg"
            assert output.dtype == out_type, f"autocast {op} gave {output.dtype}, expected {out_type}"
    assert all(_identical(outputs[0], other) for other in outputs[1:]), f"{op}: function and method differ"
    assert type(outputs[0]) is type(control)
    assert _identical(outputs[0], control), f"{op}: autocast result differs from the manually cast run"


@pytest.mark.parametrize("amp_dtype", AMP_DTYPES, ids=["fp16", "bf16"])
def test_einsum_runs_in_the_autocast_dtype(amp_dtype):
    a, b = torch.randn(2, 3, 4, 5, device="openreg"), torch.randn(2, 6, 4, 5, device="openreg")
    with torch.autocast("openreg", dtype=amp_dtype):
        out = torch.einsum("bkhd,bqhd->bqkh", a, b)
        with torch.autocast("openreg", enabled=False):
            control = torch.einsum("bkhd,bqhd->bqkh", a.to(amp_dtype), b.to(amp_dtype))
    assert out.dtype == amp_dtype
    assert torch.equal(out.cpu(), control.cpu())


@pytest.mark.parametrize("amp_dtype", AMP_DTYPES, ids=["fp16", "bf16"])
def test_banned_operators_refuse_with_cudas_message(amp_dtype):
    for op, args, module in AutocastTestLists(torch.device("openreg")).banned:
        with torch.autocast("openreg", dtype=amp_dtype):
            with pytest.raises(RuntimeError, match="unsafe to autocast"):
                getattr(module, op)(*args)
        # Outside the region (and in a disabled one) the operator runs and matches the CPU.
        expected = getattr(module, op)(*(a.cpu() for a in args))
        torch.testing.assert_close(getattr(module, op)(*args).cpu(), expected)
        with torch.autocast("openreg", dtype=amp_dtype), torch.autocast("openreg", enabled=False):
            torch.testing.assert_close(getattr(module, op)(*args).cpu(), expected)


def test_float16_is_the_default_autocast_dtype():
    a = torch.randn(4, 4, device="openreg")
    with torch.autocast("openreg"):
        assert torch.get_autocast_dtype("openreg") == torch.float16
        assert (a @ a).dtype == torch.float16


def test_weight_cast_cache_reuses_the_cast_of_a_leaf_parameter():
    weight = torch.randn(8, 8, device="openreg", requires_grad=True)
    x = torch.randn(8, 8, device="openreg")
    with torch.autocast("openreg", cache_enabled=True):
        first, second = torch.mm(x, weight), torch.mm(x, weight)
        # The cached float16 copy of the weight is shared by both products'
        # graphs: one cast node, reached from both.
        assert first.grad_fn.next_functions[1][0] is second.grad_fn.next_functions[1][0]
    with torch.autocast("openreg", cache_enabled=False):
        first, second = torch.mm(x, weight), torch.mm(x, weight)
        assert first.grad_fn.next_functions[1][0] is not second.grad_fn.next_functions[1][0]
    (first.float().sum() + second.float().sum()).backward()
    expected = 2 * (x.cpu().half().t() @ torch.ones(8, 8, dtype=torch.half)).float()
    torch.testing.assert_close(weight.grad.cpu(), expected)


def test_nested_and_disabled_regions_restore_the_outer_state():
    a = torch.randn(4, 4, device="openreg")
    with torch.autocast("openreg", dtype=torch.float16):
        with torch.autocast("openreg", dtype=torch.bfloat16):
            assert (a @ a).dtype == torch.bfloat16
            with torch.autocast("openreg", enabled=False):
                assert (a @ a).dtype == torch.float32
            assert (a @ a).dtype == torch.bfloat16
        assert (a @ a).dtype == torch.float16
        assert torch.exp(a.half()).dtype == torch.float32
    assert (a @ a).dtype == torch.float32
    assert not torch.is_autocast_enabled("openreg")


def test_autocast_on_openreg_leaves_cpu_operators_alone():
    a = torch.randn(4, 4)
    with torch.autocast("openreg"):
        assert (a @ a).dtype == torch.float32


class _ScaledMatmul(torch.autograd.Function):
    """A custom op that wants float32 inputs inside any autocast region."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="openreg", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        ctx.saw_dtype = a.dtype
        ctx.saw_autocast = torch.is_autocast_enabled("openreg")
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="openreg")
    def backward(ctx, grad):
        ctx.backward_autocast = torch.is_autocast_enabled("openreg")
        a, b = ctx.saved_tensors
        return grad @ b.t(), a.t() @ grad


def test_custom_fwd_casts_inputs_and_custom_bwd_restores_the_region():
    a = torch.randn(4, 4, device="openreg", dtype=torch.float16, requires_grad=True)
    b = torch.randn(4, 4, device="openreg", requires_grad=True)
    with torch.autocast("openreg"):
        out = _ScaledMatmul.apply(a, b)
        # cast_inputs: forward ran in float32 with autocast off inside it.
        assert out.dtype == torch.float32
        assert out.grad_fn.saw_dtype == torch.float32 and not out.grad_fn.saw_autocast
    out.sum().backward()
    assert out.grad_fn.backward_autocast is False  # forward ran with autocast off: so does backward
    torch.testing.assert_close(out.cpu(), a.detach().cpu().float() @ b.detach().cpu())
    torch.testing.assert_close(b.grad.cpu(), a.detach().cpu().float().t() @ torch.ones(4, 4))


class _RecordsAutocast(torch.autograd.Function):
    """A custom op without cast_inputs: it runs in the caller's region."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="openreg")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="openreg")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ctx.backward_autocast = torch.is_autocast_enabled("openreg")
        ctx.backward_dtype = torch.get_autocast_dtype("openreg")
        return grad @ b.t(), a.t() @ grad


def test_custom_bwd_runs_backward_in_the_forward_region():
    a = torch.randn(4, 4, device="openreg", requires_grad=True)
    with torch.autocast("openreg", dtype=torch.bfloat16):
        out = _RecordsAutocast.apply(a, a.detach())
    assert out.dtype == torch.bfloat16  # the matmul inside forward was autocast
    out.float().sum().backward()
    assert out.grad_fn.backward_autocast is True
    assert out.grad_fn.backward_dtype == torch.bfloat16
    assert a.grad.dtype == torch.float32
