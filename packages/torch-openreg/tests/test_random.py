"""Random number generation: per-device default generators, the torch.cuda
seeding API of torch.openreg, torch.Generator on openreg, and the native
random fills (normal_, uniform_, random_, bernoulli_)."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch


def _draws(device: str = "openreg:0",
           generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """One of each native random operator, brought back to the host."""
    kwargs = {"device": device, "generator": generator}
    g = generator
    return [
        torch.randn(500, **kwargs).cpu(),
        torch.rand(500, **kwargs).cpu(),
        torch.randint(-3, 1000, (500,), **kwargs).cpu(),
        torch.empty(500, device=device).bernoulli_(0.3, generator=generator).cpu(),
        torch.empty(500, device=device).normal_(5.0, 0.5, generator=generator).cpu(),
        torch.empty(500, dtype=torch.int64, device=device).random_(generator=g).cpu(),
        torch.empty(500, dtype=torch.int32, device=device).random_(50, generator=g).cpu(),
        torch.empty(500, dtype=torch.float64, device=device).uniform_(-2, 2, generator=g).cpu(),
    ]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.fixture(autouse=True)
def _restore_rng_states():
    states = torch.openreg.get_rng_state_all()
    cpu_state = torch.get_rng_state()
    yield
    torch.openreg.set_rng_state_all(states)
    torch.set_rng_state(cpu_state)


def test_same_seed_same_numbers():
    torch.openreg.manual_seed(1234)
    first = _draws()
    torch.openreg.manual_seed(1234)
    second = _draws()
    assert _same(first, second)
    torch.openreg.manual_seed(4321)
    assert not _same(first, _draws())


def test_numbers_have_the_requested_distribution():
    torch.openreg.manual_seed(7)
    normal = torch.randn(100_000, device="openreg").cpu()
    assert abs(normal.mean().item()) < 0.02 and abs(normal.std().item() - 1) < 0.02
    shifted = torch.empty(100_000, device="openreg").normal_(5.0, 0.5).cpu()
    assert abs(shifted.mean().item() - 5.0) < 0.02 and abs(shifted.std().item() - 0.5) < 0.02
    uniform = torch.rand(100_000, device="openreg").cpu()
    assert uniform.min().item() >= 0.0 and uniform.max().item() < 1.0
    assert abs(uniform.mean().item() - 0.5) < 0.01
    ranged = torch.empty(100_000, device="openreg").uniform_(-2, 3).cpu()
    assert ranged.min().item() >= -2 and ranged.max().item() < 3
    integers = torch.randint(-3, 7, (100_000,), device="openreg").cpu()
    assert integers.dtype == torch.int64
    assert set(integers.unique().tolist()) == set(range(-3, 7))
    coins = torch.empty(100_000, device="openreg").bernoulli_(0.3).cpu()
    assert set(coins.unique().tolist()) <= {0.0, 1.0}
    assert abs(coins.mean().item() - 0.3) < 0.01
    coins_p = torch.bernoulli(torch.empty(100_000, device="openreg"), p=0.8).cpu()
    assert abs(coins_p.mean().item() - 0.8) < 0.01
    bounded = torch.empty(10_000, dtype=torch.int32, device="openreg").random_(50).cpu()
    assert bounded.min().item() >= 0 and bounded.max().item() < 50


def test_random_fill_of_a_strided_view_touches_only_the_view():
    base = torch.zeros(10, 10, device="openreg")
    base[:, ::3].normal_()
    host = base.cpu()
    assert (host[:, ::3] != 0).all()
    mask = torch.ones(10, 10, dtype=torch.bool)
    mask[:, ::3] = False
    assert (host[mask] == 0).all()


def test_devices_are_independent():
    torch.openreg.manual_seed_all(99)
    reference = _draws("openreg:0")
    torch.openreg.manual_seed_all(99)
    with torch.openreg.device(1):
        torch.openreg.manual_seed(5)  # seeds device 1 only
        _draws("openreg:1")
    assert _same(_draws("openreg:0"), reference)
    # And device 1 with the same seed gives the same numbers as device 0.
    torch.openreg.manual_seed_all(99)
    assert _same(_draws("openreg:1"), reference)


def test_manual_seed_seeds_the_current_device_only():
    torch.openreg.manual_seed_all(1)
    torch.openreg.set_device(1)
    torch.openreg.manual_seed(2)
    assert torch.openreg.initial_seed() == 2
    torch.openreg.set_device(0)
    assert torch.openreg.initial_seed() == 1
    assert torch.openreg.default_generators[1].initial_seed() == 2


def test_manual_seed_all_and_initial_seed():
    torch.openreg.manual_seed_all(2024)
    for device in (0, 1):
        with torch.openreg.device(device):
            assert torch.openreg.initial_seed() == 2024
    assert [g.initial_seed() for g in torch.openreg.default_generators] == [2024, 2024]


def test_seed_and_seed_all():
    torch.openreg.manual_seed_all(3)
    torch.openreg.seed()
    first = torch.openreg.initial_seed()
    assert torch.openreg.default_generators[1].initial_seed() == 3  # other device untouched
    torch.openreg.seed()
    assert torch.openreg.initial_seed() != first
    torch.openreg.seed_all()
    seeds = [g.initial_seed() for g in torch.openreg.default_generators]
    assert seeds[0] == seeds[1] and seeds[0] not in (3, first)
    # The same seed gives the same numbers on both devices.
    assert _same(_draws("openreg:0"), _draws("openreg:1"))


def test_torch_manual_seed_seeds_openreg():
    torch.manual_seed(777)
    assert [g.initial_seed() for g in torch.openreg.default_generators] == [777, 777]
    first = _draws("openreg:1")
    torch.manual_seed(777)
    assert _same(_draws("openreg:1"), first)


def test_rng_state_round_trip():
    torch.openreg.manual_seed(11)
    _draws()
    state = torch.openreg.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    expected = _draws()
    torch.openreg.set_rng_state(state)
    assert _same(_draws(), expected)
    # The returned state is a copy: drawing more does not change it.
    assert torch.equal(state, state.clone())
    assert not torch.equal(torch.openreg.get_rng_state(), state)


@pytest.mark.parametrize("duplicate", [lambda g: pickle.loads(pickle.dumps(g)), copy.deepcopy],
                         ids=["pickle", "deepcopy"])
def test_generators_pickle_and_deep_copy_with_their_state(duplicate):
    # As torch.Generator("cuda"): the copy is a generator of the same device
    # that draws the same numbers from here on.
    generator = torch.Generator(device="openreg:1")
    generator.manual_seed(5)
    torch.randn(7, device="openreg:1", generator=generator)  # move away from the seed
    twin = duplicate(generator)
    assert twin.device == torch.device("openreg", 1)
    assert twin.initial_seed() == 5
    assert torch.equal(twin.get_state(), generator.get_state())
    ours = torch.randn(5, device="openreg:1", generator=generator).cpu()
    theirs = torch.randn(5, device="openreg:1", generator=twin).cpu()
    assert torch.equal(ours, theirs)
    assert generator.get_offset() == 0  # mt19937 keeps its position in the state, not an offset
    with pytest.raises(RuntimeError, match="no offset"):
        generator.set_offset(3)


def test_rng_state_of_a_given_device():
    torch.openreg.manual_seed_all(12)
    state1 = torch.openreg.get_rng_state(1)
    expected = _draws("openreg:1")
    torch.openreg.set_rng_state(state1, device=1)
    assert _same(_draws("openreg:1"), expected)
    assert torch.equal(torch.openreg.get_rng_state("openreg:1"),
                       torch.openreg.default_generators[1].get_state())


def test_rng_state_all_round_trip():
    torch.openreg.manual_seed_all(13)
    states = torch.openreg.get_rng_state_all()
    assert len(states) == 2
    expected = [_draws("openreg:0"), _draws("openreg:1")]
    torch.openreg.manual_seed_all(14)
    torch.openreg.set_rng_state_all(states)
    assert _same(_draws("openreg:0"), expected[0])
    assert _same(_draws("openreg:1"), expected[1])


def test_generator_on_openreg_device():
    generator = torch.Generator(device="openreg:1")
    assert generator.device == torch.device("openreg", 1)
    generator.manual_seed(5)
    first = _draws("openreg:1", generator)
    generator.manual_seed(5)
    assert _same(_draws("openreg:1", generator), first)
    # Its state round-trips, and clones draw the same numbers.
    state = generator.get_state()
    again = _draws("openreg:1", generator)
    generator.set_state(state)
    assert _same(_draws("openreg:1", generator), again)


def test_generator_is_independent_of_the_default_generators():
    torch.openreg.manual_seed_all(21)
    defaults_before = torch.openreg.get_rng_state_all()
    generator = torch.Generator(device="openreg:1").manual_seed(21)
    explicit = _draws("openreg:1", generator)
    assert all(torch.equal(a, b) for a, b in zip(defaults_before, torch.openreg.get_rng_state_all(),
                                                  strict=True))
    # Same seed as the default generator: same numbers, drawn independently.
    assert _same(_draws("openreg:1"), explicit)
    # A generator of the default device type works with the current device too.
    default_device_generator = torch.Generator(device="openreg")
    assert default_device_generator.device.type == "openreg"


def test_generator_of_another_device_type_is_rejected():
    with pytest.raises(RuntimeError, match="generator"):
        torch.randn(4, device="openreg", generator=torch.Generator()).cpu()
