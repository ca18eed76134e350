"""The Snakemake adapters (workflow/scripts/*.py) only unpack `snakemake` and call one job of
fedbench.jobs, so a job's work is in the package, where it is tested without Snakemake."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fedbench import jobs

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "workflow" / "scripts").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_an_adapter_is_short_and_calls_one_job(script):
    text = script.read_text()
    assert len(text.splitlines()) <= 15, f"{script.name}: move the work into fedbench.jobs"
    tree = ast.parse(text)
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    work = {(m, n) for m, n in imported if m != "fedbench.worker"}
    assert len(work) == 1, f"{script.name} imports {sorted(work)}"
    ((module, name),) = work
    assert module == "fedbench.jobs" and callable(getattr(jobs, name)), (module, name)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import)], "plain imports"


def test_every_job_has_its_adapter():
    public = {n for n in dir(jobs) if not n.startswith("_") and callable(getattr(jobs, n))}
    public -= {"annotations", "Any", "Path"}
    called = {
        alias.name
        for script in SCRIPTS
        for node in ast.walk(ast.parse(script.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "fedbench.jobs"
        for alias in node.names
    }
    assert called == public
