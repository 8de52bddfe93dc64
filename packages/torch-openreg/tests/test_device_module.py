"""The device module torch.openreg (every name in its __all__ works and is
documented) and the generic torch.Stream / torch.Event / torch.accelerator
APIs on openreg."""

from __future__ import annotations

import pytest
import torch

openreg = torch.openreg


# One check per public name: test_every_public_name_is_checked fails when a
# name is added to __all__ without a check here.
def _check_event():
    event = openreg.Event(enable_timing=True)
    event.record()
    event.synchronize()
    assert event.query() and isinstance(event, openreg.Event)
    assert event.device == torch.device("openreg", 0)
    with pytest.raises(NotImplementedError):
        openreg.Event(interprocess=True)


def _check_stream():
    stream = openreg.Stream(1)
    assert isinstance(stream, torch.Stream) and stream.device_index == 1
    stream.synchronize()
    assert stream.query()


def _check_stream_context():
    stream = openreg.Stream()
    with openreg.StreamContext(stream) as entered:
        assert entered is stream and openreg.current_stream() == stream
    assert openreg.current_stream() == openreg.default_stream()


def _check_oom_error():
    assert openreg.OutOfMemoryError is torch.OutOfMemoryError
    assert issubclass(openreg.OutOfMemoryError, RuntimeError)


def _check_current_device():
    assert openreg.current_device() == 0
    openreg.set_device(1)
    assert openreg.current_device() == 1
    openreg.set_device(0)


def _check_set_device():
    for spec in (1, "openreg:1", torch.device("openreg", 1)):
        openreg.set_device(spec)
        assert openreg.current_device() == 1
        openreg.set_device(0)
    openreg.set_device(None)  # no-op, as torch.cuda.set_device(-1)
    openreg.set_device(-1)
    assert openreg.current_device() == 0
    with pytest.raises(ValueError):
        openreg.set_device("cpu")


def _check_device():
    with openreg.device(1):
        assert openreg.current_device() == 1
        with openreg.device("openreg:0"):
            assert openreg.current_device() == 0
        with openreg.device(None):
            assert openreg.current_device() == 1
        assert torch.empty(1, device="openreg").device.index == 1
    assert openreg.current_device() == 0


def _check_device_of():
    x1 = torch.empty(2, device="openreg:1")
    with openreg.device_of(x1):
        assert openreg.current_device() == 1
    with openreg.device_of(torch.empty(2)):
        assert openreg.current_device() == 0
    assert openreg.current_device() == 0


def _check_current_stream():
    assert openreg.current_stream() == openreg.default_stream()
    assert openreg.current_stream(1).device_index == 1
    assert openreg.current_stream("openreg:1") == openreg.default_stream(1)


def _check_default_stream():
    s0, s1 = openreg.default_stream(0), openreg.default_stream(torch.device("openreg", 1))
    assert s0 != s1 and s0.device_index == 0 and s1.device_index == 1


def _check_set_stream():
    stream = openreg.Stream()
    openreg.set_stream(stream)
    assert openreg.current_stream() == stream
    openreg.set_stream(None)  # no-op
    assert openreg.current_stream() == stream
    openreg.set_stream(openreg.default_stream())
    with pytest.raises(ValueError):
        openreg.set_stream(torch.Stream("cpu"))


def _check_stream_function():
    stream = openreg.Stream(1)
    with openreg.stream(stream):
        assert openreg.current_device() == 1 and openreg.current_stream() == stream
    assert openreg.current_device() == 0


def _check_device_count():
    assert openreg.device_count() == 2


def _check_is_available():
    assert openreg.is_available() is True


def _check_synchronize():
    x = torch.empty(1000, device="openreg:1").uniform_()
    openreg.synchronize(1)
    openreg.synchronize("openreg:0")
    openreg.synchronize()
    assert openreg.current_stream(1).query()
    del x


def _check_default_generators():
    gens = openreg.default_generators
    assert len(gens) == 2
    assert [g.device for g in gens] == [torch.device("openreg", 0), torch.device("openreg", 1)]


def _check_rng(name):
    # The RNG functions are exercised in test_random.py; here: callable and typed.
    def check():
        states = openreg.get_rng_state_all()
        try:
            if name in ("manual_seed", "manual_seed_all"):
                getattr(openreg, name)(5)
                assert openreg.initial_seed() == 5
            elif name in ("seed", "seed_all"):
                getattr(openreg, name)()
                assert isinstance(openreg.initial_seed(), int)
            elif name == "initial_seed":
                assert isinstance(openreg.initial_seed(), int)
            elif name == "get_rng_state":
                assert openreg.get_rng_state().dtype == torch.uint8
            elif name == "set_rng_state":
                openreg.set_rng_state(openreg.get_rng_state(1), 1)
            elif name == "get_rng_state_all":
                assert len(openreg.get_rng_state_all()) == 2
            elif name == "set_rng_state_all":
                openreg.set_rng_state_all(openreg.get_rng_state_all())
        finally:
            openreg.set_rng_state_all(states)
    return check


def _check_memory(name):
    def check():
        x = torch.empty(1000, device="openreg:1")
        value = getattr(openreg, name)(1) if name not in ("empty_cache",) else None
        if name in ("memory_allocated", "max_memory_allocated"):
            assert value >= 4096
        elif name in ("memory_reserved", "max_memory_reserved"):
            assert value >= 2 << 20
        elif name == "memory_stats":
            assert value["allocated_bytes.all.current"] == openreg.memory_allocated(1)
        elif name == "mem_get_info":
            free, total = value
            assert total == 4 << 30 and 0 < free <= total
        elif name == "memory_summary":
            assert isinstance(value, str)
            assert "device 1" in value
            assert "Allocated memory" in value and "Reserved memory" in value
        elif name in ("reset_peak_memory_stats", "reset_accumulated_memory_stats"):
            assert value is None
        del x
        if name == "empty_cache":
            openreg.empty_cache()
            assert openreg.memory_reserved(1) == openreg.memory_allocated(1)
    return check


def _check_memory_fraction():
    # The cap itself, and its refusals, are tested in test_memory.py.
    assert openreg.get_per_process_memory_fraction() == openreg.get_per_process_memory_fraction(1) == 1.0
    openreg.set_per_process_memory_fraction(0.5, "openreg:1")
    try:
        assert openreg.get_per_process_memory_fraction(torch.device("openreg", 1)) == 0.5
        assert openreg.get_per_process_memory_fraction(0) == 1.0
        assert torch.empty(1000, device="openreg:1").device.index == 1
    finally:
        openreg.set_per_process_memory_fraction(1.0, 1)
    assert openreg.get_per_process_memory_fraction(1) == 1.0


def _check_get_device_name():
    assert openreg.get_device_name() == openreg.get_device_name(1) == "OpenReg Simulated Device"


def _check_get_device_properties():
    props = openreg.get_device_properties(1)
    assert props.name == "OpenReg Simulated Device"
    assert props.total_memory == 4 << 30
    assert (props.major, props.minor) == openreg.get_device_capability(1)
    assert props.multi_processor_count > 0
    assert "OpenReg" in repr(props)
    with pytest.raises(torch.AcceleratorError):
        openreg.get_device_properties(7)


def _check_get_device_capability():
    capability = openreg.get_device_capability()
    assert isinstance(capability, tuple) and len(capability) == 2
    assert all(isinstance(v, int) for v in capability)


def _check_init():
    openreg.init()
    assert openreg.is_initialized()


def _check_is_initialized():
    torch.empty(1, device="openreg")
    assert openreg.is_initialized() is True


def _check_get_amp_supported_dtype():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert openreg.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]


def _check_fallback_api():
    before = openreg.get_fallback_mode()
    openreg.set_fallback_mode("warn")
    assert openreg.get_fallback_mode() == "warn"
    openreg.set_fallback_mode(before)
    openreg.reset_fallback_counts()
    assert openreg.fallback_counts() == {}


def _check_executor_api():
    assert openreg.device_executor_enabled() is True
    openreg.set_device_executor_enabled(False)
    try:
        assert openreg.device_executor_enabled() is False
    finally:
        openreg.set_device_executor_enabled(True)
    torch.erf(torch.ones(2, device="openreg"))  # the first call with float32 is synchronous
    openreg.reset_fallback_counts()
    torch.erf(torch.ones(2, device="openreg")).cpu()
    assert openreg.executor_counts()["aten::erf.out"] == (1, 0)


def _check_extensions():
    assert isinstance(openreg.extensions(), dict)


def _check_timing_only():
    # test_timing_only.py checks what the mode does; here, the switch and its strictness.
    assert openreg.is_timing_only() is False and openreg.is_timing_only_strict() is False
    openreg.set_timing_only(True, strict=True)
    try:
        assert openreg.is_timing_only() is True and openreg.is_timing_only_strict() is True
    finally:
        openreg.set_timing_only(False)
    assert openreg.is_timing_only() is False and openreg.is_timing_only_strict() is False


def _check_values_read_as_nan():
    # test_timing_only.py checks when NaN stands for a value; here, the count's shape.
    count = openreg.values_read_as_nan()
    assert isinstance(count, int) and count >= 0


def _check_meta_disagreements():
    # test_executor.py makes an operator disagree; here, the API's shape.
    found = openreg.meta_disagreements()
    assert isinstance(found, dict)
    assert all(isinstance(count, int) and isinstance(first, str) for count, first in found.values())


def _check_profiler_activity():
    # test_profiler.py checks the records' meaning; here, the API's shape.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.PrivateUse1]):
        torch.ones(2, device="openreg").add_(1)
    records = openreg.profiler_activity()
    assert all(isinstance(r, openreg.ActivityRecord) for r in records)
    assert {"launch", "kernel"} <= {r.kind for r in records}


def _check_record_activity():
    # test_record_activity.py checks the records' meaning; here, the API's shape.
    with openreg.record_activity() as recording:
        torch.ones(2, device="openreg").neg()
    assert isinstance(recording, openreg.ActivityRecording)
    assert all(isinstance(r, openreg.ActivityRecord) for r in recording.activity)
    assert all(isinstance(call, openreg.OperatorRecord) for call in recording.operators.values())
    assert "aten::neg" in {call.name for call in recording.operators.values()}
    assert openreg.SIMULATOR_TRANSFER == "openreg::simulator_transfer"  # what the recording names them


CHECKS = {
    "ActivityRecord": _check_profiler_activity, "profiler_activity": _check_profiler_activity,
    "record_activity": _check_record_activity, "ActivityRecording": _check_record_activity,
    "OperatorRecord": _check_record_activity, "SIMULATOR_TRANSFER": _check_record_activity,
    "meta_disagreements": _check_meta_disagreements,
    "set_timing_only": _check_timing_only, "is_timing_only": _check_timing_only,
    "is_timing_only_strict": _check_timing_only,
    "values_read_as_nan": _check_values_read_as_nan,
    "Event": _check_event, "OutOfMemoryError": _check_oom_error, "Stream": _check_stream,
    "StreamContext": _check_stream_context, "current_device": _check_current_device,
    "current_stream": _check_current_stream, "default_generators": _check_default_generators,
    "default_stream": _check_default_stream, "device": _check_device,
    "device_count": _check_device_count, "device_of": _check_device_of,
    "extensions": _check_extensions, "fallback_counts": _check_fallback_api,
    "device_executor_enabled": _check_executor_api, "executor_counts": _check_executor_api,
    "set_device_executor_enabled": _check_executor_api,
    "get_amp_supported_dtype": _check_get_amp_supported_dtype,
    "get_device_capability": _check_get_device_capability,
    "get_device_name": _check_get_device_name,
    "get_device_properties": _check_get_device_properties,
    "get_fallback_mode": _check_fallback_api, "init": _check_init,
    "get_per_process_memory_fraction": _check_memory_fraction,
    "set_per_process_memory_fraction": _check_memory_fraction,
    "is_available": _check_is_available, "is_initialized": _check_is_initialized,
    "reset_fallback_counts": _check_fallback_api, "set_device": _check_set_device,
    "set_fallback_mode": _check_fallback_api, "set_stream": _check_set_stream,
    "stream": _check_stream_function, "synchronize": _check_synchronize,
    **{name: _check_rng(name) for name in (
        "get_rng_state", "get_rng_state_all", "initial_seed", "manual_seed", "manual_seed_all",
        "seed", "seed_all", "set_rng_state", "set_rng_state_all")},
    **{name: _check_memory(name) for name in (
        "empty_cache", "max_memory_allocated", "max_memory_reserved", "mem_get_info",
        "memory_allocated", "memory_reserved", "memory_stats", "memory_summary",
        "reset_accumulated_memory_stats", "reset_peak_memory_stats")},
}


def test_every_public_name_is_checked():
    assert set(openreg.__all__) == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_public_name_works(name):
    assert name in openreg.__all__
    CHECKS[name]()


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_public_name_is_documented(name):
    obj = getattr(openreg, name)
    if name == "default_generators":
        return  # a tuple of generators: documented where it is defined, in random.py
    # Its own docstring: a class's __doc__ is not inherited.
    assert obj.__doc__ and obj.__doc__.strip(), f"torch.openreg.{name} has no docstring"


def test_module_docstring():
    assert openreg.__doc__ and "openreg" in openreg.__doc__


# ------------------------------------------------------- torch.accelerator


def test_accelerator_device_management():
    assert torch.accelerator.current_accelerator() == torch.device("openreg")
    assert torch.accelerator.device_count() == 2
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1
    assert openreg.current_device() == 1
    torch.accelerator.set_device_index(0)
    with torch.accelerator.device_index(1):
        assert openreg.current_device() == 1
        assert torch.empty(1, device="openreg").device.index == 1
    assert openreg.current_device() == 0
    with torch.accelerator.device_index(None):
        assert openreg.current_device() == 0


def test_accelerator_streams():
    assert torch.accelerator.current_stream() == openreg.default_stream(0)
    assert torch.accelerator.current_stream(1) == openreg.default_stream(1)
    stream = torch.Stream("openreg:1")
    torch.accelerator.set_stream(stream)
    assert openreg.current_stream(1) == stream
    assert torch.accelerator.current_device_index() == 1  # set_stream switches device
    torch.accelerator.set_stream(openreg.default_stream(1))
    torch.accelerator.set_device_index(0)
    x = torch.empty(100, device="openreg:1").normal_()
    torch.accelerator.synchronize(1)
    torch.accelerator.synchronize()
    assert openreg.current_stream(1).query()
    del x


def test_accelerator_capability_and_memory():
    capability = torch.accelerator.get_device_capability(1)
    assert torch.float32 in capability["supported_dtypes"]
    assert torch.bfloat16 in capability["supported_dtypes"]
    x = torch.empty(1000, device="openreg")
    assert torch.accelerator.memory_allocated() == openreg.memory_allocated()
    assert torch.accelerator.memory_reserved() == openreg.memory_reserved()
    assert torch.accelerator.max_memory_reserved() == openreg.max_memory_reserved()
    torch.accelerator.reset_accumulated_memory_stats()
    assert openreg.memory_stats()["allocation.all.allocated"] == 0
    del x


def test_torch_stream_and_event_on_openreg():
    stream = torch.Stream(device="openreg:1", priority=-1)
    assert stream.device == torch.device("openreg", 1)
    event = torch.Event(device="openreg:1", enable_timing=True)
    stream.record_event(event)
    event.synchronize()
    other = torch.Stream("openreg:1")
    other.wait_event(event)
    other.wait_stream(stream)
    other.synchronize()
    assert stream.query() and other.query() and event.query()
    assert "openreg" in repr(stream)


def test_device_count_follows_the_environment(python):
    facts = python.json("""
        import json, torch
        x = torch.arange(4.0).to("openreg:2")
        facts = {"count": torch.openreg.device_count(),
                 "accelerator_count": torch.accelerator.device_count(),
                 "generators": len(torch.openreg.default_generators),
                 "device": str(x.device), "values": (x * 2).cpu().tolist()}
        try:
            torch.empty(1, device="openreg:3")
        except RuntimeError as error:  # torch.AcceleratorError, as CUDA's
            facts["error"] = str(error)
        print(json.dumps(facts))
    """, env={"OPENREG_DEVICE_COUNT": "3"})
    assert facts["count"] == facts["accelerator_count"] == facts["generators"] == 3
    assert facts["device"] == "openreg:2" and facts["values"] == [0.0, 2.0, 4.0, 6.0]
    assert "there are 3 openreg devices" in facts["error"]


# A backward through a Python kernel (slow on the autograd thread) just before
# the program ends: without the exit handler of Note [Autograd's device
# threads at exit], about one run in four aborted here.
BACKWARD_THEN_EXIT = """
import torch
lib = torch.library.Library("aten", "IMPL")

def square(x):
    with torch.no_grad():
        return torch.mul(x, x)

lib.impl("square", square, "PrivateUse1")
for device in ("openreg:0", "openreg:1"):
    x = torch.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    (torch.square(x) + x).sum().backward()
print("done")
"""


def test_a_program_that_ends_right_after_a_backward_exits_cleanly(python):
    for _ in range(8):
        result = python.run(BACKWARD_THEN_EXIT, check=False)
        assert (result.returncode, result.stdout.strip()) == (0, "done"), result.stderr[-2000:]


def test_settling_the_autograd_threads_at_exit_imports_nothing(python):
    """The exit handler's backward must not import torch._dynamo (a second of
    every program's exit, when it did). The check is registered before torch,
    so it runs after torch-openreg's exit handlers."""
    result = python.run("""
        import atexit, sys
        atexit.register(lambda: print("dynamo imported at exit:", "torch._dynamo" in sys.modules))
        import torch
        x = torch.ones(3, device="openreg", requires_grad=True)
        x.clone().sum().backward()
        print("dynamo imported by the program:", "torch._dynamo" in sys.modules)
    """)
    assert result.stdout.splitlines() == ["dynamo imported by the program: False",
                                          "dynamo imported at exit: False"], result.stdout
