"""Misuse is reported clearly: bad device indices, tensors of different
devices in one operation, streams of another device; and several Python
threads driving their own streams at once."""

from __future__ import annotations

import re
import threading

import pytest
import torch

OUT_OF_RANGE = r"Got openreg device index 9, but there are 2 openreg devices"
SAME_DEVICE = "Expected all tensors to be on the same device"
PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1


# ------------------------------------------------------------ device indices


@pytest.mark.parametrize("action", [
    lambda: torch.empty(2, device="openreg:9"),
    lambda: torch.zeros(2, 2, device=torch.device("openreg", 9)),
    lambda: torch.ones(3).to("openreg:9"),
    lambda: torch.openreg.set_device(9),
    lambda: torch.openreg.device(9).__enter__(),
    lambda: torch.openreg.Stream(9),
    lambda: torch.Stream("openreg:9"),
    lambda: torch.openreg.current_stream(9),
    lambda: torch.openreg.default_stream(9),
    lambda: torch.openreg.synchronize(9),
    lambda: torch.openreg.memory_allocated(9),
    lambda: torch.openreg.get_rng_state(9),
    lambda: torch.accelerator.set_device_index(9),
    lambda: torch.Generator(device="openreg:9"),
], ids=["empty", "zeros", "to", "set_device", "device_ctx", "Stream", "torch.Stream",
        "current_stream", "default_stream", "synchronize", "memory_allocated", "rng_state",
        "accelerator", "Generator"])
def test_bad_device_index_is_a_clear_error(action):
    # torch.AcceleratorError, a RuntimeError, as CUDA raises for an invalid
    # device ordinal: code written for CUDA that catches RuntimeError works.
    with pytest.raises(torch.AcceleratorError, match=OUT_OF_RANGE):
        action()
    assert torch.openreg.current_device() == 0


@pytest.mark.parametrize("action", [
    lambda: torch.openreg.get_device_properties(9),
    lambda: torch.openreg.get_device_properties(-1),
    lambda: torch.openreg.get_device_name(-1),
    lambda: torch.openreg.get_device_capability(9),
    lambda: torch.openreg.mem_get_info(9),
    lambda: torch.openreg.set_per_process_memory_fraction(0.5, 9),
    lambda: torch.openreg.get_per_process_memory_fraction(9),
], ids=["properties", "properties_negative", "name_negative", "capability", "mem_get_info",
        "set_memory_fraction", "get_memory_fraction"])
def test_every_entry_point_raises_the_device_index_error(action):
    with pytest.raises(torch.AcceleratorError, match=r"Got openreg device index -?\d+, but there are 2"):
        action()


@pytest.mark.parametrize("action", [
    lambda: torch.openreg.set_device(5),
    lambda: torch.empty(1, device="openreg:9"),
], ids=["set_device", "empty"])
def test_bad_device_index_says_what_the_reference_backend_says(action):
    # PyTorch's tests for out-of-tree backends (written against the upstream
    # reference backend) match this sentence; the detail after it stays.
    with pytest.raises(RuntimeError, match=r"^The device index is out of range\. Got openreg device index \d"):
        action()


def test_bad_device_index_message_names_the_range():
    with pytest.raises(RuntimeError) as info:
        torch.empty(1, device="openreg:9")
    assert isinstance(info.value, torch.AcceleratorError)
    assert "valid indices 0 to 1" in str(info.value)
    assert "OPENREG_DEVICE_COUNT" in str(info.value)


# --------------------------------------------------------- mixing devices


def _pairs():
    a = torch.randn(3, 3)
    return a, torch.randn(3, 3)


@pytest.mark.parametrize("first, second", [
    ("openreg:0", "openreg:1"), ("openreg:1", "openreg:0"), ("openreg:0", "cpu"),
    ("cpu", "openreg:0"), ("openreg:1", "cpu"),
])
@pytest.mark.parametrize("op", [
    lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x @ y, lambda x, y: torch.mm(x, y),
    lambda x, y: torch.cat([x, y]), lambda x, y: torch.stack([x, y]),
    lambda x, y: torch.where(x > 0, x, y), lambda x, y: torch.addmm(x, x, y),
    lambda x, y: torch.maximum(x, y), lambda x, y: x.add_(y),
    lambda x, y: torch.nn.functional.linear(x, y),
    lambda x, y: x.index_select(0, y.long().abs().clamp(max=2)[0]),
], ids=["add", "mul", "matmul", "mm", "cat", "stack", "where", "addmm", "maximum", "add_",
        "linear", "index_select"])
def test_mixing_devices_is_rejected(op, first, second):
    a, b = _pairs()
    x, y = a.to(first), b.to(second)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        op(x, y)
    # The operands are untouched.
    assert torch.equal(x.cpu(), a) and torch.equal(y.cpu(), b)


def test_error_names_both_devices():
    with pytest.raises(RuntimeError) as info:
        torch.mm(torch.ones(2, 2, device="openreg:0"), torch.ones(2, 2, device="openreg:1"))
    assert "openreg:0" in str(info.value) and "openreg:1" in str(info.value)


def test_cpu_scalars_and_cpu_indices_are_accepted():
    x = torch.arange(6, dtype=torch.float32).to("openreg")
    cpu = torch.arange(6, dtype=torch.float32)
    scalar = torch.tensor(2.0)
    torch.testing.assert_close((x * scalar).cpu(), cpu * 2)
    torch.testing.assert_close(torch.maximum(x, scalar).cpu(), torch.maximum(cpu, scalar))
    torch.testing.assert_close(x[torch.tensor([0, 5])].cpu(), cpu[torch.tensor([0, 5])])
    x[torch.tensor([1, 2])] = torch.tensor(9.0)
    cpu[torch.tensor([1, 2])] = 9.0
    torch.testing.assert_close(x.cpu(), cpu)
    # Copies between devices are explicit and allowed.
    y = torch.empty(6, device="openreg:1")
    y.copy_(x)
    torch.testing.assert_close(y.cpu(), cpu)


def test_foreach_operators_work_per_device():
    tensors = [torch.ones(3, device="openreg:0"), torch.ones(2, device="openreg:1")]
    torch._foreach_add_(tensors, 1.0)
    assert [t.cpu().tolist() for t in tensors] == [[2.0] * 3, [2.0] * 2]


# ------------------------------------------------------ streams and devices


def _forged_stream() -> torch.Stream:
    """A stream of openreg:1 claiming to belong to openreg:0."""
    real = torch.openreg.Stream(1)
    return torch.Stream(stream_id=real.stream_id, device_index=0, device_type=PRIVATEUSE1)


@pytest.mark.parametrize("use", [
    lambda s: torch.openreg.set_stream(s),
    lambda s: torch.openreg.stream(s).__enter__(),
    lambda s: torch.accelerator.set_stream(s),
    lambda s: s.__enter__(),
], ids=["set_stream", "stream_ctx", "accelerator", "torch.Stream_ctx"])
def test_stream_of_another_device_is_rejected(use):
    forged = _forged_stream()
    with pytest.raises(RuntimeError, match="belongs to openreg:1, not to openreg:0"):
        use(forged)
    assert torch.openreg.current_stream(0) == torch.openreg.default_stream(0)
    assert torch.openreg.current_stream(1) == torch.openreg.default_stream(1)


def test_unknown_stream_is_rejected():
    bogus = torch.Stream(stream_id=987654, device_index=0, device_type=PRIVATEUSE1)
    with pytest.raises(RuntimeError, match="not a live stream"):
        torch.openreg.set_stream(bogus)
    assert torch.openreg.current_stream() == torch.openreg.default_stream()


@pytest.mark.parametrize("use", [
    lambda s: torch.openreg.set_stream(s),
    lambda s: torch.openreg.stream(s),
    lambda s: torch.openreg.StreamContext(s),
], ids=["set_stream", "stream", "StreamContext"])
def test_non_openreg_stream_is_rejected(use):
    with pytest.raises(ValueError, match="expected an openreg stream, got a stream of cpu"):
        use(torch.Stream("cpu"))


def test_event_recorded_on_a_stream_of_another_device_is_rejected():
    event = torch.Event("openreg:0")
    event.record(torch.openreg.Stream(0))
    with pytest.raises(RuntimeError, match="openreg"):
        event.record(torch.openreg.Stream(1))


# ------------------------------------------------------------------ threads


def test_threads_drive_their_own_streams_concurrently():
    errors: list[str] = []
    results: dict[tuple[int, int], bool] = {}
    start = threading.Barrier(4)

    def worker(index: int) -> None:
        device = index % 2
        try:
            torch.openreg.set_device(device)
            stream = torch.openreg.Stream()
            start.wait(timeout=30)
            with torch.openreg.stream(stream):
                assert torch.openreg.current_stream() == stream
                for step in range(15):
                    host = torch.arange(4096, dtype=torch.float32) + 100 * index + step
                    pinned = host.pin_memory()
                    on_device = pinned.to("openreg", non_blocking=True)
                    other = on_device.to(f"openreg:{1 - device}").to(f"openreg:{device}")
                    result = (other * 2 - 1).sin().sum()
                    wide = on_device.to(torch.float64)
                    back = torch.empty(4096, dtype=torch.float64).pin_memory()
                    back.copy_(wide, non_blocking=True)
                    stream.synchronize()
                    expected = (host * 2 - 1).sin().sum()
                    results[(index, step)] = (
                        torch.allclose(result.cpu(), expected)
                        and torch.equal(back, host.double())
                        and on_device.device.index == device)
            assert torch.openreg.current_stream() == torch.openreg.default_stream(device)
        except Exception as error:  # reported by the main thread
            errors.append(f"thread {index}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert len(results) == 4 * 15 and all(results.values())
    # The main thread's state is untouched.
    assert torch.openreg.current_device() == 0
    assert torch.openreg.current_stream() == torch.openreg.default_stream()


def test_threads_share_the_caching_allocator():
    before = torch.openreg.memory_allocated(0)

    def churn() -> None:
        for _ in range(200):
            x = torch.empty(1000, device="openreg:0")
            del x

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert torch.openreg.memory_allocated(0) == before


# ------------------------------------- refusals that only the CPU kernel makes
# Note [Arguments a queued kernel could refuse] in ExecutorRules.cpp: these calls
# run synchronously, so the CPU kernel's refusal is raised at the call, as the
# CPU (and CUDA) raise it, and leaves no sticky error on the device.

HALF = torch.ones(2, 3, dtype=torch.half)
REFUSED_AT_THE_CALL = {
    "alpha overflows half": lambda t: torch.add(t, t[0], alpha=70000.0),
    "clamp bound overflows half": lambda t: t.clamp(min=-1e6),
    "fill value overflows half": lambda t: t.clone().fill_(1e6),
    "masked_fill value overflows half": lambda t: t.masked_fill(t > 0, -1e9),
    "exponent overflows half": lambda t: t.pow(1e6),
    "alpha overflows int8": lambda t: torch.add(t.to(torch.int8), t[0].to(torch.int8), alpha=1000),
    "sum of float8": lambda t: t.to(torch.float8_e4m3fn).sum((0, 1)),
    "float8 plus float8": lambda t: t.to(torch.float8_e4m3fn) + t.to(torch.float8_e4m3fn),
    # Note [Dtypes a CPU kernel does not implement]: refused by the CPU
    # kernel's dtype dispatch, which Meta does not know about.
    "silu of integers": lambda t: torch.nn.functional.silu(t.long()),
    "cumprod of bool": lambda t: torch.cumprod(t.bool(), 0, dtype=torch.bool),
}


@pytest.mark.parametrize("name", sorted(REFUSED_AT_THE_CALL))
def test_cpu_kernel_refusals_are_raised_at_the_call(name):
    operation = REFUSED_AT_THE_CALL[name]
    with pytest.raises((RuntimeError, NotImplementedError)) as on_cpu:
        operation(HALF)
    with pytest.raises(type(on_cpu.value), match=re.escape(str(on_cpu.value).splitlines()[0])):
        operation(HALF.to("openreg"))
    torch.openreg.synchronize()  # no sticky error: the device still works
    torch.testing.assert_close((HALF.to("openreg") * 2).cpu(), HALF * 2)


ACCEPTED_SYNCHRONOUSLY = {
    "lerp weight beyond half": lambda t: torch.lerp(t, t * 3, 1e6),
    "threshold beyond half": lambda t: torch.nn.functional.threshold(t, 1e6, 2.0),
    "abs of float8": lambda t: t.to(torch.float8_e4m3fn).abs().float(),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED_SYNCHRONOUSLY))
def test_calls_the_cpu_accepts_still_give_its_results(name):
    operation = ACCEPTED_SYNCHRONOUSLY[name]
    torch.testing.assert_close(operation(HALF.to("openreg")).cpu(), operation(HALF))


def test_infinite_scalars_stay_asynchronous():
    # -inf fits every floating dtype: attention masks must not synchronise
    # (once the first call with these dtypes has run).
    HALF.to("openreg").masked_fill(HALF.to("openreg") > 0, float("-inf"))
    torch.openreg.reset_fallback_counts()  # and the executor's counts
    HALF.to("openreg").masked_fill(HALF.to("openreg") > 0, float("-inf"))
    counts = torch.openreg.executor_counts()
    assert counts["aten::masked_fill_.Scalar"] == (1, 0)


def test_only_scalar_arguments_are_checked():
    # k is an int argument, never converted to the tensor's dtype: 300 does
    # not fit uint8, but the call stays asynchronous.
    values = torch.arange(1000).remainder(251).to(torch.uint8)
    torch.topk(values.to("openreg"), 300)  # the first call with these dtypes is synchronous
    torch.openreg.reset_fallback_counts()  # and the executor's counts
    result = torch.topk(values.to("openreg"), 300)
    assert torch.openreg.executor_counts()["aten::topk.values"] == (1, 0)
    torch.testing.assert_close(result.values.cpu(), torch.topk(values, 300).values)


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_dtypes_without_a_scalar_check_still_run():
    # complex32 is outside the usual dtype dispatch; its scalar check must
    # not refuse the call itself.
    x = torch.randn(3, dtype=torch.complex64).to(torch.complex32)
    torch.testing.assert_close((x.to("openreg") + 1).cpu(), x + 1)


# ------------------------------------- dedicated kernels check their devices


def _misplaced_operand_calls(other: str):
    """Each openreg kernel registered by hand, called with one operand on
    ``other`` (the CPU or the other device) and the rest on openreg:0."""
    aten = torch.ops.aten
    here = "openreg:0"
    x = torch.randn(1, 3, 8, 8, device=here)
    w = torch.randn(4, 3, 3, 3, device=here)
    grad_out = torch.ones(1, 4, 6, 6, device=here)
    q = torch.randn(1, 2, 4, 8, device=here)
    gates = torch.randn(3, 16, device=here)
    cx = torch.randn(3, 4, device=here)
    _, cy, lstm_workspace = aten._thnn_fused_lstm_cell(gates, gates, cx)
    _, gru_workspace = aten._thnn_fused_gru_cell(gates[:, :12], gates[:, :12], cx)
    conv_args = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    return {
        "convolution_weight": lambda: torch.nn.functional.conv2d(x, w.to(other)),
        "convolution_bias": lambda: torch.nn.functional.conv2d(x, w, torch.zeros(4, device=other)),
        "convolution_input": lambda: torch.nn.functional.conv2d(x.to(other), w),
        "convolution_backward": lambda: aten.convolution_backward(
            grad_out.to(other), x, w, [4], *conv_args, [True, True, True]),
        "fused_attention": lambda: aten._scaled_dot_product_fused_attention_overrideable(q, q, q.to(other)),
        "lstm_cell": lambda: aten._thnn_fused_lstm_cell(gates, gates.to(other), cx),
        "lstm_cell_backward": lambda: aten._thnn_fused_lstm_cell_backward_impl(
            cx.to(other), None, cx, cy, lstm_workspace, True),
        "gru_cell": lambda: aten._thnn_fused_gru_cell(gates[:, :12], gates[:, :12].to(other), cx),
        "gru_cell_backward": lambda: aten._thnn_fused_gru_cell_backward(cx.to(other), gru_workspace, True),
        "normal_generator": lambda: torch.empty(3, device=here).normal_(
            generator=torch.Generator(device="cpu")),
    }


@pytest.mark.parametrize("other", ["cpu", "openreg:1"])
def test_every_dedicated_kernel_refuses_a_misplaced_operand(other):
    # Each call is refused at once (a real device would fault), computes
    # nothing across devices, and leaves no sticky error behind.
    for name, call in _misplaced_operand_calls(other).items():
        if name == "normal_generator" and other != "cpu":
            continue  # any openreg generator may drive any openreg device, as on CUDA
        with pytest.raises(RuntimeError, match=f"{SAME_DEVICE}|expected an openreg generator") as info:
            call()
        assert str(torch.device(other)) in str(info.value), (name, str(info.value))
        torch.openreg.synchronize(0)
        torch.openreg.synchronize(1)
    assert (torch.ones(2, device="openreg") * 2).cpu().tolist() == [2.0, 2.0]
