"""torch.openreg.record_activity(): the runtime's records of a region with the
operator calls that queued its work, described as torch.profiler's
record_shapes describes them, without a profiler session."""

import ast
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch.nn as nn
import torch_openreg
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def launches(recording):
    return [r for r in recording.activity if r.kind == "launch"]


def calls_of(recording):
    """Each launch's operator call, in launch order."""
    return [recording.operators[r.external_correlation_id] for r in launches(recording)]


def run_calls():
    x = torch.ones(2, 3, device="openreg", dtype=torch.half)
    y = torch.ones(3, device="openreg")
    x.sum(dim=[0], keepdim=True)
    y.add(y, alpha=2)
    torch.cat([y, y])
    torch._foreach_add_([y, y], [y, y])
    y.clamp(min=0.5)
    torch.full((2,), 1.5, device="openreg")
    torch.nn.functional.gelu(y, approximate="tanh")


def test_each_launch_names_its_call_as_the_profiler_describes_it():
    run_calls()  # once before, so that both regions make the same calls
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        run_calls()
    profiled = {(e.name(), repr(e.structured_input_shapes()), repr(e.dtypes()), repr(e.concrete_inputs()))
                for e in prof.profiler.kineto_results.events()}
    with torch.openreg.record_activity() as recording:
        run_calls()
    calls = calls_of(recording)
    assert {call.name for call in calls} >= {"aten::sum", "aten::add", "aten::cat", "aten::_foreach_add_",
                                            "aten::clamp", "aten::fill_", "aten::gelu"}
    # A multi-tensor operator's per-tensor loop is not recorded: each of its launches names the
    # _foreach_ call, the one kernel call a real device's library makes of it.
    assert "aten::add_" not in {call.name for call in calls}
    assert [call.name for call in calls].count("aten::_foreach_add_") == 2
    for call in calls:
        assert (call.name, repr(call.shapes), repr(call.dtypes), repr(call.concrete_inputs)) in profiled, call
    add = next(call for call in calls if call.name == "aten::add")
    # On the plain path PyTorch's own kernel of add (CompositeExplicitAutogradNonFunctional) calls
    # add.out, and that call launches: it has the out= argument too.
    out = [] if torch_openreg._C._fast_paths_enabled() else [[3]]
    assert add.shapes == [[3], [3], [], *out] and add.dtypes == ["float", "float", "Scalar", *["float"] * len(out)]
    assert add.concrete_inputs == [None, None, 2, *[None] * len(out)]
    cat = next(call for call in calls if call.name == "aten::cat")
    assert cat.shapes[0] == [[3], [3]] and cat.dtypes[0] == "TensorList"


def test_each_call_records_what_it_returned():
    """Outputs are described as arguments are: a tool prices what a call wrote without deriving it."""
    a, b = torch.randn(4, 6, device="openreg"), torch.randn(6, 5, device="openreg")
    with torch.openreg.record_activity() as recording:
        a.mm(b)
        a.half().max(dim=1)
        torch.cat([a, a])
    calls = {call.name: call for call in calls_of(recording)}
    assert calls["aten::mm"].output_shapes == [[4, 5]] and calls["aten::mm"].output_dtypes == ["float"]
    assert calls["aten::cat"].output_shapes == [[8, 6]]
    maximum = calls["aten::max"]
    assert maximum.output_shapes == [[4], [4]] and maximum.output_dtypes == ["c10::Half", "long int"]


def test_indexing_records_its_list_of_optional_tensors_as_a_tensor_list():
    """x[:, idx] calls index(self, [None, idx]), a Tensor?[]: recorded as a tensor list whose None has
    no sizes, as the profiler records an undefined tensor in one, so a tool can price what it picks."""
    x, idx = torch.randn(4, 6, device="openreg"), torch.tensor([0, 2, 5], device="openreg")
    with torch.openreg.record_activity() as recording:
        x[:, idx]
        x[x > 0] = 1.0
    calls = {call.name: call for call in calls_of(recording)}
    assert calls["aten::index"].shapes[:2] == [[4, 6], [[], [3]]]
    assert calls["aten::index"].dtypes[:2] == ["float", "TensorList"]
    assert calls["aten::_index_put_impl_"].shapes[:2] == [[4, 6], [[4, 6]]]


def test_a_call_on_channels_last_tensors_says_so():
    """A device's convolution library may convert NCHW tensors to channels-last and back: a tool pricing
    the call needs the layout, and equal shapes in two layouts are two different calls."""
    image, weight = torch.randn(2, 3, 8, 8, device="openreg"), torch.randn(4, 3, 3, 3, device="openreg")
    with torch.openreg.record_activity() as recording:
        torch.nn.functional.conv2d(image, weight)
        torch.nn.functional.conv2d(image.to(memory_format=torch.channels_last), weight)
    convolutions = [call for call in calls_of(recording) if "conv" in call.name]
    assert [call.channels_last for call in convolutions] == [False, True]
    assert convolutions[0].shapes == convolutions[1].shapes


def test_the_outermost_calls_are_those_no_recorded_call_made():
    """A call from Python is outermost; the operators a composite calls are not (linear -> t, addmm)."""
    x, weight = torch.randn(4, 8, device="openreg"), torch.randn(16, 8, device="openreg")
    with torch.openreg.record_activity() as recording:
        torch.nn.functional.linear(x, weight)
        torch.relu(x)
    assert len(recording.outermost_starts_ns) == 2
    assert set(recording.outermost_starts_ns) < set(recording.operator_starts_ns)
    assert len(recording.operator_starts_ns) >= 4  # linear, its t and its matrix product, relu...
    with torch.openreg.record_activity() as again:  # nothing is left counted as running
        torch.relu(x)
    assert again.outermost_starts_ns == again.operator_starts_ns[:1]


def test_the_copies_the_simulator_makes_for_itself_are_named_so_and_are_no_operator_starts():
    """nonzero's size depends on the data: its kernel computes on the host, and the simulator copies the result
    to the device, which a real device does not (Note [The simulator's own transfers])."""
    x = torch.randn(64, device="openreg")
    with torch.openreg.record_activity() as recording:
        torch.nonzero(x)
    kinds = {r.correlation_id: r.name for r in recording.activity if r.kind in ("kernel", "memcpy")}
    launched = [(kinds[r.correlation_id], recording.operators[r.external_correlation_id].name)
                for r in launches(recording)]
    assert launched == [("aten::nonzero", "aten::nonzero"), ("memcpyHtoD", torch.openreg.SIMULATOR_TRANSFER)]
    assert recording.operator_starts_ns == recording.outermost_starts_ns  # nonzero's, not its transfer's


def test_the_executors_check_of_a_first_call_is_the_simulators_own_wait_and_nonzeros_wait_is_not():
    """A first call with new dtypes runs synchronously, for the executor to check its Meta kernel, where a
    real device would queue it: its host wait, and the wait for the copy of its result, fall in the
    simulator's own intervals. nonzero waits on any device (its size is the data's): only its copy's wait
    does. A fresh process, so that the first call is one."""
    code = textwrap.dedent("""
        import torch
        x = torch.randn(64, device="openreg", dtype=torch.float64)
        torch.openreg.synchronize()
        def waits(fn):
            with torch.openreg.record_activity() as recording:
                fn()
            inside = lambda r: any(a <= r.start_ns and r.end_ns <= b for a, b in recording.simulator_intervals_ns)
            # Not the recording's own wait for the devices as it ends.
            return [inside(r) for r in recording.activity if r.kind == "synchronize" and "Device" not in r.name]
        print(waits(lambda: torch.atan2(x, x)), waits(lambda: torch.atan2(x, x)), waits(lambda: torch.nonzero(x)))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[True, True] [] [False, True]"


def test_every_launch_of_a_training_step_is_tied_to_a_call_and_its_device_record():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to("openreg")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device="openreg")
    with torch.openreg.record_activity() as recording:
        model(x).sum().backward()  # the backward runs on autograd's thread
        optimizer.step()
    by_correlation = {r.correlation_id: r for r in recording.activity if r.kind != "launch"}
    assert len(launches(recording)) > 10
    for launch in launches(recording):
        assert launch.external_correlation_id in recording.operators, launch
        device_record = by_correlation[launch.correlation_id]
        assert launch.start_ns <= device_record.start_ns <= device_record.end_ns
    names = {call.name for call in calls_of(recording)}
    assert {"aten::addmm", "aten::mm", "aten::threshold_backward"} <= names
    starts = recording.operator_starts_ns
    assert starts == sorted(starts) and len(starts) >= len(recording.operators)


def test_equal_calls_share_one_record_and_cpu_calls_are_not_recorded():
    x, cpu = torch.ones(4, device="openreg"), torch.ones(4)
    with torch.openreg.record_activity() as recording:
        for _ in range(3):
            x.clamp_(min=1.0)
            cpu.clamp_(min=2.0)
        x.clamp_(min=3.0)
    calls = calls_of(recording)
    assert [call.concrete_inputs[1] for call in calls] == [1.0, 1.0, 1.0, 3.0]
    assert calls[0] is calls[1] is calls[2] and calls[3] is not calls[0]
    with torch.openreg.record_activity() as cpu_only:
        cpu.clamp_(min=2.0)
    assert cpu_only.operators == {} and cpu_only.operator_starts_ns == []


def test_equal_arguments_with_different_results_are_different_calls():
    # Equal calls are recognised by their arguments and their results: a data-dependent shape
    # makes two calls with equal arguments different calls.
    half, full = torch.tensor([1.0, 0.0, 1.0, 0.0], device="openreg"), torch.ones(4, device="openreg")
    with torch.openreg.record_activity() as recording:
        for x in (half, full, half):
            torch.nonzero(x)
    nonzero = [call for call in calls_of(recording) if call.name == "aten::nonzero"]
    assert [call.output_shapes for call in nonzero] == [[[2, 1]], [[4, 1]], [[2, 1]]]
    assert nonzero[0] is nonzero[2] and nonzero[1] is not nonzero[0]
    assert nonzero[0].shapes == nonzero[1].shapes == [[4]]


# A wrapper subclass whose sizes are read through __torch_dispatch__, which runs an operator: reading
# its sizes inside the recording's callback dispatches that operator on the same thread.
SIZES_THROUGH_AN_OPERATOR = textwrap.dedent("""
    import torch, torch_openreg

    class SizesThroughAnOperator(torch.Tensor):
        @staticmethod
        def __new__(cls, inner):
            return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device,
                                                       dispatch_sizes_strides_policy="sizes")

        def __init__(self, inner):
            self.inner = inner

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            unwrapped = [a.inner if isinstance(a, SizesThroughAnOperator) else a for a in args]
            if func is torch.ops.aten.size.default:
                return tuple(torch.ops.aten.alias.default(unwrapped[0]).shape)
            result = func(*unwrapped, **(kwargs or {}))
            return SizesThroughAnOperator(result) if isinstance(result, torch.Tensor) else result

    w = SizesThroughAnOperator(torch.ones(2, device="openreg"))
    with torch.openreg.record_activity() as recording:
        w + w
    print([(recording.operators[r.external_correlation_id].name, recording.operators[r.external_correlation_id].shapes)
           for r in recording.activity if r.kind == "launch"])
""")


def test_an_operator_the_callback_itself_dispatches_is_not_recorded():
    # In a process of its own: the callback re-entered on its own thread took its lock twice and hung.
    done = subprocess.run([sys.executable, "-c", SIZES_THROUGH_AN_OPERATOR], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    # Which calls launch depends on the layers installed (the speed layers' add launches itself).
    launched = ast.literal_eval(done.stdout.strip())
    assert any(name == "aten::add" and shapes[:2] == [[2], [2]] for name, shapes in launched), launched


def test_a_recording_keeps_no_tensor_alive():
    torch.openreg.synchronize()
    before = torch.openreg.memory_allocated()
    with torch.openreg.record_activity() as recording:
        big = torch.empty(1 << 20, device="openreg")
        big.fill_(1.0)
        del big
    assert recording.operators
    assert torch.openreg.memory_allocated() == before


def test_one_consumer_of_the_records_at_a_time(capfd):
    x = torch.ones(2, device="openreg")
    torch.openreg.synchronize()  # its fill_ before either records
    with profile(activities=ACTIVITIES):
        with pytest.raises(RuntimeError, match="openreg profiler is collecting .* stop it first"):
            with torch.openreg.record_activity():
                pass
        x.neg()
    assert [r.name for r in torch.openreg.profiler_activity() if r.kind == "kernel"] == ["aten::neg"]
    with torch.openreg.record_activity() as recording:
        with pytest.raises(RuntimeError, match="already running; they do not nest"):
            with torch.openreg.record_activity():
                pass
        with profile(activities=ACTIVITIES) as prof:  # Kineto starts it: its warning goes to the standard error
            absolute = x.abs()
    assert "no openreg device activity in this profile: torch.openreg.record_activity() is collecting" in \
        capfd.readouterr().err
    assert not [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    # The session that could not collect left the recording's operators, and the last session's
    # records, alone.
    assert [call.name for call in calls_of(recording)] == ["aten::abs"]
    assert [r.name for r in torch.openreg.profiler_activity() if r.kind == "kernel"] == ["aten::neg"]
    assert absolute.cpu().tolist() == [1.0, 1.0]  # the work ran all the same


def test_calls_from_other_threads_are_recorded():
    x = torch.ones(3, device="openreg")

    def work():
        torch.openreg.set_device(0)
        x.neg()

    with torch.openreg.record_activity() as recording:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert [call.name for call in calls_of(recording)] == ["aten::neg"]
