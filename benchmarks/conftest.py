"""Benchmarks run with `make bench` (pytest-benchmark); the unit-test run never collects them.

Each benchmark records what the summary needs in `benchmark.extra_info` (`kind` plus the case's
fields), so `benchmarks/summary.py` reads everything from pytest-benchmark's JSON.
"""

import os

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# BENCH_THREADS pins torch's intra-op threads (default: torch's own choice, the physical cores).
if os.environ.get("BENCH_THREADS"):
    torch.set_num_threads(int(os.environ["BENCH_THREADS"]))
