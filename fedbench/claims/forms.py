"""Claim forms: each turns a check's keys into comparisons over table cells.

A form is one function `form(args, table) -> Test` and one line in `FORMS`. It reads its keys
through `args` (a missing one is an error naming the claim and the key; a key no form reads is
refused after it ran) and resolves row and column ids against `table` (the grid table's ids:
an unknown one is an error naming the claim, the key and the valid ids). It returns groups of
comparisons: each comparison is a per-seed quantity Δ with the claim's side Δ > 0 (strict) or
Δ ≥ 0; a group holds when every (or most) of its comparisons do, and the test holds when every
(or most) of its groups do (`fedbench.claims.stats.combine`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fedbench.claims.stats import QUANTIFIERS

BETTER = ("higher", "lower")
_MISSING = object()


class ClaimError(ValueError):
    """A malformed claim, named by its file, claim id and key."""


@dataclass(frozen=True)
class Cell:
    """One table cell, by the grid's ids."""

    table: str
    row: str
    column: str

    def __str__(self) -> str:
        return f"{self.table}[{self.row}, {self.column}]"


@dataclass(frozen=True)
class Comparison:
    """Δ(values of `cells`, in order) with the claimed side Δ > 0 (strict) or Δ ≥ 0. `linear`
    = (coefficients, constant) when Δ is Σ c_i x_i + constant (Welch's interval needs it)."""

    label: str
    cells: tuple[Cell, ...]
    delta: Callable[[Sequence[float]], float]
    strict: bool
    linear: tuple[tuple[float, ...], float] | None = None


@dataclass(frozen=True)
class Group:
    """Comparisons that hold together (`quantifier` over them): one column of an order, say."""

    label: str
    comparisons: tuple[Comparison, ...]
    quantifier: str = "every"


@dataclass(frozen=True)
class Test:
    """What a check tests: its groups, the quantifier over them, and the test in words."""

    groups: tuple[Group, ...]
    quantifier: str
    text: str

    @property
    def cells(self) -> list[Cell]:
        """Every cell the test reads, each once, in order."""
        seen = {c: None for g in self.groups for x in g.comparisons for c in x.cells}
        return list(seen)


@dataclass(frozen=True)
class TableIds:
    """The ids a check may name: the grid table's rows, and its columns then summary columns."""

    name: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]


class Args:
    """A check's keys as its form reads them; remembers which were read."""

    def __init__(self, where: str, raw: dict[str, Any]):
        self.where, self.raw, self.read = where, raw, {"form", "table"}

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """The key's value; a missing key without a default is an error naming it."""
        self.read.add(key)
        if key in self.raw:
            return self.raw[key]
        if default is _MISSING:
            raise ClaimError(f"{self.where}: missing key {key!r}")
        return default

    def has(self, key: str) -> bool:
        return key in self.raw

    def number(self, key: str, default: Any = _MISSING, minimum: float | None = None) -> float:
        """A real number (>= minimum when given)."""
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ClaimError(f"{self.where}.{key}: expected a number, got {value!r}")
        if minimum is not None and value < minimum:
            raise ClaimError(f"{self.where}.{key}: expected a number >= {minimum}, got {value!r}")
        return float(value)

    def choice(self, key: str, valid: Sequence[str], default: str) -> str:
        value = self.get(key, default)
        if value not in valid:
            raise ClaimError(f"{self.where}.{key}: {value!r} is not one of {list(valid)}")
        return value

    def quantifier(self, key: str) -> str:
        return self.choice(key, QUANTIFIERS, "every")

    def one_id(self, key: str, valid: Sequence[str], axis: str) -> str:
        value = self.get(key)
        if not isinstance(value, str) or value not in valid:
            raise ClaimError(
                f"{self.where}.{key}: {value!r} is not a {axis} of the table; valid: {list(valid)}"
            )
        return value

    def ids(
        self, key: str, valid: Sequence[str], axis: str, default: Any = _MISSING, exclude=()
    ) -> list[str]:
        """A list of ids (or one id, or 'all': every valid id but `exclude`)."""
        value = self.get(key, default)
        if value == "all":
            return [v for v in valid if v not in exclude]
        values = value if isinstance(value, list) else [value]
        bad = [v for v in values if not isinstance(v, str) or v not in valid]
        if bad or not values:
            raise ClaimError(
                f"{self.where}.{key}: {bad or value!r} not {axis}(s) of the table; valid: "
                f"{list(valid)}"
            )
        if len(set(values)) != len(values):
            raise ClaimError(f"{self.where}.{key}: repeated ids {values}")
        return values


def _linear(label: str, cells: Sequence[Cell], coefs: Sequence[float], const: float, strict: bool):
    """Δ = Σ coefs_i · x_i + const."""
    coefs, const = tuple(float(c) for c in coefs), float(const)

    def delta(values: Sequence[float]) -> float:
        return sum(c * v for c, v in zip(coefs, values)) + const

    return Comparison(label, tuple(cells), delta, strict, (coefs, const))


def _axes(a: Args, t: TableIds) -> tuple[str, str, Callable[[str, str], Cell]]:
    """('row', 'columns', cell) when the check names a `row` (rows compared within columns), or
    ('column', 'rows', cell) when it names a `column` (columns compared within rows)."""
    if a.has("row") == a.has("column"):
        raise ClaimError(f"{a.where}: name exactly one of 'row' and 'column'")
    if a.has("row"):
        return "row", "columns", lambda main, within: Cell(t.name, main, within)
    return "column", "rows", lambda main, within: Cell(t.name, within, main)


def _valid(t: TableIds, axis: str) -> tuple[str, ...]:
    return t.rows if axis in ("row", "rows") else t.columns


def _pairwise(a: Args, t: TableIds, what: str, offset: float, strict: bool) -> Test:
    """`row` (or `column`) A against each of `over` in each of `columns` (or `rows`):
    Δ = ±(A − B) − offset, + when `better: higher`."""
    main, within, cell = _axes(a, t)
    first = a.one_id(main, _valid(t, main), main)
    others = a.ids("over", _valid(t, main), main, exclude=(first,))
    if first in others:
        raise ClaimError(f"{a.where}.over: {first!r} is compared with itself")
    places = a.ids(within, _valid(t, within), within[:-1], default="all")
    sign = 1.0 if a.choice("better", BETTER, "higher") == "higher" else -1.0
    what = what.format(
        above="above" if sign > 0 else "below", below="below" if sign > 0 else "above"
    )
    of, in_ = a.quantifier("of"), a.quantifier("in")
    groups = []
    for w in places:
        comps = tuple(
            _linear(
                f"{first} {what} {b} in {w}",
                [cell(first, w), cell(b, w)],
                [sign, -sign],
                -offset,
                strict,
            )
            for b in others
        )
        groups.append(Group(f"{within[:-1]} {w}", comps, of))
    text = (
        f"{t.name}: {main} {first} {what} {of} of {others}, in {in_} {within[:-1]} of {places} "
        f"(the claim's side: {'higher' if sign > 0 else 'lower'})"
    )
    return Test(tuple(groups), in_, text)


def order(a: Args, t: TableIds) -> Test:
    """Row A better than (above, or below when lower is better) each row of `over`, in
    every/most columns."""
    return _pairwise(a, t, "{above}", 0.0, strict=True)


def margin(a: Args, t: TableIds) -> Test:
    """Row A better than each row of `over` by at least `by` points."""
    by = a.number("by", minimum=0)
    return _pairwise(a, t, f"{{above}} by >= {by:g}", by, strict=False)


def not_worse(a: Args, t: TableIds) -> Test:
    """Row A no worse than each row of `over` by more than `tolerance` points."""
    tol = a.number("tolerance", minimum=0)
    return _pairwise(a, t, f"not {{below}} by more than {tol:g}", -tol, strict=False)


def trend(a: Args, t: TableIds) -> Test:
    """A quantity rises (or falls) as a swept value rises: `points` lists the other axis' ids in
    the swept value's increasing order; each step (or the two ends) moves the claimed way."""
    main, within, cell = _axes(a, t)
    fixed = a.ids(main, _valid(t, main), main)
    points = a.ids("points", _valid(t, within), within[:-1])
    if len(points) < 2:
        raise ClaimError(f"{a.where}.points: a trend needs at least 2 points, got {points}")
    sign = 1.0 if a.choice("direction", ("rises", "falls"), "rises") == "rises" else -1.0
    compare = a.choice("compare", ("steps", "ends"), "steps")
    pairs = list(zip(points, points[1:])) if compare == "steps" else [(points[0], points[-1])]
    in_ = a.quantifier("in")
    word = "rises" if sign > 0 else "falls"
    groups = tuple(
        Group(
            f"{main} {f}",
            tuple(
                _linear(
                    f"{f}: {lo} -> {hi} {word}",
                    [cell(f, hi), cell(f, lo)],
                    [sign, -sign],
                    0.0,
                    True,
                )
                for lo, hi in pairs
            ),
        )
        for f in fixed
    )
    text = f"{t.name}: along {points} ({compare}), the value {word}, in {in_} of {main}s {fixed}"
    return Test(groups, in_, text)


def _within(label: str, cells: list[Cell], coefs: list[float], target: float, tol: float):
    """Two comparisons: Σ c_i x_i within `tol` of `target` (above the low end, below the high)."""
    return (
        _linear(f"{label} >= {target - tol:g}", cells, coefs, -(target - tol), False),
        _linear(f"{label} <= {target + tol:g}", cells, [-c for c in coefs], target + tol, False),
    )


def value(a: Args, t: TableIds) -> Test:
    """A cell (or a cell minus another row's in the same column: `minus`) within `tolerance` of
    the number the text prints (`value`)."""
    row = a.one_id("row", t.rows, "row")
    col = a.one_id("column", t.columns, "column")
    target, tol = a.number("value"), a.number("tolerance", minimum=0)
    cells, coefs, label = [Cell(t.name, row, col)], [1.0], f"{row} in {col}"
    if a.has("minus"):
        other = a.one_id("minus", t.rows, "row")
        cells.append(Cell(t.name, other, col))
        coefs.append(-1.0)
        label = f"{row} − {other} in {col}"
    group = Group(label, _within(label, cells, coefs, target, tol))
    return Test((group,), "every", f"{t.name}: {label} = {target:g} ± {tol:g}")


def close(a: Args, t: TableIds) -> Test:
    """Row A within `tolerance` of row `to` in every/most columns (the same, up to noise)."""
    row = a.one_id("row", t.rows, "row")
    other = a.one_id("to", t.rows, "row")
    tol = a.number("tolerance", minimum=0)
    cols = a.ids("columns", t.columns, "column", default="all")
    in_ = a.quantifier("in")
    groups = tuple(
        Group(
            f"column {c}",
            _within(
                f"{row} − {other} in {c}",
                [Cell(t.name, row, c), Cell(t.name, other, c)],
                [1.0, -1.0],
                0.0,
                tol,
            ),
        )
        for c in cols
    )
    return Test(groups, in_, f"{t.name}: |{row} − {other}| <= {tol:g} in {in_} of {cols}")


def _pstd(values: Sequence[float]) -> float:
    n = len(values)
    mean = sum(values) / n
    return (sum((v - mean) ** 2 for v in values) / n) ** 0.5


AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": lambda v: sum(v) / len(v),
    "pstd": _pstd,
}


def aggregate(a: Args, t: TableIds) -> Test:
    """A column that the text defines from others (ā = the mean over clients, σ_a their
    population std): each row's `column` within `tolerance` of `stat` over the `from` columns."""
    col = a.one_id("column", t.columns, "column")
    sources = a.ids("from", t.columns, "column")
    stat = a.choice("stat", tuple(AGGREGATES), "mean")
    tol = a.number("tolerance", minimum=0)
    rows = a.ids("rows", t.rows, "row", default="all")
    in_ = a.quantifier("in")
    f = AGGREGATES[stat]
    groups = []
    for r in rows:
        cells = (Cell(t.name, r, col), *(Cell(t.name, r, c) for c in sources))
        label = f"{r}: {col} − {stat}({', '.join(sources)})"

        def low(v, f=f):
            return v[0] - f(v[1:]) + tol

        def high(v, f=f):
            return f(v[1:]) + tol - v[0]

        linear = stat == "mean"
        k = len(sources)
        groups.append(
            Group(
                f"row {r}",
                (
                    Comparison(
                        f"{label} >= −{tol:g}",
                        cells,
                        low,
                        False,
                        ((1.0, *[-1 / k] * k), tol) if linear else None,
                    ),
                    Comparison(
                        f"{label} <= {tol:g}",
                        cells,
                        high,
                        False,
                        ((-1.0, *[1 / k] * k), tol) if linear else None,
                    ),
                ),
            )
        )
    text = f"{t.name}: {col} = {stat} of {sources} ± {tol:g}, in {in_} of rows {rows}"
    return Test(tuple(groups), in_, text)


def steadier(a: Args, t: TableIds) -> Test:
    """Row A changes less than each row of `over` between two columns (`between`: pairs of
    column ids): Δ = |B_x − B_y| − |A_x − A_y| per seed ("less affected by α")."""
    row = a.one_id("row", t.rows, "row")
    others = a.ids("over", t.rows, "row", exclude=(row,))
    pairs = a.get("between")
    if not (
        isinstance(pairs, list)
        and pairs
        and all(
            isinstance(p, list) and len(p) == 2 and all(c in t.columns for c in p) for p in pairs
        )
    ):
        raise ClaimError(
            f"{a.where}.between: expected a list of [column, column] pairs of the table, got "
            f"{pairs!r}; columns: {list(t.columns)}"
        )
    of, in_ = a.quantifier("of"), a.quantifier("in")

    def delta(v: Sequence[float]) -> float:
        return abs(v[2] - v[3]) - abs(v[0] - v[1])

    groups = tuple(
        Group(
            f"columns {x} / {y}",
            tuple(
                Comparison(
                    f"{row} changes less than {b} between {x} and {y}",
                    (
                        Cell(t.name, row, x),
                        Cell(t.name, row, y),
                        Cell(t.name, b, x),
                        Cell(t.name, b, y),
                    ),
                    delta,
                    True,
                )
                for b in others
            ),
            of,
        )
        for x, y in pairs
    )
    text = f"{t.name}: {row} changes less than {of} of {others} between {pairs} ({in_} pair)"
    return Test(groups, in_, text)


def wider_gap(a: Args, t: TableIds) -> Test:
    """Row A's lead over row B is wider in column `wider` than in each of `than`:
    (A − B)_wider − (A − B)_y > 0 (signs flipped when lower is better)."""
    row = a.one_id("row", t.rows, "row")
    other = a.one_id("over", t.rows, "row")
    wide = a.one_id("wider", t.columns, "column")
    narrower = a.ids("than", t.columns, "column")
    sign = 1.0 if a.choice("better", BETTER, "higher") == "higher" else -1.0
    in_ = a.quantifier("in")
    groups = tuple(
        Group(
            f"{wide} against {y}",
            (
                _linear(
                    f"({row} − {other}) wider in {wide} than in {y}",
                    [
                        Cell(t.name, row, wide),
                        Cell(t.name, other, wide),
                        Cell(t.name, row, y),
                        Cell(t.name, other, y),
                    ],
                    [sign, -sign, -sign, sign],
                    0.0,
                    True,
                ),
            ),
        )
        for y in narrower
    )
    return Test(groups, in_, f"{t.name}: {row}'s lead over {other} wider in {wide} than {narrower}")


# name -> form; a new form is one function above and one line here.
FORMS: dict[str, Callable[[Args, TableIds], Test]] = {
    "order": order,
    "margin": margin,
    "not_worse": not_worse,
    "trend": trend,
    "value": value,
    "close": close,
    "aggregate": aggregate,
    "steadier": steadier,
    "wider_gap": wider_gap,
}


def build_test(where: str, raw: Any, table_ids: Callable[[str], TableIds | None]) -> Test:
    """Validate one check (a mapping with `form` and `table`) and build its test; `table_ids`
    gives a table's ids, or None when the grid has no such table."""
    if not isinstance(raw, dict):
        raise ClaimError(f"{where}: a check is a mapping with 'form' and 'table', got {raw!r}")
    form = raw.get("form")
    if form not in FORMS:
        raise ClaimError(f"{where}.form: {form!r} is not a claim form; valid: {list(FORMS)}")
    if "table" not in raw:
        raise ClaimError(f"{where}: missing key 'table'")
    ids = table_ids(str(raw["table"]))
    if ids is None:
        raise ClaimError(f"{where}.table: the grid has no table {raw['table']!r}")
    args = Args(where, raw)
    test = FORMS[form](args, ids)
    unknown = sorted(set(raw) - args.read)
    if unknown:
        raise ClaimError(
            f"{where}: key(s) {unknown} do not apply to form {form!r}; it reads {sorted(args.read)}"
        )
    return test
