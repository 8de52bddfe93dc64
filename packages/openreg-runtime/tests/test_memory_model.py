"""A stateful property test: random sequences of malloc, free, copies in every
direction, memset and memset_async, checked against a Python model in which
each allocation is a bytearray."""

import ctypes

import openreg_runtime as ort
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

pytestmark = pytest.mark.sanitizer_safe

MAX_SIZE = 3000
DEVICES = 2


class Allocation:
    def __init__(self, ptr: int, device: int, size: int) -> None:
        self.ptr = ptr
        self.device = device
        self.size = size
        self.model: bytearray | None = None  # None: contents not initialised yet

    def __repr__(self) -> str:
        return f"Allocation(dev{self.device}, {self.size} bytes)"


def ranges(data, allocation: Allocation, at_most: int | None = None):
    """Draws an (offset, count) inside allocation."""
    limit = allocation.size if at_most is None else min(allocation.size, at_most)
    count = data.draw(st.integers(0, limit), label="count")
    offset = data.draw(st.integers(0, allocation.size - count), label="offset")
    return offset, count


class DeviceMemoryMachine(RuleBasedStateMachine):
    allocations = Bundle("allocations")

    def __init__(self) -> None:
        super().__init__()
        self.live: list[Allocation] = []
        self.streams = [ort.stream_create()]
        ort.set_device(1)
        self.streams.append(ort.stream_create())
        ort.set_device(0)
        self.baseline = self.free_bytes()
        # Index of the one stream that may hold queued, unfinished work.
        # Synchronous calls wait only for the devices of their pointers, not
        # for another device's stream that touches them, so every other rule
        # settles first; consecutive async work on one stream stays queued
        # and relies on the stream's ordering.
        self.active: int | None = None

    # ---------------------------------------------------------------- helpers

    @staticmethod
    def free_bytes() -> list[int]:
        out = []
        for d in range(DEVICES):
            ort.set_device(d)
            out.append(ort.mem_get_info()[0])
        ort.set_device(0)
        return out

    def settle(self) -> None:
        if self.active is not None:
            ort.stream_synchronize(self.streams[self.active])
            self.active = None

    def queue_on(self, index: int) -> int:
        if self.active != index:
            self.settle()
        self.active = index
        return self.streams[index]

    @staticmethod
    def read(allocation: Allocation, offset: int, count: int) -> bytes:
        buf = ctypes.create_string_buffer(count)
        ort.memcpy(ctypes.addressof(buf), allocation.ptr + offset, count,
                   ort.orMemcpyDeviceToHost)
        return buf.raw

    def initialise(self, allocation: Allocation) -> None:
        # Fresh allocations are not initialised: give them known contents.
        ort.memset(allocation.ptr, 0xCD, allocation.size)
        allocation.model = bytearray(b"\xcd" * allocation.size)

    # ------------------------------------------------------------------ rules

    @rule(target=allocations, device=st.integers(0, DEVICES - 1),
          size=st.integers(1, MAX_SIZE))
    def malloc(self, device, size):
        self.settle()
        ort.set_device(device)
        try:
            ptr = ort.malloc(size)
        finally:
            ort.set_device(0)
        assert ptr % 512 == 0
        allocation = Allocation(ptr, device, size)
        attrs = ort.pointer_get_attributes(ptr)
        assert attrs["device"] == device and attrs["size"] >= size
        self.initialise(allocation)
        self.live.append(allocation)
        return allocation

    @rule(allocation=consumes(allocations))
    def free(self, allocation):
        self.settle()
        ort.free(allocation.ptr)
        self.live.remove(allocation)

    @rule(allocation=allocations, data=st.data(), pinned=st.booleans(),
          asynchronous=st.booleans())
    def copy_h2d(self, allocation, data, pinned, asynchronous):
        offset, count = ranges(data, allocation)
        payload = data.draw(st.binary(min_size=count, max_size=count), label="payload")
        index = data.draw(st.integers(0, DEVICES - 1), label="stream")
        if not asynchronous:
            self.settle()
        if pinned:
            host = ort.malloc_host(max(count, 1))
            ctypes.memmove(host, payload, count)
            if asynchronous:
                ort.memcpy_async(allocation.ptr + offset, host, count,
                                 ort.orMemcpyHostToDevice, self.queue_on(index))
                self.settle()  # before the pinned buffer goes
            else:
                ort.memcpy(allocation.ptr + offset, host, count, ort.orMemcpyDefault)
            ort.free_host(host)
        else:
            buf = ctypes.create_string_buffer(payload, max(count, 1))
            if asynchronous:
                # Pageable: done when the call returns, even on another stream.
                ort.memcpy_async(allocation.ptr + offset, ctypes.addressof(buf), count,
                                 ort.orMemcpyDefault, self.queue_on(index))
                ctypes.memset(buf, 0xEE, max(count, 1))
            else:
                ort.memcpy(allocation.ptr + offset, ctypes.addressof(buf), count,
                           ort.orMemcpyHostToDevice)
        allocation.model[offset:offset + count] = payload

    @rule(allocation=allocations, data=st.data(), pinned=st.booleans())
    def copy_d2h(self, allocation, data, pinned):
        self.settle()
        offset, count = ranges(data, allocation)
        if pinned:
            host = ort.malloc_host(max(count, 1))
            try:
                ort.memcpy_async(host, allocation.ptr + offset, count,
                                 ort.orMemcpyDeviceToHost, self.streams[allocation.device])
                ort.stream_synchronize(self.streams[allocation.device])
                got = ctypes.string_at(host, count)
            finally:
                ort.free_host(host)
        else:
            got = self.read(allocation, offset, count)
        assert got == bytes(allocation.model[offset:offset + count])

    @rule(dst=allocations, src=allocations, data=st.data(), asynchronous=st.booleans())
    def copy_d2d(self, dst, src, data, asynchronous):
        count = data.draw(st.integers(0, min(dst.size, src.size)), label="count")
        dst_offset = data.draw(st.integers(0, dst.size - count), label="dst_offset")
        src_offset = data.draw(st.integers(0, src.size - count), label="src_offset")
        if dst is src and abs(dst_offset - src_offset) < count:
            return  # overlapping copies are undefined, as with memcpy
        kind = data.draw(st.sampled_from([ort.orMemcpyDeviceToDevice, ort.orMemcpyDefault]))
        if asynchronous:
            index = data.draw(st.integers(0, DEVICES - 1), label="stream")
            ort.memcpy_async(dst.ptr + dst_offset, src.ptr + src_offset, count, kind,
                             self.queue_on(index))
        else:
            self.settle()
            ort.memcpy(dst.ptr + dst_offset, src.ptr + src_offset, count, kind)
        dst.model[dst_offset:dst_offset + count] = src.model[src_offset:src_offset + count]

    @rule(allocation=allocations, data=st.data(), value=st.integers(-300, 300),
          asynchronous=st.booleans())
    def memset(self, allocation, data, value, asynchronous):
        offset, count = ranges(data, allocation)
        if asynchronous:
            index = data.draw(st.integers(0, DEVICES - 1), label="stream")
            ort.memset_async(allocation.ptr + offset, value, count, self.queue_on(index))
        else:
            self.settle()
            ort.memset(allocation.ptr + offset, value, count)
        allocation.model[offset:offset + count] = bytes([value & 0xFF]) * count

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def check_whole_allocation(self, data):
        self.settle()
        allocation = data.draw(st.sampled_from(self.live), label="allocation")
        assert self.read(allocation, 0, allocation.size) == bytes(allocation.model)

    # ------------------------------------------------------------- invariants

    @invariant()
    def accounting_matches_live_allocations(self):
        used = [0] * DEVICES
        for allocation in self.live:
            used[allocation.device] += (allocation.size + 511) // 512 * 512
        free = self.free_bytes()
        assert [b - u for b, u in zip(self.baseline, used, strict=True)] == free

    def teardown(self) -> None:
        self.settle()
        for allocation in self.live:
            ort.free(allocation.ptr)
        for s in self.streams:
            ort.stream_destroy(s)
        ort.set_device(0)


DeviceMemoryMachine.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    database=None,  # write nothing outside the tests
    suppress_health_check=[HealthCheck.too_slow],
)
TestDeviceMemoryMachine = DeviceMemoryMachine.TestCase
