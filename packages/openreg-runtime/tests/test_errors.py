"""Invalid arguments: each fails with its documented code and a message naming
what went wrong; the per-thread last error; status code names and texts."""

import ctypes
import threading

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

H2D = ort.orMemcpyHostToDevice
D2H = ort.orMemcpyDeviceToHost
D2D = ort.orMemcpyDeviceToDevice
H2H = ort.orMemcpyHostToHost


# ----------------------------------------------------------------------- devices


@pytest.mark.parametrize("bad", [2, -1, 64, 2**31 - 1])
def test_bad_device_index(raises_or, bad):
    fragments = (f"invalid openreg device index {bad}", "there are 2 devices")
    with raises_or("orErrorInvalidDevice", *fragments):
        ort.set_device(bad)
    assert ort.get_device() == 0  # unchanged
    with raises_or("orErrorInvalidDevice", *fragments):
        ort.get_device_properties(bad)
    with raises_or("orErrorInvalidDevice", *fragments):
        ort.device_get_default_stream(bad)


# ------------------------------------------------------------------------ memory


def test_free_unknown_pointers(res, raises_or, hostmem):
    buf, addr = hostmem.pageable(64)
    with raises_or("orErrorInvalidValue", "orFree", "is not device memory"):
        ort.free(addr)
    pinned = res.malloc_host(64)
    with raises_or("orErrorInvalidValue", "orFreeHost"):
        ort.free(pinned)
    # Inside a device's range but never handed out.
    p = res.malloc(4096)
    never = p + 1024 * 1024
    with raises_or("orErrorInvalidDevicePointer", "not the start of a live allocation",
                   hex(never)):
        ort.free(never)


def test_double_free_and_interior_free(raises_or):
    before = ort.mem_get_info()[0]
    p = ort.malloc(4096)
    with raises_or("orErrorInvalidDevicePointer", "not the start of a live allocation",
                   "double free"):
        ort.free(p + 512)
    assert ort.pointer_get_attributes(p)["type"] == "device"  # still allocated
    ort.free(p)
    with raises_or("orErrorInvalidDevicePointer", hex(p), "openreg device 0"):
        ort.free(p)
    assert ort.mem_get_info()[0] == before


def test_free_host_errors(raises_or, hostmem):
    buf, addr = hostmem.pageable(64)
    with raises_or("orErrorInvalidValue", "orFreeHost", "not the start of live pinned memory"):
        ort.free_host(addr)
    p = ort.malloc_host(256)
    with raises_or("orErrorInvalidValue", "orFreeHost"):
        ort.free_host(p + 8)  # interior
    ort.free_host(p)
    with raises_or("orErrorInvalidValue", "orFreeHost", "double free"):
        ort.free_host(p)
    d = ort.malloc(512)
    try:
        with raises_or("orErrorInvalidValue", "orFreeHost"):
            ort.free_host(d)
    finally:
        ort.free(d)


def test_use_of_freed_memory(res, raises_or, hostmem):
    buf, addr = hostmem.pageable(64)
    live = res.malloc(64)
    p = ort.malloc(64)
    ort.free(p)
    s = res.stream()
    fragments = ("freed or was never allocated", "use of freed memory", "openreg device 0")
    with raises_or("orErrorInvalidDevicePointer", "orMemcpy:", "src", *fragments):
        ort.memcpy(addr, p, 64, D2H)
    with raises_or("orErrorInvalidDevicePointer", "orMemcpy:", "dst", *fragments):
        ort.memcpy(p, addr, 64, H2D)
    with raises_or("orErrorInvalidDevicePointer", "orMemcpyAsync", *fragments):
        ort.memcpy_async(live, p, 64, D2D, s)
    with raises_or("orErrorInvalidDevicePointer", "orMemset", *fragments):
        ort.memset(p, 0, 64)
    with raises_or("orErrorInvalidDevicePointer", "orMemsetAsync", *fragments):
        ort.memset_async(p, 0, 64, s)


def test_copy_range_overruns(res, raises_or, hostmem):
    buf, addr = hostmem.pageable(8192)
    dev = res.malloc(1000)  # rounded to 1024 bytes
    other = res.malloc(1024)
    pinned = res.malloc_host(100)
    s = res.stream()
    with raises_or("orErrorInvalidValue", "1025 bytes at dst", "overrun its allocation of 1024"):
        ort.memcpy(dev, addr, 1025, H2D)
    with raises_or("orErrorInvalidValue", "overrun"):
        ort.memcpy(addr, dev + 1000, 25, D2H)
    with raises_or("orErrorInvalidValue", "overrun"):
        ort.memcpy_async(other, dev + 1, 1024, D2D, s)
    with raises_or("orErrorInvalidValue", "101 bytes at src", "overrun its allocation of 100"):
        ort.memcpy(dev, pinned, 101, H2D)
    with raises_or("orErrorInvalidValue", "orMemset", "overrun"):
        ort.memset(dev + 512, 0, 513)
    with raises_or("orErrorInvalidValue", "orMemsetAsync", "overrun"):
        ort.memset_async(dev, 0, 2048, s)
    # Counts so large that pointer + count wraps around must not slip through.
    for huge in (2**64 - 1, 2**64 - 16, 2**63):
        with raises_or("orErrorInvalidValue", "overrun"):
            ort.memcpy(addr, dev + 16, huge, D2H)
        with raises_or("orErrorInvalidValue", "overrun"):
            ort.memset(dev + 16, 0, huge)
    # Exactly up to the end is fine.
    ort.memcpy(dev + 24, addr, 1000, H2D)


@pytest.mark.parametrize(
    "kind,dst,src,says",
    [
        (H2D, "host", "host", "memcpyHtoD"),
        (H2D, "dev", "dev", "memcpyHtoD"),
        (H2D, "host", "dev", "memcpyHtoD"),
        (D2H, "dev", "host", "memcpyDtoH"),
        (D2H, "host", "host", "memcpyDtoH"),
        (D2D, "dev", "host", "memcpyDtoD"),
        (D2D, "host", "dev", "memcpyDtoD"),
        (H2H, "dev", "host", "memcpyHtoH"),
        (H2H, "host", "dev", "memcpyHtoH"),
    ],
)
def test_copy_kind_contradicting_pointers(res, raises_or, hostmem, kind, dst, src, says):
    buf, addr = hostmem.pageable(64)
    dev = res.malloc(64)
    pick = {"host": addr, "dev": dev}
    src_side = "device" if src == "dev" else "host"
    dst_side = "device" if dst == "dev" else "host"
    message = f"the copy kind says {says} but the pointers are {src_side} to {dst_side}"
    with raises_or("orErrorInvalidMemcpyDirection", message):
        ort.memcpy(pick[dst], pick[src], 64, kind)
    with raises_or("orErrorInvalidMemcpyDirection", "orMemcpyAsync"):
        ort.memcpy_async(pick[dst], pick[src], 64, kind, res.stream())


def test_copy_unknown_kind_and_null_pointers(res, raises_or, hostmem):
    buf, addr = hostmem.pageable(64)
    dev = res.malloc(64)
    with raises_or("orErrorInvalidValue", "unknown copy kind 7"):
        ort.memcpy(dev, addr, 64, 7)
    with raises_or("orErrorInvalidValue", "orMemcpy: dst is NULL"):
        ort.memcpy(0, addr, 64, H2D)
    with raises_or("orErrorInvalidValue", "orMemcpyAsync: src is NULL"):
        ort.memcpy_async(dev, 0, 64, H2D, 0)
    with raises_or("orErrorInvalidValue", "orMemset: devPtr is NULL"):
        ort.memset(0, 0, 64)


def test_memset_of_host_memory(res, raises_or, hostmem):
    buf, addr = hostmem.pageable(64)
    pinned = res.malloc_host(64)
    with raises_or("orErrorInvalidValue", "orMemset", "is not device memory"):
        ort.memset(addr, 0, 64)
    with raises_or("orErrorInvalidValue", "orMemsetAsync", "is not device memory"):
        ort.memset_async(pinned, 0, 64, 0)


# ------------------------------------------------------------- streams and events


def test_event_recorded_on_another_devices_stream(res, raises_or):
    e0 = res.event(device=0)
    s1 = res.stream(device=1)
    with raises_or("orErrorInvalidDevice", "the event belongs to openreg device 0",
                   "the stream to device 1"):
        ort.event_record(e0, s1)
    with raises_or("orErrorInvalidDevice", "openreg device 0"):
        ort.event_record(e0, ort.device_get_default_stream(1))
    ort.set_device(1)
    with raises_or("orErrorInvalidDevice"):
        ort.event_record(e0)  # stream 0 is now device 1's default stream
    ort.set_device(0)
    ort.event_record(e0)
    ort.event_synchronize(e0)


def test_destroyed_stream_is_an_invalid_handle(res, raises_or):
    s = ort.stream_create()
    ort.stream_destroy(s)
    dev = res.malloc(64)
    pinned = res.malloc_host(64)
    event = res.event()
    calls = {
        "stream_query": lambda: ort.stream_query(s),
        "stream_synchronize": lambda: ort.stream_synchronize(s),
        "stream_get_priority": lambda: ort.stream_get_priority(s),
        "stream_get_device": lambda: ort.stream_get_device(s),
        "stream_get_id": lambda: ort.stream_get_id(s),
        "launch_kernel": lambda: ort.launch_kernel(s, lambda: None, "k"),
        "memcpy_async": lambda: ort.memcpy_async(dev, pinned, 64, H2D, s),
        "memset_async": lambda: ort.memset_async(dev, 0, 64, s),
        "event_record": lambda: ort.event_record(event, s),
        "stream_wait_event": lambda: ort.stream_wait_event(s, event),
    }
    for name, call in calls.items():
        try:
            with raises_or("orErrorInvalidResourceHandle", "is not a live stream"):
                call()
        except BaseException as e:
            e.add_note(f"while calling {name}")
            raise
    with raises_or("orErrorInvalidResourceHandle", "orStreamDestroy", "destroyed twice"):
        ort.stream_destroy(s)
    with raises_or("orErrorInvalidResourceHandle", "is not a live stream"):
        ort.stream_query(0xDEADBEEF)  # never created


def test_launch_on_destroyed_stream_releases_the_kernel(raises_or):
    import gc
    import weakref

    class Kernel:
        def __call__(self):
            pass

    s = ort.stream_create()
    ort.stream_destroy(s)
    k = Kernel()
    ref = weakref.ref(k)
    with raises_or("orErrorInvalidResourceHandle"):
        ort.launch_kernel(s, k, "refused")
    del k
    gc.collect()
    assert ref() is None  # the runtime dropped its reference on refusal


def test_destroyed_event_is_an_invalid_handle(res, raises_or):
    s = res.stream()
    other = res.event()
    e = ort.event_create()
    ort.event_destroy(e)
    calls = {
        "event_record": lambda: ort.event_record(e, s),
        "event_query": lambda: ort.event_query(e),
        "event_synchronize": lambda: ort.event_synchronize(e),
        "event_elapsed_time": lambda: ort.event_elapsed_time(e, other),
        "event_elapsed_time_end": lambda: ort.event_elapsed_time(other, e),
        "stream_wait_event": lambda: ort.stream_wait_event(s, e),
    }
    for name, call in calls.items():
        try:
            with raises_or("orErrorInvalidResourceHandle", "is not a live event"):
                call()
        except BaseException as e:
            e.add_note(f"while calling {name}")
            raise
    with raises_or("orErrorInvalidResourceHandle", "orEventDestroy", "destroyed twice"):
        ort.event_destroy(e)
    ort.event_destroy(0)  # null is accepted


def test_default_streams_cannot_be_destroyed(raises_or):
    for device in range(ort.get_device_count()):
        handle = ort.device_get_default_stream(device)
        with raises_or("orErrorInvalidResourceHandle", "is the default stream",
                       f"openreg device {device}"):
            ort.stream_destroy(handle)
        ort.stream_synchronize(handle)  # still alive
    ort.stream_destroy(0)  # null: nothing to do


@pytest.mark.parametrize("flags", [0x4, 0x8, 0x80000000, 0x7])
def test_unknown_event_flags(raises_or, flags):
    with raises_or("orErrorInvalidValue", "unknown flags", hex(flags)):
        ort.event_create(flags)


def test_kernel_only_calls_outside_a_kernel(res, raises_or):
    p = res.malloc(64)
    with raises_or("orErrorNotPermitted", "only be called from inside a running kernel"):
        ort.kernel_translate_pointer(p, 64)
    with raises_or("orErrorNotPermitted", "not inside a running kernel"):
        ort.kernel_set_error_message("nope")


def test_kernel_cannot_destroy_its_own_stream(res):
    s = res.stream()
    seen = {}

    def destroy_own():
        try:
            ort.stream_destroy(s)
        except ort.Error as e:
            seen["code"], seen["message"] = e.code, str(e)

    ort.launch_kernel(s, destroy_own, "destroy_own")
    ort.stream_synchronize(s)  # the kernel caught the error: no failure
    assert seen["code"] == ort.orErrorNotPermitted
    assert "cannot destroy the stream it runs on" in seen["message"]


# -------------------------------------------------------------------- last error


def test_last_error_peek_and_get(raises_or):
    assert ort.get_last_error() == ort.orSuccess  # the fixture reset it
    assert ort.peek_at_last_error() == ort.orSuccess
    with raises_or("orErrorInvalidDevice"):
        ort.set_device(9)
    message = ort.get_last_error_message()
    assert "invalid openreg device index 9" in message
    assert ort.peek_at_last_error() == ort.orErrorInvalidDevice
    assert ort.peek_at_last_error() == ort.orErrorInvalidDevice  # peek does not reset
    ort.set_device(0)  # a successful call does not reset it either
    assert ort.peek_at_last_error() == ort.orErrorInvalidDevice
    assert ort.get_last_error() == ort.orErrorInvalidDevice  # get resets
    assert ort.get_last_error() == ort.orSuccess
    assert ort.peek_at_last_error() == ort.orSuccess
    # A later failure replaces the earlier one.
    with pytest.raises(ort.Error):
        ort.set_device(5)
    with pytest.raises(ort.Error):
        ort.event_create(0x10)
    assert ort.get_last_error() == ort.orErrorInvalidValue
    assert "unknown flags" in ort.get_last_error_message()


def test_last_error_is_per_thread():
    with pytest.raises(ort.Error):
        ort.free(4)
    seen = {}

    def other():
        seen["initial"] = ort.peek_at_last_error()
        seen["message"] = ort.get_last_error_message()
        try:
            ort.set_device(7)
        except ort.Error:
            pass
        seen["after"] = ort.get_last_error()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"initial": ort.orSuccess, "message": "", "after": ort.orErrorInvalidDevice}
    assert ort.get_last_error() == ort.orErrorInvalidValue  # this thread's own


def test_not_ready_is_not_recorded_as_last_error(res, gate):
    s = res.stream()
    e = res.event()
    ort.launch_kernel(s, gate, "gate")
    ort.event_record(e, s)
    assert ort.stream_query(s) is False
    assert ort.event_query(e) is False
    assert ort.peek_at_last_error() == ort.orSuccess
    gate.open()


def test_error_exception_type():
    assert issubclass(ort.Error, RuntimeError)
    with pytest.raises(ort.Error) as info:
        ort.set_device(3)
    assert isinstance(info.value.code, int)
    assert info.value.code == 4 and info.value.name == "orErrorInvalidDevice"


EXPECTED_CODES = [
    ("orSuccess", 0, "no error"),
    ("orErrorInvalidValue", 1, "invalid argument"),
    ("orErrorMemoryAllocation", 2, "out of memory"),
    ("orErrorInitializationError", 3, "initialization error"),
    ("orErrorInvalidDevice", 4, "invalid device ordinal"),
    ("orErrorInvalidDevicePointer", 5, "invalid device pointer"),
    ("orErrorInvalidMemcpyDirection", 6, "invalid copy direction for memcpy"),
    ("orErrorInvalidResourceHandle", 7, "invalid resource handle"),
    ("orErrorNotReady", 8, "device not ready"),
    ("orErrorIllegalAddress", 9, "an illegal memory access was encountered"),
    ("orErrorLaunchFailure", 10, "kernel failed"),
    ("orErrorNotPermitted", 11, "operation not permitted"),
    ("orErrorUnknown", 12, "unknown error"),
    ("orErrorStreamCaptureUnsupported", 13, "operation not permitted when stream is capturing"),
    ("orErrorStreamCaptureInvalidated", 14, "operation failed due to a previous error during capture"),
]


@pytest.mark.parametrize("name,code,text", EXPECTED_CODES)
def test_error_names_and_strings(name, code, text):
    assert getattr(ort, name) == code
    assert ort.get_error_name(code) == name
    assert ort.get_error_string(code) == text


@pytest.mark.parametrize("code", [15, 99, -1])
def test_unrecognized_error_codes(code):
    assert ort.get_error_string(code) == "unrecognized error code"
    assert ort.get_error_name(code) == "orErrorUnrecognized"


def test_constants():
    assert (ort.orMemcpyHostToHost, ort.orMemcpyHostToDevice, ort.orMemcpyDeviceToHost,
            ort.orMemcpyDeviceToDevice, ort.orMemcpyDefault) == (0, 1, 2, 3, 4)
    assert (ort.orEventDefault, ort.orEventBlockingSync, ort.orEventDisableTiming) == (0, 1, 2)
    assert ctypes.sizeof(ctypes.c_void_p) == 8  # handles and pointers are 64-bit ints
