#!/usr/bin/env python3
"""OpenReg's demo: first the simulated device through the runtime's Python
bindings (devices, an asynchronous copy from pinned memory, a kernel on a
stream, an event timing), then PyTorch using it as the device "openreg"
(tensors, copies, a side stream, memory statistics, out-of-memory, RNG),
then a small CNN trained on openreg, with its loss curve and the
number of operators that had to leave the device, and finally a short DDP
run on 2 ranks under torchrun over the occl backend (openreg-distributed).
"""

import ctypes
import os
import socket
import subprocess
import sys
import time

import openreg_runtime as rt

MiB = 1 << 20


def show_devices() -> None:
    print(f"openreg-runtime {rt.__version__}: {rt.get_device_count()} simulated devices")
    for index in range(rt.get_device_count()):
        props = rt.get_device_properties(index)
        print(f"  openreg:{index}  {props['name']}, {props['total_memory'] // MiB} MiB, "
              f"capability {props['major']}.{props['minor']}")


def runtime_demo() -> None:
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


def torch_demo() -> None:
    import torch  # autoloads torch_openreg, which registers "openreg"

    print(f"\ntorch {torch.__version__}: torch.openreg.device_count() = {torch.openreg.device_count()}")
    torch.openreg.set_fallback_mode("silent")
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("openreg")
    print(f"x on {x.device}; x.t() back on the host:\n{x.t().cpu()}")
    y = x.to("openreg:1", dtype=torch.float64)
    print(f"copied to {y.device} as {y.dtype}; sum {y.sum().item()}")

    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        doubled = x * 2  # queued on the side stream
    torch.openreg.current_stream().wait_stream(side)  # forget this and reads race
    print(f"work on a side stream, synchronised: {doubled[0].tolist()}")

    torch.openreg.manual_seed(0)
    first = torch.randn(3, device="openreg").cpu()
    torch.openreg.manual_seed(0)
    print(f"same seed, same numbers: {torch.equal(first, torch.randn(3, device='openreg').cpu())}")

    print(f"memory: {torch.openreg.memory_allocated()} bytes allocated, "
          f"{torch.openreg.memory_reserved()} reserved")
    try:
        torch.empty(1 << 40, dtype=torch.uint8, device="openreg")
    except torch.OutOfMemoryError as error:
        print(f"out of memory, and the process goes on: {str(error).split('.')[0]}")


def training_demo() -> None:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.openreg.reset_fallback_counts()
    torch.manual_seed(0)
    # A small CNN learning to tell bright images from dark ones.
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 2)).to("openreg")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    losses = []
    for _ in range(40):
        labels = torch.randint(0, 2, (32,))
        images = torch.randn(32, 1, 16, 16) + 0.2 * (labels.float() * 2 - 1).view(-1, 1, 1, 1)
        loss = F.cross_entropy(model(images.to("openreg")), labels.to("openreg"))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    print("\ntraining a CNN on openreg, loss every 5 steps:",
          " ".join(f"{value:.3f}" for value in losses[::5]), f"... {losses[-1]:.3f}")
    ran = sum(sum(counts) for counts in torch.openreg.executor_counts().values())
    print(f"operator calls run by the device executor: {ran}; "
          f"operators that fell back to the CPU: {torch.openreg.fallback_counts() or 'none'}")


def distributed_demo() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print("\ntorchrun --nproc_per_node=2: DDP on openreg over occl (packages/openreg-distributed)", flush=True)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                           f"--master_port={port}", "-m", "openreg_distributed.examples.train_ddp"],
                          env=dict(os.environ, STEPS="11"), capture_output=True, text=True, timeout=300)
    print(done.stdout.rstrip() if done.returncode == 0 else f"failed:\n{done.stderr[-2000:]}")


def main() -> None:
    runtime_demo()
    torch_demo()
    training_demo()
    distributed_demo()


if __name__ == "__main__":
    main()
