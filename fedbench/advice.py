"""The fix on the terminal: at the end of a failed Snakemake run (its `onerror` handler), each
failed job's "what to do" line, read from the job's own log (`fedbench.jobs._job` writes it last),
so the user need not open the log files Snakemake's error message only names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ADVICE = "what to do: "
# Snakemake's error block names a failed job's logs in one line (snakemake/logging.py).
JOB_LOGS = re.compile(r"^\s*log: (.+?) \(check log file\(s\) for error details\)\s*$")


def failed_job_logs(run_logs: list[str | Path]) -> list[Path]:
    """The log files of the failed jobs that Snakemake's own log files name, in order, once."""
    found: dict[str, None] = {}
    for run_log in run_logs:
        try:
            text = Path(run_log).read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
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
    return len(advice)


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
