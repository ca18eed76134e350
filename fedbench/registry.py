"""Explicit registries whose entries are imported on first lookup.

A training job runs one algorithm on one model and one data source; importing every paper's
modules (and what they import: scipy for AAggFF and FedPAC) is start-up cost every job pays.
A registry names each entry as an explicit `"module:attribute"` string instead (no discovery by
naming convention), and imports it the first time it is looked up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

V = TypeVar("V")


class LazyRegistry(Mapping[str, V]):
    """A read-only `name -> value` mapping over `name -> "module:attribute"` targets.

    Names, `in`, `len` and iteration (in the targets' order) import nothing; looking a name up
    imports its module once, and `build` (if given) turns the attribute into the value once
    (e.g. a class into its instance), so every lookup of a name returns the same object.
    """

    def __init__(self, targets: dict[str, str], build: Callable[[Any], V] | None = None):
        for name, target in targets.items():
            module, sep, attr = target.partition(":")
            if not (module and sep and attr):
                raise ValueError(f"registry entry {name!r}: {target!r} is not 'module:attribute'")
        self._targets = dict(targets)
        self._build = build
        self._loaded: dict[str, V] = {}

    def __getitem__(self, name: str) -> V:
        if name not in self._loaded:
            module, _, attr = self._targets[name].partition(":")  # KeyError for unknown names
            value = getattr(importlib.import_module(module), attr)
            self._loaded[name] = value if self._build is None else self._build(value)
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def target(self, name: str) -> str:
        """The `"module:attribute"` an entry is imported from (nothing is imported)."""
        return self._targets[name]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._targets!r})"
