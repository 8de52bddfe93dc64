"""The generic device executor: operators without an openreg kernel run on the
device, asynchronously, in place on device memory, compared with the CPU."""

from __future__ import annotations

import contextlib

import openreg_runtime
import pytest
import torch
import torch.nn.functional as F
import torch_openreg


@pytest.fixture(autouse=True)
def no_classic_fallback():
    # Everything here must run on the device: a silent CPU fallback would pass.
    torch.openreg.reset_fallback_counts()
    yield
    assert torch.openreg.fallback_counts() == {}


def on_device(*tensors):
    return [t.to("openreg") for t in tensors]


def assert_matches_cpu(result, expected):
    if isinstance(expected, torch.Tensor):
        assert result.device.type == "openreg"
        assert result.dtype == expected.dtype and result.shape == expected.shape
        torch.testing.assert_close(result.cpu(), expected, equal_nan=True)
    elif isinstance(expected, (tuple, list)):
        assert len(result) == len(expected)
        for r, e in zip(result, expected, strict=True):
            assert_matches_cpu(r, e)
    else:
        assert result == expected


CASES = {
    "unary": lambda a, b: torch.sin(a).exp().tanh(),
    "binary_broadcast": lambda a, b: a * b[:1] - 2.5,
    "type_promotion": lambda a, b: a.to(torch.int32) + b.to(torch.float64),
    "half_and_python_scalar": lambda a, b: a.half() * 2.5,
    "comparison_and_where": lambda a, b: torch.where(a > b, a, b),
    "clamp_lerp_addcmul": lambda a, b: torch.addcmul(torch.lerp(a, b, 0.3), a, b.clamp(-1, 1)),
    "reductions": lambda a, b: (a.sum(1), a.mean(0), a.var(1), a.amax(0), a.logsumexp(1)),
    "max_with_indices": lambda a, b: a.max(1),
    "cumsum": lambda a, b: a.cumsum(1),
    "mm_and_addmm": lambda a, b: torch.addmm(a[:, :4], a, b.t()[:, :4]),
    "softmax": lambda a, b: torch.log_softmax(a, 1),
    "cat_stack": lambda a, b: (torch.cat([a, b], 1), torch.stack([a, b])),
    "flip_roll_repeat": lambda a, b: a.flip(0).roll(2, 1).repeat(2, 1),
    "pad": lambda a, b: F.pad(a, (1, 2, 0, 1), value=3.0),
    "gather_scatter": lambda a, b: a.scatter_add(1, a.argsort(1), b).gather(1, a.argsort(1)),
    "index_select_add": lambda a, b: a.index_select(0, torch.tensor([2, 0]).to(a.device)),
    "masked_fill": lambda a, b: a.masked_fill(b > 0, -1.0),
    "tril_triu": lambda a, b: a.tril() + b.triu(1),
    "sort_topk": lambda a, b: (a.sort(1), a.topk(2, 1)),
    "mse_loss": lambda a, b: F.mse_loss(a, b),
    "cross_entropy": lambda a, b: F.cross_entropy(a, b.argmax(1)),
    "layer_norm": lambda a, b: F.layer_norm(a, (5,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_operators_match_cpu(name):
    torch.manual_seed(0)
    a, b = torch.randn(6, 5), torch.randn(6, 5)
    expected = CASES[name](a, b)
    result = CASES[name](*on_device(a, b))
    assert_matches_cpu(result, expected)


@pytest.mark.parametrize("name", ["nonzero", "masked_select", "boolean_index", "unique"])
def test_data_dependent_shapes_synchronise_and_match_cpu(name):
    cases = {
        "nonzero": lambda a: torch.nonzero(a > 0),
        "masked_select": lambda a: torch.masked_select(a, a > 0),
        "boolean_index": lambda a: a[a > 0],
        "unique": lambda a: torch.unique(a.round(), return_counts=True),
    }
    a = torch.randn(7, 3)
    assert_matches_cpu(cases[name](a.to("openreg")), cases[name](a))


def test_non_tensor_results_come_back_to_the_host():
    a = torch.randn(4, 4)
    assert torch.equal(a.to("openreg"), a.to("openreg").clone()) is True
    assert torch.equal(a.to("openreg"), (a + 1).to("openreg")) is False


def test_launch_returns_before_the_kernel_runs(gate):
    x = torch.arange(8.0).to("openreg")
    torch.erf(x)  # the first call with float32 runs synchronously (Note [Dtypes a CPU kernel does not implement])
    torch.openreg.synchronize()
    torch.openreg.reset_fallback_counts()
    g = gate(torch.openreg.current_stream())
    y = torch.erf(x)  # queued behind the gate: the host is not held up
    assert not g.finished.is_set()
    assert not torch.openreg.current_stream().query()
    g.open()
    torch.testing.assert_close(y.cpu(), torch.erf(torch.arange(8.0)))
    assert torch.openreg.executor_counts()["aten::erf.out"] == (1, 0)


def test_in_place_and_out_variants_write_device_memory():
    a, b = torch.randn(5, 5), torch.randn(5, 5)
    x, y = on_device(a, b)
    x.mul_(y).add_(1)
    torch.testing.assert_close(x.cpu(), a * b + 1)
    out = torch.empty(0, device="openreg")
    torch.atan2(x, y, out=out)
    torch.testing.assert_close(out.cpu(), torch.atan2(a * b + 1, b))
    view = x[1:4, ::2]
    view.zero_()
    expected = a * b + 1
    expected[1:4, ::2] = 0
    torch.testing.assert_close(x.cpu(), expected)


def test_view_operators_alias_their_input():
    x = torch.arange(10.0).to("openreg")
    windows = x.unfold(0, 4, 2)
    x.add_(100)
    torch.testing.assert_close(windows.cpu(), torch.arange(10.0).add(100).unfold(0, 4, 2))


def test_convolution_forward_and_backward_match_cpu():
    torch.manual_seed(0)
    image, kernel, bias = torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3), torch.randn(4)
    grads = {}
    for device in ("cpu", "openreg"):
        leaves = [t.to(device).detach().requires_grad_() for t in (image, kernel, bias)]
        out = F.conv2d(leaves[0], leaves[1], leaves[2], stride=2, padding=1)
        out.square().sum().backward()
        grads[device] = [out.detach().cpu()] + [leaf.grad.cpu() for leaf in leaves]
    for got, want in zip(grads["openreg"], grads["cpu"], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_random_operators_follow_openreg_seeds():
    probs = torch.rand(4, 6).to("openreg")

    def draw():
        g = torch.Generator(device="openreg").manual_seed(7)
        return (torch.multinomial(probs, 3, generator=g).cpu(),
                torch.randperm(9, device="openreg", generator=g).cpu(),
                F.dropout(torch.ones(64, device="openreg"), 0.5).cpu())

    torch.openreg.manual_seed(3)
    first = draw()
    torch.openreg.manual_seed(3)
    second = draw()
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)
    assert sorted(first[1].tolist()) == list(range(9))


def test_a_host_side_error_leaves_the_device_usable():
    # masked_select has no shape function: it runs synchronously, and the
    # CPU kernel's error reaches the caller as it is, without a device fault.
    x = torch.randn(3, 4).to("openreg")
    with pytest.raises(RuntimeError, match="must match"):
        torch.masked_select(x, torch.ones(5, 5, dtype=torch.bool, device="openreg"))
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)


def test_a_device_side_error_is_sticky_and_names_the_kernel():
    x = torch.randn(3, 4).to("openreg")
    bad = torch.full((3, 1), 9, dtype=torch.int64, device="openreg")
    result = torch.gather(x, 1, bad)  # out of range: found only when the kernel runs
    with pytest.raises(RuntimeError, match="kernel 'aten::gather' failed") as failure:
        result.cpu()
    assert "sticky" in str(failure.value)
    openreg_runtime.device_reset()  # the simulator's recovery, unlike a real GPU
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)


def test_executor_can_be_switched_off_for_debugging():
    x = torch.ones(3, device="openreg")
    torch.openreg.set_device_executor_enabled(False)
    try:
        torch.erf(x).cpu()
        assert torch.openreg.fallback_counts() == {"aten::erf.out": 1}
    finally:
        torch.openreg.set_device_executor_enabled(True)
        torch.openreg.reset_fallback_counts()


def test_lazy_conjugate_views_reach_the_cpu_kernel():
    # x.mH is a view with the conjugate bit set; the kernel must see it.
    x = torch.randn(3, 3, dtype=torch.complex64)
    device = x.to("openreg")
    assert_matches_cpu(device.mH @ device, x.mH @ x)


def test_synchronous_out_variants_are_sized_on_the_host():
    # linalg_lstsq.out has no shape function: it runs synchronously, and its
    # out= tensors are sized after the CPU kernel has decided their shapes.
    a, b = torch.randn(5, 3), torch.randn(5, 2)
    result = torch.linalg.lstsq(a.to("openreg"), b.to("openreg"))
    torch.testing.assert_close(result.solution.cpu(), torch.linalg.lstsq(a, b).solution,
                               rtol=1e-4, atol=1e-4)


def test_an_out_variant_without_a_meta_kernel_takes_its_functional_twins_answer():
    """Note [An out= operator without a Meta kernel]: _scaled_mm.out, which Inductor's code for float8
    training calls, has none where _scaled_mm has one. With the twin's answer it is sized without the CPU
    kernel, so timing-only mode runs it, and it matches the CPU."""
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::_scaled_mm.out", "Meta")
    a = torch.randn(64, 128).to(torch.float8_e4m3fn)
    b = torch.randn(32, 128).to(torch.float8_e4m3fn).t()
    scale = torch.tensor(0.5)
    expected = torch._scaled_mm(a, b, scale, scale, out_dtype=torch.bfloat16)
    out = torch.empty(0, dtype=torch.bfloat16, device="openreg")  # resized, as the out= kernel resizes it
    torch._scaled_mm(*on_device(a, b, scale, scale), out_dtype=torch.bfloat16, out=out)
    assert_matches_cpu(out, expected)
    torch.openreg.set_timing_only(True)
    try:
        skipped = torch.empty(0, dtype=torch.bfloat16, device="openreg")
        torch._scaled_mm(*on_device(a, b, scale, scale), out_dtype=torch.bfloat16, out=skipped)
        torch.openreg.synchronize()
    finally:
        torch.openreg.set_timing_only(False)
    assert skipped.shape == (64, 32)


def test_conjugated_and_negated_views_copy_everywhere():
    x = torch.randn(4, dtype=torch.complex64)
    device = x.to("openreg")
    torch.testing.assert_close(device.conj().cpu(), x.conj())  # to the host
    torch.testing.assert_close(device.conj().to("openreg:1").cpu(), x.conj())  # across devices
    copy = torch.empty_like(device)
    copy.copy_(device.conj())  # within a device
    torch.testing.assert_close(copy.cpu(), x.conj())
    torch.testing.assert_close(device.conj().resolve_conj().cpu(), x.conj())
    torch.testing.assert_close(torch._neg_view(device).cpu(), -x)


def test_embedding_bag_takes_the_cpu_kernels_shapes():
    # Its Meta kernel promises an offset2bag the CPU kernel leaves empty when
    # no backward needs it: the executor runs it synchronously instead of
    # failing the device kernel.
    torch.manual_seed(0)
    weight, indices, offsets = torch.randn(10, 3), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4])
    results = {}
    for device in ("cpu", "openreg"):
        w = weight.to(device).detach().requires_grad_()
        with torch.no_grad():
            inference = F.embedding_bag(indices.to(device), w, offsets.to(device), mode="max")
        out = F.embedding_bag(indices.to(device), w, offsets.to(device), mode="mean")
        out.square().sum().backward()
        results[device] = (inference.cpu(), out.detach().cpu(), w.grad.cpu())
    torch.testing.assert_close(results["openreg"], results["cpu"])
    torch.openreg.synchronize()  # no sticky error was left behind


def test_an_out_kernel_that_refuses_leaves_no_warning_behind(capfd):
    # binary_cross_entropy.out resizes its output on the way, which a view of
    # device memory refuses; the functional kernel then runs. The out= kernel's
    # "output ... was resized" warning is about an attempt the user never made.
    x, target = torch.rand(3, 4), torch.rand(3, 4)
    loss = F.binary_cross_entropy(x.to("openreg"), target.to("openreg"))
    torch.testing.assert_close(loss.cpu(), F.binary_cross_entropy(x, target))
    assert "resized" not in capfd.readouterr().err


NORMALISATIONS = {
    "layer_norm": lambda x, w, b: F.layer_norm(x, (6,), w, b),
    "group_norm": lambda x, w, b: F.group_norm(x, 2, w, b),
    "batch_norm": lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
    # float32 weights on a reduced-precision input: float32 statistics on the CPU
    "group_norm_float32_weights": lambda x, w, b: F.group_norm(x, 2, w.float(), b.float()),
}


@contextlib.contextmanager
def host_threads(count: int):
    """PyTorch's intra-op thread count for CPU code run by the test itself."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(NORMALISATIONS))
def test_normalisations_run_the_cpu_kernels_forward_and_backward(name, dtype):
    # native_layer_norm and native_group_norm have composite kernels that
    # PyTorch would use for openreg (Note [Composite kernels the executor
    # replaces]); in float16/bfloat16 the CPU keeps layer and batch norm
    # statistics in the input's dtype, which Meta does not promise. Running
    # the CPU's own kernels gives its results to the bit, when the CPU runs
    # them on as many threads: the CPU's reductions round differently with
    # another thread count. With the speed layers these small kernels run on
    # one (Note [The threads of a kernel]); the plain path runs every kernel
    # on the host's threads.
    kernel_threads = 1 if torch_openreg._C._fast_paths_enabled() else torch.get_num_threads()
    torch.manual_seed(0)
    operands = [torch.randn(4, 6, dtype=dtype), torch.randn(6, dtype=dtype), torch.randn(6, dtype=dtype)]
    results = {}
    for device in ("cpu", "openreg"):
        with host_threads(kernel_threads if device == "cpu" else torch.get_num_threads()):
            leaves = [t.detach().to(device).requires_grad_() for t in operands]
            out = NORMALISATIONS[name](*leaves)
            out.backward(torch.linspace(-1, 1, 24, dtype=dtype).reshape(4, 6).to(device))
            results[device] = [out.detach().cpu()] + [leaf.grad.cpu() for leaf in leaves]
    torch.testing.assert_close(results["openreg"], results["cpu"], rtol=0, atol=0)
    torch.openreg.synchronize()  # and no sticky error


def test_addr_runs_the_cpu_kernel():
    torch.manual_seed(0)
    operands = (torch.randn(3, 4, dtype=torch.half), torch.randn(3, dtype=torch.half), torch.randn(4, dtype=torch.half))
    torch.addr(*on_device(*operands), beta=0.5, alpha=2)  # the first call with these dtypes is synchronous
    torch.openreg.reset_fallback_counts()  # and the executor's counts
    result = torch.addr(*on_device(*operands), beta=0.5, alpha=2)
    torch.testing.assert_close(result.cpu(), torch.addr(*operands, beta=0.5, alpha=2), rtol=0, atol=0)
    assert torch.openreg.executor_counts()["aten::addr"] == (1, 0)  # one kernel, not a decomposition


def test_grouped_mm_is_one_kernel_that_reads_its_offsets_on_the_device():
    """A Mixture of Experts' layer (transformers' grouped_mm experts): PyTorch's composite loops over the
    groups and copies the offsets to the host; openreg runs it as one kernel, as CUDA does, forward and
    backward, with the CPU's results."""
    torch.manual_seed(0)
    tokens, weights = torch.randn(24, 16, dtype=torch.bfloat16), torch.randn(3, 16, 8, dtype=torch.bfloat16)
    offsets = torch.tensor([5, 13, 24], dtype=torch.int32)  # CUDA wants 16-byte strides
    results = {}
    for device in ("cpu", "openreg"):
        leaves = [t.detach().to(device).requires_grad_() for t in (tokens, weights)]
        torch.openreg.reset_fallback_counts()  # and the executor's counts
        out = torch._grouped_mm(*leaves, offs=offsets.to(device))
        out.backward(torch.ones_like(out))
        results[device] = [out.detach().cpu()] + [leaf.grad.cpu() for leaf in leaves]
    torch.testing.assert_close(results["openreg"], results["cpu"], rtol=0, atol=0)
    # One kernel each for the forward and both gradients (a first call with new dtypes runs synchronously).
    assert sum(torch.openreg.executor_counts()["aten::_grouped_mm"]) == 3


# ------------------------------------------- Meta answers the CPU contradicts


def test_multilabel_margin_loss_of_a_1d_input_has_the_cpu_shape_at_every_call():
    # Found through PyTorch's ModuleInfo database: Meta promised [1] for a
    # 1-D input with reduction='none' (the CPU returns []), and every call
    # after the first, synchronous one took the Meta answer.
    target = torch.tensor([1, 2, -1, 0])
    x = torch.randn(4, requires_grad=True)
    expected = F.multilabel_margin_loss(x, target, reduction="none")
    for _ in range(3):
        got = F.multilabel_margin_loss(x.detach().to("openreg").requires_grad_(), target.to("openreg"),
                                       reduction="none")
        assert got.shape == expected.shape == torch.Size([])
        torch.testing.assert_close(got.cpu(), expected.detach())


def _norm_arguments(name: str, x: torch.Tensor, weight: torch.Tensor | None, device: str) -> tuple:
    """The arguments of the aten norm operator `name` for input x (channels in dim 1, 6 per row)."""
    weight = None if weight is None else weight.to(device)
    statistic = weight.dtype if weight is not None else x.dtype
    if name == "layer_norm":
        return x.to(device), [x.shape[-1]], weight, None, 1e-5
    if name == "group_norm":
        return x.to(device), weight, None, x.shape[0], x.shape[1], x.shape[-1], 2, 1e-5
    if name == "batch_norm, training":
        return x.to(device), weight, None, None, None, True, 0.1, 1e-5
    running = torch.zeros(x.shape[1], dtype=statistic, device=device), torch.ones(x.shape[1], dtype=statistic,
                                                                                  device=device)
    return x.to(device), weight, None, *running, False, 0.1, 1e-5


NORMS = {"layer_norm": "native_layer_norm", "group_norm": "native_group_norm",
         "batch_norm, training": "native_batch_norm", "batch_norm, eval": "native_batch_norm"}


@pytest.mark.parametrize("name", list(NORMS))
@pytest.mark.parametrize("dtype, weight_dtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32),
                                                 (torch.bfloat16, None), (torch.float32, torch.float32)])
def test_norm_statistics_are_the_cpu_s_and_the_calls_are_queued(name, dtype, weight_dtype, recwarn):
    # The CPU keeps the statistics in the weight's dtype (the input's without
    # one) and returns none outside training, where Meta promises float32 and
    # a channel's worth: the executor corrects Meta's answer (withCpuStatistics
    # in ExecutorRules) instead of running every such call synchronously.
    op = getattr(torch.ops.aten, NORMS[name])
    counted = f"aten::{NORMS[name]}"
    x = torch.randn(4, 4, 6, dtype=dtype)
    weight = None if weight_dtype is None else torch.randn(6 if name == "layer_norm" else 4, dtype=weight_dtype)
    expected = op(*_norm_arguments(name, x, weight, "cpu"))
    queued_before = torch.openreg.executor_counts().get(counted, (0, 0))[0]
    for _ in range(3):
        got = op(*_norm_arguments(name, x, weight, "openreg"))
        for result, wanted in zip(got, expected, strict=True):
            assert result.dtype == wanted.dtype and result.shape == wanted.shape
            assert torch.equal(result.cpu(), wanted)
    # At most the first call of these dtypes waits for its result (the executor's check).
    assert torch.openreg.executor_counts()[counted][0] - queued_before >= 2
    assert counted not in torch.openreg.meta_disagreements()
    assert not [w for w in recwarn if "disagrees with its Meta kernel" in str(w.message)]


def test_a_reduced_precision_layer_norm_runs_in_timing_only_mode():
    x = torch.randn(8, 32, dtype=torch.bfloat16, device="openreg")
    weight = torch.randn(32, dtype=torch.bfloat16, device="openreg")
    torch.openreg.set_timing_only(True)
    try:
        out = F.layer_norm(x, (32,), weight)
        torch.openreg.synchronize()
    finally:
        torch.openreg.set_timing_only(False)
    assert out.shape == x.shape and out.dtype == torch.bfloat16


_WRONG_META = torch.library.Library("openreg_wrong_meta", "DEF")
_WRONG_META.define("total(Tensor x) -> Tensor")
_WRONG_META.impl("total", lambda x: x.sum(), "CPU")
_WRONG_META.impl("total", lambda x: x.new_empty([1]), "Meta")  # the CPU returns a 0-dim tensor


def test_an_operator_whose_meta_kernel_disagrees_runs_synchronously_from_then_on(recwarn, capfd):
    # Note [A Meta kernel that disagrees with the CPU]: the first call's
    # check catches the disagreement, so no later call is sized by Meta.
    x = torch.arange(4.0, device="openreg")
    first = torch.ops.openreg_wrong_meta.total(x)
    # The warning is PyTorch's (TORCH_WARN): a Python warning where the call
    # came through a C++ kernel, printed by c10 after this Python CPU kernel.
    said = " ".join(str(w.message) for w in recwarn) + capfd.readouterr().err
    assert "openreg_wrong_meta::total disagrees with its Meta kernel" in said
    later = [torch.ops.openreg_wrong_meta.total(x) for _ in range(3)]
    for result in (first, *later):
        assert result.shape == torch.Size([]) and result.item() == 6.0
    count, difference = torch.openreg.meta_disagreements()["openreg_wrong_meta::total"]
    assert count == 1 and "promised Float[1], the CPU kernel produced Float[]" in difference
    assert torch.openreg.executor_counts()["openreg_wrong_meta::total"] == (0, 4)


# ----------------------------------------------- operators called by kernels


def test_a_kernel_may_call_an_operator_whose_dtype_never_ran_before():
    # The first call of a dtype waits for its result on the host (Note
    # [Dtypes a CPU kernel does not implement]); from inside a kernel it
    # cannot wait for its own stream, so it is queued instead, and the
    # device stays usable.
    a = torch.arange(4, dtype=torch.int16, device="openreg")
    made = []
    openreg_runtime.launch_kernel(torch.openreg.current_stream().native_handle,
                                  lambda: made.append(a * 3), "calls_an_operator")
    torch.openreg.synchronize()
    assert made[0].cpu().tolist() == [0, 3, 6, 9]


def test_a_kernel_calling_an_operator_that_must_wait_gets_a_clear_error():
    # nonzero's output shape depends on the data: it must wait for it.
    a = torch.arange(4, device="openreg")
    seen = []

    def body():
        try:
            torch.nonzero(a)
        except RuntimeError as error:
            seen.append(str(error))

    openreg_runtime.launch_kernel(torch.openreg.current_stream().native_handle, body, "calls_nonzero")
    torch.openreg.synchronize()  # the kernel caught the error: no sticky error
    assert "aten::nonzero must wait on the host" in seen[0] and "inside a kernel" in seen[0]


def test_named_tensors_are_refused_as_on_the_cpu():
    # PyTorch 2.13 has no named tensors (no names= argument, no rename):
    # openreg gives the CPU's own answer.
    for device in ("cpu", "openreg"):
        with pytest.raises(TypeError, match="unexpected keyword argument 'names'"):
            torch.empty([2, 3, 4, 5], device=device, names=["N", "C", "H", "W"])
    assert not hasattr(torch.Tensor, "rename")
