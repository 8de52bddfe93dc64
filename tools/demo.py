#!/usr/bin/env python3
"""OpenReg's demo. For now it shows the simulated device through the runtime's
Python bindings: the devices, an asynchronous copy from pinned memory, a
kernel on a stream, and an event timing. Later layers extend it.
"""

import ctypes
import time

import openreg_runtime as rt

MiB = 1 << 20


def show_devices() -> None:
    print(f"openreg-runtime {rt.__version__}: {rt.get_device_count()} simulated devices")
    for index in range(rt.get_device_count()):
        props = rt.get_device_properties(index)
        print(f"  openreg:{index}  {props['name']}, {props['total_memory'] // MiB} MiB, "
              f"capability {props['major']}.{props['minor']}")


def main() -> None:
    show_devices()
    size = 16 * MiB
    stream = rt.stream_create()
    pinned = rt.malloc_host(size)
    device = rt.malloc(size)
    ctypes.memset(pinned, 1, size)

    start, end = rt.event_create(), rt.event_create()
    rt.event_record(start, stream)
    # Pinned source: the copy is queued and the host goes on at once.
    rt.memcpy_async(device, pinned, size, rt.orMemcpyHostToDevice, stream)

    def double_every_byte() -> None:
        # A kernel reaches device memory only through the runtime's translation.
        alias = rt.kernel_translate_pointer(device, size)
        data = (ctypes.c_ubyte * size).from_address(alias)
        doubled = bytes(data).replace(b"\x01", b"\x02")
        ctypes.memmove(alias, doubled, size)
        time.sleep(0.02)  # stand-in for a long kernel

    rt.launch_kernel(stream, double_every_byte, "double_every_byte")
    rt.memcpy_async(pinned, device, size, rt.orMemcpyDeviceToHost, stream)
    rt.event_record(end, stream)
    print(f"queued copy, kernel, copy back; stream idle yet? {rt.stream_query(stream)}")

    rt.event_synchronize(end)
    all_twos = ctypes.string_at(pinned, size) == bytes([2]) * size
    print(f"after synchronising: every byte is 2? {all_twos}")
    print(f"event timing: {rt.event_elapsed_time(start, end):.2f} ms on the stream")
    print(f"device memory in use: {(rt.mem_get_info()[1] - rt.mem_get_info()[0]) // MiB} MiB "
          "(reading it from the host would fault: it is never host-mapped)")

    for event in (start, end):
        rt.event_destroy(event)
    rt.free(device)
    rt.free_host(pinned)
    rt.stream_destroy(stream)


if __name__ == "__main__":
    main()
