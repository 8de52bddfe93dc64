"""The other process of the IPC tests (test_ipc.py): runs openreg_runtime
commands read as JSON lines from stdin and answers each with one JSON line.

Not a test module and not a general RPC layer: just the steps the tests need,
so that each test reads as a dialogue between two processes.
"""

import ctypes
import json
import sys
from array import array

import openreg_runtime as ort


def add_kernel(remote: int, local: int, count: int) -> None:
    """A kernel reducing into another process's memory: remote[i] += local[i]
    over float32, reaching both buffers through translation."""

    def body() -> None:
        size = count * 4
        remote_host = ort.kernel_translate_pointer(remote, size)
        local_host = ort.kernel_translate_pointer(local, size)
        total = array("f", ctypes.string_at(remote_host, size))
        addend = array("f", ctypes.string_at(local_host, size))
        for i in range(count):
            total[i] += addend[i]
        ctypes.memmove(remote_host, total.tobytes(), size)

    ort.launch_kernel(0, body, "ipc_add")
    ort.device_synchronize()


def close_in_kernel(ptr: int) -> list[str]:
    """Tries to close from inside a kernel; returns the errors it got."""
    errors = []

    def body() -> None:
        try:
            ort.ipc_close_mem_handle(ptr)
        except ort.Error as error:
            errors.append(f"{error.name}: {error}")

    ort.launch_kernel(0, body, "close_in_kernel")
    ort.device_synchronize()
    return errors


def read(ptr: int, count: int) -> str:
    buffer = ctypes.create_string_buffer(count)
    ort.memcpy(ctypes.addressof(buffer), ptr, count, ort.orMemcpyDeviceToHost)
    return buffer.raw.hex()


def write(ptr: int, data: str) -> None:
    raw = bytes.fromhex(data)
    buffer = ctypes.create_string_buffer(raw, len(raw))
    ort.memcpy(ptr, ctypes.addressof(buffer), len(raw), ort.orMemcpyHostToDevice)


def copy_async(dst: int, src: int, count: int) -> None:
    stream = ort.stream_create()
    try:
        ort.memcpy_async(dst, src, count, ort.orMemcpyDeviceToDevice, stream)
        ort.stream_synchronize(stream)
    finally:
        ort.stream_destroy(stream)


COMMANDS = {
    "malloc": lambda size: ort.malloc(size),
    "free": lambda ptr: ort.free(ptr),
    "read": read,
    "write": write,
    "copy": lambda dst, src, count: ort.memcpy(dst, src, count, ort.orMemcpyDeviceToDevice),
    "copy_async": copy_async,
    "memset": lambda ptr, value, count: ort.memset(ptr, value, count),
    "add_kernel": add_kernel,
    "export": lambda ptr: ort.ipc_get_mem_handle(ptr).hex(),
    "open": lambda handle: ort.ipc_open_mem_handle(bytes.fromhex(handle)),
    "close": lambda ptr: ort.ipc_close_mem_handle(ptr),
    "close_in_kernel": close_in_kernel,
    "attributes": lambda ptr: ort.pointer_get_attributes(ptr),
    "free_bytes": lambda: ort.mem_get_info()[0],
    "set_device": lambda device: ort.set_device(device),
    # Host code reading device memory must fault: this command never answers.
    "host_read": lambda ptr: ctypes.string_at(ptr, 1).hex(),
}


def main() -> None:
    for line in sys.stdin:
        name, *args = json.loads(line)
        try:
            reply = {"ok": COMMANDS[name](*args)}
        except ort.Error as error:
            reply = {"error": error.name, "message": str(error)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
