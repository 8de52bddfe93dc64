"""The public kernel API: an extension built outside torch-openreg, against
the installed headers and libtorch_openreg.so only, runs its kernels on
openreg and matches the CPU, forward and backward."""

import contextlib
import io
import runpy
import shutil
from pathlib import Path

import pytest
import torch
import torch_openreg

EXAMPLE = Path(__file__).parent / "kernel_api_example"


@pytest.fixture(scope="module")
def scale_shift(tmp_path_factory):
    """Builds the example as a vendor would: the guide's build_and_run.py, run as
    it is from a copy of the example's folder (torch's extension cache in a
    temporary directory)."""
    folder = tmp_path_factory.mktemp("kernel_api_example")
    for source in ("scale_shift.cpp", "build_and_run.py"):
        shutil.copy(EXAMPLE / source, folder / source)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("TORCH_EXTENSIONS_DIR", str(folder / "extensions"))
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            runpy.run_path("build_and_run.py", run_name="__main__")
    assert output.getvalue().startswith("tensor([1., 3., 5., 7.], device='openreg:0')")
    return torch.ops.openreg_example.scale_shift


def test_installed_api_files_exist():
    include = Path(torch_openreg.get_include()) / "torch_openreg"
    assert {p.name for p in include.iterdir()} >= {"Kernel.h", "Check.h", "Export.h", "Version.h"}
    assert (Path(torch_openreg.get_library_dir()) / "libtorch_openreg.so").is_file()


def test_forward_matches_cpu(scale_shift):
    x = torch.randn(64, 33)
    out = scale_shift(x.to("openreg"), 2.5, -1.0)
    assert out.device.type == "openreg"
    torch.testing.assert_close(out.cpu(), x * 2.5 - 1.0)


def test_backward_matches_cpu(scale_shift):
    x_cpu = torch.randn(17, 5, requires_grad=True)
    x_dev = x_cpu.detach().to("openreg").requires_grad_()
    (scale_shift(x_dev, 3.0, 0.5) ** 2).sum().backward()
    ((x_cpu * 3.0 + 0.5) ** 2).sum().backward()
    torch.testing.assert_close(x_dev.grad.cpu(), x_cpu.grad)


def test_kernels_run_on_the_current_stream(scale_shift):
    stream = torch.openreg.Stream()
    x = torch.ones(1000, device="openreg")
    stream.wait_stream(torch.openreg.current_stream())  # x is filled on the default stream
    with torch.openreg.stream(stream):
        out = scale_shift(x, 2.0, 1.0)
    stream.synchronize()
    assert torch.equal(out.cpu(), torch.full((1000,), 3.0))


def test_host_check_refuses_integer_input(scale_shift):
    with pytest.raises(RuntimeError, match="expects a floating-point tensor"):
        scale_shift(torch.ones(3, dtype=torch.int64, device="openreg"), 1.0, 0.0)


def test_launch_refuses_cpu_tensor(scale_shift):
    # The op is registered for PrivateUse1 only, so call the C++ kernel's
    # launch check through a CPU operand mixed with an openreg one: the
    # dispatcher picks openreg, and launchKernel must name the CPU tensor.
    with pytest.raises(RuntimeError, match="expected defined openreg tensors"):
        torch.ops.openreg_example.scale_shift.default.redispatch(
            torch._C.DispatchKeySet("PrivateUse1"), torch.ones(3), 1.0, 0.0
        )
