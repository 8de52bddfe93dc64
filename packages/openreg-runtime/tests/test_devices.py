"""Devices: count, current device (per thread), properties, default streams,
stream creation and priorities, version."""

import os
import threading
from pathlib import Path

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

GiB = 1 << 30


def run_in_thread(fn):
    result = {}

    def body():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            result["error"] = e

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_device_count_default():
    expected = int(os.environ.get("OPENREG_DEVICE_COUNT", "2"))
    assert ort.get_device_count() == expected == 2


def test_set_and_get_device():
    assert ort.get_device() == 0
    ort.set_device(1)
    assert ort.get_device() == 1
    ort.set_device(0)
    assert ort.get_device() == 0


def test_current_device_is_per_thread():
    ort.set_device(1)
    # A new thread starts on device 0, whatever its creator's device.
    assert run_in_thread(ort.get_device) == 0

    def switch():
        ort.set_device(1)
        return ort.get_device()

    ort.set_device(0)
    assert run_in_thread(switch) == 1
    assert ort.get_device() == 0  # the other thread's choice did not leak here


def test_current_device_selects_allocation_and_stream_device(res):
    for device in (0, 1):
        ort.set_device(device)
        p = res.malloc(1024)
        assert ort.pointer_get_attributes(p)["device"] == device
        s = res.stream()
        assert ort.stream_get_device(s) == device
        assert ort.stream_get_device(0) == device
        assert ort.stream_get_id(0) == device + 1
    ort.set_device(0)


def test_current_device_inside_kernel_is_the_stream_device(res):
    seen = {}
    s1 = res.stream(device=1)
    ort.set_device(0)
    ort.launch_kernel(s1, lambda: seen.setdefault("device", ort.get_device()), "where_am_i")
    ort.stream_synchronize(s1)
    assert seen["device"] == 1
    assert ort.get_device() == 0


def test_set_device_inside_a_kernel_does_not_leak_to_later_kernels(res):
    s1 = res.stream(device=1)
    seen = []

    def switches():
        seen.append(ort.get_device())
        ort.set_device(0)  # only for the rest of this kernel
        seen.append(ort.get_device())

    ort.launch_kernel(s1, switches, "switches_device")
    ort.launch_kernel(s1, lambda: seen.append(ort.get_device()), "later")
    ort.stream_synchronize(s1)
    assert seen == [1, 0, 1]


def test_device_properties():
    for device in range(ort.get_device_count()):
        props = ort.get_device_properties(device)
        assert props["name"] == "OpenReg Simulated Device"
        assert props["total_memory"] == 4 * GiB
        assert (props["major"], props["minor"]) == (1, 0)
        assert props["multi_processor_count"] >= 1
        ort.set_device(device)
        free, total = ort.mem_get_info()
        assert total == props["total_memory"]
        assert 0 <= free <= total
    ort.set_device(0)


def test_stream_priority_range_and_clamping(res):
    least, greatest = ort.device_get_stream_priority_range()
    assert (least, greatest) == (0, -1)
    assert ort.stream_get_priority(res.stream()) == 0
    assert ort.stream_get_priority(res.stream(priority=-1)) == -1
    assert ort.stream_get_priority(res.stream(priority=-100)) == greatest
    assert ort.stream_get_priority(res.stream(priority=7)) == least
    assert ort.stream_get_priority(0) == 0


def test_default_streams():
    count = ort.get_device_count()
    handles = [ort.device_get_default_stream(d) for d in range(count)]
    assert len(set(handles)) == count and 0 not in handles
    for device, handle in enumerate(handles):
        assert ort.stream_get_id(handle) == device + 1
        assert ort.stream_get_device(handle) == device
        assert ort.stream_get_priority(handle) == 0
    # 0 means the current device's default stream.
    ort.set_device(1)
    assert ort.stream_get_id(0) == 2
    ort.set_device(0)
    assert ort.stream_get_id(0) == 1


def test_stream_ids_are_unique_and_never_reused(res):
    s1 = res.stream()
    id1 = ort.stream_get_id(s1)
    res.destroy_stream(s1)
    s2 = res.stream()
    s3 = res.stream(device=1)
    ids = [ort.stream_get_id(s2), ort.stream_get_id(s3)]
    assert id1 not in ids and len(set(ids)) == 2
    assert all(i > ort.get_device_count() for i in [id1, *ids])
    assert ort.stream_get_device(s3) == 1


def test_new_stream_is_idle_and_syncs(res):
    s = res.stream()
    assert ort.stream_query(s) is True
    ort.stream_synchronize(s)
    ort.device_synchronize()


def test_runtime_version_matches_package():
    text = (Path(__file__).resolve().parents[1] / "VERSION").read_text().strip()
    major, minor, patch = (int(x) for x in text.split("."))
    assert ort.runtime_get_version() == major * 10000 + minor * 100 + patch
    assert ort.__version__ == text
