"""A pool of spawned rank processes for the multi-process tests: started once
per test module, it runs many checks (any module-level function) on every
rank and returns their results. Loopback only; every call is bounded by a
timeout and the processes are killed whatever happens. Not a launcher for
anything but tests.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import traceback
from datetime import timedelta


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(rank: int, world: int, port: int, env: dict, timeout_s: float, conn) -> None:
    os.environ.update(env)
    import torch
    import torch.distributed as dist

    try:
        torch.openreg.set_device(rank % torch.openreg.device_count())
        dist.init_process_group("cpu:gloo,openreg:occl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=timeout_s))
        conn.send(("ready", None))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            break
        fn, args = message
        try:
            conn.send(("ok", fn(rank, world, *args)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
    try:
        dist.destroy_process_group()
    finally:
        conn.send(("bye", None))


class RankError(AssertionError):
    pass


class Workers:
    """world processes in one process group ("cpu:gloo,openreg:occl")."""

    def __init__(self, world: int, env: dict | None = None, timeout_s: float = 60.0, start_timeout_s: float = 120.0):
        self.world = world
        context = multiprocessing.get_context("spawn")
        port = free_port()
        self.connections, self.processes = [], []
        for rank in range(world):
            mine, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(rank, world, port, dict(env or {}), timeout_s, theirs),
                                      daemon=True)
            process.start()
            self.connections.append(mine)
            self.processes.append(process)
        self._collect(start_timeout_s, "start")

    def _collect(self, timeout_s: float, what: str, ranks=None) -> list:
        results = {}
        for rank in ranks if ranks is not None else range(self.world):
            connection = self.connections[rank]
            if not connection.poll(timeout_s):
                self.kill()
                raise RankError(f"rank {rank} did not answer {what} within {timeout_s} s")
            try:
                status, value = connection.recv()
            except EOFError:
                self.kill()
                raise RankError(f"rank {rank} died during {what} (exit code {self.processes[rank].exitcode})") from None
            if status == "error":
                raise RankError(f"rank {rank} failed {what}:\n{value}")
            results[rank] = value
        return [results[r] for r in sorted(results)]

    def run(self, fn, *args, timeout_s: float = 60.0, ranks=None) -> list:
        """Runs fn(rank, world, *args) on the given ranks (all by default);
        returns their results in rank order, or raises the first failure."""
        ranks = list(range(self.world)) if ranks is None else list(ranks)
        for rank in ranks:
            self.connections[rank].send((fn, args))
        return self._collect(timeout_s, fn.__name__, ranks)

    def send_only(self, rank: int, fn, *args) -> None:
        self.connections[rank].send((fn, args))

    def collect(self, what: str, ranks, timeout_s: float = 60.0) -> list:
        """The results of what send_only started on ranks, in rank order."""
        return self._collect(timeout_s, what, ranks)

    def close(self, timeout_s: float = 30.0) -> None:
        try:
            for connection in self.connections:
                connection.send(None)
            for connection in self.connections:
                if connection.poll(timeout_s):
                    connection.recv()
        except (BrokenPipeError, EOFError, OSError):
            pass
        self.kill()

    def kill(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.kill()
        for process in self.processes:
            process.join(5)
