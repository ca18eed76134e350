"""Two renderings of the same grid's tables, cell by cell: B - A against the seed spread.

    fedbench compare results/quick/papers/quick results/quick-bf16/papers/quick \
        --labels fp32 bf16 --out docs/reproductions/quick_bf16

Every table CSV present in both directories (same file name) is read (the tables' tidy rows,
`# key: text` header lines skipped); cells are matched by (row, column). A cell's difference is
Δ = mean_B - mean_A over its seeds; its spread is the larger of the two seed spreads (each table's
own ± column, e.g. the sample std over seeds); the cell is "within" when |Δ| <= spread. A cell
with fewer than two seeds on either side has no spread, and says so.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
from pathlib import Path

import pandas as pd

from fedbench.io import write_text
from fedbench.report.tables import _num

KEY = ("row", "column")
NEEDED = ("row", "column", "row_label", "column_label", "ours_mean", "ours_std", "n_runs")
CSV_COLUMNS = (
    "table",
    "row",
    "column",
    "row_label",
    "column_label",
    "quantity",
    "a_mean",
    "a_spread",
    "a_n",
    "b_mean",
    "b_spread",
    "b_n",
    "delta",
    "spread",
    "within",
)


class CompareError(ValueError):
    """A directory or table that cannot be compared."""


def read_table_csv(path: Path) -> pd.DataFrame:
    """A table's tidy rows (a CSV written before the .json sidecar began with '# ' header
    lines: they are skipped)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
        while lines and lines[0].startswith("# "):
            lines.pop(0)
        frame = pd.read_csv(io.StringIO("".join(lines)))
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise CompareError(f"{path}: not a readable table CSV ({err})") from err
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise CompareError(f"{path}: lacks column(s) {missing}: is it a fedbench table CSV?")
    return frame[frame["row"].notna() & frame["column"].notna()]


def compare_tables(name: str, a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per cell present in both tables (CSV_COLUMNS)."""
    both = a.merge(b, on=list(KEY), suffixes=("_a", "_b"))
    rows = []
    for _, r in both.iterrows():
        a_sd, b_sd = (
            _spread(r["ours_std_a"], r["n_runs_a"]),
            _spread(r["ours_std_b"], r["n_runs_b"]),
        )
        delta = r["ours_mean_b"] - r["ours_mean_a"]
        spread = max(a_sd, b_sd) if not (math.isnan(a_sd) or math.isnan(b_sd)) else math.nan
        rows.append(
            {
                "table": name,
                "row": r["row"],
                "column": r["column"],
                "row_label": r["row_label_a"],
                "column_label": r["column_label_a"],
                "quantity": r.get("quantity_a", ""),
                "a_mean": r["ours_mean_a"],
                "a_spread": a_sd,
                "a_n": int(r["n_runs_a"]),
                "b_mean": r["ours_mean_b"],
                "b_spread": b_sd,
                "b_n": int(r["n_runs_b"]),
                "delta": delta,
                "spread": spread,
                "within": None if math.isnan(spread) or math.isnan(delta) else abs(delta) <= spread,
            }
        )
    return pd.DataFrame(rows, columns=list(CSV_COLUMNS))


def _spread(std: float, n: float) -> float:
    return float(std) if n is not None and n >= 2 and not pd.isna(std) else math.nan


def compare_dirs(a: Path, b: Path) -> pd.DataFrame:
    """Every table CSV the two directories share, compared (tables in name order)."""
    for d in (a, b):
        if not d.is_dir():
            raise CompareError(f"{d}: no such directory (render the grid's tables first)")
    names = sorted({p.name for p in a.glob("*.csv")} & {p.name for p in b.glob("*.csv")})
    names = [n for n in names if n != "cost.csv"]
    if not names:
        raise CompareError(f"{a} and {b} share no table CSV: render the same grid in both")
    frames = [compare_tables(n[:-4], read_table_csv(a / n), read_table_csv(b / n)) for n in names]
    return pd.concat(frames, ignore_index=True)


def to_markdown(df: pd.DataFrame, labels: tuple[str, str], a: Path, b: Path) -> str:
    """A section per table: A ± spread, B ± spread, Δ, spread, within; then the count."""
    la, lb = labels
    lines = [
        f"# {lb} beside {la}",
        "",
        f"- {la}: `{a}`",
        f"- {lb}: `{b}`",
        f"- Δ = {lb} − {la} (mean over seeds); spread = the larger seed spread (each table's ±); "
        "within = |Δ| ≤ spread",
    ]
    for table, part in df.groupby("table", sort=False):
        quantity = part["quantity"].iloc[0] if len(part) else ""
        lines += ["", f"## {table}: {quantity}", ""]
        lines.append(f"| cell | {la} | {lb} | Δ | spread | within |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for _, r in part.iterrows():
            within = {True: "yes", False: "**no**", None: "— (one seed)"}[r["within"]]
            lines.append(
                f"| {r['row_label']} / {r['column_label']} "
                f"| {_num(r['a_mean'], 2)} ± {_num(r['a_spread'], 2)} (n={r['a_n']}) "
                f"| {_num(r['b_mean'], 2)} ± {_num(r['b_spread'], 2)} (n={r['b_n']}) "
                f"| {_num(r['delta'], 2, sign=True)} | {_num(r['spread'], 2)} | {within} |"
            )
    judged = df[df["within"].notna()]
    lines += [
        "",
        f"{int(judged['within'].sum())} of {len(judged)} cells within the seed spread"
        + (
            f"; {len(df) - len(judged)} cells with one seed not judged"
            if len(judged) < len(df)
            else ""
        ),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fedbench compare", description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path, help="directory of the reference rendering (table CSVs)")
    ap.add_argument("b", type=Path, help="directory of the other rendering")
    ap.add_argument("--labels", nargs=2, default=("A", "B"), metavar=("A", "B"))
    ap.add_argument("--out", type=Path, default=None, help="write OUT.md and OUT.csv")
    args = ap.parse_args(argv)
    try:
        df = compare_dirs(args.a, args.b)
    except CompareError as err:
        print(f"fedbench compare: {err}", file=sys.stderr)
        return 2
    text = to_markdown(df, tuple(args.labels), args.a, args.b)
    print(text)
    if args.out is not None:
        write_text(args.out.with_suffix(".md"), text)
        write_text(args.out.with_suffix(".csv"), df.round(6).to_csv(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
