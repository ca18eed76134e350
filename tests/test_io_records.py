"""Content records of result files (fedbench.io): a file written again with the same bytes gets
its first modification time back, a touched one too, and one changed by anything but the
workflow is reported as damaged (unless it is being written again)."""

from __future__ import annotations

import json
import os

from fedbench.io import check_results, record_path, settle, write_bytes, write_text


def _mtime(path) -> int:
    return os.stat(path).st_mtime_ns


def test_records_keep_a_results_files_first_time_and_find_its_damage(tmp_path):
    root = tmp_path / "results"
    f = root / "smoke" / "data" / "x.npz"
    write_bytes(f, b"abc")
    rec = json.loads(record_path(f).read_text())
    assert rec["size"] == 3 and rec["mtime_ns"] == _mtime(f) and len(rec["sha256"]) == 64
    first = _mtime(f)
    os.utime(f, ns=(first + 5_000_000_000, first + 5_000_000_000))  # as Snakemake's touch
    write_bytes(f, b"abc")  # written again, the same bytes: its first time back
    assert _mtime(f) == first
    os.utime(f, ns=(first + 9_000_000_000, first + 9_000_000_000))
    assert check_results(root) == [] and _mtime(f) == first  # touched only: the time restored
    f.write_bytes(b"abd")  # changed outside the workflow: damaged
    assert check_results(root) == [f]
    assert check_results(root, forced=[str(f)]) == []  # being written again: not an error
    write_bytes(f, b"new bytes")  # the workflow writes new content: a new record, no damage
    assert check_results(root) == [] and json.loads(record_path(f).read_text())["size"] == 9
    f.unlink()
    assert check_results(root) == []  # a missing file is Snakemake's to make


def test_only_results_files_get_records_and_checkpoints_none(tmp_path):
    write_text(tmp_path / "elsewhere" / "t.md", "x")
    write_text(tmp_path / "results" / "runs" / "checkpoint.pt", "x")
    settle(tmp_path / "elsewhere" / "t.md")
    assert not record_path(tmp_path / "elsewhere" / "t.md").exists()
    assert not record_path(tmp_path / "results" / "runs" / "checkpoint.pt").exists()
    assert [p.name for p in (tmp_path / "results" / "runs").iterdir()] == ["checkpoint.pt"]
