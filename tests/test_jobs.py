"""A job's log file (Snakemake's `log:`) holds its whole failure: the traceback, then, as its last
line, what to do; the error is raised on for the terminal, and the job leaves no logging set up."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from fedbench import jobs
from fedbench.data.base import ArrayDataset, save_dataset
from fedbench.io import DamagedFile


def _dataset(path) -> None:
    x = np.zeros((20, 3), np.float32)
    y = np.arange(20, dtype=np.int64) % 2
    save_dataset(ArrayDataset("toy", x, y, x[:4], y[:4], 2, True, "test"), path)


def test_a_damaged_input_ends_the_log_with_the_command_that_writes_it(tmp_path):
    data, out, log = tmp_path / "data.npz", tmp_path / "part.npz", tmp_path / "job.log"
    _dataset(data)
    data.write_bytes(data.read_bytes()[:100])
    handlers = list(logging.getLogger().handlers)
    with pytest.raises(DamagedFile) as err:
        jobs.partition(data, {"kind": "iid", "num_clients": 2}, 0, out, log)
    lines = log.read_text().splitlines()
    command = f"snakemake --cores all {out} --forcerun {data}"
    assert str(err.value).endswith(command)
    assert "ERROR the job failed:" in lines[0] and "Traceback (most recent call last):" in lines
    assert any(line.startswith("fedbench.io.DamagedFile: dataset file") for line in lines)
    assert "ERROR what to do: run this to write it again (its prepare rule)" in lines[-1]
    assert lines[-1].endswith(command)
    assert logging.getLogger().handlers == handlers  # the file handler went with the job


def test_any_other_failure_ends_the_log_with_the_command_that_reruns_the_job(tmp_path):
    data, out, log = tmp_path / "data.npz", tmp_path / "part.npz", tmp_path / "job.log"
    _dataset(data)
    with pytest.raises(Exception, match="no-such-kind"):
        jobs.partition(data, {"kind": "no-such-kind"}, 0, out, log)
    text = log.read_text()
    assert "Traceback (most recent call last):" in text
    assert text.splitlines()[-1].endswith(
        "what to do: fix the cause of the error above, then run this job again with: "
        f"snakemake --cores all {out}"
    )


def test_a_job_that_succeeds_logs_its_work_and_no_error(tmp_path):
    data, out, log = tmp_path / "data.npz", tmp_path / "part.npz", tmp_path / "job.log"
    _dataset(data)
    jobs.partition(data, {"kind": "iid", "num_clients": 2}, 0, out, log)
    assert out.exists()
    text = log.read_text()
    assert "INFO 2 clients" in text and "ERROR" not in text
