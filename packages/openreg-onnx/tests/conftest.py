"""Fixtures for the openreg-onnx tests, most of them torch-openreg's own.

Every test runs under the repository's device-state check (the root's
conftest.py: it starts on openreg:0 and must give back the device memory
it took) with the CPU fallback in 'error' mode: an operator that would
leave the device fails the test. The models are those of torch-openreg's
tests/test_training.py, loaded by path (no tests directory is a package).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

CORE_TESTS = Path(__file__).resolve().parents[2] / "torch-openreg" / "tests"


def _load(name: str, path: Path) -> ModuleType:
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


training = _load("openreg_core_training", CORE_TESTS / "test_training.py")


@pytest.fixture(autouse=True)
def _fallback_is_an_error(openreg_device_state):
    previous = torch.openreg.get_fallback_mode()
    torch.openreg.set_fallback_mode("error")
    yield
    torch.openreg.set_fallback_mode(previous)


def _export_and_verify(model, args: tuple, *, verify_on: list[tuple] | None = None, **options):
    """Exports ``model`` once, checks the graph with onnx.checker, and verifies
    it in onnxruntime against the device on ``args`` and on each of
    ``verify_on`` (other sizes along dynamic dimensions). Returns the program
    and the verification results; prints them (pytest -s shows the figures)."""
    import onnx
    import openreg_onnx

    program = openreg_onnx.export(model, args, verbose=False, **options)
    onnx.checker.check_model(program.model_proto, full_check=True)
    results = [openreg_onnx.verify(program, model, inputs) for inputs in [args, *(verify_on or [])]]
    for result in results:
        print(result)
        assert result.passed, str(result)
    return program, results


@pytest.fixture(scope="session")
def export_and_verify():
    return _export_and_verify


def pytest_generate_tests(metafunc):
    # A test that takes `model_name` runs once per model of torch-openreg's training tests.
    if "model_name" in metafunc.fixturenames:
        metafunc.parametrize("model_name", sorted(training.MODELS))


@pytest.fixture(scope="session")
def training_models():
    """name -> (build, make_input, make_optimizer), from torch-openreg's tests/test_training.py."""
    return training.MODELS
