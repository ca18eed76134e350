"""Histograms of the clients' final values (kind `client_histogram`, DQN-Fed's Figure 2): rows x
columns of cells like a curve figure (one histogram per row, one panel per column), a per-client
metric and protocol (a row may set its own protocol: Ditto's personal models), `bins` equal bins,
`binning` numpy (the default) or right_closed (the q-FFL release's, DQN-Fed's Figure 2).
Drawn by `fedbench.report.client_histogram`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedbench.cells import Grid, axis_entry, column_labels, run_folders, spec_header
from fedbench.config import ConfigError
from fedbench.outputs.matrix import MatrixKind
from fedbench.report.client_histogram import (
    BINNINGS,
    MAX_BINS,
    NOT_PER_CLIENT,
    HistogramSpec,
    write_client_histogram,
)

DEFAULT_BINS = 20


class ClientHistogramKind(MatrixKind):
    name = "client_histogram"
    section = "figures"
    keys = (
        "caption",
        "kind",
        "metric",
        "protocol",
        "percent",
        "rows",
        "columns",
        "seeds",
        "bins",
        "binning",
    )
    about = "a figure of kind 'client_histogram' (the clients' final values, binned)"

    def required(self, out: dict[str, Any]) -> tuple[str, ...]:
        return ("metric", "protocol", "rows", "columns")

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        bins = out.get("bins", DEFAULT_BINS)
        if isinstance(bins, bool) or not (isinstance(bins, int) and 1 <= bins <= MAX_BINS):
            raise ConfigError(f"{where}.bins: expected an integer in 1..{MAX_BINS}, got {bins!r}")
        binning = out.get("binning", "numpy")
        if binning not in BINNINGS:
            raise ConfigError(f"{where}.binning: expected one of {list(BINNINGS)}, got {binning!r}")
        for entry in (out, *out.get("rows", []), *out.get("columns", [])):
            place = where if entry is out else f"{where} entry {entry.get('id')!r}"
            if entry is not out and "metric" in entry:
                raise ConfigError(
                    f"{place}.metric: the panels share one x axis; set metric on the figure only"
                )
            if "stat" in entry:
                raise ConfigError(
                    f"{place}.stat: a histogram bins every client's value; it takes no stat"
                )
            if entry.get("protocol") in NOT_PER_CLIENT:
                raise ConfigError(
                    f"{place}.protocol: {entry['protocol']!r} has no per-client values; "
                    "use a per-client protocol (global, personal, ...)"
                )

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> HistogramSpec:
        out = grid.output(self.section, name)
        return HistogramSpec(
            **spec_header(grid, self.section, name, scale),
            metric=str(out["metric"]),
            protocol=str(out["protocol"]),
            percent=bool(out.get("percent", False)),
            rows=[axis_entry(r) for r in out["rows"]],
            columns=column_labels(grid, self.section, name, catalog, scale),
            cells=run_folders(self.runs(grid, name, catalog, scale), scale),
            bins=int(out.get("bins", DEFAULT_BINS)),
            binning=str(out.get("binning", "numpy")),
        )

    def render(self, spec: HistogramSpec, out_prefix: Path) -> list[Path]:
        return write_client_histogram(spec, out_prefix)
