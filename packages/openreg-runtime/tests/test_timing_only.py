"""Timing-only mode (Note [Timing-only mode] in src/stream.cpp): kernels are queued, ordered and
traced but not run, copies move no bytes, device memory is never touched, so a device far larger
than this machine exists, and a copy to host memory writes nothing there."""

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe


def test_switching_it_on_skips_kernels_and_copies_and_off_runs_them_again(res, raises_or, hostmem):
    s = res.stream()
    dev = res.malloc(64)
    hostmem.device_write(dev, b"x" * 64)
    ran = []
    assert not ort.get_timing_only()
    ort.set_timing_only(True)
    try:
        assert ort.get_timing_only()
        ort.trace_enable(True)
        ort.launch_kernel(s, lambda: ran.append("timed"), "not_run")
        buffer, address = hostmem.pageable(b"h" * 64)
        ort.memcpy_async(dev, address, 64, ort.orMemcpyHostToDevice, s)  # moves nothing
        ort.memset_async(dev, 7, 64, s)
        ort.memcpy_async(address, dev, 64, ort.orMemcpyDeviceToHost, s)  # nor this one
        ort.stream_synchronize(s)
        ort.trace_enable(False)
        kinds = [r["kind"] for r in ort.trace_drain() if r["kind"] not in ("launch", "synchronize")]
        assert kinds[:4] == ["kernel", "memcpy", "memset", "memcpy"]  # ordered and traced all the same
        assert buffer.raw == b"h" * 64
    finally:
        ort.set_timing_only(False)
    assert ran == []
    assert hostmem.device_read(dev, 64) == b"x" * 64  # neither the copy nor the memset touched it
    ort.launch_kernel(s, lambda: ran.append("run"), "run")
    ort.stream_synchronize(s)
    assert ran == ["run"]


def test_a_device_larger_than_this_machine_costs_it_nothing(run_python):
    # 150 GiB allocated on a device of 200 GiB, written by kernels and copies that never run:
    # the process's resident memory stays well under a GiB.
    code = """
import openreg_runtime as ort, resource
assert ort.get_timing_only()
chunks = [ort.malloc(10 << 30) for _ in range(15)]
for chunk in chunks:
    ort.memset_async(chunk, 1, 10 << 30, 0)
    ort.launch_kernel(0, lambda: None, "would_touch_it")
ort.device_synchronize()
print(ort.mem_get_info()[1] >> 30, (ort.mem_get_info()[1] - ort.mem_get_info()[0]) >> 30,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10)
try:
    ort.malloc(60 << 30)
except ort.Error as error:
    print(error.name)
"""
    result = run_python(code, env={"OPENREG_TIMING_ONLY": "1", "OPENREG_DEVICE_MEMORY": "200GiB"})
    assert result.returncode == 0, result.stderr
    total, used, resident_mib, refused = result.stdout.split()
    assert (int(total), int(used), refused) == (200, 150, "orErrorMemoryAllocation")
    assert int(resident_mib) < 1024
