"""Loss-landscape figures: one panel per cell, the run's objective on the global test set over a
plane around its final global model. Each panel's .npz is a job of its own (the `landscape` rule,
`fedbench.engine.landscape`); the figure (drawn below) reads
those files."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colors as mcolors
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedbench.cells import Grid, RunKey, column_labels, spec_header
from fedbench.config import ConfigError
from fedbench.landscape_file import LandscapeError, LandscapeSettings, load_landscape
from fedbench.outputs.matrix import MatrixKind
from fedbench.report.figures import save_figure
from fedbench.report.layout import warning_lines


class LandscapeKind(MatrixKind):
    name = "landscape"
    section = "figures"
    # Always the run's objective (its mean loss) on the global test set, one run a cell.
    keys = ("caption", "kind", "rows", "columns", "seeds", "landscape")
    about = "a landscape (always the mean cross-entropy on the global test set)"

    def required(self, out: dict[str, Any]) -> tuple[str, ...]:
        return ("rows", "columns")

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """One seed, and settings valid at every scale."""
        if not isinstance(out.get("seeds"), list) or len(out["seeds"]) != 1:
            raise ConfigError(f"{where}.seeds: a landscape is of one run per cell: give one seed")
        if not isinstance(out.get("landscape", {}), dict):
            raise ConfigError(f"{where}.landscape: expected a mapping, got {out['landscape']!r}")
        scales = (out.get("landscape") or {}).get("scales") or {}
        bad = sorted(set(scales) - set(catalog["scales"])) if isinstance(scales, dict) else []
        if bad:
            raise ConfigError(
                f"{where}.landscape.scales: unknown scale(s) {bad}; "
                f"valid: {sorted(catalog['scales'])}"
            )
        for scale in catalog["scales"]:
            try:
                LandscapeSettings.for_scale(out.get("landscape"), scale)
            except (LandscapeError, TypeError) as err:
                raise ConfigError(f"{where}.landscape (scale {scale}): {err}") from None

    def inputs(self, grid: Grid, name: str, catalog: dict, scale: str) -> list[str]:
        """Each panel's landscape file."""
        return [
            landscape_file(scale, grid.name, name, k)
            for _, k in landscape_panels(grid, name, catalog, scale)
        ]

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> LandscapeFigureSpec:
        return LandscapeFigureSpec(
            **spec_header(grid, self.section, name, scale),
            panels=[
                (label, Path(landscape_file(scale, grid.name, name, key)))
                for label, key in landscape_panels(grid, name, catalog, scale)
            ],
            settings=settings(grid, name, scale),
        )

    def render(self, spec: LandscapeFigureSpec, out_prefix: Path) -> list[Path]:
        return write_landscape_figure(spec, out_prefix)


def settings(grid: Grid, name: str, scale: str) -> LandscapeSettings:
    """The landscape settings of one figure at one scale."""
    return LandscapeSettings.for_scale(grid.output("figures", name).get("landscape"), scale)


def landscape_file(scale: str, paper: str, figure: str, key: RunKey, root: str = "results") -> str:
    """results/{scale}/landscapes/{paper}/{figure}/{dataset}/{partition}/{model}/{algorithm}/
    seed{seed}.npz: a run's landscape, under the figure whose settings computed it."""
    return (
        f"{root}/{scale}/landscapes/{paper}/{figure}/{key.dataset}/{key.partition}/{key.model}/"
        f"{key.algorithm}/seed{key.seed}.npz"
    )


def landscape_panels(grid: Grid, name: str, catalog: dict, scale: str) -> list[tuple[str, RunKey]]:
    """(panel label, run) per cell of a landscape figure, column by column, rows in order."""
    out = grid.output("figures", name)
    runs = LandscapeKind().runs(grid, name, catalog, scale)
    cols = column_labels(grid, "figures", name, catalog, scale)
    panels = []
    for col in cols:
        for row in out["rows"]:
            label = str(row.get("label", row["id"]))
            if len(cols) > 1:
                label += f", {col['label']}"
            panels.append((label, runs[(row["id"], col["id"])][0]))
    return panels


# ---------------------------------------------------------------------------------------------
# Drawing (was fedbench/report/landscape.py).
# Loss landscapes of a final global model (SuPerFed Figure 2.4, "following [62]").
#
# The landscape is computed by `fedbench/engine/landscape.py`; this module reads its files and
# draws them.


# How a landscape file's `objective` (the run's training objective) reads in the figure; files
# written before it was recorded are cross-entropy.
LOSS_NAMES = {"cross_entropy": "mean cross-entropy", "bce_logit": "mean BCE on one logit"}


@dataclass(frozen=True)
class LandscapeFigureSpec:
    """A kind='landscape' figure: one panel (surface over contour) per (label, landscape file)."""

    paper: str
    name: str
    caption: str
    scale: str
    panels: list[tuple[str, Path]]
    settings: LandscapeSettings

    def __post_init__(self) -> None:
        """Reject a figure without panels."""
        if not self.panels:
            raise LandscapeError(f"{self.paper}/{self.name}: a landscape figure needs panels")


def _shown(loss: np.ndarray, clip: float | None) -> np.ndarray:
    """The loss as drawn: non-finite values masked, values above `clip` drawn at `clip`."""
    z = np.ma.masked_invalid(loss)
    return z if clip is None else np.ma.minimum(z, clip)


def _test_set(d: dict[str, Any]) -> str:
    """How much of the global test set a landscape used."""
    n, total = d.get("n_test"), d.get("n_test_total", d.get("n_test"))
    if n == total:
        return f"the global test set (n = {n})"
    return f"a seeded random {n} of the {total} global test samples"


def make_landscape_figure(spec: LandscapeFigureSpec) -> Figure:
    """The matplotlib figure (not saved): 3-D surface above, contours below, shared colour scale."""
    data = [(label, load_landscape(path)) for label, path in spec.panels]
    shown = [_shown(d["loss"], spec.settings.clip) for _, d in data]
    finite = [z.compressed() for z in shown if z.count()]
    lo = min((float(v.min()) for v in finite), default=0.0)
    hi = max((float(v.max()) for v in finite), default=1.0)
    hi = hi if hi > lo else lo + 1.0
    levels = MaxNLocator(spec.settings.levels).tick_values(lo, hi)  # round numbers around lo, hi
    lo, hi = float(levels[0]), float(levels[-1])
    norm = mcolors.Normalize(vmin=lo, vmax=hi)
    n = len(data)
    width = max(6.0, 4.0 * n + 1.0)
    fig = Figure(figsize=(width, 8.6))
    grid = fig.add_gridspec(
        2, n + 1, width_ratios=[1.0] * n + [0.05], top=0.8, bottom=0.07, wspace=0.3
    )
    mappable = None
    for i, ((label, d), z) in enumerate(zip(data, shown, strict=True)):
        a, b = np.meshgrid(d["alphas"], d["betas"])
        top = fig.add_subplot(grid[0, i], projection="3d")
        bottom = fig.add_subplot(grid[1, i])
        title = f"({chr(65 + i)}) {label}"
        if d.get("status", "ok") != "ok":
            title += f" [run {d['status']}]"
        centre = d["loss"][len(d["betas"]) // 2, len(d["alphas"]) // 2]
        top.set_title(f"{title}\ncentre loss {centre:.4g}", fontsize="medium")
        if not z.count():
            bottom.text(0.5, 0.5, "no finite loss", ha="center", va="center")
            continue
        top.plot_surface(
            a,
            b,
            z.filled(np.nan),
            cmap="viridis",
            norm=norm,
            lw=0,
            rstride=1,
            cstride=1,
            antialiased=False,
        )
        top.set_zlim(lo, hi)
        top.set_xlabel("α (d₁)", fontsize="small")
        top.set_ylabel("β (d₂)", fontsize="small")
        mappable = bottom.contourf(a, b, z, levels=levels, cmap="viridis", norm=norm)
        bottom.contour(a, b, z, levels=levels, colors="k", linewidths=0.4, alpha=0.5)
        bottom.plot([0.0], [0.0], "r*", ms=9, label="final global model")
        bottom.set_xlabel("α (direction d₁)")
        if i == 0:
            bottom.set_ylabel("β (direction d₂)")
        bottom.set_aspect("equal")
        bottom.legend(loc="upper right", fontsize="x-small")
    first = data[0][1]
    loss_name = LOSS_NAMES.get(first.get("objective", "cross_entropy"), first.get("objective"))
    if mappable is not None:
        fig.colorbar(mappable, cax=fig.add_subplot(grid[1, n]), label=f"test loss ({loss_name})")
    c = spec.settings.clip
    clip = "" if c is None else f"; losses above {c:g} drawn at {c:g}"
    standin = any(bool(d.get("standin", False)) for _, d in data)
    title = [
        f"{spec.paper} {spec.name}: {spec.caption}",
        f"scale {spec.scale}; final global model θ of each run (seed {first.get('seed')}); "
        f"plane θ + α·d₁ + β·d₂ with random filter-normalised directions (Li et al. 2018; 1-D "
        f"parameters zeroed), {len(first['alphas'])}×{len(first['betas'])} grid over "
        f"[−{first['alphas'].max():g}, {first['alphas'].max():g}]²; loss = {loss_name} on "
        f"{_test_set(first)}; one colour scale for all panels{clip}",
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, standin)),
    ]
    fig.suptitle("\n".join(textwrap.fill(t, int(width * 11)) for t in title), fontsize="medium")
    return fig


def write_landscape_figure(spec: LandscapeFigureSpec, out_prefix: str | Path) -> list[Path]:
    """Write out_prefix.png and .pdf atomically; return their paths."""
    return save_figure(make_landscape_figure(spec), out_prefix)
