"""torch.accelerator.Graph on openreg: a captured training step replays to
the same numbers as running it step by step (checked against the CPU), the
graph's memory pool survives replays and is released by reset(), and the
operations that cannot be captured raise, leaving the stream usable."""

from __future__ import annotations

import copy
import threading

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


@pytest.fixture(autouse=True)
def _keep_the_global_cpu_rng():
    """These tests seed the CPU generator; later test files must not inherit that."""
    with torch.random.fork_rng(devices=[]):
        yield


def build_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))


class Trainer:
    """A model, its SGD-with-momentum optimizer and one training step over
    static input tensors (the step reads x and y, writes the loss)."""

    def __init__(self, model: nn.Module, device: str) -> None:
        self.model = model.to(device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.x = torch.zeros(16, 12, device=device)
        self.y = torch.zeros(16, dtype=torch.long, device=device)
        self.loss = None

    def step(self) -> None:
        self.optimizer.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.optimizer.step()
        self.loss = loss.detach()  # keeps no autograd graph alive between steps


def batches(count: int):
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(16, 12, generator=generator), torch.randint(0, 4, (16,), generator=generator))
            for _ in range(count)]


WARMUP_STEPS = 2


def capture_training_step(trainer: Trainer, device: int = 0, stream: torch.Stream | None = None,
                          warmup_steps: int = WARMUP_STEPS) -> torch.accelerator.Graph:
    """Warms the step up on a side stream, as for CUDA graphs: autograd's
    gradient accumulation then runs on that stream, the optimizer's state
    exists, and every operator has run once with its dtypes (the executor
    runs an operator's first call synchronously, which a capture refuses).
    Then captures the step there. The side stream is joined both ways, as
    CUDA's graph recipe does: it starts after the trainer's tensors were
    written on the current stream, and replays on the current stream start
    after the warm-up (without the joins the two streams race)."""
    graph = torch.accelerator.Graph()
    side = stream or torch.Stream(device=f"openreg:{device}")
    current = torch.openreg.current_stream(device)
    side.wait_stream(current)
    with side:
        for _ in range(warmup_steps):
            trainer.step()
        graph.capture_begin()
        trainer.step()
        graph.capture_end()
    current.wait_stream(side)
    return graph


@pytest.mark.parametrize("device", [0, 1])
def test_replayed_training_step_matches_cpu_steps(device):
    cpu = Trainer(build_mlp(), "cpu")
    dev = Trainer(copy.deepcopy(cpu.model), f"openreg:{device}")
    warmup, *steps = batches(11)
    for trainer in (cpu, dev):  # momentum buffers and gradients exist before capture
        trainer.x.copy_(warmup[0])
        trainer.y.copy_(warmup[1])
    for _ in range(WARMUP_STEPS):
        cpu.step()
    graph = capture_training_step(dev, device)  # runs the warm-up steps eagerly
    for x, y in steps:  # new contents in the static inputs before each replay
        cpu.x.copy_(x)
        cpu.y.copy_(y)
        cpu.step()
        dev.x.copy_(x)
        dev.y.copy_(y)
        graph.replay()
        assert dev.loss.item() == pytest.approx(cpu.loss.item(), rel=1e-4, abs=1e-5)
    for expected, actual in zip(cpu.model.parameters(), dev.model.parameters(), strict=True):
        torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-5)
    graph.reset()


def test_capture_records_instead_of_running():
    x = torch.ones(8, device="openreg")
    graph = torch.accelerator.Graph()
    with torch.Stream(device="openreg"), graph:
        x.mul_(3)
    torch.openreg.synchronize()
    assert x.cpu().tolist() == [1.0] * 8  # captured, not run
    graph.replay()
    graph.replay()
    assert x.cpu().tolist() == [9.0] * 8
    graph.reset()


def test_is_capturing_and_replay_onto_the_current_stream():
    stream = torch.Stream(device="openreg")
    x = torch.zeros(4, device="openreg")
    graph = torch.accelerator.Graph()
    assert not stream.is_capturing()
    with stream:
        graph.capture_begin()
        assert stream.is_capturing()
        x.add_(1)
        graph.capture_end()
    assert not stream.is_capturing()
    other = torch.Stream(device="openreg")
    other.wait_stream(torch.openreg.current_stream())  # x was zeroed there
    with other:
        graph.replay()
    other.synchronize()
    assert x.cpu().tolist() == [1.0] * 4
    graph.reset()


def test_memory_statistics_return_to_baseline_after_reset():
    trainer = Trainer(build_mlp(), "openreg")
    stream = torch.Stream(device="openreg")
    stream.wait_stream(torch.openreg.current_stream())  # the trainer's tensors were written there
    with stream:
        for _ in range(WARMUP_STEPS):  # gradients and momentum buffers: memory of the baseline
            trainer.step()
    trainer.loss = None
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    allocated = torch.openreg.memory_allocated()
    reserved = torch.openreg.memory_reserved()
    graph = capture_training_step(trainer, stream=stream, warmup_steps=0)
    assert torch.openreg.memory_reserved() > reserved  # the graph's private pool
    for _ in range(3):
        graph.replay()
    loss_during_replays = trainer.loss.item()
    assert loss_during_replays > 0
    trainer.loss = None  # the last tensor holding a block of the pool
    graph.reset()
    torch.openreg.empty_cache()
    assert torch.openreg.memory_allocated() == allocated
    assert torch.openreg.memory_reserved() == reserved


def test_pool_blocks_stay_valid_until_the_last_tensor_goes():
    graph = torch.accelerator.Graph()
    x = torch.arange(6.0, device="openreg")
    with torch.Stream(device="openreg"), graph:
        out = x * 2  # allocated in the graph's pool
    graph.replay()
    graph.reset()  # the pool is released, but out still holds its block
    torch.openreg.empty_cache()
    assert out.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def capture_expecting_failure(illegal, match: str, mode: str = "default") -> None:
    """Runs illegal() inside a capture: it raises, the capture ends
    invalidated, and the stream still runs work afterwards."""
    stream = torch.Stream(device="openreg")
    graph = torch.accelerator.Graph(capture_error_mode=mode)
    x = torch.ones(4, device="openreg")
    stream.wait_stream(torch.openreg.current_stream())  # x is filled there; y reads it below
    with stream:
        graph.capture_begin()
        x.add_(1)
        with pytest.raises(RuntimeError, match=match):
            illegal(x)
        with pytest.raises(RuntimeError, match="invalidated"):
            graph.capture_end()
        assert not stream.is_capturing()
        y = x * 5  # the stream is usable again
        stream.synchronize()
    assert y.cpu().tolist() == [5.0] * 4  # the discarded capture never ran
    graph.reset()


def test_synchronizing_the_capturing_stream_raises():
    capture_expecting_failure(lambda x: torch.openreg.current_stream().synchronize(), "is capturing")


def test_synchronizing_the_device_raises():
    capture_expecting_failure(lambda x: torch.openreg.synchronize(), "is capturing")


def test_item_and_other_host_reads_raise():
    capture_expecting_failure(lambda x: x.sum().item(), "is capturing")
    capture_expecting_failure(lambda x: x.cpu(), "is capturing")


def test_copy_from_pageable_memory_raises():
    capture_expecting_failure(lambda x: x.copy_(torch.zeros(4)), "pageable")


def test_allocation_outside_the_graphs_pool_raises():
    stream = torch.Stream(device="openreg")
    other = torch.Stream(device="openreg")
    graph = torch.accelerator.Graph()
    x = torch.ones(4, device="openreg")
    with stream:
        graph.capture_begin()
        y = x + 1
        with other, pytest.raises(RuntimeError, match="outside the graph's memory pool"):
            torch.empty(1024, device="openreg")
        graph.capture_end()  # refused before anything ran: the capture is intact
    graph.replay()
    assert y.cpu().tolist() == [2.0] * 4
    graph.reset()


def test_relaxed_mode_allows_unsafe_calls_on_the_capturing_thread():
    stream = torch.Stream(device="openreg")
    graph = torch.accelerator.Graph(capture_error_mode="relaxed")
    other = torch.Stream(device="openreg")
    x = torch.ones(4, device="openreg")
    with stream:
        graph.capture_begin()
        x.add_(1)
        torch.openreg.synchronize()  # allowed in relaxed mode
        with other:
            scratch = torch.empty(16, device="openreg")  # outside the pool: allowed too
        graph.capture_end()
    graph.replay()
    assert x.cpu().tolist() == [2.0] * 4
    del scratch
    graph.reset()


def test_thread_local_mode_lets_other_threads_synchronize():
    stream = torch.Stream(device="openreg")
    graph = torch.accelerator.Graph(capture_error_mode="thread_local")
    errors = []

    def other_thread():
        try:
            torch.openreg.synchronize()
        except RuntimeError as e:
            errors.append(e)

    x = torch.ones(4, device="openreg")
    with stream:
        graph.capture_begin()
        x.add_(1)
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join(timeout=60)
        graph.capture_end()
    assert errors == []
    graph.replay()
    assert x.cpu().tolist() == [2.0] * 4
    graph.reset()


def test_capture_on_the_default_stream_is_refused():
    graph = torch.accelerator.Graph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        graph.capture_begin()
    torch.ones(1, device="openreg").add_(1).cpu()  # nothing is left capturing


def test_keep_graph_instantiate_and_debug_dump(tmp_path):
    x = torch.ones(4, device="openreg")
    graph = torch.accelerator.Graph(keep_graph=True)
    with torch.Stream(device="openreg"), graph:
        x.mul_(2)
        x.add_(1)
    graph.instantiate()
    graph.replay()
    assert x.cpu().tolist() == [3.0] * 4
    path = tmp_path / "graph.txt"
    graph.debug_dump(str(path))
    lines = path.read_text().splitlines()
    assert lines[0].startswith("openreg graph: 2 operations")
    assert "kernel" in lines[1] and "kernel" in lines[2]
    graph.reset()

    plain = torch.accelerator.Graph()
    with torch.Stream(device="openreg"), plain:
        x.mul_(2)
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        plain.debug_dump(str(path))
    plain.reset()

    debug = torch.accelerator.Graph()
    debug.enable_debug_mode()
    with torch.Stream(device="openreg"), debug:
        x.mul_(2)
    debug.debug_dump(str(path))
    assert path.read_text().startswith("openreg graph: 1 operations")
    debug.reset()


def test_a_reset_graph_captures_again():
    x = torch.zeros(2, device="openreg")
    graph = torch.accelerator.Graph()
    with torch.Stream(device="openreg"), graph:
        x.add_(1)
    with pytest.raises(RuntimeError, match="reset"):
        graph.capture_begin()
    graph.reset()
    with torch.Stream(device="openreg"), graph:
        x.add_(10)
    graph.replay()
    assert x.cpu().tolist() == [10.0, 10.0]
    graph.reset()


def capture_dropout(x: torch.Tensor, generator: torch.Generator | None = None):
    """A graph of one dropout of x (and a second draw from generator, if
    given), captured on a side stream joined both ways."""
    side = torch.Stream(device="openreg")
    graph = torch.accelerator.Graph()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        graph.capture_begin()
        y = F.dropout(x, 0.5)
        z = torch.rand(x.shape, device="openreg", generator=generator) if generator is not None else None
        graph.capture_end()
    torch.openreg.current_stream().wait_stream(side)
    return graph, y, z


def test_random_kernels_draw_new_numbers_at_every_replay():
    # Note [Random numbers in graphs]: a replay must not repeat the masks
    # of the capture, and the numbers follow the generator's seed.
    x = torch.ones(256, device="openreg")

    def replays(seed: int) -> list[list[float]]:
        torch.openreg.manual_seed(seed)
        graph, y, _ = capture_dropout(x)
        masks = []
        for _ in range(4):
            graph.replay()
            masks.append(y.cpu().tolist())
        return masks

    first = replays(7)
    assert len({tuple(mask) for mask in first}) == 4, "a replay repeated the numbers of another"
    for mask in first:
        assert set(mask) == {0.0, 2.0} and 64 < mask.count(0.0) < 192  # still a dropout of p=0.5
    assert replays(7) == first  # the same seed gives the same replays
    assert replays(8) != first


def test_replays_advance_the_generators_they_draw_from():
    # Each replay draws from the default generator and from a generator of
    # the user's, in program order: after two replays, both are where two
    # draws (not zero) put them.
    x = torch.ones(64, device="openreg")
    mine = torch.Generator(device="openreg").manual_seed(3)
    torch.openreg.manual_seed(5)
    graph, _, z = capture_dropout(x, mine)
    start_default, start_mine = torch.openreg.get_rng_state(), mine.get_state()
    graph.replay()
    first = z.cpu()
    graph.replay()
    second = z.cpu()
    assert not torch.equal(first, second)
    assert not torch.equal(torch.openreg.get_rng_state(), start_default)
    assert not torch.equal(mine.get_state(), start_mine)
    after = torch.rand(4, device="openreg", generator=mine).cpu()
    mine.set_state(start_mine)
    torch.rand(1, device="openreg", generator=mine)  # what the two replays drew, one value each
    torch.rand(1, device="openreg", generator=mine)
    torch.testing.assert_close(torch.rand(4, device="openreg", generator=mine).cpu(), after)
