"""The fix on the terminal: at the end of a failed Snakemake run (its `onerror` handler), each
failed job's "what to do" line, read from the job's own log (`fedbench.jobs._job` writes it last),
so the user need not open the log files Snakemake's error message only names; and for a job a
cluster scheduler stopped at its limit (SLURM's TIMEOUT, OUT_OF_MEMORY), which writes no advice of
its own, the resource to raise and how."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ADVICE = "what to do: "
# Snakemake's error block names a failed job's logs in one line (snakemake/logging.py).
JOB_LOGS = re.compile(r"^\s*log: (.+?) \(check log file\(s\) for error details\)\s*$")


# snakemake-executor-plugin-slurm's error message, inside Snakemake's "Error in rule R:" block.
SLURM_FAILED = re.compile(r"SLURM-job '(\d+)' failed, SLURM status is: '([A-Z_]+)'")
RULE_ERROR = re.compile(r"^Error in rule ([A-Za-z_][A-Za-z0-9_]*):")
# status -> (Snakemake resource, sbatch option, sacct field, what it limits)
LIMITS = {
    "TIMEOUT": ("runtime", "--time", "Timelimit", "time limit"),
    "DEADLINE": ("runtime", "--time", "Timelimit", "deadline"),
    "OUT_OF_MEMORY": ("mem_mb", "--mem", "ReqMem", "memory"),
}


def _log_lines(run_logs: list[str | Path]):
    """Each readable log's lines (an unreadable one is skipped: the advice is a courtesy)."""
    for run_log in run_logs:
        try:
            yield Path(run_log).read_text(errors="replace").splitlines()
        except OSError:
            continue


def _sacct_field(jobid: str, field: str) -> str | None:
    """One field of a SLURM job as sacct prints it (None without sacct or an answer)."""
    try:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", jobid, f"--format={field}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [s.strip() for s in out.stdout.splitlines() if s.strip()]
    return lines[0] if out.returncode == 0 and lines else None


def _minutes(limit: str) -> int | None:
    """sacct's Timelimit ([D-]HH:MM:SS or MM:SS) in whole minutes."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", limit)
    if not m:
        return None
    d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    return d * 1440 + h * 60 + mi + (s > 0)


def _megabytes(mem: str) -> int | None:
    """sacct's ReqMem (8000M, 8G, 1T; an older sacct's trailing n/c per node/cpu) in MB."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT])[nc]?", mem)
    if not m:
        return None
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2)]
    return max(1, round(float(m.group(1)) * scale))


def _limit_in_logs(paths: list[str]) -> str | None:
    """The limit a job's own SLURM log says stopped it: where memory is enforced by polling
    (jobacct_gather's OverMemoryKill, no cgroup) SLURM records the job as FAILED and only the
    log's "exceeded memory limit" says why; a time limit reads "DUE TO TIME LIMIT"."""
    for lines in _log_lines([p for p in paths if p.endswith(".log")]):
        for line in lines:
            if "exceeded memory limit" in line.lower():
                return "OUT_OF_MEMORY"
            if "DUE TO TIME LIMIT" in line:
                return "TIMEOUT"
    return None


def _error_blocks(lines: list[str]):
    """(rule, SLURM job id, SLURM status, the block's log files) per Snakemake error block that
    names a SLURM job."""
    block: dict | None = None
    for line in [*lines, "Error in rule _end:"]:
        if m := RULE_ERROR.match(line):
            if block and block["job"]:
                yield block["rule"], *block["job"], block["logs"]
            block = {"rule": m.group(1), "job": None, "logs": []}
        elif block is not None:
            if m := SLURM_FAILED.search(line):
                block["job"] = m.groups()
            elif m := JOB_LOGS.match(line):
                block["logs"] = [s.strip() for s in m.group(1).split(", ")]


def scheduler_limits(
    run_logs: list[str | Path], sacct: Callable[[str, str], str | None] = _sacct_field
) -> list[str]:
    """One line per job that the cluster scheduler stopped at a limit of its own (a SLURM job of
    status TIMEOUT, DEADLINE or OUT_OF_MEMORY in Snakemake's log, or one whose SLURM log says it
    exceeded its memory or time limit): the rule, the limit, its value (read back with sacct
    where it answers) and the `--set-resources` that doubles it."""
    advice: dict[str, None] = {}
    for lines in _log_lines(run_logs):
        for rule, jobid, status, logs in _error_blocks(lines):
            limit = status if status in LIMITS else _limit_in_logs(logs)
            if limit is None:
                continue
            resource, option, field, what = LIMITS[limit]
            value = sacct(jobid, field)
            now = (_minutes if resource == "runtime" else _megabytes)(value) if value else None
            unit = "minutes" if resource == "runtime" else "MB"
            raised = f"{resource}={2 * now}" if now else f"{resource}=<{unit}>"
            held = f"{now} {unit}, sacct {field} {value}" if now else f"sbatch {option}"
            seen = status if limit == status else f"{status}, its SLURM log: {limit}"
            advice[
                f"SLURM job {jobid} (rule {rule}) was stopped at its {what} ({seen}; {resource}: "
                f"{held}): raise it, e.g. `--set-resources {rule}:{raised}` on the command line "
                f"or under set-resources in your profile, then rerun with --rerun-incomplete "
                "(a training run resumes from its last checkpoint)"
            ] = None
    return list(advice)


def failed_job_logs(run_logs: list[str | Path]) -> list[Path]:
    """The log files of the failed jobs that Snakemake's own log files name, in order, once."""
    found: dict[str, None] = {}
    for lines in _log_lines(run_logs):
        for line in lines:
            m = JOB_LOGS.match(line)
            if m:
                found.update(dict.fromkeys(p.strip() for p in m.group(1).split(", ")))
    return [Path(p) for p in found]


def job_advice(job_log: Path) -> str | None:
    """The last "what to do" line of one job's log (None: the log has none, or is unreadable)."""
    try:
        lines = job_log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if ADVICE in line:
            return line.split(ADVICE, 1)[1].strip()
    return None


def print_advice(run_logs, stream=None) -> int:
    """Print each failed job's advice (Snakemake's `onerror` passes its log files, a list or a
    path); returns how many jobs had one."""
    stream = stream or sys.stderr
    logs = [run_logs] if isinstance(run_logs, (str, Path)) else list(run_logs or [])
    advice = [(p, a) for p in failed_job_logs(logs) if (a := job_advice(p)) is not None]
    if advice:
        print("\nfedbench: what to do, for each failed job (from its log):", file=stream)
        for path, text in advice:
            print(f"  {path}:\n    {text}", file=stream)
    limits = scheduler_limits(logs)
    if limits:
        print("\nfedbench: what to do, for each job the scheduler stopped at a limit:", file=stream)
        for text in limits:
            print(f"  {text}", file=stream)
    return len(advice) + len(limits)


def unknown_target(targets: list[str], rule_names: list[str]) -> str | None:
    """The message for a requested target that names no rule and no file (`snakemake quikc`):
    the nearest target rules (difflib), in place of Snakemake's bare "No rule to produce"."""
    import difflib

    names = sorted(set(rule_names))
    for target in targets:
        if target in names or "/" in target or "." in target or "{" in target:
            continue  # a rule, or a file Snakemake resolves (its own error names the file)
        near = difflib.get_close_matches(target, names, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        return (
            f"snakemake target {target!r} is not a rule of this workflow: {hint}Targets are a "
            "rule (all, claims, one per grid: quick, superfed, ...) or a file under results/"
        )
    return None
