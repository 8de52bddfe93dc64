"""Note [Deletable speed layers] (csrc/aten/SpeedLayer.h): the speed layer is
installed, or not, as OPENREG_FAST_PATHS says, with the public
fastPathsEnabled() telling which. (That the plain path never includes a speed
layer's header is tools/layering.py's rule 1.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

STATE = ("import torch, torch_openreg._C as c; "
         "print(c._fast_paths_enabled(), hasattr(c._testing, 'scratch_stats'))")


@pytest.mark.parametrize("setting", ["0", "1"])
def test_the_switch_installs_the_speed_layer_or_leaves_the_plain_path(setting):
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    done = subprocess.run([sys.executable, "-c", STATE], env=dict(env, OPENREG_FAST_PATHS=setting),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    enabled, hooks = done.stdout.split()
    if setting == "0":
        assert (enabled, hooks) == ("False", "False")
    else:  # a build with csrc/fast/ installs it; one built without it has neither
        assert enabled == hooks
