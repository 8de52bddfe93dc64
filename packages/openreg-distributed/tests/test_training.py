"""DDP, FSDP2 and DTensor on openreg over occl, step by step against one
process training on the full batch on the CPU (ranks: conftest.py's pool)."""

from __future__ import annotations

import occl_training_checks as checks
import pytest


@pytest.mark.parametrize("kind,variant", [
    ("mlp", "plain"), ("cnn", "plain"), ("mlp", "hook"), ("branchy", "unused"), ("mlp", "no_sync"),
])
@pytest.mark.parametrize("group", [("ipc", 2), ("gloo", 2)], ids=["ipc", "gloo"])
def test_ddp_matches_one_process_on_the_full_batch(ranks, group, kind, variant):
    assert ranks.run(checks.check_ddp, group, kind, variant) == [checks.STEPS] * 2 + [None] * 2


def test_fsdp2_fully_shard_matches_the_unsharded_model(ranks):
    assert ranks.run(checks.check_fsdp2) == [checks.STEPS] * 4


def test_dtensor_and_functional_collectives_on_a_2x2_mesh(ranks):
    assert ranks.run(checks.check_dtensor) == [True] * 4
