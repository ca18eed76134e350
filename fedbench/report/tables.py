"""Paper tables: the paper's value beside ours (mean ± std over seeds) and the difference."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fedbench.io import write_text
from fedbench.metrics import PACK_STATS
from fedbench.papers import PaperValues
from fedbench.report.collect import GLOBAL_TEST, RUN, TRAIN, RunData, run_series
from fedbench.report.html_table import html_table
from fedbench.report.layout import (
    PROTOCOL_NOTES,
    LayoutError,
    Quantity,
    any_standin,
    cell_quantities,
    check_layout,
    load_cells,
    precision_note,
    protocol_notes,
    quantity_label,
    quantity_lines,
    value_scale,
    warning_lines,
)
from fedbench.report.sidecar import CSV_FOOT, sidecar_json

ROUND_MODES = ("final", "best")
# ± over seeds: sample std (ddof 1), population std (ddof 0, AAggFF's tables), or the largest
# absolute deviation from the mean (pFedBreD's plots).
SEED_SPREADS = ("std", "pstd", "maxdev")
# mean_drop: the mean over consecutive column pairs (before, after) of before - after (pFedBreD's
# Table 8 "Average Decrease by Noise"); ratio: one column's mean in this row over its mean in the
# summary's `reference` row (DQN-Fed's Table 2, wall-clock "× FedAvg").
SUMMARY_STATS = ("mean", "std", "mean_drop", "ratio")
# Quantities where smaller is better, so "best round" takes the minimum.
MIN_METRICS = ("loss", "ece", "mce")
MIN_STATS = ("std", "gini", "angle", "kl")
STD_NOTE = (
    "mean ± sample standard deviation (ddof=1) over seeds of each run's value; no ± with "
    "one seed; (n=k) = runs averaged; Δ = ours − paper"
)
SPREAD_NOTE = (
    "mean (c) ± s: mean = mean over seeds of each run's value; (c) = mean over seeds of each "
    "run's {spread} across clients of the same metric and protocol at the same round (scaled "
    "like the value); ± s = sample standard deviation (ddof=1) over seeds of each run's value, "
    "shown only with ≥ 2 seeds; (n=k) = runs averaged; paper 'v (c)' = the paper's value and "
    "its printed std; Δ = ours mean − paper value"
)
PSTD_NOTE = (
    "mean ± population standard deviation (ddof=0) over seeds of each run's value; no ± with "
    "one seed; (n=k) = runs averaged; Δ = ours − paper"
)
MAXDEV_NOTE = (
    "mean ± d over seeds of each run's value: d = the largest absolute deviation of a run from "
    "the mean (the convention of pFedBreD's plotting code); no ± with one seed; (n=k) = runs "
    "averaged; Δ = ours − paper"
)
SUMMARY_NOTE = (
    "summary columns ({names}) are computed from each row's cells: the mean or the sample "
    "standard deviation (ddof=1) over the listed columns of our means (of the paper's values for "
    "its own); blank unless every listed cell has runs"
)
RATIO_NOTE = (
    "{label} = this row's mean of column {column} over row {reference}'s (ratio of the seeds' "
    "means, no ±); the paper's: its own {column} values divided the same way"
)
NO_PAPER_NOTE = (
    "none for this table, so no paper or Δ columns (the CSV keeps its paper, paper_std and "
    "delta columns, empty)"
)
DIVERGED_NOTE = (
    "a cell reading 'diverged (round r)' had a run diverge at round r; a diverged run is never "
    "averaged in (the CSV's ours_mean, n_runs and delta cover the finished seeds only)"
)
ZERO_TAIL_NOTE = (
    "{cells}: 0.00 ± 0.00 means that in every seed the {stat} clients averaged 0 % (each of them "
    "got every one of its test examples wrong), not a missing value"
)
CSV_COLUMNS = (
    "row",
    "column",
    "paper",
    "paper_std",
    "ours_mean",
    "ours_std",
    "n_runs",
    "delta",
    "status",
    "eval_protocol",
    "n_diverged",
    "diverged_rounds",
    "seeds",
    "rounds",
    "standin",
    "row_label",
    "column_label",
    "quantity",
    "metric",
    "protocol",
    "stat",
    "ours_spread",
)
DASH = "—"


@dataclass(frozen=True)
class TableSpec:
    """One paper table: the quantity, how to pick a round, and which runs fill which cell."""

    paper: str
    name: str
    caption: str
    metric: str
    protocol: str
    stat: str
    round: str
    percent: bool
    rows: list[dict]
    columns: list[dict]
    cells: dict[tuple[str, str], list[Path]]
    scale: str
    decimals: int = 2
    spread: str | None = None
    seed_spread: str = "std"
    # Columns computed from a row's cells: {id, label, stat: mean|std, columns: [ids] (all)}.
    summaries: list[dict] = field(default_factory=list)
    # Footnotes printed with the header (e.g. which rows' hyperparameters are not the paper's).
    notes: list[str] = field(default_factory=list)
    # B-D13's choice, written into every output: per entry {by, tie} (column ids), each row
    # group's (rows' `group`, else the row alone) row with the highest `by` mean, ties to the
    # lowest `tie` mean, then to the first row.
    select: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Reject an unknown round mode, stat, spread, scale or a cell outside the layout."""
        where = f"{self.paper}/{self.name}"
        if self.round not in ROUND_MODES:
            raise LayoutError(
                f"{where}: round must be one of {list(ROUND_MODES)}, got {self.round!r}"
            )
        if self.seed_spread not in SEED_SPREADS:
            raise LayoutError(
                f"{where}: seed_spread must be one of {list(SEED_SPREADS)}, got "
                f"{self.seed_spread!r}"
            )
        col_ids = [str(c["id"]) for c in self.columns]
        for summ in self.summaries:
            sid = summ.get("id")
            if sid is None or str(sid) in col_ids:
                raise LayoutError(f"{where}: a summary needs an id unlike every column's: {summ}")
            if summ.get("stat") not in SUMMARY_STATS:
                raise LayoutError(
                    f"{where}: summary {sid!r}: stat must be one of {list(SUMMARY_STATS)}"
                )
            bad = [c for c in summ.get("columns", col_ids) if str(c) not in col_ids]
            if bad:
                raise LayoutError(f"{where}: summary {sid!r} lists unknown column(s) {bad}")
            if summ["stat"] == "mean_drop" and len(summ.get("columns", col_ids)) % 2:
                raise LayoutError(f"{where}: summary {sid!r}: mean_drop needs column pairs")
            _check_reference(where, summ, [str(r["id"]) for r in self.rows], col_ids)
        for sel in self.select:
            bad = [sel.get(k) for k in ("by", "tie") if str(sel.get(k)) not in col_ids]
            if bad:
                raise LayoutError(
                    f"{where}: select {sel!r} names unknown column(s) {bad}; columns: {col_ids}"
                )
        check_layout(self)
        if self.spread is not None:
            if self.spread not in PACK_STATS:
                raise LayoutError(
                    f"{where}: unknown spread {self.spread!r}; valid: {list(PACK_STATS)}"
                )
            for cell, q in cell_quantities(self).items():
                if q.protocol in (GLOBAL_TEST, TRAIN, RUN):
                    raise LayoutError(
                        f"{where}: spread needs per-client values, but cell {cell} reads "
                        f"protocol {q.protocol!r}"
                    )


def _check_reference(where: str, summ: dict, row_ids: list[str], col_ids: list[str]) -> None:
    """A ratio summary names one column and a `reference` row of the table; others name none."""
    sid, ref = summ["id"], summ.get("reference")
    if summ["stat"] != "ratio":
        if ref is not None:
            raise LayoutError(f"{where}: summary {sid!r}: only stat 'ratio' takes a reference row")
        return
    if ref is None or str(ref) not in row_ids:
        raise LayoutError(
            f"{where}: summary {sid!r}: reference {ref!r} is not a row of the table; "
            f"rows: {row_ids}"
        )
    if len(summ.get("columns", col_ids)) != 1:
        raise LayoutError(f"{where}: summary {sid!r}: a ratio reads exactly one column (columns)")


def maximises(metric: str, stat: str) -> bool:
    """Whether a larger value is better (accuracy-like) for picking the best round."""
    return not (stat in MIN_STATS or any(metric.startswith(m) for m in MIN_METRICS))


def _table_quantity(spec: TableSpec) -> Quantity:
    """The spec-wide quantity (what a cell reads when neither its row nor column overrides)."""
    return Quantity(spec.metric, spec.protocol, spec.stat)


def _round_label(spec: TableSpec, quantities: list[Quantity]) -> str:
    """How the round was chosen, for the given quantities."""
    if spec.round == "final":
        return "final round (last evaluated round)"
    hows = {"max" if maximises(q.metric, q.stat) else "min" for q in quantities}
    how = hows.pop() if len(hows) == 1 else "max for accuracies, min for loss/ece/mce and std/gini"
    return f"best round on the test set ({how} over evaluated rounds; optimistic)"


def eval_protocol_label(spec: TableSpec, quantity: Quantity | None = None) -> str:
    """How the value was chosen, said plainly on every output: of one cell's quantity, or (no
    quantity) of the whole table, naming every derived protocol it uses."""
    if quantity is not None:
        note = PROTOCOL_NOTES.get(quantity.protocol)
        return _round_label(spec, [quantity]) + (f"; {note}" if note else "")
    quantities = list(cell_quantities(spec).values()) or [_table_quantity(spec)]
    notes = protocol_notes({q.protocol for q in quantities})
    return "; ".join([_round_label(spec, quantities), *notes])


def run_value(run: RunData, spec: TableSpec, quantity: Quantity | None = None) -> tuple[float, int]:
    """(value, round) of one finished run under the spec's round mode (default: table quantity)."""
    q = quantity or _table_quantity(spec)
    series = run_series(run, q.protocol, q.metric, q.stat)
    last = run.ok_records[-1]["round"]
    if spec.round == "final":
        if series.index[-1] != last:
            raise LayoutError(
                f"{run.run_dir}: {series.name} is missing at the final evaluated round {last}"
            )
        return float(series.iloc[-1]), int(last)
    clean = series.dropna()
    if clean.empty:
        return math.nan, int(last)
    r = clean.idxmax() if maximises(q.metric, q.stat) else clean.idxmin()
    return float(clean[r]), int(r)


def run_spread(run: RunData, quantity: Quantity, spread: str, round_: int) -> float:
    """The run's `spread` stat (across clients) of the quantity's metric/protocol at a round."""
    series = run_series(run, quantity.protocol, quantity.metric, spread)
    if round_ not in series.index:
        raise LayoutError(f"{run.run_dir}: {series.name} is missing at round {round_}")
    return float(series.loc[round_])


def _diverged_status(diverged: list[RunData], total: int) -> str:
    """'diverged (round r)', with every round and the share of seeds when not all diverged."""
    rounds = sorted({int(r.diverged_round) for r in diverged})
    text = "diverged (round " if len(rounds) == 1 else "diverged (rounds "
    text += ", ".join(str(r) for r in rounds) + ")"
    if len(diverged) < total:
        text += f" in {len(diverged)}/{total} seeds"
    return text


def paper_value(spec: TableSpec, row: dict, column: str, paper_values: PaperValues | None):
    """The paper's value of a cell: its own table and row, or the row's `paper_ref` table/row;
    none for a row a user added (`added`)."""
    if paper_values is None or row.get("added"):
        return None
    table, prow = str(row.get("paper_ref", f"{spec.name}/{row['id']}")).split("/")
    return paper_values.get(table, prow, column)


def build_table(
    spec: TableSpec,
    paper_values: PaperValues | None = None,
    preloaded: dict[Path, RunData] | None = None,
) -> pd.DataFrame:
    """One row per (row, column) cell: paper value, ours mean/std over seeds, n, Δ, status.

    `preloaded`: runs already in hand by directory (see `load_cells`)."""
    cells = load_cells(spec, preloaded)
    quantities = cell_quantities(spec)
    out = []
    for row in spec.rows:
        for col in spec.columns:
            rid, cid = str(row["id"]), str(col["id"])
            q = quantities[(rid, cid)]
            runs, ok, picked, values = cell_values(spec, cells.get((rid, cid), []), q)
            scale = value_scale(q.metric, spec.percent, q.stat)
            diverged = [r for r in runs if r.status != "ok"]
            mean = float(values.mean()) if len(values) else math.nan
            std = seed_spread(values, spec.seed_spread)
            spread = math.nan
            if spec.spread is not None and ok:
                spreads = [run_spread(r, q, spec.spread, rd) for r, (_, rd) in zip(ok, picked)]
                spread = float(np.mean(spreads)) * scale
            pv = paper_value(spec, row, cid, paper_values)
            paper = pv.value if pv is not None else math.nan
            paper_std = pv.std if pv is not None and pv.std is not None else math.nan
            if diverged:
                status = _diverged_status(diverged, len(runs))
            else:
                status = "ok" if runs else "no runs"
            out.append(
                {
                    "row": rid,
                    "column": cid,
                    "paper": paper,
                    "paper_std": paper_std,
                    "ours_mean": mean,
                    "ours_std": std,
                    "n_runs": len(values),
                    "delta": mean - paper,
                    "status": status,
                    "eval_protocol": eval_protocol_label(spec, q),
                    "n_diverged": len(diverged),
                    "diverged_rounds": ";".join(str(r.diverged_round) for r in diverged),
                    "seeds": ";".join(str(r.key["seed"]) for r in ok),
                    "rounds": ";".join(str(rd) for _, rd in picked),
                    "standin": any(r.standin for r in runs),
                    "row_label": str(row["label"]),
                    "column_label": str(col["label"]),
                    "quantity": quantity_label(q, spec.percent),
                    "metric": q.metric,
                    "protocol": q.protocol,
                    "stat": q.stat,
                    "ours_spread": spread,
                }
            )
    out += _summary_rows(spec, out, paper_values)
    df = pd.DataFrame(out, columns=list(CSV_COLUMNS))
    df.attrs["standin"] = any_standin(cells)
    df.attrs["precision"] = precision_note(cells)
    times = any(q.protocol == RUN for q in quantities.values())
    df.attrs["machines"] = machine_note(cells) if times else ""
    df.attrs["paper_source"] = paper_values.source if paper_values is not None else ""
    return df


def cell_values(
    spec: TableSpec, runs: list[RunData], q: Quantity
) -> tuple[list[RunData], list[RunData], list[tuple[float, int]], np.ndarray]:
    """One cell as every table reads it: its runs by seed, the finished ones, each finished run's
    (value, round) under the spec's round mode, and the values scaled as printed (x 100 for an
    accuracy in a percent table)."""
    runs = sorted(runs, key=lambda r: r.key["seed"])
    ok = [r for r in runs if r.status == "ok"]
    picked = [run_value(r, spec, q) for r in ok]
    scale = value_scale(q.metric, spec.percent, q.stat)
    return runs, ok, picked, np.array([v * scale for v, _ in picked], dtype=np.float64)


def seed_values(
    spec: TableSpec, preloaded: dict[Path, RunData] | None = None
) -> dict[tuple[str, str], dict[int, float]]:
    """(row id, column id) -> {seed: value} of every finished run, read as `build_table` reads
    its cells (same runs, round and scaling); summary columns per seed, from the seeds every
    listed cell has (a ratio: this row's value over the reference row's at the same seed)."""
    cells = load_cells(spec, preloaded)
    out: dict[tuple[str, str], dict[int, float]] = {}
    for (rid, cid), q in cell_quantities(spec).items():
        _, ok, _, values = cell_values(spec, cells.get((rid, cid), []), q)
        out[(rid, cid)] = {int(r.key["seed"]): float(v) for r, v in zip(ok, values)}
    for row in spec.rows:
        rid = str(row["id"])
        for summ in spec.summaries:
            cols = _summary_columns(spec, summ)
            if summ["stat"] == "ratio":
                num, den = out[(rid, cols[0])], out[(str(summ["reference"]), cols[0])]
                per_seed = {s: ratio(num[s], den[s]) for s in num.keys() & den.keys()}
            else:
                common = set.intersection(*(set(out[(rid, c)]) for c in cols))
                per_seed = {
                    s: summary_value([out[(rid, c)][s] for c in cols], summ["stat"]) for s in common
                }
            out[(rid, str(summ["id"]))] = dict(sorted(per_seed.items()))
    return out


def machine_note(cells: dict[tuple[str, str], list[RunData]]) -> str:
    """Where the runs ran, from run.yaml ('cuda, 1 thread(s): 8 runs; ...'), for tables of run.yaml
    times: seconds from different machines or loads do not compare."""
    counts: dict[str, int] = {}
    for runs in cells.values():
        for r in runs:
            where = (
                f"{r.info.get('device', 'unknown device')}, {r.info.get('threads', '?')} thread(s)"
            )
            counts[where] = counts.get(where, 0) + 1
    return "; ".join(f"{k}: {n} run(s)" for k, n in sorted(counts.items()))


def choices(table: pd.DataFrame, spec: TableSpec) -> list[tuple[dict, list[tuple[str, dict]]]]:
    """Per select entry: (entry, [(group, chosen row) ...]) by B-D13's rule (highest `by` mean,
    ties to the lowest `tie` mean, then the first row); a group with no finished runs is left
    out."""
    mean = {(r["row"], r["column"]): r["ours_mean"] for _, r in table.iterrows()}
    groups: dict[str, list[dict]] = {}
    for row in spec.rows:
        groups.setdefault(str(row.get("group", row["id"])), []).append(row)
    out = []
    for sel in spec.select:
        picked = []
        for group, rows in groups.items():
            scored = [
                (mean[(str(r["id"]), str(sel["by"]))], mean[(str(r["id"]), str(sel["tie"]))], i, r)
                for i, r in enumerate(rows)
            ]
            scored = [x for x in scored if math.isfinite(x[0])]
            if scored:
                best = min(
                    scored, key=lambda x: (-x[0], x[1] if math.isfinite(x[1]) else math.inf, x[2])
                )
                picked.append((group, best[3]))
        out.append((sel, picked))
    return out


def _choice_lines(table: pd.DataFrame, spec: TableSpec) -> list[tuple[str, str]]:
    """('Chosen', text) per select entry: every group's chosen row with its two values."""
    labels = {str(c["id"]): str(c["label"]) for c in spec.columns}
    mean = {(r["row"], r["column"]): r["ours_mean"] for _, r in table.iterrows()}
    lines = []
    for sel, picked in choices(table, spec):
        by, tie = str(sel["by"]), str(sel["tie"])
        rule = f"highest {labels[by]}, ties to the lowest {labels[tie]}, then the first row"
        parts = [
            f"{row['label']} ({_num(mean[(str(row['id']), by)], spec.decimals)} / "
            f"{_num(mean[(str(row['id']), tie)], spec.decimals)})"
            for _, row in picked
        ]
        lines.append(("Chosen", f"{rule}: " + ("; ".join(parts) or "no finished runs")))
    return lines


def seed_spread(values: np.ndarray, how: str) -> float:
    """± over seeds: sample std (ddof=1), population std (pstd, ddof=0) or the largest
    |value − mean|; NaN below 2 values."""
    if len(values) < 2:
        return math.nan
    if how == "maxdev":
        return float(np.abs(values - values.mean()).max())
    if how == "pstd":
        return float(values.std(ddof=0))
    if how != "std":
        raise ValueError(f"seed_spread must be one of {list(SEED_SPREADS)}, got {how!r}")
    return float(values.std(ddof=1))


def summary_value(values: list[float], stat: str) -> float:
    """A summary column's value from a row's cells: their mean or sample std (ddof=1); NaN when
    a value is missing (Table 1 of pFedBreD leaves such rows blank)."""
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) == 0 or not np.isfinite(arr).all():
        return math.nan
    if stat == "mean":
        return float(arr.mean())
    if stat == "std":
        return float(arr.std(ddof=1)) if len(arr) >= 2 else math.nan
    if stat == "mean_drop":
        if len(arr) % 2:
            raise ValueError(f"mean_drop needs (before, after) pairs, got {len(arr)} values")
        pairs = arr.reshape(-1, 2)
        return float((pairs[:, 0] - pairs[:, 1]).mean())
    raise ValueError(f"summary stat must be one of {list(SUMMARY_STATS)}, got {stat!r}")


def ratio(value: float, reference: float) -> float:
    """value / reference; NaN when either is missing or the reference is 0."""
    if not (math.isfinite(value) and math.isfinite(reference)) or reference == 0:
        return math.nan
    return value / reference


def _summary_columns(spec: TableSpec, summ: dict) -> list[str]:
    return [str(c) for c in summ.get("columns", [c["id"] for c in spec.columns])]


def _summary_rows(
    spec: TableSpec, cells: list[dict], paper_values: PaperValues | None
) -> list[dict]:
    """One record per (row, summary column), from the row's cell records."""
    by_cell = {(c["row"], c["column"]): c for c in cells}
    out = []
    for row in spec.rows:
        rid = str(row["id"])
        for summ in spec.summaries:
            cols = _summary_columns(spec, summ)
            recs = [by_cell[(rid, c)] for c in cols]
            pv = paper_value(spec, row, str(summ["id"]), paper_values)
            paper = pv.value if pv is not None else math.nan
            if summ["stat"] == "ratio":
                ref = str(summ["reference"])
                recs.append(by_cell[(ref, cols[0])])
                ours = ratio(recs[0]["ours_mean"], recs[1]["ours_mean"])
                if pv is None:
                    paper = ratio(recs[0]["paper"], recs[1]["paper"])
                how = f"ratio of this row's mean in column {cols[0]} to row {ref}'s"
            else:
                ours = summary_value([r["ours_mean"] for r in recs], summ["stat"])
                how = {
                    "std": "sample std (ddof=1)",
                    "mean": "mean",
                    "mean_drop": "mean of (before - after) over column pairs",
                }[summ["stat"]]
            out.append(
                {
                    "row": rid,
                    "column": str(summ["id"]),
                    "paper": paper,
                    "paper_std": math.nan,
                    "ours_mean": ours,
                    "ours_std": math.nan,
                    "n_runs": min(r["n_runs"] for r in recs),
                    "delta": ours - paper,
                    "status": "ok" if math.isfinite(ours) else "no runs",
                    "eval_protocol": (
                        f"summary: {how}"
                        if summ["stat"] == "ratio"
                        else f"summary: {how} over columns {', '.join(cols)}"
                    ),
                    "n_diverged": sum(r["n_diverged"] for r in recs),
                    "diverged_rounds": "",
                    "seeds": "",
                    "rounds": "",
                    "standin": any(r["standin"] for r in recs),
                    "row_label": str(row["label"]),
                    "column_label": str(summ.get("label", summ["id"])),
                    "quantity": recs[0]["quantity"],
                    "metric": recs[0]["metric"],
                    "protocol": "summary",
                    "stat": summ["stat"],
                    "ours_spread": math.nan,
                }
            )
    return out


def _ours_note(spec: TableSpec, paper: bool = True) -> str:
    """How ours is summarised; without paper values, without the paper's and Δ's definitions."""
    note = _ours_note_with_paper(spec)
    if paper:
        return note
    return note.split("; paper 'v (c)'")[0].split("; Δ = ")[0]


def _ours_note_with_paper(spec: TableSpec) -> str:
    if spec.spread is not None:
        note = SPREAD_NOTE.format(spread=spec.spread)
        instead = {
            "maxdev": "± s = largest absolute deviation from the mean over seeds",
            "pstd": "± s = population standard deviation (ddof=0) over seeds",
        }
        if spec.seed_spread in instead:
            note = note.replace(
                "± s = sample standard deviation (ddof=1) over seeds", instead[spec.seed_spread]
            )
        return note
    return {"maxdev": MAXDEV_NOTE, "pstd": PSTD_NOTE}.get(spec.seed_spread, STD_NOTE)


def header_lines(table: pd.DataFrame, spec: TableSpec) -> list[tuple[str, str]]:
    """(key, text) lines every output starts with; warnings are keyed 'WARNING'."""
    standin = bool(table.attrs.get("standin", False) or table["standin"].any())
    lines = [
        ("Paper", spec.paper),
        ("Table", f"{spec.name}: {spec.caption}"),
        *quantity_lines(spec, spec.percent),
        ("Eval protocol", eval_protocol_label(spec)),
        ("Scale", spec.scale),
        ("Ours", _ours_note(spec, has_paper(table))),
    ]
    plain = [x for x in spec.summaries if x["stat"] != "ratio"]
    if plain:
        names = ", ".join(str(x.get("label", x["id"])) for x in plain)
        lines.append(("Summaries", SUMMARY_NOTE.format(names=names)))
    for x in spec.summaries:
        if x["stat"] == "ratio":
            label, (column,) = x.get("label", x["id"]), _summary_columns(spec, x)
            reference = x["reference"]
            lines.append(
                ("Ratio", RATIO_NOTE.format(label=label, column=column, reference=reference))
            )
    lines += [("Note", note) for note in spec.notes]
    if table.attrs.get("paper_source") and has_paper(table):
        lines.append(("Paper values from", table.attrs["paper_source"]))
    if not has_paper(table):
        lines.append(("Paper values", NO_PAPER_NOTE))
    if (table["n_diverged"] > 0).any():
        lines.append(("Diverged", DIVERGED_NOTE))
    lines += _zero_tail_lines(table)
    if table.attrs.get("precision"):
        lines.append(("Precision", table.attrs["precision"]))
    lines += _choice_lines(table, spec)
    if table.attrs.get("machines"):
        lines.append(("Machines", f"run.yaml device and torch threads: {table.attrs['machines']}"))
    lines += [("WARNING", w) for w in warning_lines(spec.scale, standin)]
    return lines


def _zero_tail_lines(table: pd.DataFrame) -> list[tuple[str, str]]:
    """A note where a worst-clients cell is exactly 0 in every seed (it reads like a blank)."""
    tails = table["stat"].astype(str).str.startswith("worst") & (table["metric"] == "top1")
    zero = table[tails & (table["n_runs"] > 0) & (table["ours_mean"] == 0)]
    zero = zero[zero["ours_std"].fillna(0) == 0]
    if zero.empty:
        return []
    cells = "; ".join(f"{r.row_label} / {r.column_label}" for r in zero.itertuples())
    stats = sorted(set(zero["stat"].astype(str)))
    stat = " / ".join(s.replace("worst", "worst ").split("_")[0] + " %" for s in stats)
    return [("Zero", ZERO_TAIL_NOTE.format(cells=cells, stat=stat))]


def _num(x: float, decimals: int, sign: bool = False) -> str:
    """A fixed-point number, or a dash for NaN."""
    if x is None or not math.isfinite(x):
        return DASH
    return f"{x:+.{decimals}f}" if sign else f"{x:.{decimals}f}"


def _paper_num(x: float, decimals: int = 2) -> str:
    """A paper's number with the table's decimals (92.5 -> 92.50, as papers print it), or all its
    digits when it has more."""
    fixed = f"{x:.{decimals}f}"
    return fixed if float(fixed) == x else f"{x:.10g}"


def display_cells(r: pd.Series, decimals: int, spread: bool = False) -> tuple[str, str, str]:
    """(paper, ours, Δ) display strings of one cell; with `spread`, 'mean (spread) ± s'."""
    paper = DASH
    if math.isfinite(r["paper"]):
        paper = _paper_num(r["paper"], decimals)
        if math.isfinite(r["paper_std"]):
            std = _paper_num(r["paper_std"], decimals)
            paper += f" ({std})" if spread else f" ± {std}"
    if r["status"] != "ok":
        return paper, (DASH if r["status"] == "no runs" else r["status"]), DASH
    ours = _num(r["ours_mean"], decimals)
    if spread:
        ours += f" ({_num(r['ours_spread'], decimals)})"
    if r["n_runs"] >= 2:
        ours += f" ± {_num(r['ours_std'], decimals)}"
    ours += f" (n={r['n_runs']})"
    return paper, ours, _num(r["delta"], decimals, sign=True)


def _summary_cells(r: pd.Series, decimals: int) -> tuple[str, str, str]:
    """(paper, ours, Δ) of a summary column: plain numbers (a ratio's paper value, computed from
    the paper's numbers, at the table's decimals)."""
    paper = DASH
    if math.isfinite(r["paper"]):
        fixed = r["stat"] == "ratio"
        paper = _num(r["paper"], decimals) if fixed else _paper_num(r["paper"], decimals)
    return paper, _num(r["ours_mean"], decimals), _num(r["delta"], decimals, sign=True)


def display_columns(spec: TableSpec) -> list[dict]:
    """The table's columns, then its summary columns."""
    return [*spec.columns, *({"label": s.get("label", s["id"]), **s} for s in spec.summaries)]


def has_paper(table: pd.DataFrame) -> bool:
    """Whether any cell has a paper value: a table without one shows no paper and Δ columns."""
    return bool(table["paper"].notna().any())


def cell_parts(table: pd.DataFrame) -> tuple[str, ...]:
    """The display columns under each table column: paper | ours | Δ, or ours alone."""
    return ("paper", "ours", "Δ") if has_paper(table) else ("ours",)


def _grid(table: pd.DataFrame, spec: TableSpec) -> list[list[str]]:
    """Display rows: row label, then paper/ours/Δ per column (summary columns last); ours alone
    when no cell has a paper value."""
    by_cell = {(r["row"], r["column"]): r for _, r in table.iterrows()}
    keep = slice(None) if has_paper(table) else slice(1, 2)
    grid = []
    for row in spec.rows:
        line = [str(row["label"])]
        for col in spec.columns:
            cell = by_cell[(str(row["id"]), str(col["id"]))]
            line += display_cells(cell, spec.decimals, spread=spec.spread is not None)[keep]
        for summ in spec.summaries:
            cell = by_cell[(str(row["id"]), str(summ["id"]))]
            line += _summary_cells(cell, spec.decimals)[keep]
        grid.append(line)
    return grid


def _head(table: pd.DataFrame, spec: TableSpec) -> list[str]:
    """Column headings after the row labels: 'label paper', 'label ours', 'label Δ' per column,
    or each column's label alone when the table shows ours alone."""
    parts = cell_parts(table)
    if len(parts) == 1:
        return [str(c["label"]) for c in display_columns(spec)]
    return [f"{c['label']} {part}" for c in display_columns(spec) for part in parts]


def _md_escape(text: str) -> str:
    """Make text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(table: pd.DataFrame, spec: TableSpec) -> str:
    """Header lines and a pipe table with paper | ours | Δ per column."""
    lines = [f"# {spec.paper} {spec.name}: {_md_escape(spec.caption)}", ""]
    for key, text in header_lines(table, spec):
        lines.append(f"- **WARNING: {text}**" if key == "WARNING" else f"- {key}: {text}")
    head = ["", *_head(table, spec)]
    lines += ["", "| " + " | ".join(_md_escape(h) for h in head) + " |"]
    lines.append("|:--|" + "--:|" * (len(head) - 1))
    for line in _grid(table, spec):
        lines.append("| " + " | ".join(_md_escape(c) for c in line) + " |")
    return "\n".join(lines) + "\n"


TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "Δ": r"$\Delta$",
    "λ": r"$\lambda$",
    "μ": r"$\mu$",
    "ν": r"$\nu$",
    "≥": r"$\geq$",
    "—": "---",
    "−": "$-$",
    "×": r"$\times$",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def tex_escape(text: str) -> str:
    """Escape LaTeX specials (and the few Unicode signs the tables use)."""
    return "".join(TEX_SPECIAL.get(ch, ch) for ch in str(text))


def to_latex(table: pd.DataFrame, spec: TableSpec) -> str:
    """A booktabs table (needs \\usepackage{booktabs}); warnings in bold in the caption."""
    head = header_lines(table, spec)
    lines = ["% generated by fedbench.report.tables; needs \\usepackage{booktabs}"]
    lines += [f"% {key}: {text}" for key, text in head]
    notes = [f"{key}: {text}." for key, text in head if key not in ("Paper", "Table", "WARNING")]
    warn = [f"\\textbf{{{tex_escape(text.upper())}.}}" for key, text in head if key == "WARNING"]
    title = spec.caption.rstrip() + ("" if spec.caption.rstrip().endswith((".", "!", "?")) else ".")
    caption = " ".join([tex_escape(title), *map(tex_escape, notes), *warn])
    n = len(display_columns(spec))
    k = len(cell_parts(table))
    lines += [
        r"\begin{table}[t]",
        r"\centering",
        f"\\caption{{{caption}}}",
        f"\\label{{tab:{tex_escape(spec.paper)}-{tex_escape(spec.name)}}}",
        f"\\begin{{tabular}}{{l{'r' * k * n}}}",
        r"\toprule",
    ]
    if k == 1:
        lines.append(" & ".join(["", *map(tex_escape, _head(table, spec))]) + r" \\")
    else:
        groups = [
            f"\\multicolumn{{3}}{{c}}{{{tex_escape(c['label'])}}}" for c in display_columns(spec)
        ]
        lines.append(" & ".join(["", *groups]) + r" \\")
        lines.append("".join(f"\\cmidrule(lr){{{2 + 3 * i}-{4 + 3 * i}}}" for i in range(n)))
        lines.append(" & ".join(["", *(["paper", "ours", r"$\Delta$"] * n)]) + r" \\")
    lines.append(r"\midrule")
    for line in _grid(table, spec):
        lines.append(" & ".join(tex_escape(c) for c in line) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_csv(table: pd.DataFrame, spec: TableSpec) -> str:
    """The tidy per-cell rows under one header row (the header lines go to the .json sidecar)."""
    buf = io.StringIO()
    table.loc[:, list(CSV_COLUMNS)].round(6).to_csv(
        buf, index=False, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n"
    )
    return buf.getvalue()


def to_json(table: pd.DataFrame, spec: TableSpec) -> str:
    """The .csv's sidecar: the header lines every other format prints above the table."""
    return sidecar_json(spec.name, header_lines(table, spec))


def to_html(table: pd.DataFrame, spec: TableSpec) -> str:
    """One self-contained, sortable HTML page of the table (what Snakemake's report shows): the
    header lines, then paper | ours | Δ per column (ours alone without paper values)."""
    parts = cell_parts(table)
    notes = [(k, t) for k, t in header_lines(table, spec) if k not in ("Paper", "Table")]
    groups = [str(c["label"]) for c in display_columns(spec)] if len(parts) > 1 else None
    head = ["", *(list(parts) * len(display_columns(spec)) if groups else _head(table, spec))]
    return html_table(
        f"{spec.paper} {spec.name}: {spec.caption}",
        notes,
        groups,
        head,
        _grid(table, spec),
        foot=(
            "Click a column's header to sort by it. Every cell's seeds, rounds, status and "
            f"quantity: {CSV_FOOT.format(name=spec.name)}"
        ),
    )


def _with_suffix(prefix: Path, ext: str) -> Path:
    """`prefix` + ext, keeping any dots already in the name."""
    return prefix.with_name(prefix.name + ext)


def write_table(table: pd.DataFrame, spec: TableSpec, out_prefix: str | Path) -> list[Path]:
    """Write out_prefix.md, .tex, .csv (tidy), .json (its notes) and .html (the report's view)
    atomically; return their paths."""
    out_prefix = Path(out_prefix)
    paths = []
    renders = (
        (".md", to_markdown),
        (".tex", to_latex),
        (".csv", to_csv),
        (".html", to_html),
        (".json", to_json),
    )
    for ext, render in renders:
        path = _with_suffix(out_prefix, ext)
        write_text(path, render(table, spec))
        paths.append(path)
    return paths
