"""PyTorch's OpInfo database run on openreg and compared with the CPU.

Each entry of opinfo_expected_to_pass.txt (``op[.variant] dtype [backward]``)
is one test, and each must pass: no xfail. The list is data and only grows;
tools/opinfo_coverage.py regenerates it from what passes (--write-expected)
and reports what does not (native / CPU fallback / failed per op). How an
entry runs - samples, moving them to openreg, tolerances, and the outputs
whose values are not compared because the OpInfo marks them random - is
opinfo_harness.py's docstring.

OPENREG_OPINFO_ALL=1 is the slow discovery mode: every entry of every OpInfo
in op_db (forward in float32/float16/bfloat16, backward in float32). Listed
entries still must pass; the others run in crash-isolated worker
subprocesses (the coverage tool's runner) and are xfail when they fail and
pass when they pass. The newly passing ones are written to
build/opinfo_new_passing.txt and named on the terminal at the end.
OPENREG_OPINFO_SAMPLES=N changes the number of samples per entry (3).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import warnings
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]


def _load(name: str, path: Path):
    # Tests run with --import-mode=importlib and tools/ is no package: load by path, once.
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


harness = _load("openreg_opinfo_harness", HERE / "opinfo_harness.py")

ALL = os.environ.get("OPENREG_OPINFO_ALL") == "1"
SAMPLES = int(os.environ.get("OPENREG_OPINFO_SAMPLES", harness.DEFAULT_SAMPLES))
EXPECTED = harness.read_expected()
LISTED = set(EXPECTED)
# A hang in C++ (a stream that never drains, a GIL deadlock) ignores the
# signal method; the thread method dumps every stack and ends the run.
# The ops' own advisories (deprecations, "degrees of freedom <= 0" for the
# samples that test exactly that) are not this test's business.
pytestmark = [pytest.mark.timeout(1200 if ALL else 120, method="thread"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


def _entries() -> list:
    if not ALL:
        return EXPECTED
    everything = set(LISTED)
    for op in harness.op_table().values():
        everything.update(harness.entries_for(op))
    return sorted(everything)


def _explain(outcome) -> str:
    text = f"{outcome.entry}: {outcome.error_type}: {outcome.message}"
    if outcome.fallbacks:
        text += f"\nCPU fallback: {outcome.fallbacks}"
    return text + (f"\n{outcome.detail}" if outcome.detail else "")


def test_recovery_after_a_device_side_failure_clears_every_device():
    # A sample may fail on a device that is not the current one.
    x = torch.empty(4, device="openreg:1")
    x.random_(5, 2)  # from >= to: the kernel fails on device 1
    with pytest.raises(RuntimeError, match="sticky") as failure:
        torch.openreg.synchronize(1)
    harness._recover_device(failure.value)
    torch.openreg.synchronize(1)
    assert (torch.ones(2, device="openreg:1") * 2).cpu().tolist() == [2.0, 2.0]


# ------------------------------------------------ discovery (slow mode)


_isolated: dict[str, dict] = {}
_new_passing: list[str] = []


@pytest.fixture(scope="module")
def isolated_results(request):
    """Slow mode: every unlisted entry, run once in crash-isolated workers."""
    if ALL and not _isolated:
        tool = _load("openreg_opinfo_coverage", REPO_ROOT / "tools" / "opinfo_coverage.py")
        unlisted = [str(e) for e in _entries() if e not in LISTED]
        _isolated.update(tool.run_all(unlisted, SAMPLES, timeout=120, jobs=2, verbose=False))
    yield _isolated
    if _new_passing:
        target = REPO_ROOT / "build" / "opinfo_new_passing.txt"
        target.parent.mkdir(exist_ok=True)
        target.write_text("".join(f"{e}\n" for e in sorted(_new_passing)))
        message = (f"{len(_new_passing)} OpInfo entries pass but are not in opinfo_expected_to_pass.txt "
                   f"(all listed in {target}; tools/opinfo_coverage.py --write-expected adds them): "
                   + ", ".join(sorted(_new_passing)[:50]))
        terminal = request.config.pluginmanager.get_plugin("terminalreporter")
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if terminal is not None and capture is not None:
            with capture.global_and_fixture_disabled():
                terminal.write_line("\n" + message, yellow=True)
        else:
            warnings.warn(message, stacklevel=1)
        _new_passing.clear()


# ------------------------------------------------------------- the list


@pytest.mark.parametrize("entry", _entries(), ids=str)
def test_opinfo(entry, request):
    if entry not in LISTED:
        data = request.getfixturevalue("isolated_results").get(str(entry))
        if data is None or data["status"] != "pass":
            reason = "not run" if data is None else f"{data['status']}: {data['error_type']}: {data['message']}"
            pytest.xfail(f"not in the expected-to-pass list ({reason})"[:500])
        _new_passing.append(str(entry))
        return
    outcome = harness.run_entry(entry, samples=SAMPLES)
    assert outcome.status == "pass", _explain(outcome)


def test_expected_list_is_sorted_unique_and_names_real_opinfos():
    lines = [line for line in harness.EXPECTED_FILE.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == sorted(set(lines)), "opinfo_expected_to_pass.txt must be sorted, without duplicates"
    assert harness.EXPECTED_FILE.read_text().startswith(harness.EXPECTED_HEADER)
    table = harness.op_table()
    for entry in EXPECTED:
        assert entry.op in table, f"{entry}: no such OpInfo in op_db"
        op = table[entry.op]
        assert harness.parse_dtype(entry.dtype) in op.supported_dtypes("cpu"), f"{entry}: dtype not supported"
        if entry.mode == "backward":
            assert op.supports_autograd and entry.dtype == "float32", f"{entry}: no float32 backward"


# --------------------------------------------------- the harness itself


def _with_op(name: str, fn):
    op = copy.copy(harness.op_table()[name])
    op.op = fn
    return op


def test_harness_detects_a_wrong_value():
    def off_by_one_on_openreg(x, *args, **kwargs):
        result = torch.add(x, *args, **kwargs)
        return result + 1 if result.device.type == "openreg" else result

    outcome = harness.run_entry(harness.Entry("add"), op=_with_op("add", off_by_one_on_openreg))
    assert outcome.status == "fail" and outcome.error_type == "Mismatch", outcome
    assert "not close" in outcome.message


def test_harness_detects_a_wrong_gradient():
    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.on_device = x.device.type == "openreg"
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad * 2 if ctx.on_device else grad

    def op(x, *args, **kwargs):
        return WrongGrad.apply(torch.add(x, *args, **kwargs))

    outcome = harness.run_entry(harness.Entry("add", "float32", "backward"), op=_with_op("add", op))
    assert outcome.status == "fail" and outcome.message.startswith("grad"), outcome


def test_harness_reports_an_error_only_openreg_raises():
    def fails_on_openreg(x, *args, **kwargs):
        if x.device.type == "openreg":
            raise RuntimeError("boom on openreg")
        return torch.add(x, *args, **kwargs)

    outcome = harness.run_entry(harness.Entry("add"), op=_with_op("add", fails_on_openreg))
    assert (outcome.status, outcome.error_type, outcome.message) == ("fail", "RuntimeError", "boom on openreg")


def test_harness_counts_the_cpu_fallback():
    torch.openreg.set_device_executor_enabled(False)
    try:
        outcome = harness.run_entry(harness.Entry("erf"))
    finally:
        torch.openreg.set_device_executor_enabled(True)
    assert outcome.status == "pass" and not outcome.native
    assert set(outcome.fallbacks) == {"aten::erf.out"}
    native = harness.run_entry(harness.Entry("erf"))
    assert native.native and "aten::erf.out" in native.executor


def test_move_sample_keeps_layout_and_host_only_tensors():
    base = torch.arange(20.0)
    view = base[5:15].as_strided((2, 3), (1, 2))
    sample = harness.op_table()["tensor_split"].sample_inputs("cpu", torch.float32)
    sample = next(iter(sample))
    index = sample.args[0]
    sample.input, sample.args = view, (index, [view.t()])
    moved, args, _ = harness.move_sample(sample, "openreg", keep_on_cpu=[False, True, False])
    assert moved.device.type == "openreg" and args[0].device.type == "cpu" and args[1][0].device.type == "openreg"
    assert (moved.stride(), moved.storage_offset()) == (view.stride(), view.storage_offset())
    torch.testing.assert_close(moved.cpu(), view)
    # The whole storage came along: as_strided can reach outside the view, as on the CPU.
    torch.testing.assert_close(moved.as_strided((3,), (1,), 0).cpu(), base[:3])
    torch.testing.assert_close(args[1][0].cpu(), view.t())


def test_random_ops_are_compared_by_structure_only():
    table = harness.op_table()
    assert harness.unchecked_reason(table["bernoulli"], torch.float32) == "output is non-deterministic"
    assert "wrapper_set_seed" in harness.unchecked_reason(table["randn"], torch.float32)
    assert harness.unchecked_reason(table["add"], torch.float32) is None
    outcome = harness.run_entry(harness.Entry("randn"))
    assert outcome.status == "pass" and outcome.unchecked
