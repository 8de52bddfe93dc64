"""Registrations done once per process: backend name, generated methods,
hooks, pinned memory, autocast, lazy initialisation and fork poisoning."""

from __future__ import annotations

import multiprocessing
import textwrap
import warnings

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence


def test_backend_is_named_openreg():
    assert torch._C._get_privateuse1_backend_name() == "openreg"
    assert torch.device("openreg").type == "openreg"
    assert torch.device("openreg:1").index == 1
    assert torch.openreg is torch.get_device_module("openreg")


def test_tensor_methods():
    cpu = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    on0 = cpu.openreg()
    on1 = cpu.openreg(1)
    assert on0.device == torch.device("openreg", 0) and on0.is_openreg
    assert on1.device == torch.device("openreg", 1) and on1.is_openreg
    assert not cpu.is_openreg
    assert torch.equal(on0.cpu(), cpu) and torch.equal(on1.cpu(), cpu)
    # .openreg() of a tensor already there is the tensor itself, as .cuda() is.
    assert on1.openreg(1) is on1


def test_module_methods():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    reference = [t.clone() for t in module.state_dict().values()]
    module.openreg(1)
    for tensor, expected in zip(module.state_dict().values(), reference, strict=True):
        assert tensor.device == torch.device("openreg", 1)
        assert torch.equal(tensor.cpu(), expected)
    module.openreg()
    assert all(p.device == torch.device("openreg", 0) for p in module.parameters())


def test_storage_methods():
    cpu = torch.arange(4, dtype=torch.float32)
    untyped = cpu.untyped_storage().openreg()
    assert isinstance(untyped, torch.UntypedStorage)
    assert untyped.device == torch.device("openreg", 0) and untyped.is_openreg
    assert not cpu.untyped_storage().is_openreg
    assert bytes(untyped.cpu()) == bytes(cpu.untyped_storage())
    on1 = cpu.untyped_storage().openreg(1)
    assert on1.device == torch.device("openreg", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage is deprecated
        typed = cpu.storage().openreg()
        assert typed.is_openreg and typed.device.type == "openreg"
        assert typed.cpu().tolist() == cpu.tolist()
    # A tensor's storage on openreg reports the device too.
    assert cpu.openreg(1).untyped_storage().device == torch.device("openreg", 1)


def test_packed_sequence_methods():
    padded = torch.randn(3, 2, 4)
    packed = pack_padded_sequence(padded, torch.tensor([3, 2]))
    moved = packed.openreg()
    assert not packed.is_openreg
    assert moved.is_openreg
    assert moved.data.device == torch.device("openreg", 0)
    assert torch.equal(moved.data.cpu(), packed.data)
    assert torch.equal(moved.batch_sizes, packed.batch_sizes)


def test_hooks_availability_and_count():
    assert torch.openreg.is_available()
    assert torch.openreg.device_count() == 2
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("openreg")
    assert torch._C._get_accelerator() == torch.device("openreg")


def test_pinned_memory_through_the_hooks():
    pageable = torch.arange(10, dtype=torch.float32)
    assert not pageable.is_pinned()
    pinned = pageable.pin_memory()
    assert pinned.is_pinned()
    assert pinned.device.type == "cpu"
    assert torch.equal(pinned, pageable)
    # Views into pinned memory are pinned; an ordinary copy is not.
    assert pinned[3:].is_pinned()
    assert not pinned.clone().is_pinned()
    # Factory functions and DataLoader-style creation.
    assert torch.empty(5, pin_memory=True).is_pinned()
    # The storage's pointer is known to the runtime as pinned host memory.
    import openreg_runtime

    assert openreg_runtime.pointer_get_attributes(pinned.data_ptr())["type"] == "host"
    assert openreg_runtime.pointer_get_attributes(pageable.data_ptr())["type"] == "unregistered"


def test_device_memory_is_known_to_the_runtime_as_device_memory():
    import openreg_runtime

    x = torch.empty(16, device="openreg:1")
    info = openreg_runtime.pointer_get_attributes(x.data_ptr())
    assert info["type"] == "device" and info["device"] == 1
    assert not x.is_pinned()


def test_autocast_without_cast_policy_warns_once_and_keeps_full_precision(fresh_facts):
    assert fresh_facts["autocast_dtypes"] == ["torch.float32", "torch.float32"]
    assert fresh_facts["autocast_values_ok"]
    assert len(fresh_facts["autocast_warnings"]) == 1, fresh_facts["autocast_warnings"]


def test_autocast_runs_in_this_process():
    # Whether or not a layer installed a cast policy (openreg-amp tests its
    # own), an operator that no policy names runs unchanged in a region.
    a = torch.randn(8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast("openreg"):
            assert torch.is_autocast_enabled("openreg")
            result = a.openreg() + a.openreg()
    assert not torch.is_autocast_enabled("openreg")
    assert result.dtype == torch.float32
    torch.testing.assert_close(result.cpu(), a + a)


def test_lazy_initialisation(fresh_facts):
    assert fresh_facts["initialized_after_import"] is False
    assert fresh_facts["initialized_after_count"] is False
    assert fresh_facts["device_count"] == 2 and fresh_facts["available"]
    assert fresh_facts["initialized_after_tensor"] is True
    torch.openreg.init()
    assert torch.openreg.is_initialized()


def _forked_child(connection) -> None:
    results = {}
    for name, action in [("current_device", lambda: torch.openreg.current_device()),
                         ("tensor", lambda: torch.ones(2, device="openreg").sum().item())]:
        try:
            action()
            results[name] = "no error"
        except Exception as error:  # reported to the parent
            results[name] = f"{type(error).__name__}: {error}"
    results["is_initialized"] = torch.openreg.is_initialized()
    connection.send(results)
    connection.close()


def test_forked_child_cannot_use_openreg():
    torch.ones(3, device="openreg").add_(1).cpu()  # the parent has used the device
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_forked_child, args=(sender,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded process
        child.start()
    try:
        assert receiver.poll(60), "forked child did not answer"
        results = receiver.recv()
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    for name in ("current_device", "tensor"):
        assert results[name].startswith("RuntimeError"), results
        # The upstream reference backend's words, which its users and tests know.
        assert ("Cannot re-initialize OpenReg in forked subprocess. To use OpenReg with multiprocessing, "
                "you must use the 'spawn' start method") in results[name], results
    assert results["is_initialized"] is False
    # The parent is unaffected.
    assert torch.ones(2, device="openreg").sum().item() == 2.0


def test_spawned_children_use_openreg(python, tmp_path):
    script = tmp_path / "spawn_main.py"
    script.write_text(textwrap.dedent("""
        import json
        import multiprocessing

        def work(device, queue):
            import torch
            torch.openreg.set_fallback_mode("silent")
            x = torch.arange(6, dtype=torch.float32, device=f"openreg:{device}")
            queue.put((device, (x * 2 + 1).cpu().tolist(), torch.openreg.device_count()))

        if __name__ == "__main__":
            import torch
            torch.ones(1, device="openreg").cpu()  # the parent uses openreg first
            context = multiprocessing.get_context("spawn")
            queue = context.Queue()
            children = [context.Process(target=work, args=(d, queue)) for d in (0, 1)]
            for child in children:
                child.start()
            results = sorted(queue.get(timeout=60) for _ in children)
            for child in children:
                child.join(60)
            print(json.dumps({"results": results,
                              "exitcodes": [child.exitcode for child in children]}))
    """))
    facts = python.json(script, timeout=120)
    expected = [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
    assert facts["results"] == [[0, expected, 2], [1, expected, 2]]
    assert facts["exitcodes"] == [0, 0]


@pytest.mark.parametrize("variable,value,reason", [
    ("OPENREG_DEVICE_MEMORY", "garbage", "OPENREG_DEVICE_MEMORY=garbage is not a size such as 512MiB or 4GiB"),
    ("OPENREG_DEVICE_MEMORY", "0", "OPENREG_DEVICE_MEMORY=0 is not a size"),
    ("OPENREG_DEVICE_MEMORY", "nan", "OPENREG_DEVICE_MEMORY=nan is not a size"),
    ("OPENREG_DEVICE_COUNT", "1000", "OPENREG_DEVICE_COUNT=1000 is not a whole number from 1 to 64"),
])
def test_a_bad_setting_is_reported_with_the_runtimes_reason(python, variable, value, reason):
    facts = python.json("""
        import json, torch
        facts = {"available": torch.openreg.is_available(), "count": torch.openreg.device_count()}
        for name, call in [("tensor", lambda: torch.ones(1, device="openreg")),
                           ("init", torch.openreg.init),
                           ("current_device", torch.openreg.current_device)]:
            try:
                call()
                facts[name] = "no error"
            except RuntimeError as error:
                facts[name] = str(error)
        print(json.dumps(facts))
    """, env={variable: value})
    assert facts["available"] is False and facts["count"] == 0
    for name in ("tensor", "init", "current_device"):
        assert f"openreg is not available: {reason}" in facts[name], facts
