"""A failed run's fix on the terminal: `fedbench.advice` reads the failed jobs' logs that
Snakemake's own log names and prints each one's "what to do" line (the end-to-end check is in
tests/test_workflow_recovery.py)."""

from __future__ import annotations

import io

from fedbench.advice import (
    _megabytes,
    _minutes,
    failed_job_logs,
    job_advice,
    print_advice,
    scheduler_limits,
)

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


# snakemake-executor-plugin-slurm 2.8's message for jobs SLURM stopped, inside Snakemake's block.
SLURM_LOG = """\
Error in rule train:
    message: SLURM-job '41' failed, SLURM status is: 'TIMEOUT'. Reason: Step 0: None.
    jobid: 2
    external_jobid: 41
Error in rule landscape:
    message: SLURM-job '42' failed, SLURM status is: 'OUT_OF_MEMORY'. Reason: Unknown.
    jobid: 7
Error in rule train:
    message: SLURM-job '43' failed, SLURM status is: 'FAILED'. Reason: Unknown.
Error in rule partition:
    message: SLURM-job '44' failed, SLURM status is: 'TIMEOUT'. Reason: Unknown.
Error in rule train:
    message: SLURM-job '45' failed, SLURM status is: 'FAILED'. Detailed failure reason unavailable
    log: logs/smoke/train/x.log, {slurm_log} (check log file(s) for error details)
    external_jobid: 45
"""


def test_a_job_stopped_at_a_scheduler_limit_names_the_resource_to_raise(tmp_path):
    run_log = tmp_path / "run.snakemake.log"
    slurm_log = tmp_path / "45.log"  # SLURM 22.05, OverMemoryKill without cgroups: state FAILED
    slurm_log.write_text(
        "slurmstepd-vm: error: StepId=45.batch exceeded memory limit (185266176 > 52428800), "
        "being killed\nslurmstepd-vm: error: Exceeded job memory limit\n"
    )
    run_log.write_text(SLURM_LOG.format(slurm_log=slurm_log))
    asked = []

    def sacct(jobid, field):
        asked.append((jobid, field))
        return {"41": "00:01:00", "42": "8G", "45": "50M"}.get(jobid)  # 44: no answer

    lines = scheduler_limits([run_log], sacct)
    # job 43 FAILED with no limit in a log: not asked, no line
    assert asked == [("41", "Timelimit"), ("42", "ReqMem"), ("44", "Timelimit"), ("45", "ReqMem")]
    assert len(lines) == 4
    assert (
        "SLURM job 41 (rule train) was stopped at its time limit (TIMEOUT; runtime: 1 minutes"
        in lines[0]
    )
    assert "`--set-resources train:runtime=2`" in lines[0] and "--rerun-incomplete" in lines[0]
    assert "(rule landscape) was stopped at its memory (OUT_OF_MEMORY; mem_mb: 8192 MB" in lines[1]
    assert "`--set-resources landscape:mem_mb=16384`" in lines[1]
    assert (
        "(rule partition)" in lines[2]
        and "`--set-resources partition:runtime=<minutes>`" in lines[2]
    )
    assert (
        "(rule train) was stopped at its memory (FAILED, its SLURM log: OUT_OF_MEMORY" in lines[3]
    )
    assert "`--set-resources train:mem_mb=100`" in lines[3]
    out = io.StringIO()
    # the real sacct is absent or knows no such jobs here: the line still names the resource
    assert print_advice(str(run_log), out) == 4
    assert "each job the scheduler stopped at a limit" in out.getvalue()


def test_sacct_limits_are_read_in_minutes_and_megabytes():
    assert [_minutes(s) for s in ("01:00", "04:00:00", "1-00:00:30", "UNLIMITED")] == [
        1,
        240,
        1441,
        None,
    ]
    assert [_megabytes(s) for s in ("8000M", "2G", "512K", "4Gn", "x")] == [
        8000,
        2048,
        1,
        4096,
        None,
    ]
