"""Atomic file writes: nothing half-written is ever left at the destination; and how to write
again a file of the workflow that was found missing or damaged."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
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


# Content records: beside each result file the workflow writes (a path under a `results` folder,
# not a checkpoint), `.<name>.sha256` holds its sha256, size and first modification time. Snakemake
# decides what to rerun by modification times: a file written again with the same bytes (a
# damaged dataset regenerated as the advice says) gets its first time back, so nothing made from
# it reruns; and a result changed by anything but the workflow (damage) is found before any job
# runs, so no good output is deleted by a rerun that would fail (`check_results`).
RECORD_SUFFIX = ".sha256"
_CHUNK = 1 << 20


def record_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}{RECORD_SUFFIX}")


def _recorded(path: Path) -> bool:
    return "results" in path.parts and not path.name.startswith("checkpoint")


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _read_record(path: Path) -> dict | None:
    try:
        rec = json.loads(record_path(path).read_text())
        return rec if {"sha256", "size", "mtime_ns"} <= set(rec) else None
    except (OSError, ValueError, AttributeError):
        return None


def settle(dest: str | os.PathLike) -> None:
    """After writing `dest`: the same bytes as its record says -> its recorded (first) time back;
    else a new record. (Snakemake touches a job's outputs after it; `check_results` restores the
    time again at the next run.)"""
    dest = Path(dest)
    if not _recorded(dest):
        return
    st, digest, rec = os.stat(dest), file_sha256(dest), _read_record(dest)
    if rec is not None and rec["sha256"] == digest and rec["size"] == st.st_size:
        os.utime(dest, ns=(st.st_atime_ns, int(rec["mtime_ns"])))
        return
    body = json.dumps({"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    tmp = record_path(dest).with_name(record_path(dest).name + f".{os.getpid()}.tmp")
    tmp.write_text(body + "\n")
    os.replace(tmp, record_path(dest))


def check_results(root: str | os.PathLike = "results", forced=()) -> list[Path]:
    """Compare every recorded result file under `root` with its record: one whose time moved but
    whose bytes did not gets its recorded time back; one whose bytes changed is returned
    (damaged: changed by something other than the workflow), unless `forced` names it (it is
    being written again). Files the record names but that are gone are left to Snakemake."""
    forced = {os.path.normpath(str(f)) for f in forced}
    damaged = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if not (name.startswith(".") and name.endswith(RECORD_SUFFIX)):
                continue
            path = Path(folder, name[1 : -len(RECORD_SUFFIX)])
            rec = _read_record(path)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if rec is None or (st.st_mtime_ns == rec["mtime_ns"] and st.st_size == rec["size"]):
                continue
            if st.st_size == rec["size"] and file_sha256(path) == rec["sha256"]:
                os.utime(path, ns=(st.st_atime_ns, int(rec["mtime_ns"])))
            elif os.path.normpath(str(path)) not in forced:
                damaged.append(path)
    return sorted(damaged)


def damaged_results_message(damaged: list[Path]) -> str:
    """The error for result files changed after the workflow wrote them, with the command that
    writes them again (nothing else: a byte-identical rewrite reruns nothing after it)."""
    shown = ", ".join(map(str, damaged[:5])) + (
        f" and {len(damaged) - 5} more" if damaged[5:] else ""
    )
    command = shlex.join(
        ["snakemake", "--cores", "all", *map(str, damaged), "--forcerun", *map(str, damaged)]
    )
    return (
        f"{len(damaged)} result file(s) changed after the workflow wrote them (their sha256 "
        f"differs from the record beside them; damaged?): {shown}. Nothing was run, so no good "
        f"output was deleted. Write them again with: {command} ; then run your own snakemake "
        "command again "
        "(a file written again with the same bytes makes nothing rerun)"
    )


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `dest`; rename it onto `dest` only if the block succeeds."""
    tmp_path = _temporary(Path(dest), suffix)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
        settle(dest)
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
        for dest in dests:
            settle(dest)


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
