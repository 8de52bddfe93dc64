"""Note [The threads of a kernel]: a kernel runs its CPU code on one thread;
only when a host thread that waits for the stream runs it (Note [Who runs
queued work]) and its operands reach KERNEL_BYTES does it split its work
across that thread's intra-op team, as on the CPU. The stream's worker never
makes a team of its own, nor does any host thread but the main one."""

import os
import threading

import pytest
import torch
import torch_openreg
from torch.utils._python_dispatch import TorchDispatchMode

KERNEL_BYTES = 256 << 10  # kParallelKernelBytes in csrc/fast/KernelThreads.h

pytestmark = [
    pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a thread team of at least two"),
    pytest.mark.skipif(os.environ.get("OPENREG_FAST_PATHS") == "0", reason="kernel threads are a speed layer"),
]


def threads_in_kernel(elements: int, synchronize: bool = False) -> tuple[int, int, bool]:
    """(threads the kernel's CPU code may use, PyTorch's threads outside it,
    whether the stream's worker ran it). synchronize lets the host run it."""
    operand = torch.zeros(elements, device="openreg")
    return torch_openreg._C._testing.kernel_threads_for_testing(operand, synchronize)


def hold_current_stream(gate) -> None:
    """Makes the current stream wait for a gated side stream, opened 0.2 s
    later: a synchronisation that comes first finds its kernels queued."""
    side = torch.openreg.Stream()
    blocked = gate(side)
    event = torch.openreg.Event()
    event.record(side)
    torch.openreg.current_stream().wait_event(event)
    threading.Timer(0.2, blocked.open).start()


def test_a_small_kernel_keeps_to_its_thread():
    inside, team, on_worker = threads_in_kernel(1024)
    assert team >= 2
    assert inside == 1 and on_worker


def test_on_the_worker_a_kernel_with_large_operands_still_keeps_to_its_thread():
    inside, team, on_worker = threads_in_kernel(KERNEL_BYTES // 4)
    assert on_worker and inside == 1 and team >= 2


def test_a_waiting_host_runs_a_large_kernel_with_its_team(gate):
    hold_current_stream(gate)
    inside, team, on_worker = threads_in_kernel(KERNEL_BYTES // 4, synchronize=True)
    assert not on_worker
    assert inside == team >= 2
    assert torch.get_num_threads() == team  # the host's own setting is back


def test_a_waiting_thread_other_than_the_main_one_runs_a_large_kernel_alone(gate):
    """Autograd's device thread, or a user's: a team of its own would be a
    second team in the process, slowing the main thread's CPU work."""
    seen = []

    def run():
        hold_current_stream(gate)
        seen.append(threads_in_kernel(KERNEL_BYTES // 4, synchronize=True))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert seen == [(1, torch.get_num_threads(), False)]


def test_backward_leaves_the_kernels_of_autograds_thread_alone(gate):
    """Backward runs on autograd's thread for openreg; a launch into a full
    queue runs queued kernels there. Probed: the kernel sees one thread."""
    seen = []
    weight = torch.randn(64, 64, device="openreg", requires_grad=True)

    def probe(grad):
        hold_current_stream(gate)
        seen.append(threads_in_kernel(KERNEL_BYTES // 4, synchronize=True))
        return grad

    doubled = weight * 2
    doubled.register_hook(probe)
    doubled.sum().backward()
    assert threading.current_thread() is threading.main_thread()
    assert seen == [(1, torch.get_num_threads(), False)]


def test_a_waiting_host_runs_a_small_kernel_alone(gate):
    hold_current_stream(gate)
    assert threads_in_kernel(1024, synchronize=True) == (1, torch.get_num_threads(), False)


def test_deterministic_algorithms_keep_every_kernel_to_one_thread(gate):
    torch.use_deterministic_algorithms(True)
    try:
        hold_current_stream(gate)
        inside, team, on_worker = threads_in_kernel(KERNEL_BYTES // 4, synchronize=True)
    finally:
        torch.use_deterministic_algorithms(False)
    assert not on_worker and inside == 1 and team >= 2


def test_small_kernels_compute_what_the_cpu_computes():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    result = (a.to("openreg") @ b.to("openreg")).cpu()
    torch.testing.assert_close(result, a @ b)


class RecordingMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def test_kernels_a_waiting_host_runs_do_not_see_its_thread_state(gate):
    """A dispatch mode, CPU autocast and grad mode on the synchronising
    thread are the host's, not the kernels' (Note [Who runs a fast kernel])."""
    a = torch.randn(256, 256)
    hold_current_stream(gate)
    z = a.to("openreg")
    product, total = z @ z, z.cumsum(0)  # cumsum: through the device executor
    with RecordingMode() as mode, torch.autocast("cpu", dtype=torch.bfloat16):
        torch.openreg.synchronize()
    assert mode.seen == []
    assert product.dtype == torch.float32
    torch.testing.assert_close(product.cpu(), a @ a)
    torch.testing.assert_close(total.cpu(), a.cumsum(0))
