"""The distributed tests share two helper modules, occl_workers (a pool of
rank processes) and occl_checks (what the ranks run); pytest imports test
files with importlib, so this directory goes on sys.path for them and for
the spawned rank processes, which inherit it."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
