"""AOTInductor on openreg: packages compiled by aoti_compile_and_package from
models on openreg load with aoti_load_package and with torch's C++
AOTIModelPackageLoader, run their kernels on openreg streams with their
weights in device memory, and match eager openreg and the CPU (an MLP with a
dynamic batch, a small CNN, a Transformer encoder layer)."""

from __future__ import annotations

import copy
import gc
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch_openreg
from torch.fx.experimental import proxy_tensor

EXAMPLE = Path(__file__).parent / "aoti_example"
_spec = importlib.util.spec_from_file_location("aoti_build_command", EXAMPLE / "build_command.py")
_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_build)
build_command = _build.build_command


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.layers(x), dim=-1)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def _encoder_layer() -> nn.Module:
    return nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)


# name -> (model factory, input sizes, whether the batch is dynamic)
MODELS = {
    "mlp": (MLP, (5, 16), True),
    "cnn": (SmallCNN, (2, 3, 16, 16), False),
    "transformer": (_encoder_layer, (2, 7, 32), False),
}


class Compiled:
    """A model on the CPU, its copy on openreg and its AOTInductor package."""

    def __init__(self, name: str, folder: Path) -> None:
        factory, self.input_sizes, dynamic = MODELS[name]
        torch.manual_seed(0)
        self.cpu_model = factory().eval()
        self.model = copy.deepcopy(self.cpu_model).to("openreg")
        example = torch.randn(self.input_sizes, device="openreg")
        shapes = ({0: torch.export.Dim("batch", min=1, max=64)},) if dynamic else None
        with torch.no_grad():
            exported = torch.export.export(self.model, (example,), dynamic_shapes=shapes)
        self.package = torch._inductor.aoti_compile_and_package(exported, package_path=str(folder / f"{name}.pt2"))


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory) -> str:
    """Inductor's caches, in the session's temporary directory that
    test_compile.py uses too: the children that compile a package of their
    own, and the next module's, find there what every compilation builds
    first (the probes of the CPU, the precompiled headers)."""
    return str(tmp_path_factory.getbasetemp() / "inductor")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, inductor_cache):
    """The three packages, compiled once for the module (each costs tens of
    seconds)."""
    folder = tmp_path_factory.mktemp("aoti")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", inductor_cache)
        packages = {name: Compiled(name, folder) for name in MODELS}
    gc.collect()  # the compilations' garbage holds device memory the tests must not count
    yield packages
    packages.clear()
    # torch.export leaves its last trace in a module-level map of torch 2.13
    # (proxy_tensor._FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT), whose graph holds
    # the exported model, and so its weights in device memory, until the next
    # export: the tests after this module must find the device empty.
    proxy_tensor._FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT.clear()
    gc.collect()


@pytest.fixture(autouse=True)
def _no_fallback():
    """No operator may leave the device, when compiling or running."""
    torch.openreg.set_fallback_mode("error")
    yield
    gc.collect()  # loaded models hold their weights in device memory


def _check_against_eager(c: Compiled, loaded, batch: int | None = None) -> float:
    """Runs the loaded package and both eager models on one input; returns
    the largest difference from the CPU."""
    sizes = c.input_sizes if batch is None else (batch, *c.input_sizes[1:])
    x = torch.randn(sizes)
    with torch.no_grad():
        out = loaded(x.to("openreg"))  # loaded = torch._inductor.aoti_load_package(package)
        eager = c.model(x.to("openreg"))
        cpu = c.cpu_model(x)
    assert out.device == torch.device("openreg:0")
    torch.testing.assert_close(out.cpu(), eager.cpu(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.cpu(), cpu, rtol=1e-4, atol=1e-5)
    return (out.cpu() - cpu).abs().max().item()


@pytest.mark.parametrize("name", list(MODELS))
def test_package_matches_eager_and_cpu(compiled, name):
    loaded = torch._inductor.aoti_load_package(compiled[name].package)
    before = torch.openreg.fallback_counts()
    _check_against_eager(compiled[name], loaded)
    assert torch.openreg.fallback_counts() == before


def test_dynamic_batch(compiled):
    loaded = torch._inductor.aoti_load_package(compiled["mlp"].package)
    for batch in (1, 8, 33):
        _check_against_eager(compiled["mlp"], loaded, batch)


def test_package_names_the_device(compiled):
    loaded = torch._inductor.aoti_load_package(compiled["mlp"].package)
    assert loaded.loader.get_metadata()["AOTI_DEVICE_KEY"] == "openreg"


def test_weights_live_in_device_memory(compiled):
    c = compiled["cnn"]
    weight_bytes = sum(t.nbytes for t in c.cpu_model.state_dict().values() if t.is_floating_point())
    before = torch.openreg.memory_allocated(0)
    loaded = torch._inductor.aoti_load_package(c.package)
    assert torch.openreg.memory_allocated(0) - before >= weight_bytes  # placed at load, before any run
    del loaded
    gc.collect()
    assert torch.openreg.memory_allocated(0) == before  # and freed with the model


def test_runs_on_the_device_it_is_loaded_for(compiled):
    c = compiled["mlp"]
    loaded = torch._inductor.aoti_load_package(c.package, device_index=1)
    x = torch.randn(4, 16)
    before = torch.openreg.memory_allocated(0)
    out = loaded(x.to("openreg:1"))
    assert out.device == torch.device("openreg:1")
    assert torch.openreg.memory_allocated(0) == before
    torch.testing.assert_close(out.cpu(), c.cpu_model(x).detach(), rtol=1e-4, atol=1e-5)


def test_kernels_queue_on_the_current_stream(compiled, gate):
    """The model returns while its kernels wait behind a blocked stream, and
    computes once the stream moves: they ran there, asynchronously."""
    c = compiled["mlp"]
    loaded = torch._inductor.aoti_load_package(c.package)
    x = torch.randn(3, 16)
    x_dev = x.to("openreg")
    stream = torch.openreg.Stream()
    stream.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(stream):
        g = gate(stream)
        out = loaded(x_dev)
        assert not g.finished.is_set()
        g.open()
        torch.testing.assert_close(out.cpu(), c.cpu_model(x).detach(), rtol=1e-4, atol=1e-5)


def test_unsupported_modes_are_refused_by_name(python, inductor_cache):
    """Runtime constant folding (the folding step places the weights) and
    torch.compile's C++ wrapper. In a child: a failed compilation keeps the
    model's weights alive in Inductor's state, which this process's memory
    checks would count."""
    messages = python.json("""
        import json
        import torch
        model = torch.nn.Linear(4, 2).to("openreg")
        x = torch.randn(2, 4, device="openreg")
        messages = []
        try:
            torch._inductor.aoti_compile_and_package(
                torch.export.export(model, (x,)),
                inductor_configs={"aot_inductor.use_runtime_constant_folding": True})
        except Exception as error:
            messages.append(str(error))
        try:
            with torch._inductor.config.patch(cpp_wrapper=True):
                torch.compile(model)(x)
        except Exception as error:
            messages.append(str(error))
        print(json.dumps(messages))
    """, env={"TORCHINDUCTOR_CACHE_DIR": inductor_cache}, timeout=300)
    assert len(messages) == 2
    assert "openreg does not support aot_inductor.use_runtime_constant_folding" in messages[0]
    assert "openreg does not support torch.compile with cpp_wrapper=True" in messages[1]


def test_a_package_runs_from_four_threads_at_once(compiled, python):
    """Note [AOTInductor models and the GIL]: a thread waiting for the model
    must not hold the GIL its running peer's shims need (a deadlock, before).
    The MLP's package (its shims include addmm), loaded in a child with a
    bound, so a deadlock fails instead of hanging."""
    c = compiled["mlp"]
    x = torch.randn(c.input_sizes)
    with torch.no_grad():
        expected = c.cpu_model(x)
    result = python.json(f"""
        import json, os, threading, time
        import torch
        loaded = torch._inductor.aoti_load_package({c.package!r})
        x = torch.tensor({x.tolist()!r})
        results, errors = [], []

        def runs():
            try:
                for _ in range(20):
                    results.append(loaded(x.to("openreg")).cpu().tolist())
            except Exception as error:
                errors.append(str(error))

        threads = [threading.Thread(target=runs, daemon=True) for _ in range(4)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120  # a bound for a deadlock, not a speed measurement
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        alive = sum(t.is_alive() for t in threads)
        print(json.dumps({{"alive": alive, "errors": errors, "results": results}}), flush=True)
        os._exit(0)  # threads still stuck would keep the process from exiting
    """, timeout=300)
    assert result["alive"] == 0 and result["errors"] == [] and len(result["results"]) == 80, result
    for out in result["results"]:
        torch.testing.assert_close(torch.tensor(out), expected, rtol=1e-4, atol=1e-5)


def test_a_package_built_for_another_kernel_api_major_is_refused_naming_both(compiled, python, inductor_cache):
    """The package records the kernel API MAJOR it was compiled against; one
    recording 999 stands for a package built by another torch-openreg. In a
    child, as above."""
    assert torch._inductor.aoti_load_package(compiled["mlp"].package) is not None  # this API's packages load
    message = python.json("""
        import json
        import torch
        import torch_openreg._compile.aot_inductor as aot
        aot.KERNEL_API_MAJOR = "999"
        model = torch.nn.Linear(4, 2).to("openreg")
        x = torch.randn(2, 4, device="openreg")
        with torch.no_grad():
            package = torch._inductor.aoti_compile_and_package(torch.export.export(model, (x,)))
        try:
            torch._inductor.aoti_load_package(package)
            print(json.dumps("loaded"))
        except Exception as error:
            print(json.dumps(str(error)))
    """, env={"TORCHINDUCTOR_CACHE_DIR": inductor_cache}, timeout=300)
    version = (Path(torch_openreg.get_include()) / "torch_openreg" / "Version.h").read_text()
    major, minor = (re.search(rf"TORCH_OPENREG_API_VERSION_{part} (\d+)", version).group(1)
                    for part in ("MAJOR", "MINOR"))
    assert "built for torch-openreg's kernel API 999.x" in message, message
    assert f"this torch-openreg has kernel API {major}.{minor}" in message, message


# ---------------------------------------------------------------- from C++


@pytest.fixture(scope="module")
def cpp_runner(tmp_path_factory) -> Path:
    """run_package.cpp, built as the guide builds it (aoti_example/build_command.py)."""
    folder = tmp_path_factory.mktemp("aoti_cpp")
    command = build_command(EXAMPLE / "run_package.cpp", folder / "run_package")
    subprocess.run(command, check=True, timeout=300, capture_output=True)
    return folder / "run_package"


@pytest.mark.parametrize("name", ["mlp", "transformer"])
def test_cpp_loader_matches_cpu(compiled, cpp_runner, tmp_path, name):
    c = compiled[name]
    x = torch.randn(c.input_sizes)
    (tmp_path / "input.bin").write_bytes(x.numpy().tobytes())
    result = subprocess.run([str(cpp_runner), c.package, str(tmp_path / "input.bin"), str(tmp_path / "output.bin"),
                             *map(str, c.input_sizes)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    with torch.no_grad():
        expected = c.cpu_model(x)
    out = torch.frombuffer(bytearray((tmp_path / "output.bin").read_bytes()), dtype=torch.float32)
    torch.testing.assert_close(out.reshape(expected.shape), expected, rtol=1e-4, atol=1e-5)
