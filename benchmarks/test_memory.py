"""Peak memory of a 100-client vectorised round: default chunking, one chunk, a tight budget.

Each variant runs in its own process (bench_memory.py) so peaks do not mix; the timed value is
that process's wall time, the memory figures are in extra_info.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("bench_memory.py")
VARIANTS = {
    "default": [],
    "one_chunk": ["--chunk", "100"],
    "budget_8mb": ["--budget-mb", "8"],
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_round_memory(benchmark, variant):
    device = os.environ.get("BENCH_DEVICE", "cpu")  # bench_lib.DEVICE, without importing torch
    cmd = [sys.executable, str(SCRIPT), "--clients", "100", "--device", device, *VARIANTS[variant]]

    def run():
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    result = json.loads(benchmark.pedantic(run, rounds=1, iterations=1).strip().splitlines()[-1])
    benchmark.extra_info.update(kind="memory", variant=variant, **result)
