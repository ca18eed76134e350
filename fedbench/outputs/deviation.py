"""Per-class loss-deviation figures of one client's personalised model (pFedBreD Figs 3 and 9):
one run per cell (method row x setting column), its final `per_class_loss` record."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.cells import Grid, axis_entry, check_names, column_labels, merge_cell, spec_header
from fedbench.config import ConfigError
from fedbench.outputs.base import OutputKind, check_axes
from fedbench.report.collect import RunData, RunDataError, load_run
from fedbench.report.layout import warning_lines

AXIS_KEYS = ("id", "label", "dataset", "partition", "model", "algorithm")


class DeviationKind(OutputKind):
    name = "deviation"
    section = "figures"
    keys = ("caption", "kind", "protocol", "client", "seeds", "rows", "columns")
    about = "a deviation figure (per-class loss deviations of one client)"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """One seed, a client index, and rows x columns whose cells name known runs."""
        seeds = out.get("seeds")
        if not isinstance(seeds, list) or len(seeds) != 1 or not _is_index(seeds[0]):
            raise ConfigError(
                f"{where}.seeds: a deviation figure draws one run per cell: give one seed, e.g. "
                f"[0] (got {seeds!r})"
            )
        if not _is_index(out.get("client", 0)):
            raise ConfigError(
                f"{where}.client: expected a client index >= 0, got {out['client']!r}"
            )
        if not isinstance(out.get("protocol", "personal"), str):
            raise ConfigError(
                f"{where}.protocol: expected a protocol name, got {out['protocol']!r}"
            )
        check_axes(where, out)
        for axis in ("rows", "columns"):
            for e in out[axis]:
                bad = sorted(set(e) - set(AXIS_KEYS))
                if bad:
                    raise ConfigError(
                        f"{where} {axis[:-1]} {e['id']!r}: unknown key(s) {bad}; valid: {AXIS_KEYS}"
                    )
        for row in out["rows"]:
            for col in out["columns"]:
                place = f"{where} cell ({row['id']}, {col['id']})"
                check_names(place, merge_cell(row, col, place), catalog)

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> DeviationFigureSpec:
        out = grid.output(self.section, name)
        return DeviationFigureSpec(
            **spec_header(grid, self.section, name, scale),
            protocol=out.get("protocol", "personal"),
            client=int(out.get("client", 0)),
            seed=int(out["seeds"][0]),
            rows=[axis_entry(r) for r in out["rows"]],
            columns=column_labels(grid, self.section, name, catalog, scale),
            cells={
                cell: Path(keys[0].folder(scale))
                for cell, keys in self.runs(grid, name, catalog, scale).items()
            },
        )

    def render(self, spec: DeviationFigureSpec, out_prefix: Path) -> list[Path]:
        return write_deviation_figure(spec, out_prefix)


def _is_index(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# ---------------------------------------------------------------------------------------------
# Drawing (was fedbench/report/deviations.py).
# Per-class loss deviations of one client's personalised model (pFedBreD Figs 3 and 9, B.4).
#
# A figure of kind `deviation` reads, per cell (method row × setting column), the final record's
# `per_class_loss[protocol]` of one run (training.per_class_loss) and draws for the chosen client
# two panels per column: Δ𝒢_c = 𝒢_{k,c} − 𝒢̄_c (global test: the union of the clients' test splits;
# 𝒢̄_c the plain mean over the personalised models) and Δℒ_c = ℒ_{k,c} − ℒ̄_c (own test split,
# ℒ_{k,c} = 0 without label c; ℒ̄_c weights each model by its share of the label-c test samples).


RECORD_KEY = "per_class_loss"  # what the engine writes (fedbench/engine/per_class.py)
# Mathtext: DejaVu Sans has no script capitals (𝒢, ℒ).
YLABEL = {"G": r"$\Delta\mathcal{G}_c$ (loss)", "L": r"$\Delta\mathcal{L}_c$ (loss)"}


@dataclass(frozen=True)
class DeviationFigureSpec:
    """Rows = methods (bars), columns = settings (a G and an L panel each), one run per cell."""

    paper: str
    name: str
    caption: str
    scale: str
    protocol: str
    client: int
    seed: int
    rows: list[dict]
    columns: list[dict]
    cells: dict[tuple[str, str], Path]


def deviations(record: dict[str, list], client: int) -> dict[str, np.ndarray]:
    """Δ𝒢 and Δℒ per class of `client`'s model, and which classes its test split holds."""
    g = np.asarray(record["global_loss"], dtype=np.float64)
    loc = np.asarray(record["local_loss"], dtype=np.float64)
    n = np.asarray(record["local_n"], dtype=np.float64)
    if not 0 <= client < len(g):
        raise ValueError(f"client {client} is not among the run's {len(g)} clients")
    total = n.sum(axis=0)
    # ℒ̄_c: each client's ℒ_{i,c} weighted by its share of label-c local test samples.
    l_bar = np.divide((loc * n).sum(axis=0), total, out=np.zeros_like(total), where=total > 0)
    return {
        "G": g[client] - g.mean(axis=0),
        "L": loc[client] - l_bar,
        "present": n[client] > 0,
    }


def final_record(run: RunData, protocol: str) -> dict[str, list] | None:
    """The run's `per_class_loss[protocol]` of its final round (None when the run diverged)."""
    if run.status != "ok":
        return None
    last = run.ok_records[-1]
    found = last.get(RECORD_KEY, {})
    if protocol not in found:
        raise RunDataError(
            f"{run.run_dir}: the final record has no {RECORD_KEY}[{protocol!r}] "
            f"(has {sorted(found)}): train with training.per_class_loss: true and a model "
            f"that has protocol {protocol!r}"
        )
    return found[protocol]


def write_deviation_figure(spec: DeviationFigureSpec, out_prefix: str | Path) -> list[Path]:
    """Grouped per-class bars (one colour per method), a G and an L panel per column; the
    client's own classes shaded; .png and .pdf, each written atomically."""
    from matplotlib.figure import Figure

    from fedbench.report.figures import save_figure

    runs = {cell: load_run(path) for cell, path in spec.cells.items()}
    data, diverged = {}, []
    for cell, run in runs.items():
        rec = final_record(run, spec.protocol)
        if rec is None:
            diverged.append(cell)
        else:
            data[cell] = deviations(rec, spec.client)
    classes = max((len(d["G"]) for d in data.values()), default=1)
    width = min(11.0, 3.2 + 0.1 * classes * max(1, len(spec.rows)))
    nr = len(spec.columns)
    fig = Figure(figsize=(2 * width, 2.6 * nr + 1.6), layout="constrained")
    axes = fig.subplots(nr, 2, squeeze=False)
    bar = 0.8 / max(1, len(spec.rows))
    for i, col in enumerate(spec.columns):
        # Each setting's own class count (Sent140 2, FEMNIST 62), 1 when no run finished.
        n_cls = max((len(d["G"]) for (_, c), d in data.items() if c == col["id"]), default=1)
        for j, panel in enumerate(("G", "L")):
            ax = axes[i][j]
            present = next(
                (
                    data[(r["id"], col["id"])]["present"]
                    for r in spec.rows
                    if (r["id"], col["id"]) in data
                ),
                None,
            )
            if present is not None:
                for c in np.flatnonzero(present):
                    ax.axvspan(c - 0.5, c + 0.5, color="0.9", lw=0, zorder=0)
            for k, row in enumerate(spec.rows):
                cell = (row["id"], col["id"])
                label = str(row["label"]) + (" [diverged]" if cell in diverged else "")
                if cell not in data:
                    ax.bar([], [], color=f"C{k % 10}", label=label)
                    continue
                values = data[cell][panel]
                x = np.arange(len(values)) - 0.4 + bar * (k + 0.5)
                ax.bar(x, values, width=bar, color=f"C{k % 10}", label=label, zorder=2)
            ax.axhline(0.0, color="0.3", lw=0.6, zorder=1)
            ax.set_title(f"{col['label']}-{panel}", fontsize=9)
            ax.set_xlim(-0.6, n_cls - 0.4)
            ax.set_xticks(range(0, n_cls, 1 if n_cls <= 20 else 5))
            ax.tick_params(labelsize=7)
            ax.set_ylabel(YLABEL[panel], fontsize=8)
            if i == nr - 1:
                ax.set_xlabel("class", fontsize=8)
            ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 6))
    standin = any(run.standin for run in runs.values())
    title = [
        f"{spec.paper} {spec.name}: {spec.caption}",
        f"scale {spec.scale}; seed {spec.seed}; client {spec.client}'s personalised model "
        f"(protocol {spec.protocol}) at the final round. G: ΔG_c = G_c − mean over all "
        f"clients' models, on the union of the clients' test splits; L: ΔL_c = L_c − the "
        f"mean over clients weighted by their label-c test counts, on the client's own test "
        f"split (L_c = 0 for a class it lacks). Shaded: classes in the client's test split.",
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, standin)),
    ]
    chars = int(2 * width * 10)
    fig.suptitle("\n".join(textwrap.fill(t, chars) for t in title), fontsize="medium")
    return save_figure(fig, out_prefix)
