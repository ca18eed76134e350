"""Result files honour the umask: the atomic writer's temporary file (mkstemp's 0600) takes the
mode a plain open would give the destination, so a shared project folder's results are readable
by the group (umask 022) or private (077), as the user chose."""

from __future__ import annotations

import os
import stat

import pytest

from fedbench.io import atomic_path, atomic_paths, write_bytes, write_text, write_yaml


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_every_atomic_writer_gives_the_umasks_mode(umask, tmp_path):
    expected = 0o666 & ~umask
    write_text(tmp_path / "a.md", "x")
    write_bytes(tmp_path / "b.bin", b"x")
    write_yaml(tmp_path / "deep" / "c.yaml", {"k": 1})
    with atomic_path(tmp_path / "d.npz", suffix=".npz") as tmp, open(tmp, "wb") as fh:
        fh.write(b"x")
    with atomic_paths(tmp_path / "e.jsonl", tmp_path / "f.yaml") as tmps:
        for t in tmps:
            t.write_text("x")
    files = ["a.md", "b.bin", "deep/c.yaml", "d.npz", "e.jsonl", "f.yaml"]
    assert {f: oct(_mode(tmp_path / f)) for f in files} == {f: oct(expected) for f in files}
    # what a plain open gives, for comparison: the same
    (tmp_path / "plain").write_text("x")
    assert _mode(tmp_path / "plain") == expected
    assert not list(tmp_path.rglob("*.tmp"))  # nothing half-written left behind


def test_a_table_and_a_run_record_honour_the_umask(umask, tmp_path, monkeypatch):
    """Two real outputs: `fedbench record`'s CSV and a table's four files."""
    from pathlib import Path

    from fedbench.record import main

    config = Path(__file__).resolve().parents[1] / "config" / "config.yaml"
    monkeypatch.chdir(tmp_path)  # no runs here: every run listed missing, the table empty
    args = ["quick", "table1", "--config", str(config), "--out", "r.csv", "--table-out", "t"]
    assert main(args) == 0
    made = ["r.csv", "t.md", "t.csv", "t.tex", "t.html"]
    assert {f: oct(_mode(f)) for f in made} == {f: oct(0o666 & ~umask) for f in made}
