#!/usr/bin/env python3
"""Writes tools/bench/neusight_sample.csv.gz: the rows of NeuSight's published training split that
openreg-perf's fit uses (published.py, Note [How a calibration row becomes a prediction]), taken from the
project's shared/perf/neusight-train/ so that CI, which clones this repository alone, has them.

The first ROWS[op] rows of each operator file for each device (the files are already a random draw,
seed 20261128, see their README), one CSV with an `op` column and only the columns the fit reads.
Source: NeuSight (Lee et al., ASPLOS 2025), repository sitar-lab/NeuSight at commit 6945927d, MIT
License, Copyright (c) 2025 Georgia Institute of Technology and Microsoft Corporation.

    python3 tools/bench/neusight_sample.py [--source ../shared/perf/neusight-train]
"""

import argparse
import csv
import gzip
import io
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "neusight_sample.csv.gz"
ELEMENTWISE = ("add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu", "tanh", "gelu")
ROWS = {**dict.fromkeys(ELEMENTWISE, 20), "softmax": 40, "ln": 40, "linear": 60, "bmm": 60, "conv": 60}
COLUMNS = ("op", "Device", "Latency", "Kernel Name", "B", "M", "N", "K", "H", "Input_Channel", "Output_Channel",
           "Kernel_Szie", "Input_Size", "Stride", "Padding")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=HERE.parents[2] / "shared" / "perf" / "neusight-train")
    source = parser.parse_args().source
    # mtime=0: the same rows make the same bytes.
    with io.TextIOWrapper(gzip.GzipFile(OUTPUT, "wb", mtime=0), newline="") as out:
        out.write("# A sample of NeuSight's training split (sitar-lab/NeuSight@6945927d, MIT License,\n"
                  "# Copyright (c) 2025 Georgia Institute of Technology and Microsoft Corporation);\n"
                  "# made by tools/bench/neusight_sample.py. Latency in ms (FP32, CUDA events around\n"
                  "# repeated runs); NeuSight's names: see openreg_perf/published.py.\n")
        writer = csv.DictWriter(out, COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for op, count in ROWS.items():
            taken: Counter = Counter()
            with gzip.open(source / f"{op}.csv.gz", "rt", newline="") as file:
                for row in csv.DictReader(file):
                    if taken[row["Device"]] < count:
                        taken[row["Device"]] += 1
                        writer.writerow({**row, "op": op})
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
