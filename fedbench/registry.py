"""Explicit registries whose entries are imported on first lookup, and the plugins beside them.

A training job runs one algorithm on one model and one data source; importing every paper's
modules (and what they import: scipy for AAggFF and FedPAC) is start-up cost every job pays.
A registry names each entry as an explicit `"module:attribute"` string instead (no discovery by
naming convention), and imports it the first time it is looked up.

Entries from outside fedbench (a user's method) come two ways, each the ecosystem's convention:
an installed package's entry point in the registry's group (`[project.entry-points.
"fedbench.algorithms"] mine = "my_method:Mine"`), found the first time a name is not a built-in
one or the names are listed; or `add(name, target)`, where the target may also be a file,
`"path/to/file.py:Class"` (a user's config overlay names one). A plugin may not take a built-in's
name (the error names both), and a plugin that fails to import is an error naming it, where it
came from and the import's traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

V = TypeVar("V")


class PluginError(ImportError):
    """A plugin entry that cannot be registered or imported (the message names it and the fix)."""


def _split(name: str, target: str) -> tuple[str, str]:
    where, sep, attr = target.rpartition(":")
    if not (where and sep and attr):
        raise ValueError(
            f"registry entry {name!r}: {target!r} is not 'module:attribute' "
            "(or 'path/to/file.py:attribute')"
        )
    return where, attr


def plugin_file(target: str) -> Path | None:
    """The file of a `"path/to/file.py:attribute"` target (resolved), None for a module's."""
    where = target.rpartition(":")[0]
    return Path(where).resolve() if where.endswith(".py") else None


def load_target(target: str) -> Any:
    """The attribute a target names: `"module:attribute"`, or `"path/to/file.py:attribute"`
    (the file imported as a module of its own, named after its resolved path, once)."""
    where, attr = _split("?", target)
    path = plugin_file(target)
    if path is None:
        module = importlib.import_module(where)
    else:
        key = "fedbench_plugin_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        module = sys.modules.get(key)
        if module is None:
            if not path.is_file():
                raise FileNotFoundError(f"no file {path}")
            spec = importlib.util.spec_from_file_location(key, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[key] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[key]
                raise
    return getattr(module, attr)


class LazyRegistry(Mapping[str, V]):
    """A read-only `name -> value` mapping over `name -> "module:attribute"` targets.

    Names, `in`, `len` and iteration (in the targets' order, plugins after) import nothing;
    looking a name up imports its module once, and `build` (if given) turns the attribute into
    the value once (e.g. a class into its instance), so every lookup of a name returns the same
    object. `group`: the entry-point group whose installed plugins join the built-in entries.
    """

    def __init__(
        self,
        targets: dict[str, str],
        build: Callable[[Any], V] | None = None,
        group: str | None = None,
    ):
        for name, target in targets.items():
            _split(name, target)
        self._targets = dict(targets)
        self._build = build
        self._loaded: dict[str, V] = {}
        self._group = group
        self._plugins: dict[str, tuple[str, str]] | None = None  # name -> (target, origin)
        self._added: dict[str, tuple[str, str]] = {}

    # -- plugins -----------------------------------------------------------------------------
    def _plugin_targets(self) -> dict[str, tuple[str, str]]:
        """The installed plugins of the group and the added entries: name -> (target, origin)."""
        if self._plugins is None:
            found: dict[str, tuple[str, str]] = {}
            if self._group is not None:
                for ep in importlib.metadata.entry_points(group=self._group):
                    dist = getattr(ep, "dist", None)
                    origin = f"entry point {ep.name!r} of the installed package " + (
                        repr(dist.name) if dist is not None else "(unknown)"
                    )
                    self._refuse_clash(ep.name, ep.value, origin, found)
                    found[ep.name] = (ep.value, origin)
            self._plugins = found
        return {**self._plugins, **self._added}

    def _refuse_clash(
        self, name: str, target: str, origin: str, found: dict[str, tuple[str, str]]
    ) -> None:
        if name in self._targets:
            raise PluginError(
                f"plugin {name!r} ({target}, {origin}) takes the name of fedbench's built-in "
                f"{name!r} ({self._targets[name]}): rename the plugin"
            )
        if name in found and found[name][0] != target:
            raise PluginError(
                f"plugin {name!r} is registered twice: {found[name][0]} ({found[name][1]}) and "
                f"{target} ({origin}): rename one"
            )

    def add(self, name: str, target: str, origin: str = "added") -> None:
        """Register a plugin entry (`"module:attribute"` or `"path/to/file.py:attribute"`);
        `origin` says where it was named (a config overlay's file, for the error messages)."""
        _split(name, target)
        self._refuse_clash(name, target, origin, self._plugin_targets())
        self._added[name] = (target, origin)
        self._loaded.pop(name, None)

    def plugin_files(self) -> list[Path]:
        """The files of the file-path plugins added so far (what a warm worker must watch)."""
        return [p for t, _ in self._added.values() if (p := plugin_file(t)) is not None]

    # -- the mapping -------------------------------------------------------------------------
    def __getitem__(self, name: str) -> V:
        if name not in self._loaded:
            if name in self._targets:
                value = load_target(self._targets[name])
            else:
                target, origin = self._plugin_targets()[name]  # KeyError for unknown names
                try:
                    value = load_target(target)
                except Exception as err:
                    raise PluginError(
                        f"plugin {name!r} ({target}, {origin}) failed to import: "
                        f"{type(err).__name__}: {err}\n{traceback.format_exc()}"
                        "Fix the plugin's file, or remove it from where it is named."
                    ) from err
            self._loaded[name] = value if self._build is None else self._build(value)
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._targets or name in self._plugin_targets()

    def __iter__(self) -> Iterator[str]:
        yield from self._targets
        yield from self._plugin_targets()

    def __len__(self) -> int:
        return len(self._targets) + len(self._plugin_targets())

    def target(self, name: str) -> str:
        """The `"module:attribute"` (or file) an entry is imported from (nothing is imported)."""
        if name in self._targets:
            return self._targets[name]
        return self._plugin_targets()[name][0]

    def builtin_values(self) -> Iterator[V]:
        """The built-in entries' values (imported on the way), no plugin's: what a warm worker
        preloads, so a plugin's file is read by each job as it is then."""
        return (self[name] for name in self._targets)

    def is_plugin(self, name: str) -> bool:
        """Whether `name` comes from outside fedbench (an entry point or an added entry)."""
        return name not in self._targets and name in self._plugin_targets()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._targets!r})"
