"""Interprocess device memory (orIpcGetMemHandle/OpenMemHandle/CloseMemHandle):
two processes on this host sharing device allocations through handles sent
over a pipe, every refusal, and the lifetime rules (free before close, a
killed importer, an exporter that exits).

The other process is tests/ipc_peer.py, driven one command at a time; every
reply is awaited with a timeout and every peer is killed at teardown.
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from array import array
from pathlib import Path

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

PEER = Path(__file__).with_name("ipc_peer.py")
REPLY_TIMEOUT_S = 30.0
MiB = 1 << 20


class Peer:
    """A second process running ipc_peer.py, spoken to over its stdin/stdout."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENREG_")}
        self.process = subprocess.Popen(
            [sys.executable, str(PEER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env)

    def call(self, name: str, *args):
        """Runs one command; returns its result or raises ort.Error-like PeerError."""
        self.process.stdin.write(json.dumps([name, *args]) + "\n")
        self.process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=REPLY_TIMEOUT_S):
                raise TimeoutError(f"peer did not answer {name} within {REPLY_TIMEOUT_S} s")
        line = self.process.stdout.readline()
        if not line:
            raise EOFError(f"peer exited during {name}: {self.stop()}")
        reply = json.loads(line)
        if "error" in reply:
            raise PeerError(reply["error"], reply["message"])
        return reply["ok"]

    def stop(self) -> str:
        """Ends the peer (closing its stdin first) and returns its stderr."""
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=REPLY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.stderr.read()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=REPLY_TIMEOUT_S)


class PeerError(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


@pytest.fixture
def peer():
    """Starts peers on demand; each is killed at teardown, whatever happened."""
    peers = []

    def start() -> Peer:
        peers.append(Peer())
        return peers[-1]

    yield start
    for p in peers:
        if p.process.poll() is None:
            p.process.kill()
        p.process.wait(timeout=REPLY_TIMEOUT_S)
        for stream in (p.process.stdin, p.process.stdout, p.process.stderr):
            stream.close()


def pattern(count: int, seed: int) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(count))


def free_bytes() -> int:
    return ort.mem_get_info()[0]


def wait_for_free_bytes(expected: int) -> int:
    """The exporter reclaims at its next allocator call; polls mem_get_info."""
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while free_bytes() != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return free_bytes()


# --------------------------------------------------------------- sharing data


def test_copies_both_ways_between_processes(res, peer, hostmem):
    size = 3 * MiB + 100
    exported = res.malloc(size)
    hostmem.device_write(exported, pattern(size, 1))
    other = peer()
    imported = other.call("open", ort.ipc_get_mem_handle(exported).hex())
    local = other.call("malloc", size)
    other.call("copy", local, imported, size)  # exporter's memory -> importer's
    assert bytes.fromhex(other.call("read", local, size)) == pattern(size, 1)
    other.call("write", local, pattern(size, 2).hex())
    other.call("copy_async", imported, local, size)  # importer's -> exporter's, on a stream
    assert hostmem.device_read(exported, size) == pattern(size, 2)
    other.call("memset", imported + 10, 0xAB, 5)
    assert hostmem.device_read(exported + 8, 9) == pattern(size, 2)[8:10] + b"\xab" * 5 + pattern(size, 2)[15:17]
    other.call("close", imported)
    other.call("free", local)
    assert other.stop() == ""


def test_handle_names_the_whole_allocation(res, peer, hostmem):
    base = res.malloc(8192)
    hostmem.device_write(base, pattern(8192, 3))
    handle = ort.ipc_get_mem_handle(base + 1000)
    assert isinstance(handle, bytes) and len(handle) == ort.OR_IPC_HANDLE_SIZE == 64
    assert handle == ort.ipc_get_mem_handle(base)  # an interior pointer names its allocation
    other = peer()
    other.call("set_device", 1)
    imported = other.call("open", handle.hex())
    attributes = other.call("attributes", imported + 4000)
    assert attributes == {"type": "device", "device": 1, "base": imported, "size": 8192}
    assert bytes.fromhex(other.call("read", imported + 1000, 16)) == pattern(8192, 3)[1000:1016]
    other.call("close", imported)


def test_kernel_in_importer_reduces_into_exporter_memory(res, peer, hostmem):
    count = 4096
    mine = array("f", [i * 0.25 - 300 for i in range(count)])
    theirs = array("f", [(i % 97) * 1.5 for i in range(count)])
    exported = res.malloc(count * 4)
    hostmem.device_write(exported, mine.tobytes())
    other = peer()
    imported = other.call("open", ort.ipc_get_mem_handle(exported).hex())
    local = other.call("malloc", count * 4)
    other.call("write", local, theirs.tobytes().hex())
    other.call("add_kernel", imported, local, count)
    expected = array("f", [a + b for a, b in zip(mine, theirs, strict=True)])
    assert array("f", hostmem.device_read(exported, count * 4)) == expected
    other.call("close", imported)
    other.call("free", local)


def test_opened_memory_does_not_count_against_the_importer(res, peer):
    exported = res.malloc(64 * MiB)
    other = peer()
    before = other.call("free_bytes")
    imported = other.call("open", ort.ipc_get_mem_handle(exported).hex())
    assert other.call("free_bytes") == before
    other.call("close", imported)
    assert other.call("free_bytes") == before


def test_host_access_to_opened_memory_faults(res, peer):
    exported = res.malloc(4096)
    other = peer()
    imported = other.call("open", ort.ipc_get_mem_handle(exported).hex())
    with pytest.raises(EOFError) as info:
        other.call("host_read", imported)
    code, stderr = other.process.returncode, str(info.value)
    if "AddressSanitizer" in stderr:  # under tools/sanitize.py its handler reports and exits
        assert "SEGV on unknown address" in stderr, stderr
    else:
        assert code in (-signal.SIGSEGV, -signal.SIGBUS), (code, stderr)


# ----------------------------------------------------------------- refusals


def test_opening_own_handle_is_not_permitted(res, raises_or):
    ptr = res.malloc(4096)
    with raises_or("orErrorNotPermitted", "exported by this process", "original device pointer"):
        ort.ipc_open_mem_handle(ort.ipc_get_mem_handle(ptr))


def test_garbage_handles_are_invalid_values(raises_or):
    with raises_or("orErrorInvalidValue", "not the bytes written by orIpcGetMemHandle"):
        ort.ipc_open_mem_handle(bytes(range(64)))
    with raises_or("orErrorInvalidValue", "a handle is 64 bytes"):
        ort.ipc_open_mem_handle(b"short")


@pytest.mark.parametrize("forgery", ["offset + 1 MiB", "offset past the device", "size + 4096"])
def test_forged_handles_do_not_open_memory_they_do_not_name(res, peer, hostmem, forgery):
    # A handle whose offset or size was changed must not open another
    # allocation (here one never exported, right after the exported one),
    # nor fault the importer: the exporter's lease records what it exported.
    exported = res.malloc(MiB)
    neighbour = res.malloc(MiB)
    hostmem.device_write(neighbour, pattern(64, 9))
    handle = bytearray(ort.ipc_get_mem_handle(exported))
    offset = int.from_bytes(handle[48:56], "little")  # HandleData: offset, then size (src/ipc.cpp)
    size = int.from_bytes(handle[56:64], "little")
    assert size == MiB
    if forgery == "offset + 1 MiB":
        handle[48:56] = (offset + MiB).to_bytes(8, "little")
    elif forgery == "offset past the device":
        handle[48:56] = (offset + (64 << 30)).to_bytes(8, "little")
    else:
        handle[56:64] = (size + 4096).to_bytes(8, "little")
    other = peer()
    with pytest.raises(PeerError, match="forged or corrupted handle") as info:
        other.call("open", bytes(handle).hex())
    assert info.value.name == "orErrorInvalidValue"
    assert other.call("open", ort.ipc_get_mem_handle(exported).hex())  # the genuine handle still opens
    assert hostmem.device_read(neighbour, 64) == pattern(64, 9)


def test_unknown_flags_are_invalid(res, raises_or):
    handle = ort.ipc_get_mem_handle(res.malloc(512))
    with raises_or("orErrorInvalidValue", "unknown flags 0x1"):
        ort.ipc_open_mem_handle(handle, 1)


def test_exporting_what_is_not_a_live_allocation(res, hostmem, raises_or):
    buffer, address = hostmem.pageable(64)
    with raises_or("orErrorInvalidValue", "not device memory"):
        ort.ipc_get_mem_handle(address)
    with raises_or("orErrorInvalidValue", "devPtr is NULL"):
        ort.ipc_get_mem_handle(0)
    ptr = ort.malloc(4096)
    ort.free(ptr)
    with raises_or("orErrorInvalidDevicePointer", "freed or was never allocated"):
        ort.ipc_get_mem_handle(ptr)


def test_closing_what_was_not_opened(res, raises_or):
    ptr = res.malloc(4096)
    with raises_or("orErrorInvalidValue", "not a pointer returned by orIpcOpenMemHandle", "orFree"):
        ort.ipc_close_mem_handle(ptr)
    with raises_or("orErrorInvalidValue", "not a pointer returned by orIpcOpenMemHandle"):
        ort.ipc_close_mem_handle(0x1234)
    ort.ipc_close_mem_handle(0)  # NULL: nothing to do


def test_importer_refusals(res, peer):
    exported = res.malloc(4096)
    other = peer()
    imported = other.call("open", ort.ipc_get_mem_handle(exported).hex())
    with pytest.raises(PeerError, match="orIpcCloseMemHandle") as info:
        other.call("free", imported)
    assert info.value.name == "orErrorInvalidValue"
    with pytest.raises(PeerError, match="does not export such memory again") as info:
        other.call("export", imported)
    assert info.value.name == "orErrorInvalidValue"
    with pytest.raises(PeerError, match="overrun its allocation of 4096 bytes") as info:
        other.call("memset", imported + 8, 0, 4096)  # opened memory keeps its bounds
    assert info.value.name == "orErrorInvalidValue"
    with pytest.raises(PeerError, match="not a pointer returned by orIpcOpenMemHandle") as info:
        other.call("close", imported + 512)
    # Closing waits for queued work: a kernel would wait for its own stream.
    error, = other.call("close_in_kernel", imported)
    assert error.startswith("orErrorNotPermitted: ") and "inside a kernel" in error
    other.call("close", imported)
    with pytest.raises(PeerError, match="closed already") as info:
        other.call("close", imported)
    assert info.value.name == "orErrorInvalidValue"


def test_handle_of_freed_allocation_is_stale(peer):
    ptr = ort.malloc(4096)
    handle = ort.ipc_get_mem_handle(ptr)
    ort.free(ptr)
    # An allocation made and exported since (at the same address, if the
    # allocator reuses it) is a new one: the old handle must not open it.
    again = ort.malloc(4096)
    fresh = ort.ipc_get_mem_handle(again)
    assert fresh != handle
    other = peer()
    with pytest.raises(PeerError, match="stale handle") as info:
        other.call("open", handle.hex())
    assert info.value.name == "orErrorInvalidResourceHandle"
    other.call("close", other.call("open", fresh.hex()))
    ort.free(again)


def test_handle_of_exited_process_is_stale(peer, raises_or):
    exporter = peer()
    ptr = exporter.call("malloc", 4096)
    handle = bytes.fromhex(exporter.call("export", ptr))
    assert exporter.stop() == ""
    with raises_or("orErrorInvalidResourceHandle", "stale handle", "has exited"):
        ort.ipc_open_mem_handle(handle)


# ---------------------------------------------------------------- lifetimes


def test_exporter_free_waits_for_the_last_close(peer, hostmem, raises_or):
    baseline = free_bytes()
    size = 2 * MiB
    exported = ort.malloc(size)
    hostmem.device_write(exported, pattern(size, 4))
    other = peer()
    imported = other.call("open", ort.ipc_get_mem_handle(exported).hex())
    ort.free(exported)  # returns at once; the bytes stay reserved for the importer
    assert free_bytes() == baseline - size
    with raises_or("orErrorInvalidDevicePointer", "freed already"):
        ort.free(exported)
    # New allocations never land on the reserved range.
    others = [ort.malloc(size) for _ in range(3)]
    for p in others:
        assert not exported <= p < exported + size
        ort.memset(p, 0x5A, size)
    assert bytes.fromhex(other.call("read", imported, size)) == pattern(size, 4)
    other.call("memset", imported, 0x11, size)  # still writable, corrupts nothing
    for p in others:
        assert hostmem.device_read(p, size) == b"\x5a" * size
        ort.free(p)
    other.call("close", imported)
    assert wait_for_free_bytes(baseline) == baseline


def test_killed_importer_releases_the_memory(peer):
    baseline = free_bytes()
    exported = ort.malloc(MiB)
    handle = ort.ipc_get_mem_handle(exported)
    holder = peer()
    holder.call("open", handle.hex())
    ort.free(exported)  # deferred: the holder has it open
    assert free_bytes() == baseline - MiB
    holder.kill()
    assert wait_for_free_bytes(baseline) == baseline
    # The parent is fully usable: a new export and import work.
    ptr = ort.malloc(MiB)
    other = peer()
    other.call("close", other.call("open", ort.ipc_get_mem_handle(ptr).hex()))
    ort.free(ptr)
    assert free_bytes() == baseline


def test_free_after_importer_was_killed_is_immediate(peer):
    baseline = free_bytes()
    exported = ort.malloc(MiB)
    holder = peer()
    holder.call("open", ort.ipc_get_mem_handle(exported).hex())
    holder.kill()
    ort.free(exported)
    assert free_bytes() == baseline


def test_opened_memory_outlives_its_exiting_exporter(peer, hostmem):
    exporter = peer()
    ptr = exporter.call("malloc", MiB)
    exporter.call("write", ptr, pattern(MiB, 5).hex())
    imported = ort.ipc_open_mem_handle(bytes.fromhex(exporter.call("export", ptr)))
    exporter.call("free", ptr)
    assert exporter.stop() == ""
    assert hostmem.device_read(imported, MiB) == pattern(MiB, 5)
    local = ort.malloc(MiB)
    ort.memcpy(imported, local, MiB, ort.orMemcpyDeviceToDevice)  # writable too
    ort.ipc_close_mem_handle(imported)
    ort.free(local)


def test_many_importers_of_one_allocation(res, peer, hostmem):
    size = 64 * 1024
    exported = res.malloc(size)
    ort.memset(exported, 0, size)
    handle = ort.ipc_get_mem_handle(exported).hex()
    peers = [peer() for _ in range(3)]
    opened = [p.call("open", handle) for p in peers]
    for rank, (p, imported) in enumerate(zip(peers, opened, strict=True)):
        p.call("memset", imported + rank * 1024, rank + 1, 1024)
    got = hostmem.device_read(exported, 3 * 1024)
    assert got == b"".join(bytes([rank + 1]) * 1024 for rank in range(3))
    for p, imported in zip(peers, opened, strict=True):
        p.call("close", imported)


def test_closed_memory_is_no_longer_device_memory(peer, res):
    # After close, the importer no longer knows the pointer as device memory.
    exported = res.malloc(4096)
    other = peer()
    imported = other.call("open", ort.ipc_get_mem_handle(exported).hex())
    other.call("close", imported)
    assert other.call("attributes", imported)["type"] == "unregistered"
