"""The scenarios' peak host memory: their own, not their parent's."""

import resource
import sys


def peak_host_bytes() -> int:
    """This process's peak resident memory. Linux's VmHWM starts afresh when a program is executed;
    getrusage's ru_maxrss does not: a child of tools/bench/perf_model.py starts from the fit's memory
    (0.49 GiB measured where the program itself peaked at 0.37)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS counts bytes, Linux kilobytes
