"""Required: the device's random number generators.

The contracts: the same seed gives the same numbers; a state saved with
get_rng_state() (of the device module or of a torch.Generator) and restored
with set_rng_state() replays the numbers drawn after it; fork_rng() leaves
the device's state as it found it; each device has a state of its own.
"""

from __future__ import annotations

import pytest
import torch


def draw(device, generator=None) -> torch.Tensor:
    return torch.rand(1000, device=device, generator=generator).cpu()


def test_the_same_seed_gives_the_same_numbers(device):
    torch.manual_seed(1234)
    first = draw(device)
    torch.manual_seed(1234)
    assert torch.equal(draw(device), first), "contract: torch.manual_seed(s) makes the device's draws repeat"
    assert not torch.equal(draw(device), first), "contract: successive draws differ"


def test_a_restored_device_state_replays_the_draws(device, device_type):
    module = torch.get_device_module(device_type)
    state = module.get_rng_state()
    first = draw(device)
    module.set_rng_state(state)
    assert torch.equal(draw(device), first), (
        "contract: set_rng_state(get_rng_state()) of the device module replays the numbers drawn after the save")


def test_a_restored_generator_state_replays_the_draws(device):
    generator = torch.Generator(device=device)
    generator.manual_seed(99)
    state = generator.get_state()
    first = draw(device, generator)
    generator.set_state(state)
    assert torch.equal(draw(device, generator), first), (
        "contract: Generator.set_state(Generator.get_state()) replays the numbers drawn after the save")
    assert generator.device == device, "contract: a generator made for the device reports it"


def test_fork_rng_leaves_the_state_as_it_was(device, device_type):
    module = torch.get_device_module(device_type)
    state = module.get_rng_state()
    with torch.random.fork_rng(devices=[0], device_type=device_type):
        draw(device)
    assert torch.equal(module.get_rng_state(), state), "contract: fork_rng() restores the device's state on exit"


def test_each_device_has_its_own_state(device_type):
    if torch.accelerator.device_count() < 2:
        pytest.skip("the backend has 1 device; this contract needs two")
    module = torch.get_device_module(device_type)
    module.manual_seed_all(7)
    on_zero = draw(f"{device_type}:0")
    on_one = draw(f"{device_type}:1")
    assert torch.equal(on_zero, on_one), "contract: manual_seed_all(s) seeds every device alike"
    state_of_one = module.get_rng_state(1)
    draw(f"{device_type}:0")
    assert torch.equal(module.get_rng_state(1), state_of_one), (
        "contract: drawing on device 0 leaves device 1's state unchanged")
