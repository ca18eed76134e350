"""The spec of a curve figure (kind "rounds" or "lambda"), which both drawers read
(`fedbench.report.figures`, `fedbench.report.lambda_curves`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fedbench.metrics import PACK_STATS
from fedbench.report.layout import LayoutError, cell_quantities, check_layout
from fedbench.report.smooth import Savgol

FIGURE_KINDS = ("rounds", "lambda")
# "columns": one panel per column, one line per row; "cells" (λ figures): one panel per
# (row, column), a block of panels per row (thesis Figs. 2.3 and 2.5 draw each scheme apart).
PANEL_LAYOUTS = ("columns", "cells")


@dataclass(frozen=True)
class FigureSpec:
    """One paper figure: the quantity over rounds (kind "rounds") or over λ at the final round
    (kind "lambda"; protocols lambda0.0 … lambda1.0, `protocol` unused), and which runs feed
    which panel and line."""

    paper: str
    name: str
    caption: str
    metric: str
    protocol: str
    stat: str
    percent: bool
    rows: list[dict]
    columns: list[dict]
    cells: dict[tuple[str, str], list[Path]]
    scale: str
    kind: str = "rounds"
    panels: str = "columns"
    smooth: Savgol | None = None  # each run's curve filtered before the mean over seeds

    def __post_init__(self) -> None:
        """Reject an unknown kind, stat, scale, a cell outside the rows × columns, or a row/column
        overriding the metric or stat (the panels share one y axis; only protocol may vary, and
        not even that in a λ figure, whose protocols are the λ grid)."""
        where = f"{self.paper}/{self.name}"
        if self.kind not in FIGURE_KINDS:
            raise LayoutError(f"{where}: unknown kind {self.kind!r}; valid: {list(FIGURE_KINDS)}")
        if self.panels not in PANEL_LAYOUTS:
            raise LayoutError(f"{where}: unknown panels {self.panels!r}; valid: {PANEL_LAYOUTS}")
        if self.panels == "cells" and self.kind != "lambda":
            raise LayoutError(f"{where}: panels 'cells' is for λ figures only")
        if self.smooth is not None and self.kind != "rounds":
            raise LayoutError(f"{where}: smooth is for figures of kind 'rounds' only")
        check_layout(self)
        for cell, q in cell_quantities(self).items():
            if (q.metric, q.stat) != (self.metric, self.stat):
                raise LayoutError(
                    f"{where}: cell {cell} reads {q.metric}/{q.stat}, but a "
                    f"figure's rows and columns may override only the protocol "
                    f"(the figure plots {self.metric}/{self.stat})"
                )
            if self.kind == "lambda" and q.protocol != self.protocol:
                raise LayoutError(
                    f"{where}: cell {cell} overrides the protocol ({q.protocol!r}), but a λ "
                    f"figure reads the protocols lambda0.0 … lambda1.0 of every run"
                )
        if self.kind == "lambda" and self.stat not in PACK_STATS:
            raise LayoutError(f"{where}: a λ figure needs a per-client stat {list(PACK_STATS)}")
