"""Proof that the kit tests contracts: each defect seeded into OpenReg on
purpose (TORCH_OPENREG_SEEDED_DEFECT, torch_openreg/_seeded_defects.py)
makes the kit fail, in the test that checks the contract it breaks, with a
message naming that contract. The table below is the guide's
negative-control table."""

from __future__ import annotations

import pytest
from kit_runs import ENABLED_BY, OPENREG_OVERRIDES

# LITERALINCLUDE START: NEGATIVE_CONTROLS
# defect -> (group, the test that must fail, words its message must contain)
CONTROLS = {
    "current-device-stuck-at-zero": ("device", "test_set_device_index_moves_the_current_device",
                                     "current_device_index() follows set_device_index"),
    "exchange-device-returns-the-new-device": ("device", "test_device_index_context_restores_the_device",
                                               "restores the previous device"),
    "synchronize-returns-early": ("device", "test_synchronize_waits_for_queued_work",
                                  "synchronize() returns only once the work queued before it"),
    "elapsed-time-in-seconds": ("streams", "test_elapsed_time_is_in_milliseconds", "in milliseconds"),
    "stream-synchronize-returns-early": ("streams", "test_stream_synchronize_waits_for_its_work",
                                         "Stream.synchronize() returns only once"),
    "event-synchronize-returns-early": ("streams", "test_event_synchronize_waits_for_the_recorded_work",
                                        "Event.synchronize() returns only once"),
    "stream-wait-ignored": ("streams", "test_a_stream_waiting_for_a_stream_sees_its_work", "wait_stream"),
    "query-always-true": ("streams", "test_query_is_false_while_work_runs_and_true_after",
                          "False while the recorded work still runs"),
    "allocator-stats-ignore-frees": ("allocator", "test_memory_allocated_follows_a_tensor",
                                     "returns to its baseline once the tensor is freed"),
    "empty-cache-keeps-memory": ("allocator", "test_empty_cache_returns_the_reserved_memory",
                                 "empty_cache() gives the unused cached blocks back"),
    "rng-state-not-restored": ("rng", "test_a_restored_device_state_replays_the_draws", "set_rng_state"),
    "backend-metadata-drops-a-field": ("serialization", "test_backend_metadata_survives_save_and_load",
                                       "gives back what set_tensor_metadata set"),
    "profiler-drops-device-events": ("profiler", "test_the_profile_holds_the_device_kernels",
                                     "holds its kernels"),
    "autocast-mm-in-float32": ("autocast", "test_the_cast_policy[torch_fp16-mm]", "mm runs in torch.float16"),
    "allreduce-drops-a-rank": ("distributed", "test_two_ranks_match_the_cpu[collectives]",
                               "all_reduce sum on rank"),
    "float16-abs-keeps-the-sign": ("operators", "test_compare_cpu_abs_openreg_float16",
                                   "abs on the device computes what it computes on the CPU"),
    "tanh-gradient-negated": ("operators", "test_gradients_match_cpu_tanh_openreg_float32",
                              "tanh's gradients on the device are the CPU's"),
}
# LITERALINCLUDE END: NEGATIVE_CONTROLS
CONTROLS_BY_TEST = {test: group for group, test, _ in CONTROLS.values()}


def test_every_seeded_defect_has_a_control():
    from torch_openreg._seeded_defects import DEFECTS

    assert set(CONTROLS) == set(DEFECTS)
    assert len(CONTROLS) >= 12


def only(test: str) -> list[str]:
    """The distributed group's scenarios take seconds each, and the operators
    group, compared as OpenReg's overrides widen it (float16, bfloat16,
    gradients), half a minute: -k keeps only the test that checks the broken
    contract (and the operators group gets those overrides). The other groups
    run whole, as a vendor runs them (a stream's ordering shows in the state
    the group's earlier tests leave, not always in a fresh process)."""
    group = CONTROLS_BY_TEST.get(test)
    if group == "operators":
        return ["-k", test, "--overrides", str(OPENREG_OVERRIDES)]
    if group == "distributed":
        name, _, parameter = test.rstrip("]").partition("[")
        return ["-k", f"{name} and {parameter}"]
    return []


@pytest.mark.parametrize("defect", sorted(CONTROLS))
def test_the_kit_catches_the_defect(kit, installed, defect):
    group, test, words = CONTROLS[defect]
    if group in ENABLED_BY and not installed(ENABLED_BY[group]):
        pytest.skip(f"the {group} group needs {ENABLED_BY[group]}, not installed here")
    code, report = kit("--groups", group, *only(test), "--retries", "0", defect=defect)
    assert code == 1 and not report["passed"], f"the kit passed OpenReg with {defect} seeded"
    messages = {failure["test"].rsplit("::", 1)[1]: failure["message"] for failure in report["failures"]}
    assert test in messages, f"{defect}: {test} did not fail; these did: {sorted(messages)}"
    assert words in messages[test] and "contract" in messages[test], messages[test]
    assert report["groups"][group]["status"] == "failed"
