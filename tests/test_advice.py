"""A failed run's fix on the terminal: `fedbench.advice` reads the failed jobs' logs that
Snakemake's own log names and prints each one's "what to do" line (the end-to-end check is in
tests/test_workflow_recovery.py)."""

from __future__ import annotations

import io

from fedbench.advice import failed_job_logs, job_advice, print_advice

# As Snakemake 9 writes an error block into .snakemake/log/*.snakemake.log (snakemake/logging.py).
RUN_LOG = """\
Error in rule partition:
    message: None
    jobid: 3
    input: results/smoke/data/synthetic-1-1.npz
    output: results/smoke/partitions/synthetic-1-1/natural/seed0.npz
    log: {a} (check log file(s) for error details)
Error in rule train:
    jobid: 5
    log: {b}, {c} (check log file(s) for error details)
Error in rule partition:
    log: {a} (check log file(s) for error details)
"""


def test_each_failed_jobs_advice_is_printed_once(tmp_path):
    a, b, c = (tmp_path / n for n in ("a.log", "b.log", "c.log"))
    a.write_text("2026-12-04 INFO start\nTraceback ...\n2026-12-04 ERROR what to do: rerun A\n")
    b.write_text("ERROR what to do: old advice\nmore\nERROR what to do: fix B, then rerun\n")
    c.write_text("no advice in this one\n")  # a job of another kind: nothing to print
    run_log = tmp_path / "run.snakemake.log"
    run_log.write_text(RUN_LOG.format(a=a, b=b, c=c))
    assert failed_job_logs([run_log]) == [a, b, c]
    assert (job_advice(a), job_advice(b), job_advice(c)) == ("rerun A", "fix B, then rerun", None)
    out = io.StringIO()
    assert print_advice([str(run_log)], out) == 2
    text = out.getvalue()
    assert "what to do, for each failed job" in text
    assert f"  {a}:\n    rerun A\n" in text and f"  {b}:\n    fix B, then rerun\n" in text
    assert text.count("rerun A") == 1 and str(c) not in text
    # a missing log or run log is passed over; a lone path works like a list
    assert print_advice(tmp_path / "missing.log", io.StringIO()) == 0
    assert job_advice(tmp_path / "missing.log") is None
