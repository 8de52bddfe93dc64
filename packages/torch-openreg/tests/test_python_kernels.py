"""Python kernels (ops/launch.py) as a careless user writes them: a kernel
that synchronises with its own stream gets a clear error instead of a hang,
and CPU views that escape the kernel stop reaching device memory. The
registration scenario itself is tested in test_registration_scenarios.py."""

from __future__ import annotations

import pytest
import torch
from torch_openreg.ops.launch import launch_on_stream


def _run_in_kernel(tensor: torch.Tensor, body) -> None:
    """Runs body(view) inside a Python kernel over tensor, not in the host
    probe that first runs it over an empty CPU tensor."""
    launch_on_stream("probe", [tensor], lambda view: body(view) if view.numel() else None)


@pytest.mark.timeout(120, method="thread")  # a regression hangs in C++: only this method ends it
def test_a_python_kernel_that_waits_for_its_own_stream_gets_a_clear_error():
    x = torch.ones(4, device="openreg")
    cached = torch.ones(1 << 20, device="openreg")  # a whole cached segment once freed
    del cached
    calls = {
        "orMemcpyAsync": lambda: x.cpu(),
        "orDeviceSynchronize": torch.openreg.synchronize,
        "orStreamSynchronize": lambda: torch.openreg.current_stream().synchronize(),
        "orFree": torch.openreg.empty_cache,
    }
    errors = {}

    def body(view):
        for expected, call in calls.items():
            try:
                call()
                errors[expected] = None
            except RuntimeError as error:
                errors[expected] = str(error)

    reserved = torch.openreg.memory_reserved()
    free_before = torch.openreg.mem_get_info()[0]
    _run_in_kernel(x, body)
    torch.openreg.synchronize()  # the kernel did not fail: each error was raised and caught
    for expected, message in errors.items():
        assert message is not None, expected
        assert f"orErrorNotPermitted: {expected} was called from inside kernel 'probe'" in message
        assert "own stream" in message
    # The segment empty_cache could not free stayed cached, so the
    # allocator's statistics still match the device's memory.
    assert torch.openreg.memory_reserved() == reserved
    assert torch.openreg.mem_get_info()[0] == free_before
    torch.openreg.empty_cache()  # from the host it works
    assert torch.openreg.mem_get_info()[0] > free_before


@pytest.mark.timeout(120, method="thread")
def test_freeing_from_a_kernel_without_caching_keeps_the_memory_accounted(python):
    # Without caching a free goes straight to orFree, which a kernel of the
    # device may not call: the block is cached instead of lost.
    facts = python.json("""
        import json, torch, openreg_runtime
        from torch_openreg.ops.launch import launch_on_stream
        x = torch.ones(4, device="openreg")
        def body(view):
            if view.numel():
                z = torch.ones(1000, device="openreg")
                del z
        launch_on_stream("frees", [x], body)
        torch.openreg.synchronize()
        in_use = torch.openreg.mem_get_info()[1] - torch.openreg.mem_get_info()[0]
        facts = {"reserved": torch.openreg.memory_reserved(), "in_use": in_use}
        torch.openreg.empty_cache()
        facts["reserved_after_empty"] = torch.openreg.memory_reserved()
        print(json.dumps(facts))
    """, env={"PYTORCH_NO_OPENREG_MEMORY_CACHING": "1"})
    assert facts["reserved"] == facts["in_use"] == 512 + 4096
    assert facts["reserved_after_empty"] == 512


def test_a_python_kernels_views_are_unusable_after_it_returns():
    x = torch.arange(6.0, device="openreg")
    escaped = {}

    def body(view):
        escaped["view"] = view
        escaped["slice"] = view[2:]
        escaped["sum_inside"] = float(view.sum())

    _run_in_kernel(x, body)
    torch.openreg.synchronize()
    assert escaped["sum_inside"] == 15.0  # inside the kernel the view works
    for leaked in (escaped["view"], escaped["slice"]):
        for use in (lambda t: t.sum(), lambda t: t.tolist(), lambda t: t.fill_(0), repr):
            with pytest.raises(RuntimeError, match="valid only while that kernel ran"):
                use(leaked)
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]

