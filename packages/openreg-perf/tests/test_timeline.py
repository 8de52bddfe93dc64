"""The replay (timeline.py) on traces written by hand: stream order, event waits, overlap of streams,
host waits, the host's own time, collectives and determinism. No openreg device needed."""

from __future__ import annotations

import pytest
from openreg_perf.capture import HostWait, Trace, Work
from openreg_perf.collectives import collective_seconds
from openreg_perf.costs import OpCall
from openreg_perf.model import kernel_seconds
from openreg_perf.profile import load_profile
from openreg_perf.report import kernel_records, region_report
from openreg_perf.timeline import replay

H100 = load_profile("h100-sxm")
MS = 1_000_000  # ns
F32 = "float"


def mm(n: int) -> OpCall:
    return OpCall("aten::mm", [[n, n], [n, n]], [F32, F32], [None, None])


class Program:
    """Builds a Trace as a program would leave it: each call queues work at the next microsecond."""

    def __init__(self):
        self.trace = Trace(region_ns=(0, 10**12))
        self.now = 0

    def queue(self, kind, name, stream=1, device=0, op=None, waits_for=0, gap_ns=1000) -> Work:
        self.now += gap_ns
        work = Work(len(self.trace.work) + 1, kind, name, device, stream, self.now, (self.now, self.now), op,
                    waits_for)
        self.trace.work.append(work)
        return work

    def kernel(self, op=None, **where) -> Work:
        return self.queue("kernel", op.name if op else "kernel", op=op, **where)

    def wait(self, name, stream, waits_for=0, device=0, took_ns=5 * MS) -> HostWait:
        self.now += 1000
        wait = HostWait(name, device, stream, (self.now, self.now + took_ns), waits_for)
        self.trace.waits.append(wait)
        self.now += took_ns
        return wait


def by_correlation(timeline):
    return {item.work.correlation: item for item in timeline.items}


def test_work_on_one_stream_runs_in_order_for_its_predicted_time():
    program = Program()
    a, b = program.kernel(mm(4096)), program.kernel(mm(256))
    items = by_correlation(replay(program.trace, H100))
    first, second = items[a.correlation], items[b.correlation]
    assert first.seconds == pytest.approx(kernel_seconds(first.cost, None, H100).seconds)
    assert second.start_s == pytest.approx(first.end_s)  # queued long before the first ended: waits for it
    assert first.category == "compute" and first.bound == "compute"


def test_a_kernel_never_starts_before_the_event_it_waits_for():
    program = Program()
    long = program.kernel(mm(8192), stream=1)
    record = program.queue("event_record", "eventRecord", stream=1)
    program.queue("stream_wait", "streamWaitEvent", stream=2, waits_for=record.correlation)
    after = copy(program, "memcpyDtoH", 1, stream=2)
    independent = copy(program, "memcpyHtoD", 1, stream=3)
    items = by_correlation(replay(program.trace, H100))
    assert items[after.correlation].start_s >= items[long.correlation].end_s
    # Two streams with no dependency overlap.
    assert items[independent.correlation].start_s < items[long.correlation].end_s


def test_kernels_of_two_streams_take_the_device_one_after_the_other():
    """Note [Streams share the device]: each kernel's time is the whole device's, so eight products on eight
    streams take as long as on one (they ran 5.8 times faster than the datasheet's roofline before); a
    collective and a copy run beside them."""
    def region(streams):
        program = Program()
        products = [program.kernel(mm(4096), stream=1 + n % streams) for n in range(8)]
        beside = [collective(program, "allreduce", "c10d::allreduce_", 64, stream=20),
                  copy(program, "memcpyHtoD", 64, stream=21)]
        return program, products, beside

    one, _, _ = region(1)
    program, products, beside = region(8)
    timeline = replay(program.trace, H100, ranks=8)
    items = by_correlation(timeline)
    assert timeline.total_s == pytest.approx(replay(one.trace, H100, ranks=8).total_s)
    for first, second in zip(products, products[1:], strict=False):
        assert items[second.correlation].start_s >= items[first.correlation].end_s
    for work in beside:
        assert items[work.correlation].start_s < items[products[0].correlation].end_s


def test_a_wait_for_an_event_recorded_before_the_region_does_not_wait():
    program = Program()
    program.queue("stream_wait", "streamWaitEvent", stream=2, waits_for=12345)
    k = program.kernel(mm(64), stream=2)
    # It starts when the host has queued it: one launch after the wait.
    assert by_correlation(replay(program.trace, H100))[k.correlation].start_s == pytest.approx(
        H100.host.launch_s)


def test_the_host_resumes_when_the_predicted_work_it_waits_for_ends():
    program = Program()
    big = program.kernel(mm(8192))
    program.wait("orStreamSynchronize", stream=1, took_ns=500 * MS)  # the simulator took 500 ms
    after = program.kernel(mm(64))
    timeline = replay(program.trace, H100)
    items = by_correlation(timeline)
    (wait,) = timeline.waits
    # The predicted end and the target host's synchronisation, not the simulator's 500 ms.
    assert wait.end_s == pytest.approx(items[big.correlation].end_s + H100.host.synchronize_s)
    assert items[after.correlation].start_s >= wait.end_s
    assert timeline.total_s < 0.1


def test_a_device_synchronize_waits_for_every_stream_of_its_device_only():
    program = Program()
    slow = program.kernel(mm(8192), stream=5)
    program.kernel(mm(16384), device=1, stream=9)
    program.wait("orDeviceSynchronize", stream=0, device=0)
    timeline = replay(program.trace, H100, host="launches")
    assert timeline.waits[0].end_s == pytest.approx(by_correlation(timeline)[slow.correlation].end_s)


def test_the_profiles_host_prices_launches_operators_calls_steps_and_synchronisations():
    """host="profile" (the default): each launch host.launch_s, each further operator recorded since
    the previous event host.operator_s, each further outermost call among them host.outer_call_s more,
    each module called host.module_call_s, each optimizer step begun host.optimizer_step_s, each
    synchronisation host.synchronize_s after the work."""
    program = Program()
    program.kernel(OpCall("aten::relu", [[4]], [F32]))
    second = program.kernel(OpCall("aten::relu", [[4]], [F32]), gap_ns=2 * MS)
    # Four operators recorded before the second launch: two calls from Python, each with a child.
    starts = [second.queued_ns - 400, second.queued_ns - 300, second.queued_ns - 200, second.queued_ns - 100]
    program.trace.operator_starts_ns = starts
    program.trace.outermost_starts_ns = [starts[0], starts[2]]
    program.trace.optimizer_steps_ns = [starts[0] - 50]
    program.trace.module_calls_ns = [starts[0] - 20, starts[2] - 20]
    program.wait("orDeviceSynchronize", stream=0)
    timeline = replay(program.trace, H100)
    host = H100.host
    assert host.outer_call_s > 0 and host.module_call_s > 0 and host.optimizer_step_s > 0
    expected = (host.launch_s + 3 * host.operator_s + host.outer_call_s + 2 * host.module_call_s
                + host.optimizer_step_s)
    assert by_correlation(timeline)[second.correlation].start_s == pytest.approx(expected)
    (wait,) = timeline.waits
    assert wait.end_s == pytest.approx(max(wait.start_s, timeline.items[-1].end_s) + host.synchronize_s)


def test_the_default_prediction_does_not_depend_on_this_machines_timing():
    """The same program, its host 100 times slower here (a busy machine), predicts the same."""
    def program_with_gaps(gap_ns: int) -> Trace:
        program = Program()
        for n in (64, 512, 64, 2048):
            program.kernel(mm(n), gap_ns=gap_ns)
            program.trace.operator_starts_ns.append(program.now - gap_ns // 2)
        program.wait("orDeviceSynchronize", stream=0, took_ns=gap_ns * 7)
        program.kernel(mm(64), gap_ns=gap_ns)
        return program.trace

    fast, slow = replay(program_with_gaps(2_000), H100), replay(program_with_gaps(200_000), H100)
    assert fast.total_s == slow.total_s
    assert replay(program_with_gaps(2_000), H100, host="this-machine").total_s < \
        replay(program_with_gaps(200_000), H100, host="this-machine").total_s


def test_an_unknown_host_model_is_refused():
    with pytest.raises(ValueError, match="profile, this-machine, launches"):
        replay(Trace(), H100, host="measured")


def test_the_host_as_measured_here_keeps_its_own_time_but_not_the_instruments():
    program = Program()
    program.kernel(mm(64))
    second = program.kernel(mm(64), gap_ns=2 * MS)  # the host spent 2 ms in between (its Python)
    items = by_correlation(replay(program.trace, H100, host="this-machine"))
    assert items[second.correlation].start_s == pytest.approx(2e-3)
    # The same gap, during which 1000 operators were recorded at 1 us each: 1 ms of it was the profiler's.
    program.trace.operator_starts_ns = list(range(program.now - 1000 * 1000, program.now, 1000))
    program.trace.recording_cost_per_operator_s = 1e-6
    assert by_correlation(replay(program.trace, H100, host="this-machine"))[second.correlation].start_s == \
        pytest.approx(1e-3, rel=1e-3)
    # And two memory samples of 0.2 ms each in it (memory.py): 0.6 ms left of the host's own.
    program.trace.host_pauses_ns = [(program.now - 1500 * 1000, program.now - 1300 * 1000),
                                    (program.now - 500 * 1000, program.now - 300 * 1000)]
    assert by_correlation(replay(program.trace, H100, host="this-machine"))[second.correlation].start_s == \
        pytest.approx(6e-4, rel=1e-3)
    # Two threads' samples overlapping by 0.1 ms, and one under way when the gap begins: each instant
    # of the gap is taken out once, and only its part inside the gap.
    program.trace.host_pauses_ns = [(program.now - 1500 * 1000, program.now - 1300 * 1000),
                                    (program.now - 1400 * 1000, program.now - 1200 * 1000),
                                    (program.now - 2100 * 1000, program.now - 1900 * 1000)]
    assert by_correlation(replay(program.trace, H100, host="this-machine"))[second.correlation].start_s == \
        pytest.approx(6e-4, rel=1e-3)


def test_every_launch_costs_the_host_at_least_the_profiles_launch_overhead():
    program = Program()
    kernels = [program.kernel(OpCall("aten::relu", [[4]], [F32]), gap_ns=10) for _ in range(5)]
    items = by_correlation(replay(program.trace, H100, host="this-machine"))
    host = 4 * H100.host.launch_s  # the fifth launch, 10 ns apart as measured
    device = sum(items[k.correlation].seconds for k in kernels[:-1])
    assert items[kernels[-1].correlation].start_s == pytest.approx(max(host, device))
    assert items[kernels[-1].correlation].start_s >= host


def test_collectives_take_the_alpha_beta_time_of_their_rank_count():
    program = Program()
    op = OpCall("c10d::allreduce_", [[[1 << 20]]], ["TensorList"])
    k = program.kernel(op)
    program.trace.work[-1].name = "allreduce"
    nbytes = (1 << 20) * 4
    for ranks in (2, 8, 64):
        item = by_correlation(replay(program.trace, H100, ranks=ranks))[k.correlation]
        assert item.category == "collective"
        assert item.seconds == pytest.approx(collective_seconds("all_reduce", nbytes, ranks, H100))
    # Priced by the collective model: not listed among the operators the default rule priced.
    assert region_report(replay(program.trace, H100, ranks=8), H100, {}).unknown_operators == []


def test_a_collective_says_whether_its_links_or_its_steps_held_it():
    """A large all_reduce in the NVSwitch moves each rank's buffer once, at the switch fraction of the link's
    rate; a small one is its steps' latency (it said "latency, 0.0 %" for both)."""
    def replayed(mib, ranks):
        program = Program()
        work = collective(program, "allreduce", "c10d::allreduce_", mib, stream=1)
        return by_correlation(replay(program.trace, H100, ranks=ranks))[work.correlation]

    large, small = replayed(1024, 8), replayed(0, 8)  # 1 GiB, and nothing
    switch = H100.collectives.switch_fraction
    assert large.bound == "link" and 0.95 * switch < large.achieved_fraction <= switch  # less its setup
    assert small.bound == "latency" and small.achieved_fraction < 0.01
    across = replayed(1024, 16)  # across nodes, through each node's eight NICs: at the protocol's fraction
    assert across.bound == "link"
    assert 0.9 * H100.collectives.simple_fraction < across.achieved_fraction <= H100.collectives.simple_fraction


def collective(program, name, op_name, mib, stream):
    work = program.kernel(OpCall(op_name, [[[mib << 18]]], ["TensorList"]), stream=stream)  # float32
    work.name = name
    return work


def copy(program, name, mib, stream, device=0):
    return program.queue("memcpy", name, stream=stream, device=device,
                         op=OpCall("aten::copy_", [[mib << 18], [mib << 18], []], [F32, F32, "Scalar"],
                                   ["", "", False]))


# Note [Transfers share their link] (timeline.py)
def test_transfers_on_other_streams_share_their_link_and_other_work_does_not():
    program = Program()
    gather = collective(program, "allgather", "c10d::allgather_", 256, stream=1)
    scatter = collective(program, "reduce_scatter_tensor", "c10d::reduce_scatter_tensor_", 256, stream=2)
    upload = copy(program, "memcpyHtoD", 64, stream=3)
    second_upload = copy(program, "memcpyHtoD", 64, stream=4)
    download = copy(program, "memcpyDtoH", 64, stream=5)  # the other direction: a link of its own
    other_device = copy(program, "memcpyHtoD", 64, stream=3, device=1)
    compute = program.kernel(mm(4096), stream=6)
    items = by_correlation(replay(program.trace, H100, ranks=8))
    item = lambda work: items[work.correlation]  # noqa: E731
    assert item(scatter).start_s == pytest.approx(item(gather).end_s)  # two groups' streams: one link
    assert item(second_upload).start_s == pytest.approx(item(upload).end_s)
    for independent in (download, other_device, compute, upload):
        assert item(independent).start_s < item(gather).end_s
    # Each transfer still takes its own time: the last ends when the link has moved all their bytes.
    assert item(scatter).seconds == pytest.approx(collective_seconds("reduce_scatter", 256 << 20, 8, H100))


def test_an_unknown_operator_gets_the_default_cost_and_is_listed():
    program = Program()
    program.kernel(OpCall("aten::special_bessel_j0", [[1024]], [F32]))
    timeline = replay(program.trace, H100)
    (record,) = kernel_records(timeline)
    assert not record.known and record.bytes == 2 * 1024 * 4 and record.flops == 0
    assert region_report(timeline, H100, {}).unknown_operators == ["aten::special_bessel_j0"]


def test_a_backends_own_setup_in_a_collective_is_no_operators_work():
    """openreg-distributed clears and fills its control block (a memset, a copy) in a group's first
    collective: work the collective's operator did not describe, so not priced by a default rule."""
    program = Program()
    gather = OpCall("c10d::allgather_", [[[[16]] * 2], [[16]]], ["TensorList", "TensorList"])
    setup = [program.queue("memset", "memset", op=gather), program.queue("memcpy", "memcpyHtoD", op=gather)]
    collective(program, "allgather", "c10d::allgather_", 1, stream=1)
    timeline = replay(program.trace, H100, ranks=2)
    items = by_correlation(timeline)
    assert [items[work.correlation].cost for work in setup] == [None, None]
    assert region_report(timeline, H100, {}).unknown_operators == []


def test_an_empty_region_is_predicted_as_nothing():
    timeline = replay(Trace(), H100)
    assert timeline.total_s == 0.0 and timeline.items == []
    report = region_report(timeline, H100, {})
    assert report.total_s == 0.0 and report.flops == 0.0 and report.hardware_flop_utilisation == 0.0


def test_the_prediction_is_deterministic():
    program = Program()
    for n in (64, 512, 4096):
        program.kernel(mm(n), stream=1 + n % 3)
    program.wait("orDeviceSynchronize", stream=0)
    first, second = replay(program.trace, H100), replay(program.trace, H100)
    assert [(i.start_s, i.seconds) for i in first.items] == [(i.start_s, i.seconds) for i in second.items]


def test_exposed_communication_is_what_no_compute_overlaps():
    program = Program()
    program.kernel(mm(8192), stream=1)
    op = OpCall("c10d::allreduce_", [[[64 << 20]]], ["TensorList"])
    program.kernel(op, stream=2)
    program.trace.work[-1].name = "allreduce"
    timeline = replay(program.trace, H100, ranks=8)
    report = region_report(timeline, H100, {})
    compute = next(i for i in timeline.items if i.category == "compute")
    comm = next(i for i in timeline.items if i.category == "collective")
    overlap = max(0.0, min(compute.end_s, comm.end_s) - max(compute.start_s, comm.start_s))
    assert report.communication_s == pytest.approx(comm.seconds)
    assert report.exposed_communication_s == pytest.approx(comm.seconds - overlap)


def test_fp8_work_on_a_chip_without_fp8_runs_and_is_measured_at_its_fp32_rate():
    a100 = load_profile("a100-sxm-80gb")
    assert a100.peak.fp8_flops_per_s == 0 and a100.peak_of("fp8") == a100.peak.fp32_flops_per_s
    program = Program()
    fp8 = "c10::Float8_e4m3fn"
    program.kernel(OpCall("aten::_scaled_mm", [[4096, 4096], [4096, 4096], [], [], [], [], [], []],
                          [fp8, fp8, F32, F32, "", "", "Scalar", "Scalar"], [None] * 6 + [15, False]))
    timeline = replay(program.trace, a100)
    report = region_report(timeline, a100, {})
    utilisation = report.flops / (report.total_s * a100.peak.fp32_flops_per_s)
    assert report.hardware_flop_utilisation == pytest.approx(utilisation)
    assert 0 < report.hardware_flop_utilisation < 1


def test_flop_utilisation_counts_tf32_work_against_the_tf32_peak():
    """An FP32 product on TF32 units is measured against the TF32 peak, never the FP32 one (which
    would put utilisation over 100 %)."""
    program = Program()
    program.kernel(mm(8192))
    program.trace.tf32_matmul = True
    timeline = replay(program.trace, H100)
    report = region_report(timeline, H100, {})
    (item,) = timeline.items
    assert item.precision == "tf32"
    utilisation = report.flops / (report.total_s * H100.peak.tf32_flops_per_s)
    assert report.hardware_flop_utilisation == pytest.approx(utilisation)
    assert report.hardware_flop_utilisation < 1


@pytest.mark.parametrize(("name", "more", "flops_per_element"), [
    ("aten::_foreach_mul_", [([], "Scalar", 0.9)], 1),
    ("aten::_amp_foreach_non_finite_check_and_unscale_", [([], F32, None), ([], F32, None)], 2),  # GradScaler's
])
def test_a_foreach_call_is_one_multi_tensor_kernel(name, more, flops_per_element):
    """Note [Multi-tensor kernels]: the per-tensor launches of one _foreach_ call on openreg are priced
    as CUDA's multi_tensor_apply runs them: the whole operator in its first launch, a kernel of its
    own per further chunk, no host launch for the others. 200 tensors of one list: two chunks of 110."""
    shapes = [[1024]] * 200
    call = OpCall(name, [shapes] + [shape for shape, _, _ in more], ["TensorList"] + [dtype for _, dtype, _ in more],
                  [None] + [value for _, _, value in more])
    program = Program()
    launches = [program.kernel(call) for _ in range(200)]
    for work in launches:
        work.call = 7  # one call of the operator
    after = program.kernel(mm(64))
    timeline = replay(program.trace, H100)
    items = by_correlation(timeline)
    assert set(items) == {launches[0].correlation, after.correlation}
    merged = items[launches[0].correlation]
    alone = kernel_seconds(merged.cost, None, H100).seconds
    chip = H100.chip  # two kernels queued: each at least the stream's floor, the second its own floor more
    assert merged.seconds == pytest.approx(max(2 * chip.kernel_floor_s, alone + chip.graph_floor_s))
    assert items[after.correlation].start_s == pytest.approx(max(H100.host.launch_s, merged.end_s))
    (record,) = [r for r in kernel_records(timeline) if r.op == name]
    assert record.flops == 200 * 1024 * flops_per_element
