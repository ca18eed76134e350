"""What every output kind provides (`OutputKind`), and the grid-key check they share."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from fedbench.cells import Grid, RunKey, rect_cells
from fedbench.config import ConfigError
from fedbench.outputs.registry import owners

# The files the table and figure rules write for every output of a section.
EXTENSIONS = {"tables": ("md", "tex", "csv", "json", "html"), "figures": ("png", "pdf")}


class OutputKind:
    """One kind of table or figure. Subclasses set the class attributes and define `check`,
    `spec` and `render`; `runs` defaults to one run per seed of every row x column cell."""

    name: ClassVar[str]  # the grid's `kind:` value
    section: ClassVar[str]  # "tables" or "figures"
    keys: ClassVar[tuple[str, ...]]  # the grid keys an entry of this kind takes
    about: ClassVar[str]  # "a table", "a landscape (...)": what the unknown-key error says

    def validate(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """Raise ConfigError naming the entry and key of anything wrong with `out`."""
        unknown = sorted(set(out) - set(self.keys))
        if unknown:
            raise ConfigError(
                f"{where}: key(s) {unknown} do not apply to {self.about}; "
                f"valid: {list(self.keys)}{_taken_elsewhere(where, unknown)}"
            )
        self.check(where, out, catalog)

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """The kind's own checks of an entry whose keys are all known."""
        raise NotImplementedError

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        """(row id, column id) -> the runs (one per seed) the output reads. `choices`: how a
        table's rows that run a selection's choice name theirs (`fedbench.outputs.chosen`)."""
        return rect_cells(grid, self.section, name, catalog, scale)

    def inputs(self, grid: Grid, name: str, catalog: dict, scale: str) -> list[str]:
        """Files beyond the runs' metrics.jsonl and run.yaml that rendering reads."""
        return []

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> Any:
        """Everything rendering needs (paths, labels, settings): the report never reads grids."""
        raise NotImplementedError

    def render(self, spec: Any, out_prefix: Path) -> list[Path]:
        """Write `out_prefix`.{ext} for each of the section's extensions; return the paths."""
        raise NotImplementedError


class GridView:
    """A grid whose entry (`section`, `name`) has other rows (template rows expanded, chosen
    rows resolved): what `rect_cells` and the kinds' `spec` read in its place."""

    def __init__(self, grid: Grid, section: str, name: str, rows: list[dict]):
        self._grid, self._section, self._name, self._rows = grid, section, name, rows

    def output(self, section: str, name: str) -> dict[str, Any]:
        out = self._grid.output(section, name)
        return (
            {**out, "rows": self._rows} if (section, name) == (self._section, self._name) else out
        )

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._grid, attr)


def check_axes(where: str, out: dict[str, Any]) -> None:
    """`rows` and `columns`: non-empty lists of mappings, each with a unique `id`."""
    for axis in ("rows", "columns"):
        entries = out.get(axis)
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"{where}: missing key {axis!r} (a non-empty list of mappings)")
        ids = [e.get("id") if isinstance(e, dict) else None for e in entries]
        if None in ids or len(set(ids)) != len(ids):
            raise ConfigError(f"{where}.{axis}: every entry needs a unique 'id'")


def _taken_elsewhere(where: str, keys: list[str]) -> str:
    """'; figure1.spread: only tables take it' for each key another kind takes."""
    notes = []
    for key in keys:
        kinds = owners(key)
        if not kinds:
            continue
        figures = [f"'{k.name}'" for k in kinds if k.section == "figures"]
        who = ["tables"] if any(k.section == "tables" for k in kinds) else []
        who += [f"figures of kind {_either(figures)}"] if figures else []
        notes.append(f"; {where}.{key}: only {' and '.join(who)} take it")
    return "".join(notes)


def _either(names: list[str]) -> str:
    """'a', 'a or b', 'a, b or c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
