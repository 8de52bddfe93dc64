"""The kit stands alone: it imports nothing of OpenReg's (a vendor installs
it next to its own backend), its command names its groups, and it refuses a
group it does not have."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import openreg_conformance
from openreg_conformance.groups import GROUPS

PACKAGE = Path(openreg_conformance.__file__).parent
# An import of torch_openreg or of a layer package (openreg_amp, ...), not of the kit itself.
OPENREG_IMPORT = re.compile(r"^\s*(?:import|from)\s+(torch_openreg|openreg_(?!conformance)\w+)", re.MULTILINE)


def test_no_source_of_the_kit_imports_openreg():
    offenders = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                 if OPENREG_IMPORT.search(path.read_text())]
    assert offenders == []


def test_the_kit_loads_with_the_backend_switched_off():
    # TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch loads no backend, so nothing of OpenReg's is in the process.
    listing = subprocess.run([sys.executable, "-c", "import sys, openreg_conformance.cli as cli, "
                              "openreg_conformance.plugin, openreg_conformance.capabilities, "
                              "openreg_conformance.report;"
                              "cli.main(['--list-groups']);"
                              "print(sorted(m for m in sys.modules if m.startswith(('torch_openreg', 'openreg_'))"
                              " and not m.startswith('openreg_conformance')))"],
                             env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"), capture_output=True, text=True,
                             timeout=120, check=True).stdout
    assert listing.splitlines()[-1] == "[]"
    for group in GROUPS:
        assert group.name in listing


def test_an_unknown_group_is_refused_naming_the_groups():
    run = subprocess.run([sys.executable, "-m", "openreg_conformance", "--device", "openreg", "--groups", "warp"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "unknown groups ['warp']" in run.stderr and "device, streams" in run.stderr


DEVICE_GENERIC_FILE = '''
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


class TestViews(TestCase):
    def test_view_shares_storage(self, device):
        base = torch.arange(6.0, device=device)
        base.view(2, 3)[1, 1] = 40.0
        self.assertEqual(base[4].item(), 40.0)


instantiate_device_type_tests(TestViews, globals())

if __name__ == "__main__":
    run_tests()
'''


def test_pytorch_files_run_from_a_checkout(kit, tmp_path):
    # A stand-in for a PyTorch checkout's test/ folder holding one of the
    # kit's files: it runs, restricted to the device; the missing ones skip.
    checkout = tmp_path / "pytorch-test"
    checkout.mkdir()
    (checkout / "test_view_ops.py").write_text(DEVICE_GENERIC_FILE)
    code, report = kit("--groups", "pytorch_files", "--pytorch-tests", str(checkout))
    assert code == 0, report["failures"]
    counts = report["groups"]["pytorch_files"]
    assert counts["passed"] == 1 and counts["skipped"] >= 12, counts
    assert any(reason.startswith("test_torch.py is not in") for reason in report["skipped_by_reason"])
