"""openreg-distributed as a package: loaded through torch_openreg's entry
points, occl registered for the device "openreg" (and only for it: the
string pitfall of register_backend), named by torch-openreg's extra, and its
transport choice refusing what it cannot honour. No processes spawned."""

from __future__ import annotations

from importlib.metadata import requires

import pytest
import torch
import torch.distributed as dist
from openreg_distributed.registration import choose_transport


def test_listed_as_loaded():
    assert torch.openreg.extensions()["distributed"] == "loaded"


def test_occl_is_the_default_backend_of_openreg_only():
    backends = dist.Backend.default_device_backend_map
    assert backends["openreg"] == "occl"
    # devices="openreg" as a string would have registered "o", "p", "e", ...
    assert not [device for device in backends if len(device) == 1]
    assert "occl" in dist.Backend.backend_list


def test_the_distributed_extra_installs_this_package():
    extras = [r for r in requires("torch-openreg") if 'extra == "distributed"' in r]
    assert any(r.startswith("openreg-distributed") for r in extras), extras


def test_transport_choice(monkeypatch):
    store = dist.HashStore()
    monkeypatch.delenv("OCCL_TRANSPORT", raising=False)
    assert choose_transport(store, 0, 1) == "ipc"
    monkeypatch.setenv("OCCL_TRANSPORT", "gloo")
    assert choose_transport(dist.HashStore(), 0, 1) == "gloo"


def test_transport_choice_refuses_unknown_and_disagreeing_requests(monkeypatch):
    monkeypatch.setenv("OCCL_TRANSPORT", "carrier-pigeon")
    with pytest.raises(ValueError, match="OCCL_TRANSPORT='carrier-pigeon' is not a transport of occl"):
        choose_transport(dist.HashStore(), 0, 1)
    store = dist.HashStore()
    store.set("occl/host/1", "gloo|elsewhere")  # rank 1 asked for gloo
    monkeypatch.setenv("OCCL_TRANSPORT", "ipc")
    with pytest.raises(RuntimeError, match="ranks set OCCL_TRANSPORT differently"):
        choose_transport(store, 0, 2)
