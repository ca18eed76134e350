"""`python -m fedbench.data status` on a config folder and raw folder the test writes, with
sources of every kind (generated, present, fetchable, by hand); and its dataset walk against the
grid's own runs on the project's config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import fedbench.data
from fedbench.data import __main__ as cli
from fedbench.data import status
from fedbench.data.base import MANIFEST, RemoteFile, Source

ROOT = Path(__file__).resolve().parents[2]


class Fake(Source):
    """A source with the given files (nothing is fetched or loaded here)."""

    input_shape = (1,)
    num_classes = 2

    def __init__(self, name: str, files: list[RemoteFile]) -> None:
        self.name, self.files = name, files

    def load(self, raw_dir, **params):
        raise NotImplementedError

    def standin(self, rng, *, n_train=2000, n_test=500, **params):
        raise NotImplementedError


SOURCES = {
    "gen": Fake("gen", []),
    "here": Fake("here", [RemoteFile("a.bin", ("https://example.org/a.bin",))]),
    "web": Fake("web", [RemoteFile("w.zip", ("https://data.example.org/w.zip",))]),
    "hand": Fake(
        "hand",
        [RemoteFile("x.csv", ("https://example.org/x.csv",)), RemoteFile("terms.zip", ())],
    ),
}


@pytest.fixture
def setup(tmp_path):
    """(config folder, raw root) with two grids, a catalog file, and one fetched source."""
    config = tmp_path / "config"
    (config / "papers").mkdir(parents=True)
    (config / "catalog").mkdir()
    scales = {"paper": {"data": "real"}, "smoke": {"data": "standin"}}
    datasets = {f"{s}-set": {"source": s} for s in ("gen", "here", "web")}
    (config / "config.yaml").write_text(yaml.safe_dump({"scales": scales, "datasets": datasets}))
    (config / "catalog" / "p.yaml").write_text(
        yaml.safe_dump({"datasets": {"hand-set": {"source": "hand"}, "odd": {"source": "nope"}}})
    )
    grid_a = {  # `dataset` in defaults, rows, candidates and a cell
        "paper": "a",
        "defaults": {"dataset": "gen-set"},
        "tables": {
            "table1": {
                "rows": {"r": {"dataset": ["here-set", "web-set"], "model": "m"}},
                "cells": [{"dataset": "hand-set"}],
            }
        },
    }
    grid_b = {"paper": "b", "default_scale": "smoke", "figures": {"figure1": {"dataset": "odd"}}}
    (config / "papers" / "a.yaml").write_text(yaml.safe_dump(grid_a))
    (config / "papers" / "b.yaml").write_text(yaml.safe_dump(grid_b))
    raw = tmp_path / "raw"
    (raw / "here").mkdir(parents=True)
    (raw / "here" / "a.bin").write_bytes(b"12345")
    (raw / "here" / MANIFEST).write_text(json.dumps({"a.bin": {"bytes": 5, "sha256": "x"}}))
    return config, raw


def test_each_state_with_how(setup):
    config, raw = setup
    rows = {r.dataset: r for r in status.rows(config, raw, sources=SOURCES)}
    assert sorted(rows) == ["gen-set", "hand-set", "here-set", "odd", "web-set"]
    assert rows["gen-set"].state == status.GENERATED and rows["gen-set"].grids == ("a",)
    assert rows["here-set"].state == status.PRESENT and str(raw / "here") in rows["here-set"].how
    assert rows["web-set"].state == status.FETCHABLE
    assert rows["web-set"].how == "urllib from data.example.org"
    assert rows["hand-set"].state == status.MANUAL
    assert rows["hand-set"].how == (
        f"{raw / 'hand' / 'x.csv'} <- https://example.org/x.csv; "
        f"{raw / 'hand' / 'terms.zip'} <- no public URL: see the docstring"
    )
    odd = rows["odd"]
    assert (odd.scale, odd.state, odd.how) == ("smoke", status.UNKNOWN, "source 'nope' unknown")
    assert {r.scale for r in rows.values() if r.dataset != "odd"} == {"paper"}


def test_files_from_one_place_name_it_once(tmp_path):
    """Clothing1M's 18 files come from one request to its authors: one line, not 18."""
    where = "https://example.org/request (on request: email the authors)"
    files = [(tmp_path / "c1m" / n, where) for n in ("a.txt", "b.txt", "images/0")]
    files.append((tmp_path / "c1m" / "x.csv", "https://example.org/x.csv"))
    assert status.manual_places(files) == (
        f"{tmp_path / 'c1m'}/{{a.txt, b.txt, images/0}} <- {where}; "
        f"{tmp_path / 'c1m' / 'x.csv'} <- https://example.org/x.csv"
    )


def test_a_changed_size_is_no_longer_present(setup):
    config, raw = setup
    (raw / "here" / "a.bin").write_bytes(b"123456")
    row = next(r for r in status.rows(config, raw, sources=SOURCES) if r.dataset == "here-set")
    assert row.state == status.FETCHABLE


def test_one_scale_for_every_grid(setup):
    config, raw = setup
    rows = status.rows(config, raw, scale="smoke", sources=SOURCES)
    known = [r for r in rows if r.state != status.UNKNOWN]
    assert {r.scale for r in rows} == {"smoke"}
    assert {r.state for r in known} == {status.STANDIN} and len(known) == 4
    with pytest.raises(ValueError, match="unknown scale 'smok'; valid: paper, smoke"):
        status.rows(config, raw, scale="smok", sources=SOURCES)


def test_markdown_and_text_tables(setup):
    config, raw = setup
    rows = status.rows(config, raw, sources=SOURCES)
    md = status.markdown(rows).splitlines()
    assert md[0] == "| scale | dataset | source | state | how | grids |"
    assert md[1] == "| --- | --- | --- | --- | --- | --- |" and len(md) == 2 + len(rows)
    assert "| paper | web-set | web | fetchable | urllib from data.example.org | a |" in md
    txt = status.text(rows).splitlines()
    assert txt[0].split() == ["scale", "dataset", "source", "state", "how"]
    assert txt[-1] == (
        "1 generated: nothing to fetch, 1 needs a manual step, 1 present and verified, "
        "1 fetchable, 1 unknown source"
    )


def test_command_line(setup, capsys, monkeypatch):
    config, raw = setup
    monkeypatch.setattr(fedbench.data, "SOURCES", SOURCES)
    argv = ["status", "--config", str(config), "--raw", str(raw), "--scale", "smoke"]
    assert cli.main([*argv, "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| scale | dataset |")
    assert "| smoke | gen-set | gen | stand-in only at this scale |" in out
    assert cli.main([*argv[:-1], "paper-scale"]) == 2
    assert "unknown scale 'paper-scale'" in capsys.readouterr().err
    assert cli.main(["status", "--config", str(config / "missing")]) == 2
    capsys.readouterr()
    assert cli.main(["status", "--config", str(config), "--raw", str(raw), "--by-source"]) == 0
    assert "paper  hand-set  hand    needs a manual step" in capsys.readouterr().out


def test_by_source_joins_datasets_and_grids():
    rows = [
        status.Row("paper", "d1", "s", ("a",), status.FETCHABLE, "how"),
        status.Row("paper", "d2", "s", ("b", "a"), status.FETCHABLE, "how"),
        status.Row("paper", "d3", "r", ("c",), status.MANUAL, "place"),
    ]
    assert status.by_source(rows) == [
        status.Row("paper", "d3", "r", ("c",), status.MANUAL, "place"),
        status.Row("paper", "d1, d2", "s", ("a", "b"), status.FETCHABLE, "how"),
    ]


def test_project_grids_name_every_dataset_their_runs_use():
    from fedbench.config import load_catalog
    from fedbench.grid import all_runs, load_grid, resolve_scale

    catalog = load_catalog(ROOT / "config" / "config.yaml")  # with config/catalog/*.yaml
    walked = status.grid_datasets(ROOT / "config")
    for path in sorted((ROOT / "config" / "papers").glob("*.yaml")):
        grid = load_grid(path, catalog)
        default, names = walked[path.stem]
        assert default == resolve_scale(grid, None)
        runs = all_runs(grid, catalog, default, choices="first")  # chosen rows: any value
        assert {r.dataset for r in runs} <= set(names), path.name
    rows = status.rows(ROOT / "config", ROOT / "no-such-raw", scale="smoke")
    assert {r.state for r in rows} == {status.STANDIN}
    assert len({r.dataset for r in rows}) == len(rows) > 10
