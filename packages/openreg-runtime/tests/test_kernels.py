"""Kernels: pointer translation, and the sticky error a failing kernel leaves
on its device until device_reset."""

import ctypes
import threading

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

STICKY = "sticky: call orDeviceReset"


def reset(device: int) -> None:
    previous = ort.get_device()
    ort.set_device(device)
    ort.device_reset()
    ort.set_device(previous)


# ------------------------------------------------------------------ translation


def test_translate_reads_and_writes_device_memory(res, hostmem):
    n = 1024
    dev = res.malloc(n, device=1)
    hostmem.device_write(dev, bytes(range(256)) * 4)
    s = res.stream(device=1)
    seen = {}

    def kernel():
        host = ort.kernel_translate_pointer(dev, n)
        seen["host"] = host
        seen["data"] = ctypes.string_at(host, n)
        ctypes.memmove(host, bytes(255 - b for b in seen["data"]), n)
        # Interior pointers and sub-ranges translate to the same alias.
        seen["interior"] = ort.kernel_translate_pointer(dev + 100, 24)

    ort.launch_kernel(s, kernel, "invert")
    ort.stream_synchronize(s)
    assert seen["data"] == bytes(range(256)) * 4
    assert seen["interior"] == seen["host"] + 100
    assert seen["host"] != dev  # the alias, not the device address
    assert hostmem.device_read(dev, n) == bytes(255 - b for b in bytes(range(256)) * 4)


def test_kernel_may_translate_memory_of_another_device(res, hostmem):
    a = res.malloc(64, device=0)
    b = res.malloc(64, device=1)
    hostmem.device_write(a, b"A" * 64)

    def kernel():
        ctypes.memmove(ort.kernel_translate_pointer(b, 64),
                       ort.kernel_translate_pointer(a, 64), 64)

    ort.launch_kernel(res.stream(device=1), kernel, "cross_device_copy")
    ort.set_device(1)
    ort.device_synchronize()
    ort.set_device(0)
    assert hostmem.device_read(b, 64) == b"A" * 64


def test_kernel_returning_normally_succeeds_and_caught_translation_still_fails(
        res, raises_or):
    s = res.stream()
    dev = res.malloc(512)
    seen = {}

    def kernel():
        try:
            ort.kernel_translate_pointer(dev, 513)
        except ort.Error as e:
            seen["code"] = e.code
            seen["message"] = str(e)
        # Catching the error does not undo the fault, as on hardware.

    ort.launch_kernel(s, kernel, "swallows_fault")
    with raises_or("orErrorIllegalAddress", "kernel 'swallows_fault'", "513 bytes"):
        ort.stream_synchronize(s)
    assert seen["code"] == ort.orErrorIllegalAddress
    assert "not inside one live allocation" in seen["message"]
    ort.device_reset()


# ---------------------------------------------------------------- sticky errors


def test_raising_kernel_leaves_sticky_error(res, gate, hostmem, raises_or):
    s = res.stream()
    other = res.stream()
    event = res.event()
    dev = res.malloc(64)
    ort.memset(dev, 0, 64)
    skipped = threading.Event()

    def bad_kernel():
        raise ValueError("something broke in the kernel")

    ort.launch_kernel(s, gate, "gate")
    ort.launch_kernel(s, bad_kernel, "bad_kernel")
    # Queued after the failure: must be skipped.
    ort.launch_kernel(s, skipped.set, "after_failure")
    ort.memset_async(dev, 0xFF, 64, s)
    ort.event_record(event, s)
    gate.open()

    fragments = ("kernel 'bad_kernel' failed on openreg device 0", "ValueError",
                 "something broke in the kernel", STICKY)
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.stream_synchronize(s)
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.device_synchronize()
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.event_synchronize(event)
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.stream_synchronize(other)  # every stream of the device
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.stream_query(s)
    assert ort.get_last_error() == ort.orErrorLaunchFailure
    # Later launches onto the device are refused, on any of its streams.
    refused = threading.Event()
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.launch_kernel(other, refused.set, "refused")
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.memset_async(dev, 1, 64, other)
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.memset(dev, 1, 64)
    buf, addr = hostmem.pageable(64)
    with raises_or("orErrorLaunchFailure", *fragments):
        ort.memcpy(addr, dev, 64, ort.orMemcpyDeviceToHost)
    # get_last_error does not clear the sticky error.
    ort.get_last_error()
    with raises_or("orErrorLaunchFailure"):
        ort.device_synchronize()

    ort.device_reset()
    assert not skipped.is_set() and not refused.is_set()
    assert hostmem.device_read(dev, 64) == bytes(64)  # the memset was skipped
    # The device works again.
    ran = threading.Event()
    ort.launch_kernel(s, ran.set, "after_reset")
    ort.memset_async(dev, 2, 64, s)
    ort.stream_synchronize(s)
    assert ran.is_set()
    assert hostmem.device_read(dev, 64) == b"\x02" * 64
    ort.device_synchronize()


def test_illegal_address_kernel_leaves_sticky_error(res, hostmem, raises_or):
    s = res.stream(device=1)
    dev = res.malloc(1000, device=1)  # 1024 bytes reserved
    freed = ort.malloc(64)
    ort.free(freed)
    cases = [
        ("overrun", lambda: ort.kernel_translate_pointer(dev, 1025), "1025 bytes"),
        ("freed", lambda: ort.kernel_translate_pointer(freed, 1), hex(freed)),
        ("host_pointer", lambda: ort.kernel_translate_pointer(0x1000, 1), "0x1000"),
        ("null", lambda: ort.kernel_translate_pointer(0, 1), "bytes at"),
    ]
    ort.set_device(1)
    for name, body, fragment in cases:
        ort.launch_kernel(s, body, f"illegal_{name}")
        with raises_or("orErrorIllegalAddress", f"kernel 'illegal_{name}'",
                       "openreg device 1", "illegal address", fragment, STICKY):
            ort.stream_synchronize(s)
        with raises_or("orErrorIllegalAddress", f"illegal_{name}"):
            ort.launch_kernel(s, lambda: None, "refused")
        ort.device_reset()
        ort.stream_synchronize(s)
    ort.set_device(0)


def test_first_failure_wins(res, gate, raises_or):
    a = res.stream()
    b = res.stream()

    def second():
        gate()
        raise KeyError("second failure")

    ort.launch_kernel(b, second, "second")  # running, held at the gate
    assert gate.started.wait(10)
    ort.launch_kernel(a, lambda: 1 / 0, "first")
    with raises_or("orErrorLaunchFailure", "kernel 'first'", "ZeroDivisionError"):
        ort.stream_synchronize(a)
    gate.open()  # the second kernel now fails too, after the first
    with raises_or("orErrorLaunchFailure", "kernel 'first'", "ZeroDivisionError") as info:
        ort.stream_synchronize(b)
    assert "second" not in str(info.value)
    ort.device_reset()
    ort.device_synchronize()


def test_sticky_error_does_not_affect_other_device(res, hostmem, raises_or):
    s0 = res.stream(device=0)
    s1 = res.stream(device=1)
    d1 = res.malloc(128, device=1)
    def fault():
        raise RuntimeError("dev0 fault")

    ort.launch_kernel(s0, fault, "k0")
    with raises_or("orErrorLaunchFailure", "dev0 fault"):
        ort.stream_synchronize(s0)
    # Device 1 keeps working, synchronously and asynchronously.
    ran = threading.Event()
    ort.launch_kernel(s1, ran.set, "k1")
    ort.memset_async(d1, 7, 128, s1)
    ort.stream_synchronize(s1)
    assert ran.is_set()
    assert hostmem.device_read(d1, 128) == b"\x07" * 128
    ort.set_device(1)
    ort.device_synchronize()
    ort.device_reset()  # resetting device 1 does not clear device 0
    ort.set_device(0)
    with raises_or("orErrorLaunchFailure", "dev0 fault"):
        ort.device_synchronize()
    ort.device_reset()
    ort.device_synchronize()


def test_kernel_set_error_message_and_sticky_messages(res, raises_or):
    s = res.stream()

    def failing():
        ort.kernel_set_error_message("custom device assertion: x < n")
        raise AssertionError("ignored: the first message wins")

    ort.launch_kernel(s, failing, "asserting_kernel")
    with raises_or("orErrorLaunchFailure", "kernel 'asserting_kernel'",
                   "custom device assertion: x < n"):
        ort.stream_synchronize(s)
    ort.device_reset()


def test_free_works_while_device_is_sticky(res, raises_or):
    s = res.stream()
    before = ort.mem_get_info()[0]
    p = ort.malloc(4096)
    ort.launch_kernel(s, lambda: 1 / 0, "fault")
    with raises_or("orErrorLaunchFailure"):
        ort.stream_synchronize(s)
    ort.free(p)  # memory is never lost to a sticky error
    assert ort.mem_get_info()[0] == before
    ort.device_reset()


def test_skipped_kernels_release_their_callables(res, gate, raises_or):
    import gc
    import weakref

    class Kernel:
        ran = False

        def __call__(self):
            Kernel.ran = True

    s = res.stream()
    ort.launch_kernel(s, gate, "gate")
    ort.launch_kernel(s, lambda: 1 / 0, "fault")
    k = Kernel()
    ref = weakref.ref(k)
    ort.launch_kernel(s, k, "skipped")
    del k
    gate.open()
    with raises_or("orErrorLaunchFailure"):
        ort.stream_synchronize(s)
    gc.collect()
    assert ref() is None and not Kernel.ran
    ort.device_reset()


def test_many_kernels_share_state_without_races(res):
    s = res.stream()
    counter = [0]
    lock = threading.Lock()

    def inc():
        with lock:
            counter[0] += 1

    for _ in range(500):
        ort.launch_kernel(s, inc, "inc")
    ort.stream_synchronize(s)
    assert counter[0] == 500


def test_default_kernel_name_labels_errors(res, raises_or):
    s = res.stream()

    def unnamed():
        raise OSError("no name given")

    ort.launch_kernel(s, unnamed)  # the bindings' default name
    with raises_or("orErrorLaunchFailure", "kernel 'python_kernel'", "no name given"):
        ort.stream_synchronize(s)
    ort.device_reset()


# ------------------------------------------- waiting from inside a kernel


def _self_waits(stream, dev, other_dev, pinned, event_on_stream):
    """Calls that would wait for the calling kernel's own stream or device."""
    return {
        "orDeviceSynchronize": ort.device_synchronize,
        "orDeviceReset": ort.device_reset,
        "orStreamSynchronize": lambda: ort.stream_synchronize(stream),
        "orEventSynchronize": lambda: ort.event_synchronize(event_on_stream),
        "orFree": lambda: ort.free(dev),
        "orFreeHost": lambda: ort.free_host(pinned),
        "orMemcpy": lambda: ort.memcpy(other_dev, dev, 64),
        "orMemset": lambda: ort.memset(dev, 0, 64),
        "orMemcpyAsync": lambda: ort.memcpy_async(
            ctypes.addressof(ctypes.create_string_buffer(64)), dev, 64, ort.orMemcpyDeviceToHost, stream),
    }


def test_a_kernel_that_waits_for_itself_is_refused_by_name(res):
    # Each of these calls, made from inside a kernel, would wait for the
    # kernel's own stream: it must fail at once, naming the call, not hang.
    s = res.stream()
    dev = res.malloc(64)
    other_dev = res.malloc(64, device=1)
    pinned = res.malloc_host(64)
    event = res.event()
    outcomes = {}

    def kernel():
        ort.event_record(event, s)  # queued behind this kernel
        for call, action in _self_waits(s, dev, other_dev, pinned, event).items():
            try:
                action()
                outcomes[call] = "returned"
            except ort.Error as error:
                outcomes[call] = (error.name, str(error))

    ort.launch_kernel(s, kernel, "self_waiter")
    ort.stream_synchronize(s)  # the kernel did not fail: every refusal was caught
    assert set(outcomes) == set(_self_waits(s, dev, other_dev, pinned, event))
    for call, outcome in outcomes.items():
        assert outcome != "returned", call
        name, message = outcome
        assert name == "orErrorNotPermitted", (call, message)
        assert message.startswith(f"{call} was called from inside kernel 'self_waiter'"), message
        assert "own stream" in message
    # Nothing was freed or lost: the memory is still live and usable.
    assert ort.pointer_get_attributes(dev)["type"] == "device"
    assert ort.pointer_get_attributes(pinned)["type"] == "host"


def test_a_kernel_may_queue_work_and_wait_for_other_streams(res, hostmem):
    # Only waits for the kernel's own stream or device are refused.
    s = res.stream()
    other = res.stream()
    dev = res.malloc(64)
    dev1 = res.malloc(64, device=1)
    outcomes = {}

    def kernel():
        ort.memset_async(dev, 5, 64, s)           # queued after this kernel
        ort.stream_synchronize(other)             # another stream of this device
        ort.memcpy_async(dev1, dev, 0, ort.orMemcpyDeviceToDevice, s)  # nothing to wait for
        e = ort.event_create()
        ort.event_record(e, other)
        ort.event_synchronize(e)                  # recorded on another stream
        ort.event_destroy(e)
        ort.set_device(1)
        ort.memset(dev1, 9, 64)                   # another device: waits for it
        ort.device_synchronize()
        outcomes["done"] = True

    ort.launch_kernel(s, kernel, "well_behaved")
    ort.stream_synchronize(s)
    assert outcomes == {"done": True}
    assert hostmem.device_read(dev, 64) == b"\x05" * 64
    assert hostmem.device_read(dev1, 64) == b"\x09" * 64


def test_launch_blocking_does_not_make_a_kernel_wait_for_itself(run_python):
    # With OPENREG_LAUNCH_BLOCKING=1 every launch waits for its work, except
    # work a kernel queues on its own stream, which would wait forever.
    result = run_python("""
import json, openreg_runtime as ort
order = []
def inner():
    order.append("inner")
def outer():
    ort.launch_kernel(0, inner, "inner")
    order.append("outer returned")
ort.launch_kernel(0, outer, "outer")
ort.device_synchronize()
print(json.dumps(order))
""", env={"OPENREG_LAUNCH_BLOCKING": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == '["outer returned", "inner"]'


# ---------------------------------------- reading a faulted device's memory


def test_work_that_reads_a_faulted_device_reports_its_error(res, raises_or):
    # A copy out of a faulted device, queued on another device's stream, and
    # an event recorded on (or waited for from) the faulted device report the
    # sticky error instead of going on with what the device never produced.
    s0 = res.stream(device=0)
    s1 = res.stream(device=1)
    src = res.malloc(64, device=0)
    dst = res.malloc(64, device=1)
    event0 = res.event(device=0)
    ort.event_record(event0, s0)
    ort.launch_kernel(s0, lambda: 1 / 0, "faulty")
    with raises_or("orErrorLaunchFailure", "kernel 'faulty'"):
        ort.stream_synchronize(s0)
    with raises_or("orErrorLaunchFailure", "kernel 'faulty'"):
        ort.memcpy_async(dst, src, 64, ort.orMemcpyDeviceToDevice, s1)
    with raises_or("orErrorLaunchFailure", "kernel 'faulty'"):
        ort.memcpy(dst, src, 64, ort.orMemcpyDeviceToDevice)
    with raises_or("orErrorLaunchFailure", "kernel 'faulty'"):
        ort.event_record(res.event(device=0), s0)
    with raises_or("orErrorLaunchFailure", "kernel 'faulty'"):
        ort.stream_wait_event(s1, event0)
    ort.set_device(1)
    ort.device_synchronize()  # device 1 itself is fine
    ort.set_device(0)
    ort.device_reset()
    ort.memcpy_async(dst, src, 64, ort.orMemcpyDeviceToDevice, s1)
    ort.stream_synchronize(s1)
