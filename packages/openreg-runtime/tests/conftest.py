"""Shared fixtures for the openreg-runtime tests.

Every test runs under ``_clean_runtime`` (autouse): it starts on device 0 with
no last error and tracing off, and afterwards checks that the test left no
device memory allocated, no sticky kernel error and no stream worker threads
behind. Tests get their resources from the ``res`` fixture, which releases
whatever the test did not (opening gates first, so nothing can hang).

The suite assumes the runtime's default configuration (2 devices of 4 GiB);
other configurations are tested in subprocesses (test_environment.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time

import openreg_runtime as ort
import pytest

# A gated kernel waits at most this long; a test that forgets to open its gate
# then fails (the kernel raises) instead of hanging the suite.
GATE_TIMEOUT_S = 20.0


# --------------------------------------------------------------------- helpers


class Gate:
    """A kernel body that blocks its stream until the test calls open().

    Launch it with ``ort.launch_kernel(stream, gate, name)``. ``started`` is
    set when the kernel begins, ``finished`` when it returns after being
    opened; if nobody opens it within GATE_TIMEOUT_S it raises (the kernel
    fails) and ``timed_out`` is set.
    """

    def __init__(self) -> None:
        self._open = threading.Event()
        self.started = threading.Event()
        self.finished = threading.Event()
        self.timed_out = False

    def __call__(self) -> None:
        self.started.set()
        if not self._open.wait(GATE_TIMEOUT_S):
            self.timed_out = True
            raise TimeoutError("gate was never opened")
        self.finished.set()

    def open(self) -> None:
        self._open.set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()


class Resources:
    """Creates runtime resources for one test and releases the leftovers."""

    def __init__(self) -> None:
        self.gates: list[Gate] = []
        self.streams: list[int] = []
        self.events: list[int] = []
        self.device_ptrs: list[int] = []
        self.host_ptrs: list[int] = []

    # Device selection helper: run a creation call on a given device.
    @contextlib.contextmanager
    def on_device(self, device: int | None):
        if device is None:
            yield
            return
        previous = ort.get_device()
        ort.set_device(device)
        try:
            yield
        finally:
            ort.set_device(previous)

    def gate(self) -> Gate:
        g = Gate()
        self.gates.append(g)
        return g

    def stream(self, device: int | None = None, priority: int | None = None) -> int:
        with self.on_device(device):
            if priority is None:
                s = ort.stream_create()
            else:
                s = ort.stream_create_with_priority(priority)
        self.streams.append(s)
        return s

    def destroy_stream(self, s: int) -> None:
        self.streams.remove(s)
        ort.stream_destroy(s)

    def event(self, flags: int = 0, device: int | None = None) -> int:
        with self.on_device(device):
            e = ort.event_create(flags)
        self.events.append(e)
        return e

    def destroy_event(self, e: int) -> None:
        self.events.remove(e)
        ort.event_destroy(e)

    def malloc(self, size: int, device: int | None = None) -> int:
        with self.on_device(device):
            p = ort.malloc(size)
        if p:
            self.device_ptrs.append(p)
        return p

    def free(self, p: int) -> None:
        self.device_ptrs.remove(p)
        ort.free(p)

    def malloc_host(self, size: int) -> int:
        p = ort.malloc_host(size)
        if p:
            self.host_ptrs.append(p)
        return p

    def free_host(self, p: int) -> None:
        self.host_ptrs.remove(p)
        ort.free_host(p)

    def close(self) -> None:
        for g in self.gates:
            g.open()
        # Leftover work may have failed on purpose; clear sticky errors so the
        # frees below do not wait on anything, then release everything.
        for device in range(ort.get_device_count()):
            ort.set_device(device)
            with contextlib.suppress(ort.Error):
                ort.device_synchronize()
        for s in self.streams:
            ort.stream_destroy(s)
        for e in self.events:
            ort.event_destroy(e)
        for p in self.device_ptrs:
            ort.free(p)
        for p in self.host_ptrs:
            ort.free_host(p)
        self.streams.clear()
        self.events.clear()
        self.device_ptrs.clear()
        self.host_ptrs.clear()
        ort.set_device(0)


def _task_count() -> int:
    return len(os.listdir("/proc/self/task"))


def _free_bytes_per_device() -> list[int]:
    free = []
    for device in range(ort.get_device_count()):
        ort.set_device(device)
        free.append(ort.mem_get_info()[0])
    ort.set_device(0)
    return free


# -------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session", autouse=True)
def _warm_default_streams():
    # A stream's worker thread starts with its first piece of work; start the
    # default streams' workers now so the per-test thread count is stable.
    for device in range(ort.get_device_count()):
        ort.set_device(device)
        ort.launch_kernel(0, lambda: None, "warm_up")
        ort.device_synchronize()
    ort.set_device(0)
    # The copy engine's helper threads start with the first large copy and
    # live as long as the process: start them now too.
    size = 16 << 20
    device = ort.malloc(size)
    ort.memset(device, 0, size)
    ort.free(device)
    yield


@pytest.fixture(autouse=True)
def _clean_runtime():
    ort.set_device(0)
    ort.trace_enable(False)
    ort.trace_drain()
    ort.get_last_error()
    baseline_free = _free_bytes_per_device()
    baseline_tasks = _task_count()
    yield
    problems = []
    ort.trace_enable(False)
    ort.trace_drain()
    for device in range(ort.get_device_count()):
        ort.set_device(device)
        try:
            ort.device_synchronize()
        except ort.Error as e:
            problems.append(f"device {device} left with a sticky error: {e}")
            ort.device_reset()
    after_free = _free_bytes_per_device()
    if after_free != baseline_free:
        problems.append(
            f"device memory leaked: free bytes per device {baseline_free} before, "
            f"{after_free} after")
    # Joined threads can stay listed for an instant after join() returns.
    deadline = time.monotonic() + 5.0
    while _task_count() > baseline_tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    if _task_count() > baseline_tasks:
        problems.append(
            f"threads leaked (streams not destroyed?): {baseline_tasks} before, "
            f"{_task_count()} after")
    ort.set_device(0)
    if problems:
        pytest.fail("; ".join(problems))


@pytest.fixture
def res():
    resources = Resources()
    yield resources
    resources.close()


@pytest.fixture
def gate(res) -> Gate:
    return res.gate()


@pytest.fixture
def raises_or():
    """``with raises_or(code, "fragment", ...):`` expects an ort.Error with
    that code (an int or a name such as "orErrorInvalidValue") whose message
    contains every fragment. Yields pytest's ExceptionInfo."""

    @contextlib.contextmanager
    def check(code, *fragments):
        if isinstance(code, str):
            code = getattr(ort, code)
        with pytest.raises(ort.Error) as info:
            yield info
        error = info.value
        assert error.code == code, f"expected {ort.get_error_name(code)}, got {error.name}: {error}"
        assert error.name == ort.get_error_name(code)
        for fragment in fragments:
            assert fragment in str(error), f"{fragment!r} not in {str(error)!r}"

    return check


@pytest.fixture
def run_python(python):
    """Runs Python code in a fresh interpreter (the root conftest's ``python``)
    with extra environment variables; OPENREG_* variables of this process are
    dropped unless given. Returns the CompletedProcess, whatever its status."""

    def run(code: str, env: dict[str, str] | None = None, timeout: float = 60):
        dropped = {name: None for name in os.environ if name.startswith("OPENREG_")}
        return python.run(code, env={**dropped, **(env or {})}, timeout=timeout, check=False)

    return run


# ------------------------------------------------------ byte buffers via ctypes


def host_bytes(address: int, count: int) -> bytes:
    return ctypes.string_at(address, count)


def host_write(address: int, data: bytes) -> None:
    ctypes.memmove(address, data, len(data))


@pytest.fixture
def hostmem():
    """Helpers to read and write host memory at integer addresses."""

    class HostMem:
        read = staticmethod(host_bytes)
        write = staticmethod(host_write)

        @staticmethod
        def pageable(data: bytes | int):
            """A pageable host buffer; returns (ctypes buffer, address)."""
            buf = ctypes.create_string_buffer(data, len(data)) if isinstance(
                data, bytes) else ctypes.create_string_buffer(data)
            return buf, ctypes.addressof(buf)

        @staticmethod
        def device_read(ptr: int, count: int) -> bytes:
            """Synchronous D2H copy of count bytes into a fresh bytes object."""
            buf = ctypes.create_string_buffer(count)
            ort.memcpy(ctypes.addressof(buf), ptr, count, ort.orMemcpyDeviceToHost)
            return buf.raw

        @staticmethod
        def device_write(ptr: int, data: bytes) -> None:
            buf = ctypes.create_string_buffer(data, len(data))
            ort.memcpy(ptr, ctypes.addressof(buf), len(data), ort.orMemcpyHostToDevice)

    return HostMem
