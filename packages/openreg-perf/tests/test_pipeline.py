"""openreg_perf.pipeline: pipeline schedules played out over per-stage predictions, against the bubble
fractions worked out by hand for equal stages, small timelines worked out by hand, and stages
predicted from a real model without executing."""

from __future__ import annotations

import dataclasses

import pytest
from openreg_perf.collectives import collective_seconds
from openreg_perf.model import copy_seconds
from openreg_perf.pipeline import StageTimes, device_order, play, predict_pipeline
from openreg_perf.profile import load_profile


def equal(count: int, forward: float = 1.0, backward: float = 2.0, nbytes: float = 0.0) -> list[StageTimes]:
    return [StageTimes(forward, backward, nbytes) for _ in range(count)]


def bubble(operations, devices: int) -> float:
    end = max(op.end_s for op in operations)
    busy = sum(op.end_s - op.start_s for op in operations) / devices
    return 1 - busy / end


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("devices", "micro_batches"), [(2, 1), (4, 4), (4, 16), (8, 8), (8, 32)])
def test_equal_stages_leave_the_bubble_of_p_minus_one_over_m_plus_p_minus_one(schedule, devices, micro_batches):
    operations = play(equal(devices), micro_batches, schedule)
    assert bubble(operations, devices) == pytest.approx((devices - 1) / (micro_batches + devices - 1))
    assert max(op.end_s for op in operations) == pytest.approx(3.0 * (micro_batches + devices - 1))


@pytest.mark.parametrize(("devices", "chunks", "micro_batches"), [(2, 2, 4), (4, 2, 8), (4, 4, 16), (8, 2, 32)])
def test_interleaving_v_chunks_divides_the_bubble_by_v(devices, chunks, micro_batches):
    # Each chunk holds 1/v of a device's layers: its forward and backward take 1/v of the time.
    stages = equal(devices * chunks, 1.0 / chunks, 2.0 / chunks)
    operations = play(stages, micro_batches, "interleaved-1f1b", chunks)
    expected = (devices - 1) / (chunks * micro_batches + devices - 1)
    assert bubble(operations, devices) == pytest.approx(expected)


def test_two_stages_one_micro_batch_wait_for_each_other_and_the_links():
    # Worked by hand: F0 [0, 1], send 0.5, F1 [1.5, 2.5], B1 [2.5, 4.5], send 0.5, B0 [5, 7].
    operations = play(equal(2), 1, "1f1b", transfer_s=lambda boundary, nbytes: 0.5)
    assert [(op.kind, op.stage, op.start_s, op.end_s) for op in operations] == [
        ("F", 0, 0.0, 1.0), ("F", 1, 1.5, 2.5), ("B", 1, 2.5, 4.5), ("B", 0, 5.0, 7.0)]


def test_1f1b_holds_at_most_p_micro_batches_where_gpipe_holds_all():
    gpipe, one_f_one_b = (predict_pipeline(equal(4), "h100-sxm", 16, schedule) for schedule in ("gpipe", "1f1b"))
    assert [gpipe.in_flight(d) for d in range(4)] == [16] * 4
    assert [one_f_one_b.in_flight(d) for d in range(4)] == [4, 3, 2, 1]


def test_every_schedule_runs_each_stage_forward_and_backward_once_per_micro_batch():
    for schedule, devices, chunks in (("gpipe", 4, 1), ("1f1b", 4, 1), ("interleaved-1f1b", 4, 2)):
        order = [op for d in range(devices) for op in device_order(schedule, d, devices, 8, chunks)]
        assert sorted(order) == sorted((kind, stage, m) for kind in "FB" for stage in range(devices * chunks)
                                       for m in range(8))


def test_a_stage_boundary_between_nodes_sends_over_the_network():
    across_profile = load_profile("h100-sxm")  # 8 devices per node: 4 stages x 4 tensor-parallel ranks need two
    within_profile = dataclasses.replace(across_profile,
                                         links=dataclasses.replace(across_profile.links, devices_per_node=16))
    stages = equal(4, 1e-3, 2e-3, nbytes=64e6)
    across, within = (predict_pipeline(stages, profile, 8, tensor_parallel=4)
                      for profile in (across_profile, within_profile))
    # The first micro-batch's forward and the last one's backward each cross the middle boundary.
    links = across_profile.links
    network_s = links.network_latency_s + 16e6 / links.network_bytes_per_s
    assert across.pipeline_s - within.pipeline_s >= 2 * (network_s - copy_seconds(16e6, "p2p", False, across_profile))


def test_data_parallel_replicas_add_their_gradient_reduction_and_recomputation_a_forward():
    profile = load_profile("h100-sxm")
    stages = [StageTimes(1e-3, 2e-3, 1e6, parameter_bytes=2e9) for _ in range(4)]
    alone = predict_pipeline(stages, profile, 8)
    replicated = predict_pipeline(stages, profile, 8, data_parallel=8)
    assert alone.gradient_reduction_s == 0 and replicated.gradient_reduction_s > 0
    # Equal stages: the first device's backward ends last, and its reduction is all after the pipeline.
    assert replicated.step_time_s == pytest.approx(alone.pipeline_s + replicated.gradient_reduction_s)
    recomputed = predict_pipeline(stages, profile, 8, recomputation="full")
    assert recomputed.pipeline_s == pytest.approx(alone.pipeline_s * 4 / 3, rel=0.02)


def test_a_device_reduces_its_gradients_while_the_devices_before_it_still_run_their_backwards():
    # The last stage holds the output layer: four times the parameters. Its device's last backward ends
    # three backwards and their gradients' transfers (6 ms and a little) before the first device's, and
    # its reduction starts then.
    profile = load_profile("h100-sxm")
    stages = [StageTimes(1e-3, 2e-3, 1e6, parameter_bytes=nbytes) for nbytes in (1e8, 1e8, 1e8, 4e8)]
    step = predict_pipeline(stages, profile, 8, data_parallel=8)  # 32 devices: two replicas a node, on 4 nodes
    small, large = (collective_seconds("all_reduce", nbytes, 8, profile, ranks_per_node=2) for nbytes in (1e8, 4e8))
    assert step.reductions_s == pytest.approx([small, small, small, large])
    assert step.last_backward_end_s(0) == pytest.approx(step.pipeline_s)
    earlier = 3 * (2e-3 + copy_seconds(1e6, "p2p", False, profile))
    assert step.last_backward_end_s(3) == pytest.approx(step.pipeline_s - earlier)
    assert step.step_time_s == pytest.approx(max(step.pipeline_s + small, step.pipeline_s - earlier + large))
    assert step.exposed_reduction_s < step.gradient_reduction_s == pytest.approx(large)
    # Per device: its work and its wait fill the pipeline; its own reduction after the pipeline.
    for device in range(4):
        times = step.device_times(device)
        assert times.compute_s == pytest.approx(8 * 3e-3)
        assert times.compute_s + times.bubble_s == pytest.approx(step.pipeline_s)
    assert step.device_times(0).exposed_reduction_s == pytest.approx(small)
    assert step.device_times(3).exposed_reduction_s == pytest.approx(large - earlier)
    assert step.device_lines()[3].startswith("device 3: compute 24.0 ms, bubble ")


@pytest.mark.parametrize(("arguments", "message"), [
    (dict(schedule="zero-bubble"), "schedule must be one of"),
    (dict(schedule="1f1b", chunks=2), "needs interleaved-1f1b"),
    (dict(schedule="interleaved-1f1b", chunks=2, micro_batches=6), "not a multiple of 4"),
    (dict(recomputation="selective"), "not 'selective' .selective recomputation is predicted as it runs, from "
                                      "stages whose modules checkpoint themselves"),
    (dict(micro_batches=0), "micro_batches must be a whole number from 1 to 1,048,576, not 0"),
    (dict(micro_batches=True), "micro_batches must be a whole number from 1 to 1,048,576, not True"),
    (dict(tensor_parallel=0), "tensor_parallel must be a whole number from 1 to 1,048,576, not 0"),
    (dict(data_parallel=1.5), "data_parallel must be a whole number from 1 to 1,048,576, not 1.5"),
    (dict(stages=[StageTimes(-1e-3, 2e-3, 1e6)] * 8), "stage 0: its times and sizes must be finite and not negative"),
    (dict(stages=[StageTimes(float("nan"), 2e-3, 1e6)] * 8), "must be finite"),
])
def test_a_schedule_that_cannot_run_is_refused_saying_why(arguments, message):
    arguments = {"stages": equal(8), "micro_batches": 8, **arguments}
    with pytest.raises(ValueError, match=message):
        predict_pipeline(profile="h100-sxm", **arguments)


def test_a_schedule_is_named_in_any_case_and_an_empty_pipeline_has_no_bubble():
    assert predict_pipeline(equal(4), "h100-sxm", 8, schedule="1F1B").schedule == "1f1b"  # as the prose writes it
    assert predict_pipeline([StageTimes(0.0, 0.0, 0.0)], "h100-sxm", 1).bubble_fraction == 0.0


def test_a_stage_on_the_cpu_is_refused_not_predicted_as_nothing():
    import torch
    from openreg_perf.pipeline import predict_stage

    with pytest.raises(ValueError, match="a stage's module and input must be on openreg to be predicted, not on cpu"):
        predict_stage(torch.nn.Linear(8, 8), torch.randn(2, 8), "h100-sxm")


def test_stages_predicted_from_a_model_without_executing(h100_here):
    torch = pytest.importorskip("torch")
    from openreg_perf.pipeline import predict_stage

    blocks = [torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(
        "openreg") for _ in range(4)]
    x = torch.randn(512, 1024, device="openreg", requires_grad=True)
    stages = [predict_stage(block, x, h100_here) for block in blocks]
    assert all(s.backward_s > s.forward_s > 0 for s in stages)
    assert stages[0].activation_bytes == 512 * 1024 * 4 and stages[0].parameter_bytes == (2 * 1024 * 4096 + 5120) * 4
    assert len({(s.forward_s, s.backward_s) for s in stages}) == 1, "the same block is predicted the same"
    step = predict_pipeline(stages, h100_here, micro_batches=8)
    assert step.pipeline_s > 8 * (stages[0].forward_s + stages[0].backward_s)
    assert 0 < step.bubble_fraction < 0.5


def test_activation_recomputation_is_priced_as_the_checkpointed_stage_runs_it(h100_here):
    """A stage that checkpoints its layers (torch.utils.checkpoint, as a training script does) recomputes
    in its backward what the backward needs of the forward: all of it but the last matmul, whose output
    no backward reads (PyTorch stops recomputing there), or, selectively, only what its policy does not
    save (here every op but the matmuls: the GELU). The prediction records those kernels in the backward,
    at the forward's prices."""
    torch = pytest.importorskip("torch")
    import functools
    from collections import Counter

    import openreg_perf
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    block = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(
        "openreg")
    for parameter in block.parameters():
        parameter.grad = torch.empty_like(parameter)  # each backward adds to them, as every run's does
    x = torch.randn(512, 1024, device="openreg")

    def save_matmuls(context, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.addmm.default else CheckpointPolicy.PREFER_RECOMPUTE

    selective = functools.partial(create_selective_checkpoint_contexts, save_matmuls)
    runs = {"none": lambda: block(x), "full": lambda: checkpoint(block, x, use_reentrant=False),
            "selective": lambda: checkpoint(block, x, use_reentrant=False, context_fn=selective)}
    kernels = {}
    for name, run in runs.items():
        x.requires_grad_()  # its gradient is written, as the previous stage's input is: not added to
        with openreg_perf.simulate(h100_here, execute=False) as forward:
            output = run()
        gradient = torch.empty_like(output)
        with openreg_perf.simulate(h100_here, execute=False) as backward:
            output.backward(gradient)
        kernels[name] = (forward.kernels, backward.kernels)
        x = x.detach()
    (addmm, gelu, _), plain_backward = kernels["none"]
    for name, recomputed in (("full", [addmm, gelu]), ("selective", [gelu])):
        forward, backward = kernels[name]
        assert [k.name for k in forward] == ["aten::addmm", "aten::gelu", "aten::addmm"]
        assert Counter(k.name for k in backward) - Counter(k.name for k in plain_backward) == \
            Counter(k.name for k in recomputed), name
        assert sum(k.seconds for k in backward) == pytest.approx(
            sum(k.seconds for k in plain_backward) + sum(k.seconds for k in recomputed)), name
