"""torch.compile on openreg: Inductor's generated kernels run on openreg
streams, asynchronously, and compiled models (forward and training step)
match eager openreg with no operator falling back to the CPU; also
recompilation, dynamic shapes, graph breaks and the registrations."""

from __future__ import annotations

import copy
import gc
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import openreg_runtime
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

# The models of the eager training tests (MLP, CNN with BatchNorm,
# Transformer encoder, LSTM+GRU), with their inputs and optimizers.
_spec = importlib.util.spec_from_file_location("eager_training", Path(__file__).with_name("test_training.py"))
_eager_training = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_eager_training)
MODELS = _eager_training.MODELS


@pytest.fixture(autouse=True)
def _compile_state(tmp_path_factory, monkeypatch):
    """Inductor's caches in a temporary directory, Dynamo's state reset
    around each test, and the CPU fallback refused (no operator may leave
    the device)."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "inductor"))
    torch._dynamo.reset()
    torch.openreg.set_fallback_mode("error")
    yield
    torch._dynamo.reset()  # compiled graphs hold device memory (their constants, cached buffers)
    gc.collect()


def on_device(module: nn.Module) -> nn.Module:
    return copy.deepcopy(module).to("openreg")


def assert_on_openreg(module: nn.Module) -> None:
    for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
        assert tensor.device.type == "openreg", f"{name} left the device: {tensor.device}"


# ------------------------------------------------------------ registration

# A fresh process: `import torch` leaves Dynamo and Inductor unimported, and
# whatever imports them first, compiling on openreg works with both backends.
FRESH_PROCESS = """
import sys, torch
assert "torch._dynamo" not in sys.modules and "torch._inductor" not in sys.modules, "imported at autoload"
first = sys.argv[1]
if first == "inductor":
    import torch._inductor
elif first == "interface":
    from torch._dynamo.device_interface import get_interface_for_device
    assert get_interface_for_device("openreg:1").device_count() == 2
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
x = torch.randn(4, 8)
for backend in ("inductor", "openreg"):
    torch._dynamo.reset()
    out = torch.compile(model.to("openreg"), backend=backend)(x.to("openreg"))
    torch.testing.assert_close(out.cpu(), model.cpu()(x))
print("compiled", first)
"""


@pytest.mark.parametrize("first_import", ["torch._dynamo", "inductor", "interface"])
def test_a_fresh_process_registers_on_first_use_whatever_imports_dynamo_first(first_import):
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    # The compiled C++ kernels are shared with the other tests (the same source
    # compiles once), but not whole graphs: each process lowers its graphs
    # itself, through the device's registrations, instead of loading them.
    env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, first_import], capture_output=True, text=True,
                            timeout=240, env=env)
    assert result.returncode == 0, result.stderr
    assert f"compiled {first_import}" in result.stdout


def test_dynamo_device_interface_is_openreg():
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("openreg")
    assert interface is get_interface_for_device("openreg:1")
    assert interface.device_count() == torch.openreg.device_count() == 2
    assert interface.is_available()
    with interface.device(1):
        assert interface.current_device() == 1
    stream = interface.Stream()
    with interface.stream(stream):
        assert interface.current_stream() == stream
        assert interface.get_raw_stream(0) == stream.native_handle
    event = interface.Event()
    event.record(interface.current_stream())
    interface.synchronize(0)
    assert isinstance(event, torch.Event) and event.query()
    assert event.device == torch.device("openreg", 0)  # an event takes its device when recorded
    assert interface.get_device_properties(0).name == torch.openreg.get_device_name(0)
    assert interface.is_dtype_supported(torch.bfloat16)


def test_openreg_is_a_dynamo_backend_compiling_with_inductor():
    assert "openreg" in torch._dynamo.list_backends()
    x = torch.randn(64, device="openreg")
    compiled = torch.compile(lambda t: (t.sin() + 1).relu(), backend="openreg")
    torch.testing.assert_close(compiled(x).cpu(), (x.cpu().sin() + 1).relu())


# ------------------------------------------------------------------ models


def compile_and_compare(name: str, dynamic: bool | None = None):
    build, make_input, make_optimizer = MODELS[name]
    torch.manual_seed(0)
    model = build()
    eager, compiled = on_device(model), on_device(model)
    compiled_model = torch.compile(compiled, dynamic=dynamic)
    optimizers = [make_optimizer(eager.parameters()), make_optimizer(compiled.parameters())]
    compiled_step = torch.compile(optimizers[1].step)
    x = make_input().to("openreg")
    y = torch.randint(0, 3, (x.shape[0],)).to("openreg")
    with torch.no_grad():
        torch.testing.assert_close(compiled_model(x).cpu(), eager(x).cpu(), rtol=1e-4, atol=1e-5)
    for _ in range(2):
        for module, optimizer, step in ((eager, optimizers[0], optimizers[0].step),
                                        (compiled_model, optimizers[1], compiled_step)):
            optimizer.zero_grad()
            F.cross_entropy(module(x), y).backward()
            step()
    for (pname, expected), actual in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(actual.detach().cpu(), expected.detach().cpu(), rtol=1e-3, atol=1e-4,
                                   msg=lambda m, pname=pname: f"{pname}: {m}")
    assert_on_openreg(compiled)
    return compiled_model


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_model_matches_eager_openreg_without_fallback(name):
    torch.openreg.reset_fallback_counts()
    compile_and_compare(name)
    assert torch.openreg.fallback_counts() == {}



def test_compiled_cross_entropy_training_step_over_ten_classes_matches_cpu():
    # Ten classes over 64 rows make Inductor vectorise the backward of
    # cross_entropy, whose `masked` loads need the C++ data-type rules (Note
    # [Inductor's choices keyed on the device type "cpu"] in inductor.py).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    x, y = torch.randn(64, 32), torch.randint(0, 10, (64,))
    trained = {}
    for device, compiled in (("cpu", False), ("openreg", False), ("openreg", True)):
        module = copy.deepcopy(model).to(device)
        optimizer = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
        inputs, targets = x.to(device), y.to(device)

        def loss(module=module, inputs=inputs, targets=targets):
            return F.cross_entropy(module(inputs), targets)
        forward, update = (torch.compile(loss), torch.compile(optimizer.step)) if compiled else (loss, optimizer.step)
        for _ in range(3):
            optimizer.zero_grad()
            forward().backward()
            update()
        trained[device, compiled] = module.cpu()
    for key in (("openreg", False), ("openreg", True)):
        for (pname, expected), actual in zip(trained["cpu", False].named_parameters(),
                                             trained[key].parameters(), strict=True):
            torch.testing.assert_close(actual.detach(), expected.detach(), rtol=1e-4, atol=1e-5,
                                       msg=lambda m, pname=pname, key=key: f"{key} {pname}: {m}")

def test_compiled_model_stays_on_its_device_index():
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU()).to("openreg:1")
    compiled = torch.compile(model)
    x = torch.randn(5, 6)
    out = compiled(x.to("openreg:1"))
    assert out.device == torch.device("openreg", 1)
    torch.testing.assert_close(out.cpu(), model.cpu()(x), rtol=1e-4, atol=1e-5)


# ----------------------------------------------- recompilation and shapes


def count_compiles(fn, **kwargs):
    counter = torch._dynamo.testing.CompileCounterWithBackend("openreg")
    return torch.compile(fn, backend=counter, **kwargs), counter


def softmax_mlp(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.tanh(x @ w) * 2 + 1, dim=-1)


def test_new_shape_recompiles_static_graph():
    compiled, counter = count_compiles(softmax_mlp, dynamic=False)
    w = torch.randn(16, 8)
    for rows in (4, 4, 9):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(compiled(x.to("openreg"), w.to("openreg")).cpu(), softmax_mlp(x, w))
    assert counter.frame_count == 2  # 4 rows, then 9 rows; the repeat reused the first


def test_dynamic_shapes_compile_once():
    compiled, counter = count_compiles(softmax_mlp, dynamic=True)
    w = torch.randn(16, 8)
    for rows in (3, 7, 12):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(compiled(x.to("openreg"), w.to("openreg")).cpu(), softmax_mlp(x, w))
    assert counter.frame_count == 1


def test_dynamic_model_training_matches_eager():
    compiled = compile_and_compare("mlp", dynamic=True)
    x = torch.randn(5, 10)  # a batch size the compiled graphs have not seen
    eager = nn.Sequential(*[copy.deepcopy(m).cpu() for m in compiled._orig_mod])
    with torch.no_grad():
        torch.testing.assert_close(compiled(x.to("openreg")).cpu(), eager(x), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------- graph breaks


def with_graph_break(x: torch.Tensor) -> torch.Tensor:
    y = torch.relu(x) * 3
    if y.sum().item() > 0:  # data-dependent control flow: Dynamo breaks the graph here
        y = y - 1
    return torch.sigmoid(y)


def test_graph_break_runs_the_rest_eagerly_on_openreg():
    compiled, counter = count_compiles(with_graph_break)
    for x in (torch.randn(32), -torch.ones(32)):
        torch.testing.assert_close(compiled(x.to("openreg")).cpu(), with_graph_break(x))
    assert counter.frame_count >= 2  # the graphs before and after the break


# ------------------------------------------------ kernels on the device


def test_generated_kernels_run_on_the_current_stream_by_name():
    compiled = torch.compile(softmax_mlp)
    x, w = torch.randn(4, 16, device="openreg"), torch.randn(16, 8, device="openreg")
    compiled(x, w)  # compile outside the trace
    stream = torch.openreg.Stream()
    torch.openreg.synchronize()
    openreg_runtime.trace_enable(True)
    try:
        openreg_runtime.trace_drain()
        with torch.openreg.stream(stream):
            out = compiled(x, w)
        stream.synchronize()
        activity = openreg_runtime.trace_drain()
    finally:
        openreg_runtime.trace_enable(False)
    ran = [a for a in activity if a["kind"] == "kernel" and a["name"].startswith("cpp_fused")]
    launched = [a["name"] for a in activity if a["kind"] == "launch" and a["name"].startswith("cpp_fused")]
    assert ran, f"no generated kernel ran: {activity}"
    assert launched == [a["name"] for a in ran]
    assert {a["stream"] for a in ran} == {stream.native_handle}
    torch.testing.assert_close(out.cpu(), softmax_mlp(x.cpu(), w.cpu()))


def test_generated_kernels_are_asynchronous(on_blocked_stream):
    compiled = torch.compile(lambda t: torch.exp(t) + t * t)
    x = torch.randn(256, device="openreg")
    compiled(x)  # compile before the stream is blocked
    out = on_blocked_stream(lambda: compiled(x))
    torch.testing.assert_close(out.cpu(), torch.exp(x.cpu()) + x.cpu() * x.cpu())


def test_launch_refuses_a_host_tensor():
    from torch_openreg import _C

    with pytest.raises(RuntimeError, match="takes openreg tensors and 0-dim CPU tensors only"):
        _C._launch_compiled_kernel("k", 1, (torch.ones(2, device="openreg"), torch.ones(2)))
    with pytest.raises(TypeError, match="expected an openreg tensor, an int or a float"):
        _C._launch_compiled_kernel("k", 1, (torch.ones(2, device="openreg"), "text"))


# ------------------------------------------------------------------- amp


@pytest.mark.skipif("amp" not in torch.openreg.extensions(),
                    reason="torch.compile under torch.autocast('openreg') needs the openreg-amp layer "
                           "(torch-openreg[amp]), which is not installed")
def test_compile_under_autocast():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    device_model = on_device(model)
    compiled = torch.compile(device_model)
    x = torch.randn(8, 16)
    with torch.autocast("openreg", dtype=torch.bfloat16):
        out = compiled(x.to("openreg"))
        expected = device_model(x.to("openreg"))
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), expected.cpu(), rtol=2e-2, atol=2e-2)


def test_inductor_config_comes_back_after_an_openreg_compile():
    from torch._inductor import config
    from torch_openreg._compile.inductor import CPP_CODEGEN_CONFIG

    before = {name: getattr(config, name) for name in CPP_CODEGEN_CONFIG}
    compiled = torch.compile(lambda t: torch.softmax(t, -1) * 2)
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(x.to("openreg")).cpu(), torch.softmax(x, -1) * 2)
    assert {name: getattr(config, name) for name in CPP_CODEGEN_CONFIG} == before
