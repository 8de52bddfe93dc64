"""Needs a PyTorch checkout: PyTorch's own device-generic test files.

The files of a PyTorch checkout's test/ folder (--pytorch-tests) that
instantiate their tests for every device and apply to the installed release,
each run by pytest in a process of its own with
PYTORCH_TESTING_DEVICE_ONLY_FOR set to the device, as PyTorch's
run_openreg_tests.py runs them. A file passes when pytest reports tests passed and none failed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from openreg_conformance import plugin

pytestmark = pytest.mark.conformance_capability("pytorch_tests")

# Files of PyTorch's test/ folder written with instantiate_device_type_tests
# whose subject is what every backend implements (operators, views,
# indexing, reductions, nn). A file missing from the checkout is skipped.
FILES = [
    "test_view_ops.py", "test_indexing.py", "test_shape_ops.py", "test_reductions.py", "test_sort_and_select.py",
    "test_binary_ufuncs.py", "test_unary_ufuncs.py", "test_tensor_creation_ops.py", "test_type_promotion.py",
    "test_torch.py", "nn/test_convolution.py", "nn/test_pooling.py", "nn/test_embedding.py",
]
BOUND_S = 1800


@pytest.mark.parametrize("name", FILES)
def test_a_pytorch_test_file(device_type, name):
    folder = plugin.pytorch_tests_dir()
    path = folder / name
    if not path.exists():
        pytest.skip(f"{name} is not in {folder}")
    environment = dict(os.environ, PYTORCH_TESTING_DEVICE_ONLY_FOR=device_type)
    environment.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)  # PyTorch's files run as PyTorch runs them
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(path)],
                             cwd=folder, env=environment, capture_output=True, text=True, timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name} ran past {BOUND_S} s")
    assert run.returncode == 0, f"PyTorch's {name} on the device:\n{run.stdout[-3000:]}"
    assert " passed" in run.stdout, f"PyTorch's {name} ran no test on the device:\n{run.stdout[-3000:]}"
