"""Cluster and multi-GPU profiles: the rules declare what a scheduler needs, and the profiles
dry-run over the grids."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULE_FILES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))


def _rule_blocks(text: str) -> dict[str, str]:
    """rule name -> its text (up to the next top-level statement)."""
    blocks = re.split(r"^(?=\S)", text, flags=re.M)
    out = {}
    for block in blocks:
        m = re.match(r"rule (\w+):", block)
        if m:
            out[m.group(1)] = block
    return out


def test_every_rule_with_a_job_declares_memory_and_runtime():
    rules = {name: b for f in RULE_FILES for name, b in _rule_blocks(f.read_text()).items()}
    jobs = {n: b for n, b in rules.items() if re.search(r"^\s+(script|shell|run):", b, re.M)}
    assert {"fetch", "prepare", "partition", "train", "table", "figure", "landscape"} <= set(jobs)
    for name, block in jobs.items():
        resources = re.search(r"resources:\n((?:\s{8}.*\n)+)", block)
        assert resources, f"rule {name} declares no resources"
        declared = set(re.findall(r"(\w+)=", resources.group(1)))
        assert {"mem_mb", "runtime", "gpu"} <= declared, f"rule {name}: {sorted(declared)}"


def _dry_run(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    return log


def _jobs(log: str, rule: str) -> list[str]:
    """The dry run's blocks of one rule's jobs."""
    return [b for b in re.split(r"\n\s*\n", log) if re.search(rf"^(local)?rule {rule}:", b, re.M)]


@pytest.mark.workflow
@pytest.mark.skipif(
    importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
    reason="snakemake-executor-plugin-slurm is not installed (pip install -e '.[cluster]')",
)
def test_slurm_profile_dry_runs_the_paper_grid():
    # One paper's grid (the profile maps rules, not grids; `make test`'s dry-run-paper stage
    # builds every grid's DAG): AAggFF's runs at paper scale.
    log = _dry_run("--profile", "profiles/slurm", "aaggff", "--config", "scale=paper")
    train = _jobs(log, "train")
    assert len(train) > 100
    for block in train:
        resources = re.search(r"resources: (.*)", block).group(1)
        assert re.search(r"\bgpu=1\b", resources) and "runtime=" in resources, block
    for block in _jobs(log, "partition"):
        assert not re.search(r"\bgpu=[1-9]", block), block


@pytest.mark.workflow
def test_multigpu_profile_gives_each_training_run_one_gpu():
    log = _dry_run(
        "--profile", "profiles/multigpu", "quick", "--config", "scale=smoke", "device=cuda"
    )
    train = _jobs(log, "train")
    assert train
    for block in train:
        assert re.search(r"resources: .*\bgpu=1\b", block), block
