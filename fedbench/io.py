"""Atomic file writes: nothing half-written is ever left at the destination; and how to write
again a file of the workflow that was found missing or damaged."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shlex
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml


def _umask() -> int:
    """The process's umask, read without changing it (Linux's /proc; elsewhere set and restored,
    which for an instant leaves it at 0 for the process's other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _temporary(dest: Path, suffix: str = "") -> Path:
    """An empty temporary file beside `dest` (its folder made), with the mode a plain `open`
    would give `dest` (0666 less the umask): mkstemp's 0600 would survive the rename, leaving
    results that nobody else on a shared project folder can read."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix + ".tmp", dir=dest.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    return Path(tmp)


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `dest`; rename it onto `dest` only if the block succeeds."""
    tmp_path = _temporary(Path(dest), suffix)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_paths(*dests: str | os.PathLike) -> Iterator[list[Path]]:
    """Several files, all or none: yield temporary paths, renamed onto `dests` only once every
    one has been written (a failure part-way, e.g. a full disk, leaves no destination touched)."""
    with contextlib.ExitStack() as stack:
        tmps = [stack.enter_context(_staged(d)) for d in dests]
        yield tmps
        for tmp, dest in zip(tmps, dests):
            os.replace(tmp, dest)


@contextlib.contextmanager
def _staged(dest: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `dest`, removed on exit unless it was renamed."""
    tmp = _temporary(Path(dest))
    try:
        yield tmp
    finally:
        Path(tmp).unlink(missing_ok=True)


def dump_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write bytes in place (into a temporary path of `atomic_path`/`atomic_paths`)."""
    with open(path, "wb") as f:
        f.write(data)


def yaml_text(obj: Any) -> str:
    """YAML with keys in insertion order."""
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def jsonl_text(rows: list[dict]) -> str:
    """One JSON object per line, with stable formatting."""
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def write_text(dest: str | os.PathLike, text: str) -> None:
    """Write text atomically."""
    write_bytes(dest, text.encode())


def write_bytes(dest: str | os.PathLike, data: bytes) -> None:
    """Write bytes atomically."""
    with atomic_path(dest) as tmp:
        dump_bytes(tmp, data)


def write_yaml(dest: str | os.PathLike, obj: Any) -> None:
    """Write YAML atomically (keys in insertion order)."""
    write_text(dest, yaml_text(obj))


def write_jsonl(dest: str | os.PathLike, rows: list[dict]) -> None:
    """Write one JSON object per line atomically, with stable formatting."""
    write_text(dest, jsonl_text(rows))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a JSON-lines file."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# The files the Snakemake job running in this process writes (`fedbench.jobs` sets them): naming
# them as targets reruns that job. Empty outside a job (a library call, a test).
_JOB_TARGETS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "fedbench_job_targets", default=()
)


@contextlib.contextmanager
def job_targets(*paths: str | os.PathLike) -> Iterator[None]:
    """Within the block, the running job writes `paths` (what `rewrite_advice` names)."""
    token = _JOB_TARGETS.set(tuple(str(p) for p in paths))
    try:
        yield
    finally:
        _JOB_TARGETS.reset(token)


def rerun_command(*targets: str | os.PathLike, forcerun: str | os.PathLike | None = None) -> str:
    """The snakemake command line that (re)builds `targets`, first forcing `forcerun` (a file)."""
    words = ["snakemake", "--cores", "all", *(str(t) for t in targets)]
    if forcerun is not None:  # after the targets: --forcerun takes every word that follows it
        words += ["--forcerun", str(forcerun)]
    return shlex.join(words)


def rewrite_advice(path: str | os.PathLike, rule: str) -> str:
    """How to write again a missing or damaged file that the workflow's `rule` writes, ending
    with the command to run as written.

    Inside a job, the command also reruns that job: Snakemake would not, when the job's outputs
    were removed on its failure and a table or figure made earlier from them is still there
    (an output whose input is missing counts as up to date), so deleting the file and rerunning
    the grid's target would do nothing. `--forcerun FILE` writes the file again, whether it is
    there or not, and reruns every job of the targets that reads it."""
    targets = _JOB_TARGETS.get()
    if not targets:
        return f"run this to write it again (its {rule} rule): {rerun_command(path, forcerun=path)}"
    return (
        f"run this to write it again (its {rule} rule) and rerun the job that read it, then run "
        f"your own snakemake command again: {rerun_command(*targets, forcerun=path)}"
    )


class DamagedFile(ValueError):
    """A file the workflow wrote is damaged (truncated, altered, unreadable); the message names
    it and ends with the command that writes it again (`advice`)."""

    def __init__(self, path: str | os.PathLike, problem: str, rule: str):
        self.path, self.rule = Path(path), rule
        self.advice = rewrite_advice(path, rule)
        super().__init__(f"{problem}; {self.advice}")


class MissingFile(FileNotFoundError):
    """A file the workflow writes is not there; the message ends with the command that writes
    it (`advice`)."""

    def __init__(self, path: str | os.PathLike, what: str, rule: str):
        self.advice = rewrite_advice(path, rule)
        super().__init__(f"{what} file {path} does not exist; {self.advice}")
