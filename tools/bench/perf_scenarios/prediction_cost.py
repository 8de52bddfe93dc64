"""What a prediction costs the program: OpenReg demo's CNN (tools/demo.py) trained for 100 steps,
plainly on openreg, inside openreg_perf.simulate("h100-sxm"), and inside simulate(..., execute=False)
(timing-only); alternating, medians of 7 rounds, the analysis after each region included. And where
timing-only's time goes, one instrument added at a time: timing-only mode alone (nothing computed,
nothing recorded), with torch.openreg.record_activity(), with the memory samples too (memory.py);
simulate adds the analysis. Prints JSON. Run by tools/bench/perf_model.py."""

import contextlib
import json
import statistics
import time

import openreg_perf

openreg_perf.devices_for("h100-sxm")  # timing-only needs the profile's capacity: before torch starts
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from openreg_perf.memory import MemoryWatch  # noqa: E402

STEPS, ROUNDS = 100, 7
DEVICES = list(range(torch.openreg.device_count()))  # what simulate() watches

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 2)).to("openreg")
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
images = torch.randn(32, 1, 16, 16, device="openreg")
labels = torch.randint(0, 2, (32,), device="openreg")


def steps() -> None:
    for _ in range(STEPS):
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.openreg.synchronize()


def plain() -> None:
    steps()


def predicted(execute: bool):
    def run() -> None:
        with openreg_perf.simulate("h100-sxm", execute=execute):
            steps()
    return run


def timing_only_under(*instruments):
    """Timing-only steps under the instruments given (context managers, entered in order)."""
    def run() -> None:
        torch.openreg.set_timing_only(True)
        try:
            with contextlib.ExitStack() as stack:
                for instrument in instruments:
                    stack.enter_context(instrument())
                steps()
        finally:
            torch.openreg.set_timing_only(False)
    return run


def seconds(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


steps()  # warm-up: the simulator's first calls
cases = {"plain": plain, "simulate": predicted(True), "timing_only": predicted(False),
         "timing_only_mode": timing_only_under(), "recorded": timing_only_under(torch.openreg.record_activity),
         "recorded_and_sampled": timing_only_under(lambda: MemoryWatch(DEVICES), torch.openreg.record_activity)}
for fn in cases.values():
    fn()
samples = {name: [] for name in cases}
for _ in range(ROUNDS):
    for name, fn in cases.items():
        samples[name].append(seconds(fn))
print(json.dumps({name: statistics.median(values) for name, values in samples.items()} | {"steps": STEPS}))
