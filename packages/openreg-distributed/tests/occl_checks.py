"""What the rank processes of the collective tests run (occl_workers.py calls
these as fn(rank, world, *args)). Each check runs one collective through
occl on openreg tensors and the same collective through gloo on CPU copies
of the same inputs, and compares. Not tests themselves: test_collectives.py
drives them.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

# (transport, size) -> the group, made once per rank process by make_groups.
GROUPS: dict = {}
DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
}
OPS = {
    "SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG, "PRODUCT": dist.ReduceOp.PRODUCT,
    "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND,
    "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR, "PREMUL_SUM": None,
}
FLOATS = ("float32", "float64", "float16", "bfloat16")


def make_groups(rank: int, world: int) -> dict:
    """Every rank makes every group (new_group is collective over the whole
    world), in the same order; returns {key: transport the group chose}."""
    chosen = {}
    for transport in ("ipc", "gloo"):
        for size in (2, world):
            os.environ["OCCL_TRANSPORT"] = transport
            try:
                group = dist.new_group(list(range(size)), backend="cpu:gloo,openreg:occl")
            finally:
                del os.environ["OCCL_TRANSPORT"]
            if rank < size:
                GROUPS[(transport, size)] = group
                backend = group._get_backend(torch.device("openreg"))
                chosen[f"{transport}{size}"] = backend.transport
    return chosen


def ops_for(dtype: str) -> list[str]:
    if dtype in FLOATS:
        return ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]
    if dtype == "bool":
        return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
    return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


def sample(rank: int, shape, dtype: str, salt: int = 0) -> torch.Tensor:
    """A CPU tensor that differs per rank, small enough that products and
    sums stay exact in every dtype."""
    generator = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype == "uint8":
        return torch.randint(0, 4, shape, generator=generator).to(DTYPES[dtype])
    if dtype in FLOATS:
        return (torch.randint(-8, 9, shape, generator=generator).to(torch.float32) / 4).to(DTYPES[dtype])
    return torch.randint(-3, 4, shape, generator=generator).to(DTYPES[dtype])


def _group(key):
    return GROUPS.get(tuple(key))


def _op(name: str, world: int):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(0.5)
    return OPS[name]


def _reference_allreduce(cpu: torch.Tensor, op: str, group) -> torch.Tensor:
    """The same all_reduce through gloo on CPU; gloo has no AVG or
    PREMUL_SUM and reduces half precision in float32, so those go through
    SUM in float32 and are finished here."""
    size = dist.get_world_size(group)
    if cpu.dtype in (torch.float16, torch.bfloat16) or op in ("AVG", "PREMUL_SUM"):
        wide = cpu.double() if cpu.dtype == torch.float64 else cpu.float()
        dist.all_reduce(wide, op=OPS["SUM"] if op in ("AVG", "PREMUL_SUM") else OPS[op], group=group)
        if op == "AVG":
            wide /= size
        if op == "PREMUL_SUM":
            wide *= 0.5
        return wide.to(cpu.dtype)
    reference = cpu.clone()
    dist.all_reduce(reference, op=OPS[op], group=group)
    return reference


def _assert_same(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    actual = actual.cpu()
    if expected.dtype.is_floating_point:
        tolerance = 1e-2 if expected.dtype in (torch.float16, torch.bfloat16) else 1e-6
        torch.testing.assert_close(actual, expected, rtol=tolerance, atol=tolerance, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(actual, expected), f"{what}: occl {actual} != gloo {expected}"


def check_all_reduce(rank, world, key, dtypes):
    group = _group(key)
    if group is None:
        return None
    cases = 0
    for dtype in dtypes:
        for op in ops_for(dtype):
            cpu = sample(rank, (3, 5), dtype, salt=cases)
            device = cpu.to("openreg")
            work = dist.all_reduce(device, op=_op(op, world), group=group, async_op=True)
            work.wait()
            _assert_same(device, _reference_allreduce(cpu, op, group), f"all_reduce {op} {dtype}")
            cases += 1
    return cases


# Large enough for the in-place allreduce over IPC (fast/IpcAllreduce.cpp
# takes tensors of 256 KiB and more), and an odd number of elements so the
# ranks' chunks differ in length.
LARGE_SHAPE = (1001, 301)


def check_large_all_reduce(rank, world, key):
    """all_reduce of tensors large enough for the in-place path: against
    gloo on CPU, bit-identical on every rank, and twice on the same tensor
    (the peers' opened memory is reused) after it changed."""
    group = _group(key)
    if group is None:
        return None
    cases = 0
    for dtype, ops in (("float32", ["SUM", "AVG", "MAX", "PREMUL_SUM"]), ("bfloat16", ["SUM"]), ("int64", ["SUM"]),
                       ("bool", ["BOR"])):
        device = torch.empty(LARGE_SHAPE, dtype=DTYPES[dtype], device="openreg")
        for op in ops:
            cpu = sample(rank, LARGE_SHAPE, dtype, salt=cases)
            device.copy_(cpu)  # the same allocation each time
            dist.all_reduce(device, op=_op(op, world), group=group)
            _assert_same(device, _reference_allreduce(cpu, op, group), f"large all_reduce {op} {dtype}")
            mine = device.cpu().view(torch.uint8) if dtype != "bool" else device.cpu().to(torch.uint8)
            everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
            dist.all_gather(everyone, mine, group=group)
            assert all(torch.equal(theirs, mine) for theirs in everyone), f"ranks differ after {op} {dtype}"
            cases += 1
    return cases


def check_broadcast_and_reduce(rank, world, key, dtypes):
    group = _group(key)
    if group is None:
        return None
    size = dist.get_world_size(group)
    root = 1 % size
    for dtype in dtypes:
        cpu = sample(rank, (4, 3), dtype)
        device = cpu.to("openreg")
        dist.broadcast(device, src=root, group=group)
        reference = cpu.clone()
        dist.broadcast(reference, src=root, group=group)
        _assert_same(device, reference, f"broadcast {dtype}")
        device = cpu.to("openreg")
        dist.reduce(device, dst=root, op=dist.ReduceOp.MAX, group=group)
        reference = cpu.clone()
        dist.reduce(reference, dst=root, op=dist.ReduceOp.MAX, group=group)
        if rank == root:
            _assert_same(device, reference, f"reduce MAX {dtype}")
    return len(dtypes)


def check_gathers(rank, world, key, dtypes):
    group = _group(key)
    if group is None:
        return None
    size = dist.get_world_size(group)
    root = size - 1
    for dtype in dtypes:
        cpu = sample(rank, (2, 3), dtype)
        device = cpu.to("openreg")
        # all_gather into a list
        outputs = [torch.empty_like(device) for _ in range(size)]
        dist.all_gather(outputs, device, group=group)
        references = [torch.empty_like(cpu) for _ in range(size)]
        dist.all_gather(references, cpu, group=group)
        for got, want in zip(outputs, references, strict=True):
            _assert_same(got, want, f"all_gather {dtype}")
        # all_gather_into_tensor
        out = torch.empty((2 * size, 3), dtype=cpu.dtype, device="openreg")
        dist.all_gather_into_tensor(out, device, group=group)
        _assert_same(out, torch.cat(references), f"all_gather_into_tensor {dtype}")
        # gather to the root
        gathered = [torch.empty_like(device) for _ in range(size)] if rank == root else None
        dist.gather(device, gathered, dst=root, group=group)
        if rank == root:
            for got, want in zip(gathered, references, strict=True):
                _assert_same(got, want, f"gather {dtype}")
        # scatter from the root
        pieces = [sample(r, (2, 3), dtype, salt=7) for r in range(size)]
        out = torch.empty_like(device)
        dist.scatter(out, [p.to("openreg") for p in pieces] if rank == root else None, src=root, group=group)
        reference = torch.empty_like(cpu)
        dist.scatter(reference, pieces if rank == root else None, src=root, group=group)
        _assert_same(out, reference, f"scatter {dtype}")
    return len(dtypes)


def check_reduce_scatters(rank, world, key, dtypes):
    group = _group(key)
    if group is None:
        return None
    size = dist.get_world_size(group)
    for dtype in dtypes:
        pieces = [sample(rank, (2, 2), dtype, salt=r) for r in range(size)]
        # Reference: gloo's all_reduce of the whole input, then this rank's piece.
        whole = torch.cat(pieces)
        reference = _reference_allreduce(whole, "SUM", group)[2 * rank: 2 * rank + 2]
        out = torch.empty((2, 2), dtype=whole.dtype, device="openreg")
        dist.reduce_scatter(out, [p.to("openreg") for p in pieces], group=group)
        _assert_same(out, reference, f"reduce_scatter {dtype}")
        out = torch.empty((2, 2), dtype=whole.dtype, device="openreg")
        dist.reduce_scatter_tensor(out, whole.to("openreg"), group=group)
        _assert_same(out, reference, f"reduce_scatter_tensor {dtype}")
    return len(dtypes)


def check_all_to_all(rank, world, key, dtypes):
    group = _group(key)
    if group is None:
        return None
    size = dist.get_world_size(group)
    for dtype in dtypes:
        # even splits
        cpu = sample(rank, (2 * size, 3), dtype)
        out = torch.empty((2 * size, 3), dtype=cpu.dtype, device="openreg")
        dist.all_to_all_single(out, cpu.to("openreg"), group=group)
        reference = torch.empty_like(cpu)
        dist.all_to_all_single(reference, cpu, group=group)
        _assert_same(out, reference, f"all_to_all_single {dtype}")
        # uneven splits: rank r sends r + s + 1 rows to rank s
        send = [rank + s + 1 for s in range(size)]
        receive = [s + rank + 1 for s in range(size)]
        cpu = sample(rank, (sum(send), 2), dtype, salt=3)
        out = torch.empty((sum(receive), 2), dtype=cpu.dtype, device="openreg")
        dist.all_to_all_single(out, cpu.to("openreg"), receive, send, group=group)
        reference = torch.empty((sum(receive), 2), dtype=cpu.dtype)
        dist.all_to_all_single(reference, cpu, receive, send, group=group)
        _assert_same(out, reference, f"all_to_all_single with splits {dtype}")
        # rank 0 sends no rows (its input has none) but receives some
        send = [0 if rank == 0 else 1] * size
        receive = [0] + [1] * (size - 1)
        cpu = sample(rank, (sum(send), 3), dtype, salt=5)
        out = torch.empty((sum(receive), 3), dtype=cpu.dtype, device="openreg")
        dist.all_to_all_single(out, cpu.to("openreg"), receive, send, group=group)
        reference = torch.empty((sum(receive), 3), dtype=cpu.dtype)
        dist.all_to_all_single(reference, cpu, receive, send, group=group)
        _assert_same(out, reference, f"all_to_all_single from an input of no rows {dtype}")
        # a list of tensors of different sizes
        inputs = [sample(rank, (s + 1,), dtype, salt=s) for s in range(size)]
        outputs = [torch.empty((rank + 1,), dtype=cpu.dtype, device="openreg") for _ in range(size)]
        dist.all_to_all(outputs, [t.to("openreg") for t in inputs], group=group)
        # gloo's all_to_all wants equal sizes: the reference moves the same
        # bytes with its all_to_all_single and split sizes.
        reference = torch.empty(((rank + 1) * size,), dtype=cpu.dtype)
        dist.all_to_all_single(reference, torch.cat(inputs), [rank + 1] * size, [s + 1 for s in range(size)],
                               group=group)
        for got, want in zip(outputs, reference.split(rank + 1), strict=True):
            _assert_same(got, want, f"all_to_all {dtype}")
    return len(dtypes)


def check_point_to_point(rank, world, key):
    group = _group(key)
    if group is None:
        return None
    size = dist.get_world_size(group)
    peer_of = {r: r ^ 1 for r in range(size)}
    peer = dist.get_global_rank(group, peer_of[dist.get_group_rank(group, rank)])
    mine = sample(rank, (5,), "float32").to("openreg")
    # Both ranks send first, then receive: sends must not wait for receivers.
    for tag in (0, 3):
        dist.send(mine + tag, dst=peer, group=group, tag=tag)
    for tag in (0, 3):
        got = torch.empty(5, device="openreg")
        dist.recv(got, src=peer, group=group, tag=tag)
        _assert_same(got, sample(peer, (5,), "float32") + tag, f"send/recv tag {tag}")
    # recv from any source (a tag of its own: the ring below may send early)
    got = torch.empty(5, device="openreg")
    if rank % 2 == 0:
        source = dist.recv(got, group=group, tag=7)
        assert source == peer, f"recv from any source reported rank {source}, the sender is {peer}"
        _assert_same(got, sample(peer, (5,), "float32"), "recv any source")
    else:
        dist.send(mine, dst=peer, group=group, tag=7)
    # batch_isend_irecv: a ring
    right, left = (rank + 1) % size, (rank - 1) % size
    got = torch.empty(5, device="openreg")
    ops = [dist.P2POp(dist.isend, mine, dist.get_global_rank(group, right), group),
           dist.P2POp(dist.irecv, got, dist.get_global_rank(group, left), group)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    _assert_same(got, sample(left, (5,), "float32"), "batch_isend_irecv ring")
    return True


def check_coalesced(rank, world, key):
    group = _group(key)
    if group is None:
        return None
    size = dist.get_world_size(group)
    device = torch.device("openreg", torch.openreg.current_device())
    inputs = [sample(rank, (3,), "float32", salt=i) for i in range(3)]
    # all_gather_into_tensor and reduce_scatter_tensor, coalesced
    outs = [torch.empty(3 * size, device="openreg") for _ in inputs]
    with dist._coalescing_manager(group, device, async_ops=True) as manager:
        for out, t in zip(outs, inputs, strict=True):
            dist.all_gather_into_tensor(out, t.to("openreg"), group=group)
    manager.wait()
    for out, t in zip(outs, inputs, strict=True):
        references = [torch.empty(3) for _ in range(size)]
        dist.all_gather(references, t, group=group)
        _assert_same(out, torch.cat(references), "coalesced all_gather_into_tensor")
    wholes = [sample(rank, (2 * size,), "float32", salt=10 + i) for i in range(3)]
    outs = [torch.empty(2, device="openreg") for _ in wholes]
    with dist._coalescing_manager(group, device, async_ops=True) as manager:
        for out, whole in zip(outs, wholes, strict=True):
            dist.reduce_scatter_tensor(out, whole.to("openreg"), group=group)
    manager.wait()
    for out, whole in zip(outs, wholes, strict=True):
        _assert_same(out, _reference_allreduce(whole, "SUM", group)[2 * rank: 2 * rank + 2],
                     "coalesced reduce_scatter_tensor")
    # all_reduce_coalesced through the backend
    tensors = [t.to("openreg") for t in inputs]
    backend = group._get_backend(torch.device("openreg"))
    options = dist.AllreduceCoalescedOptions()
    options.reduceOp = dist.ReduceOp.SUM
    backend.allreduce_coalesced(tensors, options).wait()
    for got, t in zip(tensors, inputs, strict=True):
        _assert_same(got, _reference_allreduce(t, "SUM", group), "allreduce_coalesced")
    # barrier
    dist.barrier(group=group)
    return True


def check_split(rank, world, key):
    """split_group of a 4-rank group into two pairs: each pair reduces on
    its own, through the parent's transport."""
    parent = _group(key)
    # split_group wants the world bound to a device, as init_process_group(
    # device_id=...) does; the pool's world is made without one, so that
    # new_group makes fresh groups (with the transport asked for) rather
    # than splits of the world; it is unbound again at once.
    world_group = dist.distributed_c10d._get_default_group()
    world_group.bound_device_id = torch.device("openreg", torch.openreg.current_device())
    try:
        pair = dist.split_group(parent, [[0, 1], [2, 3]])
    finally:
        world_group.bound_device_id = None
    backend = pair._get_backend(torch.device("openreg"))
    t = torch.full((6,), float(rank), device="openreg")
    dist.all_reduce(t, group=pair, async_op=True).synchronize()  # a failure raises here, naming itself
    partner = rank ^ 1
    assert torch.equal(t.cpu(), torch.full((6,), float(rank + partner))), t.cpu()
    transport = backend.transport
    dist.destroy_process_group(pair)
    return transport
