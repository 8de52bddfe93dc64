"""Timing-only mode from PyTorch (torch.openreg.set_timing_only; the runtime's Note [Timing-only
mode]): programs run for their shapes, allocations and kernels, never for their values; a floating-point
value read to the host reads as NaN, and whatever else needs a value raises, naming the operator and the
mode; a device of any capacity exists on this machine, and
running out of it raises torch.OutOfMemoryError where the caching allocator would."""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


@pytest.fixture
def timing_only():
    torch.openreg.set_timing_only(True)
    try:
        yield
    finally:
        torch.openreg.set_timing_only(False)


def test_a_training_step_runs_for_its_shapes_and_kernels(timing_only):
    assert torch.openreg.is_timing_only()
    with torch.device("openreg"):
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(8, 32, device="openreg"), torch.randint(0, 4, (8,), device="openreg")
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    assert loss.shape == () and model[0].weight.grad.shape == (64, 32)
    assert len(optimizer.state) == 4 and optimizer.state[model[0].weight]["exp_avg"].device.type == "openreg"
    torch.openreg.synchronize()


@pytest.mark.parametrize("needs_a_value, names", [
    (lambda t: t.long().item(), "aten::_local_scalar_dense (.item()"),
    (lambda t: bool(t > 0), "aten::_local_scalar_dense (.item(), or bool()"),
    (lambda t: t.long().cpu(), "a copy from an openreg tensor to the CPU"),
    (lambda t: torch.nonzero(t), "aten::nonzero (its output shape depends on the data"),
    (lambda t: t[t > 0], "(its output shape depends on the data"),
    (lambda t: print(t.long()), "a copy from an openreg tensor to the CPU"),
], ids=["integer item", "bool of a comparison", "integer copy", "nonzero", "boolean index", "integer print"])
def test_what_needs_a_value_raises_and_names_it(timing_only, needs_a_value, names):
    t = torch.rand(1, device="openreg")  # a random fill: values the host does not know
    with pytest.raises(RuntimeError, match="timing-only mode") as failure:
        needs_a_value(t)
    assert names in str(failure.value) and "values of device memory" in str(failure.value)


def test_a_floating_point_value_read_is_nan_with_one_warning_per_line(timing_only):
    """Note [Values read in timing-only mode]: a log line's .item() and a copy to the CPU read NaN,
    counted, with a warning once per line of the program that reads."""
    before = torch.openreg.values_read_as_nan()
    t = torch.rand(3, device="openreg")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        logged = [t.sum().item() for _ in range(3)]  # one line, three reads
        host = t.cpu()
    assert all(math.isnan(value) for value in logged) and host.isnan().all()
    assert torch.openreg.values_read_as_nan() - before == 4
    assert len([w for w in caught if "NaN stands for it" in str(w.message)]) == 2
    torch.openreg.set_timing_only(False)
    assert math.isnan((torch.tensor(logged, device="openreg") * 2).sum().item())  # NaN after the mode, too


# Note [Printing a tensor in timing-only mode] (torch_openreg/_printing.py)
def test_print_formats_a_copy_on_the_host_nan_where_never_computed(timing_only):
    before = torch.openreg.values_read_as_nan()
    weight = nn.Parameter(torch.rand(2, 3, device="openreg"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        printed = [repr(weight * 2) for _ in range(2)]  # one line, two reads
        parameter = repr(weight)
    assert printed[0] == printed[1] == ("tensor([[nan, nan, nan],\n        [nan, nan, nan]], device='openreg:0', "
                                        "grad_fn=<MulBackward0>)")
    assert parameter.startswith("Parameter containing:\ntensor([[nan, nan, nan],") and "requires_grad=True" in parameter
    assert torch.openreg.values_read_as_nan() - before == 3
    lines = [w.lineno for w in caught if "nan stands for them" in str(w.message)]
    assert len(lines) == 2 and all(w.filename == __file__ for w in caught)  # the printing lines', once each
    assert repr(torch.tensor([1, 2, 3], device="openreg")) == "tensor([1, 2, 3], device='openreg:0')"  # known


def test_print_of_a_large_tensor_reads_only_its_summary(timing_only, monkeypatch):
    before, read = torch.openreg.values_read_as_nan(), []
    copy_to_cpu = torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "cpu", lambda t, *args, **kwargs: read.append(t.numel()) or copy_to_cpu(t))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        printed = repr(torch.rand(1024, 1024, device="openreg"))  # 4 MiB: more than the host ever knows
    assert printed == repr(torch.full((1024, 1024), float("nan"))).replace(")", ", device='openreg:0')")
    assert read == [6 * 6] and torch.openreg.values_read_as_nan() - before == 1  # the 3 + 3 rows and columns shown


# Note [Values the host knows in timing-only mode] (csrc/runtime/TimingOnlyMemory.h)
def test_values_copied_from_the_host_are_read_exactly_until_other_work_changes_them(timing_only):
    reads_as_nan = torch.openreg.values_read_as_nan()
    shapes = torch.tensor([[4096, 1024], [1024, 1]], device="openreg")
    assert shapes.tolist() == [[4096, 1024], [1024, 1]] and shapes[1, 0].item() == 1024
    assert shapes.t().cpu().tolist() == [[4096, 1024], [1024, 1]]  # a view reads through its strides
    assert torch.tensor(3.5, device="openreg").item() == 3.5
    assert torch.openreg.values_read_as_nan() == reads_as_nan  # none of them stood in by NaN
    shapes.add_(torch.randint_like(shapes, 2))  # queued over values the host does not know: unknown again
    with pytest.raises(RuntimeError, match="This value is a Long"):
        shapes.tolist()


def test_kernels_over_known_values_compute_them_on_the_host(timing_only):
    """broadcast_object_list sums the objects' lengths, all_gather_object compares them: the results
    of kernels whose operands are all known are known too, whichever route the operator takes."""
    lengths = torch.tensor([3, 9, 4], device="openreg")
    assert torch.sum(lengths).item() == 16 and lengths.max().item() == 9
    assert bool(lengths[1] > lengths[2]) and lengths.cumsum(0).tolist() == [3, 12, 16]
    scale = torch.tensor([0.5, 2.0], device="openreg")  # floats: the host fast path's operands
    assert (scale * scale + scale).tolist() == [0.75, 6.0]
    scale.mul_(4.0)
    assert scale.tolist() == [2.0, 8.0]
    rows = lengths[None, :].expand(2, 3)  # an operand whose elements share memory, as on the device
    assert (rows * torch.tensor([[1], [2]], device="openreg")).tolist() == [[3, 9, 4], [6, 18, 8]]
    assert torch.zeros(2, dtype=torch.long, device="openreg").tolist() == [0, 0]  # a fill, from its scalar
    product = lengths * torch.randint(0, 2, (3,), device="openreg")  # random: not known
    product[:2].fill_(1)  # part of it, written: the rest is still unknown
    with pytest.raises(RuntimeError, match="This value is a Long"):
        product.tolist()


def test_a_known_tensor_grown_by_resize_keeps_its_values(timing_only):
    pickled = torch.tensor([7, 8, 9], dtype=torch.uint8, device="openreg")
    pickled.resize_(5)  # all_gather_object grows each rank's bytes to the largest rank's
    assert pickled[:3].tolist() == [7, 8, 9]


def test_only_small_copies_that_fill_their_tensor_s_memory_are_known(timing_only):
    large = torch.zeros(2**18 + 1, dtype=torch.int32).to("openreg")  # over a MiB: only queued
    half = torch.empty(4, dtype=torch.long, device="openreg")
    half[:2].copy_(torch.tensor([1, 2]))  # the rest of its memory is unknown
    for t in (large, half):
        with pytest.raises(RuntimeError, match="timing-only mode, which computes none"):
            t[0].item()


def test_known_values_never_reach_work_computed_after_the_mode():
    torch.openreg.set_timing_only(True)
    known = torch.tensor([1.0, 2.0], device="openreg")
    assert known.tolist() == [1.0, 2.0]
    torch.openreg.set_timing_only(False)
    with pytest.raises(RuntimeError, match="never computed"):  # the copy moved no bytes
        known.sum()
    with pytest.raises(RuntimeError, match="never computed"):
        known.cpu()


def test_strict_mode_raises_for_every_value_read():
    torch.openreg.set_timing_only(True, strict=True)
    try:
        t = torch.rand(3, device="openreg")
        for read in (lambda: t.sum().item(), t.cpu):
            with pytest.raises(RuntimeError, match="needs values of device memory"):
                read()
    finally:
        torch.openreg.set_timing_only(False)
    assert torch.ones(3, device="openreg").sum().item() == 3.0


def test_the_cpu_fallback_needs_values_too(timing_only):
    t = torch.ones(2, device="openreg")
    torch.openreg.set_device_executor_enabled(False)  # every operator without a kernel takes the fallback
    try:
        with pytest.raises(RuntimeError, match="aten::erfinv.*, which has no openreg kernel .* timing-only mode"):
            torch.erfinv(t)
    finally:
        torch.openreg.set_device_executor_enabled(True)


def test_an_operator_whose_meta_kernel_refuses_its_arguments_is_refused_saying_so(timing_only):
    """_grouped_mm's Meta kernel takes bf16 only, as CUDA's kernel does; the CPU's takes fp32 too. Without
    Meta's answer timing-only mode has no output shape: the refusal quotes Meta's, not 'depends on the data'."""
    tokens, weights = torch.randn(16, 16, device="openreg"), torch.randn(2, 16, 8, device="openreg")
    offsets = torch.tensor([8, 16], dtype=torch.int32, device="openreg")
    with pytest.raises(RuntimeError, match=r"aten::_grouped_mm \(its Meta kernel, which gives its output shape "
                                           r"without computing, refused these arguments: .*BF16") as refused:
        torch._grouped_mm(tokens, weights, offs=offsets)
    assert "depends on the data" not in str(refused.value)
    assert torch._grouped_mm(tokens.bfloat16(), weights.bfloat16(), offs=offsets).shape == (16, 8)


def test_an_operator_pinned_to_the_cpu_is_launched_as_the_device_would_launch_it(timing_only):
    """histc, pinned to the CPU (PerOperatorFallback.cpp), as Mixtral's router calls it: the CPU has no
    values to compute from, so the executor launches it, its bins sized by Meta (Note [An operator pinned
    to the CPU in timing-only mode]); OPENREG_FALLBACK=error still refuses it."""
    t = torch.rand(64, device="openreg")
    torch.openreg.reset_fallback_counts()
    with torch.openreg.record_activity() as recording:
        bins = torch.histc(t, bins=8, min=0, max=1)
    assert bins.shape == (8,) and bins.device.type == "openreg" and torch.openreg.fallback_counts() == {}
    launched = [recording.operators[r.external_correlation_id].name for r in recording.activity if r.kind == "launch"]
    assert launched == ["aten::histc"]
    torch.openreg.set_fallback_mode("error")
    try:
        with pytest.raises(NotImplementedError, match="aten::histc"):
            torch.histc(t, bins=8)
    finally:
        torch.openreg.set_fallback_mode("warn")


def test_switching_back_computes_values_again():
    torch.openreg.set_timing_only(True)
    skipped = torch.ones(4, device="openreg") * 3  # queued in timing-only mode: never computed
    torch.openreg.set_timing_only(False)
    computed = torch.ones(4, device="openreg") * 3
    assert computed.cpu().tolist() == [3.0] * 4
    del skipped


def test_a_device_of_a_profile_s_capacity_runs_out_where_the_allocator_would(python):
    # 80 GiB on this machine: parameters and activations are reserved, never touched; the allocator's
    # rounding and caching decide where it runs out, and the message gives capacity and usage.
    code = """
import resource, torch
held = [torch.empty(10 << 30, dtype=torch.uint8, device="openreg") for _ in range(7)]  # 70 GiB
try:
    torch.empty(12 << 30, dtype=torch.uint8, device="openreg")
except torch.OutOfMemoryError as error:
    message = str(error)
    print("OOM", "total capacity of 80 GiB" in message and "70 GiB is allocated" in message or message)
print(torch.openreg.memory_allocated() >> 30, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 20)
"""
    result = python.run(code, env={"OPENREG_TIMING_ONLY": "1", "OPENREG_DEVICE_MEMORY": "80GiB"})
    lines = result.stdout.split("\n")
    assert lines[0] == "OOM True", result.stdout
    allocated, resident_gib = map(int, lines[1].split())
    assert allocated == 70 and resident_gib < 2


# Note [Memory timing-only mode never computed] (csrc/runtime/TimingOnlyMemory.h): what the mode
# made holds no values, and real work reading it is refused, naming what made it.
def test_a_tensor_made_in_timing_only_mode_is_refused_for_real_naming_its_maker():
    old_sevens = torch.full((65536,), 7.0, device="openreg")
    del old_sevens  # its block goes back to the cache, 7s and all
    torch.openreg.set_timing_only(True)
    ones = torch.ones(65536, device="openreg")  # fill_ queued, never run: the block still holds 7s
    torch.openreg.set_timing_only(False)
    for read in (lambda: ones.sum(), lambda: ones.cpu(), lambda: ones + 1, lambda: ones[:10].clone()):
        with pytest.raises(RuntimeError, match=r"whose values were never computed: it was made in timing-only "
                                               r"mode by aten::fill_"):
            read()
    assert torch.ones(65536, device="openreg").sum().item() == 65536.0  # memory made for real is fine


def test_a_dlpack_export_of_memory_never_computed_is_refused_in_either_mode():
    """A tensor imported from DLPack has no allocator block to carry the mark: its reads would go
    unchecked, so the export is refused, by Tensor.__dlpack__ (torch.from_dlpack) and to_dlpack."""
    torch.openreg.set_timing_only(True)
    try:
        threes = torch.ones(4, device="openreg") * 3
        with pytest.raises(RuntimeError, match="a DLPack export .* never computed: it was made in timing-only mode "
                                               "by aten::mul"):
            torch.from_dlpack(threes)
    finally:
        torch.openreg.set_timing_only(False)
    with pytest.raises(RuntimeError, match="a DLPack export .* made in timing-only mode by aten::mul"):
        torch.utils.dlpack.to_dlpack(threes)
    threes.fill_(3.0)  # written whole for real: computed again
    assert torch.from_dlpack(threes).cpu().tolist() == [3.0] * 4


def test_a_tensor_overwritten_for_real_after_the_region_is_usable_again():
    torch.openreg.set_timing_only(True)
    made = [torch.ones(1000, device="openreg") for _ in range(4)]
    torch.openreg.set_timing_only(False)
    made[0].fill_(2.0)
    made[1].copy_(torch.arange(1000.0))
    made[2].zero_()
    torch.add(torch.ones(1000, device="openreg"), 1, out=made[3])
    assert [t.sum().item() for t in made] == [2000.0, sum(range(1000)), 0.0, 2000.0]
    torch.openreg.set_timing_only(True)
    half = torch.ones(1000, device="openreg")
    torch.openreg.set_timing_only(False)
    half[:500].fill_(1.0)  # half of it written for real: the rest is still unknown
    with pytest.raises(RuntimeError, match="never computed"):
        half.sum()


def test_a_predicted_adam_step_then_real_training_fails_clearly_instead_of_diverging():
    torch.manual_seed(0)
    cpu_model = nn.Linear(16, 1)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    model = copy.deepcopy(cpu_model).to("openreg")

    def trainer(model, x, y):
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

        def step():
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            return loss
        return optimizer, step

    optimizer, step = trainer(model, x.to("openreg"), y.to("openreg"))
    torch.openreg.set_timing_only(True)
    step()  # Adam's state (zeros_like) is made here, never computed; the parameters keep their values
    torch.openreg.set_timing_only(False)
    with pytest.raises(RuntimeError, match="never computed: it was made in timing-only mode by aten::"):
        step()
    optimizer.state.clear()  # made again, for real: training goes on exactly as on the CPU
    _, cpu_step = trainer(cpu_model, x, y)
    expected = [cpu_step().item() for _ in range(3)]
    assert [step().item() for _ in range(3)] == pytest.approx(expected, rel=1e-5)


def test_a_thread_computing_for_real_during_a_region_gets_an_error_never_a_wrong_value():
    import threading
    region_open, computed = threading.Event(), threading.Event()
    result = {}

    def computing_thread():
        region_open.wait(timeout=30)
        result["tensor"] = torch.full((256,), 3.0, device="openreg") * 2
        computed.set()

    thread = threading.Thread(target=computing_thread)
    thread.start()
    torch.openreg.set_timing_only(True)
    region_open.set()
    computed.wait(timeout=30)
    torch.openreg.set_timing_only(False)
    thread.join(timeout=30)
    with pytest.raises(RuntimeError, match="never computed"):
        result["tensor"].sum().item()
