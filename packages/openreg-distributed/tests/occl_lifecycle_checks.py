"""What the ranks run for test_lifecycle.py: process groups made, destroyed
and made again in one job. A group never meets an earlier group's state
(Note [Each group meets under keys of its own] in csrc/Backend.cpp), and
groups split off a group bound to a device work on every rank."""

from __future__ import annotations

import socket
from datetime import timedelta

import torch
import torch.distributed as dist

# occl alone: gloo's own keys of a group made again on one store are the
# earlier group's (ProcessGroupGloo would connect to the old addresses).
BACKEND = "openreg:occl"
TIMEOUT = timedelta(seconds=30)  # generous: making a group is a rendezvous


def _shared_store(rank, world) -> dist.TCPStore:
    """A store of this scenario's own, which outlives the groups made on it
    (as torchrun's agent store does): rank 0 hosts it on a free port."""
    default = dist.distributed_c10d._get_default_store()
    if rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        default.set("lifecycle/port", str(port))
    port = int(default.get("lifecycle/port"))
    return dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0, timeout=timedelta(seconds=30))


def _remake_default_group(store, rank, world, **kwargs) -> None:
    dist.destroy_process_group()
    dist.init_process_group(BACKEND, store=store, rank=rank, world_size=world, timeout=TIMEOUT, **kwargs)


def reinit_on_one_store(rank, world, rounds):
    """The default group is destroyed and made again on one store, rounds
    times; each time its occl all_reduce sums what the ranks hold now, and a
    message sent in an earlier group and never received is not received by
    a later one."""
    torch.openreg.set_device(rank)
    store = _shared_store(rank, world)
    sums, received = [], []
    for round_ in range(rounds):
        _remake_default_group(store, rank, world)
        t = torch.full((4,), float(rank + 1 + 10 * round_), device="openreg")
        dist.all_reduce(t)
        sums.append(t.cpu().tolist())
        if rank == 1:
            dist.send(torch.full((2,), float(round_), device="openreg"), dst=0)  # received only in round 0
        elif round_ == 0:
            into = torch.zeros(2, device="openreg")
            dist.recv(into, src=1)
            received.append(into.cpu().tolist())
        dist.all_reduce(torch.zeros(1, device="openreg"))  # the send was posted before the group goes
    # The default group is the pool's again (made on this store), which keeps working.
    return {"sums": sums, "received": received}


def splits_of_a_bound_group(rank, world):
    """With device_id given (the documented way), c10d asks the ranks left
    out of a subgroup to take part in splitting it (perform_nocolor_split):
    new_group and new_subgroups work, and their collectives are right."""
    torch.openreg.set_device(rank)
    store = _shared_store(rank, world)
    _remake_default_group(store, rank, world, device_id=torch.device("openreg", rank))
    alone = dist.new_group([0])  # rank 1 is left out
    pair = dist.new_group([0, 1])
    mine, _ = dist.new_subgroups(group_size=1)
    results = {}
    t = torch.full((3,), float(rank + 1), device="openreg")
    dist.all_reduce(t, group=pair)
    results["pair"] = t.cpu().tolist()
    if rank == 0:
        t = torch.full((3,), 5.0, device="openreg")
        dist.all_reduce(t, group=alone)
        results["alone"] = t.cpu().tolist()
    t = torch.full((3,), float(rank + 1), device="openreg")
    dist.all_reduce(t, group=mine)
    results["own subgroup"] = t.cpu().tolist()
    for group in (alone, pair, mine):
        if group != dist.GroupMember.NON_GROUP_MEMBER:
            dist.destroy_process_group(group)
    return results
