"""Recovering from a damaged file, end to end: in a one-run grid at smoke scale, a truncated
dataset, a truncated partition and a damaged checkpoint. A failed job's log holds the traceback and,
last, what to do; the command its error prints, run as written, writes the file again and reruns
the job, and the run ends with the same metrics.jsonl bytes as before the damage."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from workflow_copy import copy_workflow, snakemake_env

from fedbench.io import record_path

ROOT = Path(__file__).resolve().parents[1]
SCALE = "smoke"
DATA = f"results/{SCALE}/data/synthetic-1-1.npz"
PART = f"results/{SCALE}/partitions/synthetic-1-1/natural/seed0.npz"
RUN = "synthetic-1-1/natural/linear/fedavg/seed0"
METRICS = f"results/{SCALE}/runs/{RUN}/metrics.jsonl"
TABLE = f"results/{SCALE}/papers/tiny/table1.md"
# One table of one cheap run (30 devices of Synthetic(1,1), a linear model, 2 rounds at smoke).
GRID = {
    "paper": "tiny",
    "title": "one run",
    "default_scale": SCALE,
    "seeds": [0],
    "tables": {
        "table1": {
            "caption": "one cell",
            "metric": "top1",
            "protocol": "global",
            "stat": "wmean",
            "round": "final",
            "rows": [{"id": "fedavg", "label": "FedAvg", "algorithm": "fedavg"}],
            "columns": [
                {
                    "id": "synthetic",
                    "label": "Synthetic(1,1)",
                    "dataset": "synthetic-1-1",
                    "partition": "natural",
                    "model": "linear",
                }
            ],
        }
    },
}
ADVICE = re.compile(r"(snakemake --cores \S+ .*)$")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A copy of the workflow whose only grid is GRID, its env, and the run's metrics bytes."""
    ws = tmp_path_factory.mktemp("recovery")
    copy_workflow(ws, {"tiny": yaml.safe_dump(GRID)})
    warm = Path(tempfile.mkdtemp(prefix="fbw"))  # short: a socket path holds <= 100 bytes
    env = snakemake_env(warm)
    _snakemake(ws, env, "tiny")
    yield ws, env, (ws / METRICS).read_bytes()
    shutil.rmtree(warm, ignore_errors=True)


def _run(ws: Path, env: dict, command: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        command, shell=True, cwd=ws, env=env, capture_output=True, text=True, timeout=300
    )
    result.log = result.stdout + result.stderr  # snakemake logs to stderr
    return result


def _snakemake(ws: Path, env: dict, args: str, ok: bool = True) -> subprocess.CompletedProcess:
    result = _run(ws, env, f"snakemake --cores 2 {args}")
    assert (result.returncode == 0) == ok, result.log[-4000:]
    return result


def _truncate(path: Path, record: bool = True) -> None:
    """Cut a file in half; record=False also drops its content record (a file written before
    records existed: the damage is then found by the job that reads it)."""
    if not record:
        record_path(path).unlink()
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _ran(log: str, rule: str) -> int:
    """How many jobs of `rule` a snakemake run's output says it ran (its job-stats table)."""
    return sum(int(m.group(1)) for m in re.finditer(rf"^{rule}\s+(\d+)\s*$", log, re.M))


def _follow_advice(ws: Path, env: dict, log: Path, terminal: str, damaged: str) -> str:
    """The failed job's log holds the traceback and ends with the command; the terminal shows
    the same error; the command, run as written, succeeds. Returns the command."""
    text = log.read_text()
    assert "Traceback (most recent call last)" in text, text
    assert f"{damaged} is corrupt" in text, text
    last = text.rstrip("\n").splitlines()[-1]
    assert "what to do:" in last, text
    command = ADVICE.search(last).group(1)
    assert f"--forcerun {damaged}" in command, command
    assert command in terminal, terminal[-4000:]  # the error Snakemake prints says the same
    # and the run ends with the log's advice line itself (the `onerror` handler, fedbench.advice)
    marker = "fedbench: what to do, for each failed job (from its log):"
    assert marker in terminal, terminal[-4000:]
    assert last.split("what to do: ", 1)[1] in terminal.split(marker)[-1], terminal[-4000:]
    result = _run(ws, env, command)
    assert result.returncode == 0, result.log[-4000:]
    return command


@pytest.mark.workflow
def test_a_truncated_dataset_read_by_the_partition_job(workspace):
    ws, env, metrics = workspace
    _truncate(ws / DATA, record=False)  # newer than its partition: `tiny` reruns that job
    failed = _snakemake(ws, env, "tiny", ok=False)
    log = ws / "logs" / SCALE / "partition" / "synthetic-1-1" / "natural" / "seed0.log"
    command = _follow_advice(ws, env, log, failed.log, DATA)
    assert command == f"snakemake --cores all {PART} --forcerun {DATA}"
    assert (ws / METRICS).read_bytes() == metrics


@pytest.mark.workflow
def test_a_truncated_partition_and_a_damaged_checkpoint_of_the_run(workspace):
    ws, env, metrics = workspace
    _truncate(ws / PART, record=False)
    ckpt = (ws / METRICS).parent / "checkpoint.pt"
    ckpt.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)  # a write cut short
    failed = _snakemake(ws, env, "tiny", ok=False)
    assert not (ws / METRICS).exists()  # removed with the failed job: `tiny` alone would not
    log = ws / "logs" / SCALE / "train" / f"{RUN}.log"  # rerun it, its table being there
    command = _follow_advice(ws, env, log, failed.log, PART)
    assert command == f"snakemake --cores all {METRICS} --forcerun {PART}"
    # The rerun found the damaged checkpoint: deleted with a warning, trained from round 0.
    text = log.read_text()
    assert re.search(r"WARNING checkpoint .*checkpoint\.pt refused \(deleted\)", text), text
    assert "trains from round 0" in text, text
    assert not ckpt.exists()
    assert (ws / METRICS).read_bytes() == metrics
    _snakemake(ws, env, "tiny")  # then the user's own command again: it completes
    assert (ws / METRICS).read_bytes() == metrics


@pytest.mark.workflow
def test_the_warm_worker_starts_only_for_a_later_job_and_leaves_nothing(workspace):
    """A one-job run starts no server (it would import for nothing beside the job); a run of
    several jobs may start one, and once the run ends no socket, lock or log is left."""
    ws, env, metrics = workspace
    warm = Path(tempfile.mkdtemp(prefix="fbw"))
    on = {**env, "FEDBENCH_WARM_WORKER": "1", "FEDBENCH_WARM_DIR": str(warm)}
    snakefile = (ws / "Snakefile").read_text()
    # what the jobs are told: a shell job writes the count the workflow's onstart set
    probe = '\n\nrule planned:\n    output:\n        "planned-{n}.txt",\n    shell:\n'
    probe += '        "echo $FEDBENCH_WARM_PLANNED > {output}"\n'
    (ws / "Snakefile").write_text(snakefile + probe)
    try:
        _snakemake(ws, on, f"{TABLE} planned-1.txt --forcerun {TABLE}")  # one script job
        assert (ws / "planned-1.txt").read_text().strip() == "1"
        time.sleep(1.0)  # a server started by the job would hold its lock by now
        assert list(warm.iterdir()) == []
        _snakemake(ws, on, f"tiny planned-2.txt --forcerun {METRICS}")  # train and table
        assert (ws / "planned-2.txt").read_text().strip() == "2"
        end = time.monotonic() + 60
        while any(warm.iterdir()) and time.monotonic() < end:
            time.sleep(0.2)  # the server, told to stop by onsuccess, finishes its imports' exit
        assert list(warm.iterdir()) == []
        assert (ws / METRICS).read_bytes() == metrics
    finally:
        (ws / "Snakefile").write_text(snakefile)
        shutil.rmtree(warm, ignore_errors=True)


@pytest.mark.workflow
def test_a_forced_run_keeps_no_params_file_that_a_grid_run_deletes(workspace):
    """params.pt is temp (only a landscape job reads it): Snakemake keeps a target job's temp
    outputs, so the workflow's onsuccess deletes those no requested file names."""
    ws, env, metrics = workspace
    params = (ws / METRICS).parent / "params.pt"
    _snakemake(ws, env, f"{METRICS} --forcerun {METRICS}")
    assert (ws / METRICS).read_bytes() == metrics and not params.exists()
    _snakemake(ws, env, f"{Path(METRICS).parent}/params.pt --forcerun {METRICS}")  # by name
    assert params.is_file()
    params.unlink()


@pytest.mark.workflow
@pytest.mark.parametrize("damaged", [DATA, PART, METRICS], ids=["dataset", "partition", "metrics"])
def test_a_damaged_result_stops_the_run_before_any_job_and_its_repair_retrains_nothing(
    workspace, damaged
):
    """A result changed after the workflow wrote it (its content record differs): the run stops
    before any job, naming it and the command, so no output is deleted; the command writes it
    again, with the same bytes, and then the user's command retrains no run whose inputs are
    byte-identical (only a damaged metrics.jsonl's own run trains again)."""
    ws, env, metrics = workspace
    before = {p: (ws / p).stat().st_mtime_ns for p in (DATA, PART, METRICS, TABLE)}
    _truncate(ws / damaged)
    failed = _snakemake(ws, env, "tiny", ok=False)
    assert "result file(s) changed after the workflow wrote them" in failed.log, failed.log[-3000:]
    assert "Nothing was run, so no good output was deleted" in failed.log
    assert all((ws / p).exists() for p in (DATA, PART, METRICS, TABLE))  # nothing deleted
    command = re.search(r"Write them again with: (snakemake .*?) ;", failed.log).group(1)
    assert command == f"snakemake --cores all {damaged} --forcerun {damaged}"
    repair = _run(ws, env, command)
    assert repair.returncode == 0, repair.log[-4000:]
    assert _ran(repair.log, "train") == (1 if damaged == METRICS else 0)
    again = _snakemake(ws, env, "tiny")  # the user's own command: nothing left to retrain
    assert _ran(again.log, "train") == 0 and _ran(again.log, "partition") == 0, again.log[-3000:]
    assert (ws / METRICS).read_bytes() == metrics
    # every file written again with the same bytes has its first time back (its record's:
    # the time it was written, before Snakemake touched it)
    for p in (DATA, PART, METRICS):
        first = json.loads(record_path(ws / p).read_text())["mtime_ns"]
        assert (ws / p).stat().st_mtime_ns == first <= before[p], p
