"""`fedbench new algorithm`: the files it writes pass their own tests as written, and bad names
or existing files are refused with the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_the_new_method_passes_its_own_tests(tmp_path, capsys):
    folder = tmp_path / "my-work"  # outside the repository
    assert main(["new", "algorithm", "my_method", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {folder / 'my_method.py'}" in out and "pytest" in out
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("fedprox", "fedbench already has an algorithm 'fedprox'"),
        ("My-Method", "not a lowercase Python module name"),
        ("class", "not a lowercase Python module name"),
    ],
)
def test_a_bad_name_is_refused(tmp_path, capsys, name, needle):
    assert main(["new", "algorithm", name, "--dir", str(tmp_path)]) == 2
    assert needle in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_existing_files_are_not_overwritten(tmp_path, capsys):
    (tmp_path / "mine.py").write_text("# my work\n")
    assert main(["new", "algorithm", "mine", "--dir", str(tmp_path)]) == 2
    assert "mine.py exist(s)" in capsys.readouterr().err
    assert (tmp_path / "mine.py").read_text() == "# my work\n"
    assert not (tmp_path / "test_mine.py").exists()
