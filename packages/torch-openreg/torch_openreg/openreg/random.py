"""Random number generation of torch.openreg: one default generator per
device (independent of each other), with the torch.cuda seeding API."""

from typing import Any

import torch

import torch_openreg._C as _C
from torch_openreg.openreg.utils import _device_index

# One default generator per device; creating them touches no device.
default_generators: tuple[torch.Generator, ...] = tuple(
    _C._default_generator(i) for i in range(_C._device_count())
)


def _generator(device: Any = None) -> torch.Generator:
    return default_generators[_device_index(device, optional=True, default_current=True)]


def manual_seed(seed: int) -> None:
    """Seed the current device's default generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every device's default generator with the same seed."""
    for generator in default_generators:
        generator.manual_seed(int(seed))


def seed() -> None:
    """Seed the current device's default generator with a random number."""
    _generator().seed()


def seed_all() -> None:
    """Seed every device's default generator with one random number."""
    value = default_generators[0].seed()
    for generator in default_generators[1:]:
        generator.manual_seed(value)


def initial_seed() -> int:
    """The seed the current device's default generator started from."""
    return _generator().initial_seed()


def get_rng_state(device: Any = "openreg") -> torch.Tensor:
    """The state of ``device``'s default generator, as a CPU ByteTensor."""
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "openreg") -> None:
    """Restore ``device``'s default generator from a state."""
    _generator(device).set_state(new_state.clone())


def get_rng_state_all() -> list[torch.Tensor]:
    """The states of every device's default generator."""
    return [generator.get_state() for generator in default_generators]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    """Restore every device's default generator."""
    for generator, state in zip(default_generators, new_states, strict=True):
        generator.set_state(state.clone())
