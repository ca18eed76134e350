"""A user's method beside the published ones (issue 40): a config overlay registers the plugin,
adds its catalog entry and appends its row to a grid's tables; bad overlays are refused naming
the key and the fix. End to end: the smoke quick grid with the overlay, through a file plugin
and an installed entry point, and an edit of the method's file reruns its runs only, with and
without the warm worker."""

from __future__ import annotations

import copy
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from test_bad_config import BASE, GRID
from workflow_copy import copy_workflow, snakemake_env

from fedbench.algorithms import ALGORITHMS
from fedbench.config import ConfigError, resolve_run
from fedbench.grid import load_workflow
from fedbench.registry import PluginError

ROOT = Path(__file__).resolve().parents[1]
MINE = """
from dataclasses import dataclass
from typing import ClassVar

from fedbench.algorithms.base import Algorithm


@dataclass(frozen=True)
class Mine(Algorithm):
    name: ClassVar[str] = "{name}"
    mu: float = 0.0
"""


@pytest.fixture
def registry():
    """ALGORITHMS as it was before the test (plugins are process-wide)."""
    added, loaded = dict(ALGORITHMS._added), dict(ALGORITHMS._loaded)
    yield ALGORITHMS
    ALGORITHMS._added.clear()
    ALGORITHMS._added.update(added)
    ALGORITHMS._loaded.clear()
    ALGORITHMS._loaded.update(loaded)


def _plugin(folder: Path, name: str, body: str | None = None) -> Path:
    path = folder / f"{name}.py"
    path.write_text(MINE.format(name=name) if body is None else body)
    return path


def _overlay(plugin: Path | None, name: str, **extra) -> dict:
    overlay = {
        "algorithms": {name: {"algorithm": name, "mu": 0.1}},
        "add_rows": {"toy": {"to": ["table1"], "rows": [{"id": "mine", "algorithm": name}]}},
    }
    if plugin is not None:
        overlay["plugins"] = {"algorithms": {name: f"{plugin}:Mine"}}
    overlay.update(extra)
    return overlay


def _load(overlay: dict, grid: dict = GRID) -> dict:
    config = copy.deepcopy(BASE)
    for key, value in overlay.items():  # as snakemake --configfile merges it
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "papers").mkdir()
        (Path(d) / "papers" / "toy.yaml").write_text(yaml.safe_dump(grid))
        grids = load_workflow(config, d)
    return {"grids": grids, "config": config}


def test_the_row_is_appended_marked_and_its_runs_record_the_plugins_file(tmp_path, registry):
    plugin = _plugin(tmp_path, "mine_a")
    got = _load(_overlay(plugin, "mine_a"))
    rows = got["grids"]["toy"].output("tables", "table1")["rows"]
    assert [r["id"] for r in rows] == ["fedavg", "fedprox", "mine"]  # after the published ones
    assert rows[-1]["added"] is True and not any(r.get("added") for r in rows[:-1])
    spec = resolve_run(got["config"], "smoke", "mnist", "iid", "linear", "mine_a", 0)
    import hashlib

    assert spec["algorithm"]["plugin"] == {
        "target": f"{plugin}:Mine",
        "file": str(plugin),
        "sha256": hashlib.sha256(plugin.read_bytes()).hexdigest(),
    }
    published = resolve_run(got["config"], "smoke", "mnist", "iid", "linear", "fedprox", 0)
    assert "plugin" not in published["algorithm"]  # built-ins' specs (and runs) unchanged


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        ({"add_rows": {"toi": {"rows": [{"id": "m", "algorithm": "fedavg"}]}}}, ["toi", "'toy'"]),
        (
            {"add_rows": {"toy": {"to": ["tabel1"], "rows": [{"id": "m", "algorithm": "fedavg"}]}}},
            ["add_rows.toy.to", "tabel1", "'table1'"],
        ),
        (
            {"add_rows": {"toy": {"too": "all", "rows": [{"id": "m", "algorithm": "fedavg"}]}}},
            ["add_rows.toy", "'too'", "'to'"],
        ),
        (
            {"add_rows": {"toy": {"rows": [{"id": "fedavg", "algorithm": "fedprox"}]}}},
            ["row id 'fedavg' is taken"],
        ),
        (
            {"add_rows": {"toy": {"rows": [{"id": "m", "algorithm": "fedprx"}]}}},
            ["fedprx", "'fedprox'"],
        ),
        ({"algorithms": {"mine": {"algorithm": "fedprox", "muu": 0.1}}}, ["muu", "'mu'"]),
        ({"plugins": {"algoritms": {}}}, ["plugins", "algoritms", "'algorithms'"]),
        (
            {"plugins": {"algorithms": {"x": "no/such/file.py:X"}}},
            ["plugins.algorithms.x", "no such file" if False else "no file"],
        ),
    ],
)
def test_a_bad_overlay_names_the_key_and_the_nearest_names(change, needles, registry):
    with pytest.raises(ConfigError) as err:
        _load(change)
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_a_plugin_taking_a_builtin_name_or_failing_to_import_is_named(tmp_path, registry):
    plugin = _plugin(tmp_path, "fedprox")
    with pytest.raises(PluginError, match=r"plugin 'fedprox' .* built-in 'fedprox'.*rename"):
        _load({"plugins": {"algorithms": {"fedprox": f"{plugin}:Mine"}}})
    broken = _plugin(tmp_path, "broken", "from dataclasses import dataclas\n")
    with pytest.raises(PluginError) as err:
        _load(_overlay(broken, "broken_x"))
    text = str(err.value)
    assert "plugin 'broken_x'" in text and str(broken) in text and "ImportError" in text
    assert "Traceback" in text and "Fix the plugin's file" in text


# -- end to end, through snakemake ------------------------------------------------------------
SCALE = "smoke"
TABLE = f"results/{SCALE}/papers/quick/table1"
RUNS = f"results/{SCALE}/runs"


def _snakemake(ws: Path, env: dict, args: str, watch: Path | None = None, ok: bool = True) -> str:
    """Run `snakemake --cores 2 ARGS` (or ARGS itself when it is a snakemake command line) at the
    smoke scale; with `watch`, also require that a warm worker's socket appeared there while it
    ran (the worker served the run's later jobs)."""
    command = args if args.startswith("snakemake ") else f"snakemake --cores 2 {args}"
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(
            f"{command} --config scale={SCALE}",
            shell=True,
            cwd=ws,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        seen = False
        while proc.poll() is None:
            seen = seen or (watch is not None and any(watch.glob("*.sock")))
            time.sleep(0.05)
        out.seek(0)
        log = out.read()
    assert (proc.returncode == 0) == ok, log[-4000:]
    assert watch is None or seen, "no warm worker served the run"
    return log


def _trained(log: str) -> int:
    return sum(int(m.group(1)) for m in re.finditer(r"^train\s+(\d+)\s*$", log, re.M))


def _doc_commands() -> list[str]:
    """The command lines of docs/extending.md's first bash block."""
    text = (ROOT / "docs" / "extending.md").read_text()
    block = text.split("<!-- extending-commands", 1)[1].split("```bash\n", 1)[1].split("```")[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def _csv_rows(ws: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((ws / f"{TABLE}.csv").read_text())))


def _metrics(ws: Path, algorithm: str) -> dict[str, bytes]:
    return {
        str(p.relative_to(ws)): p.read_bytes()
        for p in sorted((ws / RUNS).rglob("metrics.jsonl"))
        if f"/{algorithm}/" in str(p)
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A copy of the workflow with the quick grid only, its smoke runs made without overlay."""
    ws = tmp_path_factory.mktemp("overlay")
    copy_workflow(ws, {"quick": ROOT / "config" / "papers" / "quick.yaml"})
    warm = Path(tempfile.mkdtemp(prefix="fbo"))  # short: a socket path holds <= 100 bytes
    env = snakemake_env(warm)
    _snakemake(ws, env, "quick")
    before = {"csv": _csv_rows(ws), "md": (ws / f"{TABLE}.md").read_text()}
    yield ws, env, before
    shutil.rmtree(warm, ignore_errors=True)


def _published_rows_unchanged(ws: Path, before: dict, label: str) -> list[dict]:
    rows = _csv_rows(ws)
    old = before["csv"]
    assert rows[: len(old)] == old  # every published row's numbers, byte for byte
    added = rows[len(old) :]
    assert added and all(label == r["row_label"].removesuffix(" ‡") for r in added), added
    assert all(r["paper"] == "" and r["delta"] == "" for r in added)  # no paper value, no Δ
    md = (ws / f"{TABLE}.md").read_text()
    assert f"{label} ‡" in md and "not from the paper" in md
    assert f"{label} ‡" in (ws / f"{TABLE}.html").read_text()
    return added


@pytest.mark.workflow
def test_a_file_plugin_row_and_an_edit_reruns_only_its_runs(workspace, tmp_path_factory):
    """docs/extending.md's commands as written (the grid at the smoke scale), in a copy of the
    workflow, the user's folder outside it."""
    ws, env, before = workspace
    commands = _doc_commands()
    assert [c.split()[0] for c in commands] == ["fedbench", "python", "snakemake"]
    for command in commands[:2]:  # write the method, its tests pass as written
        done = subprocess.run(command, shell=True, cwd=ws, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    work = (ws / ".." / "my-work").resolve()
    overlay, method = work / "my_method.yaml", work / "my_method.py"
    published = {a: _metrics(ws, a) for a in ("fedavg", "fedprox", "scaffold")}
    log = _snakemake(ws, env, commands[2])
    runs = len(_metrics(ws, "my_method"))
    assert runs == 3 and _trained(log) == runs  # its runs only: the published ones stand
    _published_rows_unchanged(ws, before, "MyMethod (mu = 0.01)")
    first = _metrics(ws, "my_method")
    # Edit the method (its term off): its runs, and only they, rerun, and run the edited code:
    # FedProx at mu = 0 is FedAvg, so the row's numbers become FedAvg's.
    original = method.read_text()
    method.write_text(original.replace("self.mu / 2 * drift", "0.0 * drift"))
    log = _snakemake(ws, env, f"quick --configfile {overlay}")
    assert _trained(log) == runs
    assert {a: _metrics(ws, a) for a in published} == published
    off = [r for r in _csv_rows(ws) if r["row"] == "my_method"]
    fedavg = [r for r in _csv_rows(ws) if r["row"] == "fedavg"]
    assert [r["ours_mean"] for r in off] == [r["ours_mean"] for r in fedavg]
    # Back to the original with the warm worker on: its jobs run the file as it is now.
    method.write_text(original)
    warm_env = {**env, "FEDBENCH_WARM_WORKER": "1"}
    log = _snakemake(
        ws, warm_env, f"quick --configfile {overlay}", watch=Path(env["FEDBENCH_WARM_DIR"])
    )
    assert _trained(log) == runs
    assert _metrics(ws, "my_method") == first
    assert {a: _metrics(ws, a) for a in published} == published


PACKAGE_TOML = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "my-package"
version = "0.1"

[project.entry-points."fedbench.algorithms"]
mine_ep = "my_package.module:Mine"
"""


@pytest.mark.workflow
def test_an_installed_entry_point_row(workspace, tmp_path_factory):
    """docs/extending.md's package route: a package whose pyproject declares the entry point,
    installed with pip (into a temporary site: --target keeps the shared venv as it was, and
    --no-build-isolation --no-deps keeps pip offline), then an overlay without `plugins`."""
    ws, env, before = workspace
    work = tmp_path_factory.mktemp("pkg")
    package = work / "my-package"
    (package / "my_package").mkdir(parents=True)
    (package / "pyproject.toml").write_text(PACKAGE_TOML)
    (package / "my_package" / "__init__.py").write_text("")
    (package / "my_package" / "module.py").write_text(MINE.format(name="mine_ep"))
    site = work / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*pip, "--target", str(site), str(package)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (site / "my_package-0.1.dist-info" / "entry_points.txt").is_file()
    overlay = work / "ep.yaml"
    overlay.write_text(
        yaml.safe_dump(
            {
                "algorithms": {"mine-ep": {"algorithm": "mine_ep"}},
                "add_rows": {
                    "quick": {
                        "to": ["table1"],
                        "rows": [{"id": "ep", "label": "EP", "algorithm": "mine-ep"}],
                    }
                },
            }
        )
    )
    env = {**env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    log = _snakemake(ws, env, f"quick --configfile {overlay}")
    assert _trained(log) == 3
    added = _published_rows_unchanged(ws, before, "EP")
    # Mine at its default is FedAvg: the same numbers as the published FedAvg row.
    fedavg = [r for r in _csv_rows(ws) if r["row"] == "fedavg"]
    assert [r["ours_mean"] for r in added] == [r["ours_mean"] for r in fedavg]


def _tree(ws: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in (ws / "results").rglob("*")}


@pytest.mark.workflow
def test_a_bad_overlay_stops_before_any_job_and_writes_nothing(workspace, tmp_path):
    ws, env, _ = workspace
    before = _tree(ws)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "add_rows": {
                    "quick": {"to": ["tabel1"], "rows": [{"id": "x", "algorithm": "fedavg"}]}
                }
            }
        )
    )
    log = _snakemake(ws, env, f"quick --configfile {bad}", ok=False)
    assert "add_rows.quick.to: unknown output 'tabel1'; nearest: 'table1'" in log, log[-3000:]
    assert _tree(ws) == before


def test_to_all_adds_the_row_to_every_output_whose_rows_are_methods(registry):
    """A figure of curves takes the row; a partition figure (no methods) is skipped under `all`
    and refused by name; a table whose columns name the algorithm likewise."""
    grid = copy.deepcopy(GRID)
    table = grid["tables"]["table1"]
    grid["figures"] = {
        "figure1": {k: table[k] for k in ("metric", "protocol", "stat", "rows", "columns")},
        "figure2": {
            "kind": "partition",
            "rows": [{"id": "train", "label": "Train"}],
            "columns": [{"id": "dir", "dataset": "mnist", "partition": "dir"}],
        },
    }
    row = {"id": "mine", "algorithm": "fedprox"}
    got = _load({"add_rows": {"toy": {"to": "all", "rows": [row]}}}, grid)["grids"]["toy"]
    assert got.output("figures", "figure1")["rows"][-1]["added"] is True
    assert got.output("tables", "table1")["rows"][-1]["id"] == "mine"
    assert got.output("figures", "figure2") == grid["figures"]["figure2"]
    with pytest.raises(ConfigError, match="kinds \\['table', 'rounds'\\].*'partition'"):
        _load({"add_rows": {"toy": {"to": ["figure2"], "rows": [row]}}}, grid)
