"""The runner against a suite of its own: a file past its timeout is killed
and reported, a crash costs only its file, a test that passes on a retry is
flaky, one that fails every time fails, and the report says each as
PyTorch's run_openreg_tests.py does."""

from __future__ import annotations

import textwrap

from openreg_conformance import report, runner

FILES = {
    "test_device.py": """
        def test_passes():
            pass

        def test_fails_every_time():
            assert False, "contract: broken on purpose"
    """,
    "test_streams.py": """
        import time

        def test_hangs():
            time.sleep(600)
    """,
    "test_guard.py": """
        import os, signal

        def test_crashes():
            os.kill(os.getpid(), signal.SIGKILL)
    """,
    "test_rng.py": """
        from pathlib import Path

        def test_fails_once():
            marker = Path(__file__).with_suffix(".seen")
            if not marker.exists():
                marker.touch()
                assert False, "first run"

        def test_skips():
            import pytest
            pytest.skip("no such feature here")
    """,
}


def test_timeouts_crashes_retries_and_the_report(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    options = runner.Options(device="openreg", files=list(FILES), timeout_s=8, retries=2, suite=tmp_path)
    with open(tmp_path / "log", "w") as log:
        results = runner.run(options, log)
    built = report.build(results, ["device", "streams", "guard", "rng"])
    assert built["failed"] == ["test_device.py::test_fails_every_time", "test_guard.py::<process>",
                               "test_streams.py::<process>"]
    assert "while running test_streams.py::test_hangs" in results.tests["test_streams.py::<process>"].message
    assert "while running test_guard.py::test_crashes" in results.tests["test_guard.py::<process>"].message
    assert built["flaky"] == ["test_rng.py::test_fails_once"]
    assert built["timed_out"] == ["test_streams.py"]
    assert results.crashed == {"test_guard.py": "signal 9"}
    assert built["skipped_by_reason"] == {"no such feature here": 1}
    assert results.tests["test_device.py::test_passes"].outcome == "passed"
    assert "contract: broken on purpose" in results.tests["test_device.py::test_fails_every_time"].message
    assert built["groups"]["streams"]["status"] == "failed" and built["groups"]["rng"]["status"] == "passed"
    assert not built["passed"]
