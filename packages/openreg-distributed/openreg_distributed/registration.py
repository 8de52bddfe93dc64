"""Registers occl with torch.distributed and builds one OcclBackend per
process group, choosing its transport: IPC when every rank of the group
runs on this host, gloo otherwise or when OCCL_TRANSPORT=gloo. Not here: any
collective (the C++ backend owns them all).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch.distributed as dist

TRANSPORTS = ("ipc", "gloo")
_registered = False


def _host_identity() -> str:
    # Two containers may share a hostname but not device memory: the boot
    # id tells machines apart, the hostname tells the user which host.
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "unknown-boot"
    return f"{socket.gethostname()}/{boot}"


def _requested_transport() -> str:
    requested = os.environ.get("OCCL_TRANSPORT", "").strip().lower()
    if requested and requested not in TRANSPORTS:
        raise ValueError(f"OCCL_TRANSPORT={requested!r} is not a transport of occl; use one of {TRANSPORTS} "
                         "or leave it unset to choose automatically")
    return requested


# LITERALINCLUDE START: OCCL_CHOOSE_TRANSPORT
def choose_transport(store: dist.Store, rank: int, size: int) -> str:
    """Every rank posts its host and its OCCL_TRANSPORT; IPC only if all
    hosts match and nobody asked for gloo. The answer is the same on every
    rank, since each reads the same records."""
    requested = _requested_transport()
    store.set(f"occl/host/{rank}", f"{requested}|{_host_identity()}")
    records = [store.get(f"occl/host/{r}").decode().split("|", 1) for r in range(size)]
    if len({wanted for wanted, _ in records}) > 1:
        raise RuntimeError("occl: ranks set OCCL_TRANSPORT differently: "
                           + ", ".join(f"rank {r}: {wanted or 'unset'}" for r, (wanted, _) in enumerate(records))
                           + "; set the same value (or none) on every rank")
    same_host = len({host for _, host in records}) == 1
    return "ipc" if same_host and requested != "gloo" else "gloo"
# LITERALINCLUDE END: OCCL_CHOOSE_TRANSPORT


def _make_gloo(store: dist.Store, rank: int, size: int, timeout_seconds: float) -> dist.ProcessGroupGloo:
    prefixed = dist.PrefixStore("occl/gloo-transport", store)
    return dist.ProcessGroupGloo(prefixed, rank, size, timedelta(seconds=timeout_seconds))


# LITERALINCLUDE START: OCCL_CREATE_BACKEND
def create_backend(options, backend_options=None):
    """The creator torch.distributed calls for each new occl group
    (extended_api=True: options is a _DistributedBackendOptions)."""
    from openreg_distributed import _C

    store, rank, size = options.store, options.group_rank, options.group_size
    transport = choose_transport(store, rank, size)
    # Test-only: the conformance kit's negative control of a collective (csrc/SeededDefects.cpp).
    seeded = os.environ.get("TORCH_OPENREG_SEEDED_DEFECT") == "allreduce-drops-a-rank"
    make = _C._seeded_defect_backend if seeded else _C.OcclBackend
    return make(store, rank, size, options.timeout.total_seconds(), options.group_id or "default",
                _make_gloo if transport == "gloo" else None)
# LITERALINCLUDE END: OCCL_CREATE_BACKEND


# LITERALINCLUDE START: OCCL_REGISTER
def register() -> None:
    """Registers occl for the openreg device (once). devices must be a list:
    torch 2.13 iterates a string character by character."""
    global _registered
    if _registered:
        return
    from torch_openreg import version_mismatch

    from openreg_distributed._build_info import TORCH_OPENREG_VERSION, TORCH_VERSION

    mismatch = version_mismatch("openreg-distributed", {"torch": TORCH_VERSION, "torch-openreg": TORCH_OPENREG_VERSION})
    if mismatch is not None:
        raise RuntimeError(mismatch)
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this torch build; occl needs it")
    dist.Backend.register_backend("occl", create_backend, extended_api=True, devices=["openreg"])
    _registered = True
# LITERALINCLUDE END: OCCL_REGISTER
