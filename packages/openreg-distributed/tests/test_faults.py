"""Failures never hang and never hand out a value: a rank with mismatched
tensors, reduce ops, roots or split sizes, a rank that never calls the
collective, a receive with no send and a rank killed during it each fail
the others within the group's timeout, naming the collective, its sequence
number, the group and the ranks that did not join; every consumer of the
output (a copy, a synchronisation, the future) raises, and work that does
not wait for it goes on. One pool of 2 ranks with 4 devices each; every
scenario has its own group."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import occl_fault_checks as checks
import pytest
from occl_workers import Workers, free_port


@pytest.fixture(scope="module")
def pair():
    workers = Workers(2, env={"OPENREG_DEVICE_COUNT": "4"})
    try:
        assert workers.run(checks.make_fault_groups) == [True, True]
        yield workers
    finally:
        workers.close(timeout_s=10)


def test_mismatched_shapes_are_reported_on_every_rank(pair):
    for result in pair.run(checks.mismatched_shapes):
        seen, again = result["seen"], result["again"]
        assert "allreduce #0 in group" in seen, seen
        assert "ranks disagree" in seen and "Float[4]" in seen and "Float[5]" in seen, seen
        # The group refuses further collectives with the same reason.
        assert "ranks disagree" in again, again
        # The group's message is the user's, without a C++ backtrace.
        assert "Exception raised from" not in again and "frame #" not in again, again
        # The failure is the group's, not the device's: compute and another
        # group on the same device go on, and the memory comes back.
        assert result["computed"] == 12.0, result
        assert result["healthy"] == [3.0] * 4, result
        before, after = result["memory"]
        assert before == after, f"device memory before the failed group {before}, after destroying it {after}"


# A bound that proves nothing waited past the group's timeout (3 s), with
# room for a loaded machine; not a speed measurement.
NO_HANG_S = checks.TIMEOUT.total_seconds() + 15


def assert_memory_returned(memory) -> None:
    before, after = memory
    assert before == after, f"device memory before the failed group {before}, after destroying it {after}"


@pytest.mark.parametrize("transport", ["ipc", "gloo"])
@pytest.mark.parametrize("name", sorted(checks.MISMATCHES))
def test_no_consumer_of_a_mismatched_collective_sees_a_value(pair, name, transport):
    _, collective, detail = checks.MISMATCHES[name]
    for rank, result in enumerate(pair.run(checks.mismatched, name, transport)):
        for consumer in ("launched", "cpu", "synchronize"):
            seen = result[consumer]
            if consumer == "launched" and seen == "no error":
                continue  # the collective was queued; its consumers must fail
            assert f"{collective} in group" in seen and detail in seen, (rank, consumer, seen)
        assert result["cpu"] != "no error" and result["synchronize"] != "no error", (rank, result)
        assert result["independent"] == [0.0, 2.0, 4.0]
        assert_memory_returned(result["memory"])


@pytest.mark.parametrize("transport", ["ipc", "gloo"])
def test_consumers_fail_even_when_the_collective_failed_before_wait(pair, transport):
    for rank, result in enumerate(pair.run(checks.waited_after_it_failed, transport)):
        assert "allreduce #0 in group" in result["launched"] and "ranks disagree" in result["launched"], (rank, result)
        for consumer in ("cpu", "synchronize"):
            assert "allreduce #0 in group" in result[consumer], (rank, consumer, result)
        assert_memory_returned(result["memory"])


def test_a_receive_without_a_send_fails_its_consumers(pair):
    result, (skipped, memory) = pair.run(checks.recv_without_send)
    assert skipped == "skipped"
    assert_memory_returned(memory)
    assert result["launched"] == "no error"  # wait() orders the stream and returns, as NCCL's does
    for consumer in ("cpu", "synchronize"):
        seen = result[consumer]
        assert "recv #0 in group" in seen and "no matching send" in seen and "rank(s) that did not join: 1" in seen, \
            (consumer, seen)
    assert result["independent"] == [0.0, 2.0, 4.0]
    assert_memory_returned(result["memory"])


@pytest.mark.parametrize("name,device", [("absent-ipc", 1), ("absent-gloo", 2)], ids=["ipc", "gloo"])
def test_a_rank_that_never_joins_fails_the_others(pair, name, device):
    ((seen, elapsed), memory), (skipped, skipped_memory) = pair.run(checks.absent_rank, name, device)
    assert skipped == "skipped"
    assert "allreduce #0 in group" in seen and "did not complete within 3000 ms" in seen, seen
    assert "rank(s) that did not join: 1" in seen, seen
    assert elapsed < NO_HANG_S, f"the failure took {elapsed:.1f} s"
    assert_memory_returned(memory)
    assert_memory_returned(skipped_memory)


def test_whoever_reads_a_failed_collective_through_its_future_raises(pair):
    ((future_seen, chained_seen), memory), (skipped, _) = pair.run(checks.failed_future)
    assert skipped == "skipped"
    for seen in (future_seen, chained_seen):
        assert "allreduce #0 in group" in seen and "did not complete within 3000 ms" in seen, seen
        assert "rank(s) that did not join: 1" in seen, seen
    assert_memory_returned(memory)


def test_abort_returns_at_once_and_frees_the_group(pair):
    result, skipped = pair.run(checks.aborted)
    assert skipped == "skipped"
    error, took = result["abort"]
    assert error == "no error", error
    # The collective waits for rank 1 for up to 60 s; the abort ends it.
    assert took < checks.LONG_TIMEOUT.total_seconds() / 4, f"abort took {took:.1f} s"
    for seen in (result["seen"], result["future"]):
        assert "was aborted" in seen, seen
    before, after = result["memory"]
    assert before == after, f"device memory before the group {before}, after aborting it {after}"


# Last: it kills rank 1 of the pool.
def test_a_killed_rank_fails_the_others_before_the_timeout(pair):
    pair.send_only(1, checks.killed_rank)
    pair.send_only(0, checks.killed_rank)
    pair.processes[1].join(40)
    assert pair.processes[1].exitcode == -9, "rank 1 was not killed inside the collective"
    (result,) = pair.collect("killed_rank", ranks=[0])
    # Rank 0 sees through rank 1's control block that it never arrived, and
    # through its pid that it is gone: it fails without waiting for the
    # timeout (checked by the message: a timeout says "did not complete").
    ddp, ddp_elapsed = result["ddp"]
    assert "in group" in ddp and "rank(s) that did not join: 1 (its process exited)" in ddp, ddp
    assert ddp_elapsed < NO_HANG_S, f"DDP's failure took {ddp_elapsed:.1f} s"
    seen = result["seen"]
    for consumer in ("cpu", "synchronize"):  # never rank 0's own ones
        assert "allreduce #1 in group" in seen[consumer], seen
        assert "rank(s) that did not join: 1 (its process exited)" in seen[consumer], seen
        assert "cannot complete" in seen[consumer] and "did not complete within" not in seen[consumer], seen
    assert seen["elapsed"] < NO_HANG_S, f"the failure took {seen['elapsed']:.1f} s"
    assert result["independent"] == [0.0, 2.0, 4.0]
    # Destroying the group afterwards does not wait for the dead rank (nor
    # for a timeout), and gives the group's device memory back.
    assert result["destroy"][0] == "no error", result
    assert result["destroy"][1] < NO_HANG_S, result
    before, after = result["memory"]
    assert before == after, f"device memory before the group {before}, after destroying it {after}"


def test_a_rank_that_exits_right_after_a_collective_leaves_it_complete_for_the_others():
    # Rank 1 exits as soon as its all_reduce is done, before rank 0 may have opened its mailbox;
    # a collective every rank completed succeeds for every rank. Repeated: the exit races rank 0.
    script = Path(__file__).with_name("occl_exit_checks.py")
    env = dict(os.environ, PYTHONPATH=str(script.parent))
    for attempt in range(6):
        port = free_port()
        ranks = [subprocess.Popen([sys.executable, str(script), str(rank), str(port)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
        try:
            outputs = [rank.communicate(timeout=120)[0] for rank in ranks]
        finally:
            for rank in ranks:
                rank.kill()
        assert ranks[0].returncode == 0 and "[3.0, 3.0, 3.0, 3.0]" in outputs[0], (attempt, outputs[0][-2000:])
        assert ranks[1].returncode == 0, (attempt, outputs[1][-2000:])
