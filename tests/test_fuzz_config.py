"""Fuzzed configuration (issue 42): mutations of the real catalog (config/config.yaml) and of a
real grid (config/papers/quick.yaml): a key dropped, renamed or misspelt, a value retyped,
nested or misspelt. Loading each either succeeds or raises fedbench's ConfigError naming a key
or name on the mutated path; never another exception."""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbench.config import ConfigError
from fedbench.grid import load_workflow

ROOT = Path(__file__).resolve().parents[1]
CATALOG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
GRID = yaml.safe_load((ROOT / "config" / "papers" / "quick.yaml").read_text())
EXAMPLES = 150
RESULTS: dict[str, int] = {}


def _paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    out = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree[:3]):
            out.append((*prefix, i))
            out += _paths(v, (*prefix, i))
    return out


def _misspell(text: str) -> str:
    return text[:-1] if len(text) > 2 else text + "x"


RETYPES = [None, 0, -1, 2.5, "x", True, [], {}, [1, "a"], {"k": 1}]


@st.composite
def mutations(draw):
    which = draw(st.sampled_from(["catalog", "grid"]))
    tree = copy.deepcopy(CATALOG if which == "catalog" else GRID)
    paths = _paths(tree)
    path = draw(st.sampled_from(paths))
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    op = draw(st.sampled_from(["drop", "rename", "retype", "nest", "misspell"]))
    if op == "drop" and isinstance(parent, dict):
        del parent[key]
    elif op == "rename" and isinstance(parent, dict):
        parent[_misspell(str(key))] = parent.pop(key)
    elif op == "retype":
        parent[key] = draw(st.sampled_from(RETYPES))
    elif op == "nest":
        parent[key] = draw(st.sampled_from([{"x": parent[key]}, [parent[key]]]))
    elif isinstance(parent[key], str):
        parent[key] = _misspell(parent[key])
    else:
        parent[key] = draw(st.sampled_from(RETYPES))
        op = "retype"
    return which, path, op, tree


@pytest.fixture(scope="module")
def folder():
    d = Path(tempfile.mkdtemp())
    (d / "papers").mkdir()
    shutil.copytree(ROOT / "config" / "catalog", d / "catalog")
    yield d
    shutil.rmtree(d, ignore_errors=True)
    print(f"\nfuzzed configs: {sum(RESULTS.values())} cases, {RESULTS}")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutations())
def test_a_mutated_catalog_or_grid_loads_or_names_the_key(folder, case):
    which, path, op, tree = case
    catalog = tree if which == "catalog" else copy.deepcopy(CATALOG)
    grid = tree if which == "grid" else GRID
    (folder / "papers" / "quick.yaml").write_text(yaml.safe_dump(grid))
    try:
        load_workflow(catalog, folder)
    except ConfigError as err:
        names = [str(p) for p in path if not isinstance(p, int)]
        text = str(err)
        assert any(n in text or _misspell(n) in text for n in names), (which, path, op, text)
        RESULTS["refused"] = RESULTS.get("refused", 0) + 1
        return
    RESULTS["loaded"] = RESULTS.get("loaded", 0) + 1
