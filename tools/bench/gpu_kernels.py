#!/usr/bin/env python3
"""Which kernels a real GPU runs for ResNet-50's convolutions, as tools/bench/gpu_calibration.py times
them (forward; with the weight's or the input's gradient): each kernel's name, how many run per call
and their device time per call, from torch.profiler (CUPTI). What no datasheet gives the performance
model: the algorithm cuDNN picks in each precision (its kernel names), and whether it converts layouts
around the convolution. Besides gpu_calibration's cases (BF16 channels-last, FP32 and TF32
contiguous), BF16 contiguous, as autocast runs a model never converted to channels-last.

    python3 tools/bench/gpu_kernels.py --output OUT.csv
"""

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_calibration as calibration  # noqa: E402

CALLS = 5
LAYOUTS = {torch.channels_last: "channels-last", torch.contiguous_format: "contiguous"}


def kernels_per_call(fn) -> dict[str, list]:
    """{kernel name: [launches, device microseconds]} per call of fn, after a warm-up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
    found = defaultdict(lambda: [0.0, 0.0])
    for event in profile.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            found[event.name][0] += 1 / CALLS
            found[event.name][1] += event.time_range.elapsed_us() / CALLS
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, type=Path)
    output = parser.parse_args().output
    hardware, header = calibration.environment("cuda")
    with open(output, "w", newline="") as file:
        file.writelines(f"# {line.replace('gpu_calibration', 'gpu_kernels')}\n" for line in header)
        rows = csv.writer(file)
        rows.writerow(("workload", "config", "precision", "layout", "hardware", "kernel", "launches per call",
                       "device us per call"))
        precisions = calibration.CONVOLUTION_PRECISIONS + (("BF16", torch.bfloat16, torch.contiguous_format),)
        for precision, dtype, memory_format in precisions:
            for c_in, c_out, k, stride, side in calibration.RESNET50_CONVOLUTIONS:
                config = f"N=32 C={c_in} K={c_out} R=S={k} stride={stride} H=W={side}"
                for workload, gradients in calibration.CONVOLUTION_PASSES.items():
                    if c_in == 3 and gradients[1]:
                        continue  # nothing takes the gradient of the images
                    with calibration.tf32(precision == "TF32"):
                        make = calibration.convolution(c_in, c_out, k, stride, side, dtype, memory_format, gradients)
                        fn = make("cuda")
                        for name, (launches, micros) in sorted(kernels_per_call(fn).items()):
                            rows.writerow((workload, config, precision, LAYOUTS[memory_format], hardware, name,
                                           f"{launches:.3g}", f"{micros:.4g}"))
                    file.flush()
                    print(f"{workload} | {config} | {precision} {LAYOUTS[memory_format]}", flush=True)


if __name__ == "__main__":
    main()
