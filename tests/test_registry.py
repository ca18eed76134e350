"""fedbench.registry: lazy built-in entries, and plugins beside them (an installed package's entry
point, or a file named by a target), each refused or reported with its name and origin."""

from __future__ import annotations

import sys

import pytest

from fedbench.algorithms import ALGORITHMS
from fedbench.registry import LazyRegistry, PluginError

MINE = """
from dataclasses import dataclass
from typing import ClassVar

from fedbench.algorithms.base import Algorithm


@dataclass(frozen=True)
class Mine(Algorithm):
    name: ClassVar[str] = "mine"
    mu: float = 0.0
"""
BUILTIN = {"fedavg": "fedbench.algorithms.base:Algorithm"}


def _site(tmp_path, name: str, target: str, package: str = "my-method"):
    """A folder on sys.path holding an installed package's metadata with one entry point in
    group fedbench.algorithms, and the module it names (what `pip install` would leave)."""
    site = tmp_path / "site"
    (site / "my_method").mkdir(parents=True)
    (site / "my_method" / "__init__.py").write_text(MINE)
    info = site / f"{package.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[fedbench.algorithms]\n{name} = {target}\n")
    return site


@pytest.fixture
def on_path(monkeypatch):
    def add(path):
        monkeypatch.syspath_prepend(str(path))
        monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))

    yield add
    sys.modules.pop("my_method", None)


def test_builtin_entries_import_on_lookup_only():
    reg = LazyRegistry({"fedavg": "fedbench.algorithms.base:Algorithm", "x": "no_such_module:X"})
    assert "x" in reg and list(reg) == ["fedavg", "x"] and len(reg) == 2
    assert reg["fedavg"] is ALGORITHMS["fedavg"]
    with pytest.raises(ModuleNotFoundError):
        reg["x"]


def test_an_installed_entry_point_joins_the_registry(tmp_path, on_path):
    on_path(_site(tmp_path, "mine", "my_method:Mine"))
    reg = LazyRegistry(BUILTIN, group="fedbench.algorithms")
    assert [v.__name__ for v in reg.builtin_values()] == ["Algorithm"]
    assert "my_method" not in sys.modules  # a warm worker's preload leaves plugins to each job
    assert "mine" in reg and list(reg) == ["fedavg", "mine"]
    assert reg["mine"].name == "mine" and reg.is_plugin("mine") and not reg.is_plugin("fedavg")
    assert reg.target("mine") == "my_method:Mine"


def test_an_entry_point_may_not_take_a_builtin_name(tmp_path, on_path):
    on_path(_site(tmp_path, "fedavg", "my_method:Mine"))
    reg = LazyRegistry(BUILTIN, group="fedbench.algorithms")
    with pytest.raises(PluginError) as err:
        list(reg)
    message = str(err.value)
    assert "my_method:Mine" in message and "fedbench.algorithms.base:Algorithm" in message
    assert "'my-method'" in message and "rename the plugin" in message


def test_a_file_target_is_imported_from_the_file(tmp_path):
    path = tmp_path / "work" / "mine.py"
    path.parent.mkdir()
    path.write_text(MINE)
    reg = LazyRegistry(BUILTIN)
    reg.add("mine", f"{path}:Mine", origin="overlay mine.yaml")
    assert reg["mine"].__name__ == "Mine" and reg.plugin_files() == [path.resolve()]
    with pytest.raises(PluginError, match=r"plugin 'fedavg' \(.*overlay x.yaml\) takes the name"):
        reg.add("fedavg", f"{path}:Mine", origin="overlay x.yaml")


def test_a_plugin_that_fails_to_import_is_named_with_its_traceback(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("x = 1\ny = x / 0\n")
    reg = LazyRegistry(BUILTIN)
    reg.add("broken", f"{path}:Broken", origin="overlay mine.yaml")
    with pytest.raises(PluginError) as err:
        reg["broken"]
    message = str(err.value)
    assert "plugin 'broken'" in message and str(path) in message and "overlay mine.yaml" in message
    assert "ZeroDivisionError" in message and "y = x / 0" in message  # the traceback's line
    missing = LazyRegistry(BUILTIN)
    missing.add("gone", f"{tmp_path / 'gone.py'}:Gone")
    with pytest.raises(PluginError, match="FileNotFoundError: no file"):
        missing["gone"]


def test_the_project_registries_read_their_groups():
    from fedbench.data import SOURCES
    from fedbench.models import MODELS

    assert [r._group for r in (ALGORITHMS, MODELS, SOURCES)] == [
        "fedbench.algorithms",
        "fedbench.models",
        "fedbench.datasets",
    ]
