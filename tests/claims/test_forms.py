"""Claim forms and verdicts by hand, on small fake tables (values per cell and seed).

Each form is built with `build_test` against a fake table's ids, then read with
`evaluate.read_runs` on values written in the test, and on printed values with
`stats.printed_verdict`; every verdict (supported, contradicted, inconclusive, not run) is
reached, and the paired and Welch intervals are computed here by hand.
"""

from __future__ import annotations

import math

import pytest

from fedbench.claims.evaluate import EXACT, TableRead, comparison_result, read_runs
from fedbench.claims.forms import FORMS, Cell, ClaimError, TableIds, build_test
from fedbench.claims.stats import (
    CONTRADICTED,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NO_VALUES,
    NOT_RUN,
    SUPPORTED,
    combine,
    printed_verdict,
)

# t_{0.975, k} from a printed t table (the intervals below are worked out with these).
T975 = {1: 12.706204736, 2: 4.302652730, 4: 2.776445105}
T = TableIds("t1", ("a", "b", "c"), ("x", "y", "z", "avg"))


def build(**check) -> object:
    return build_test("claim demo.check", {"table": "t1", **check}, {"t1": T}.get)


def reading(test, cells: dict[tuple[str, str], dict]) -> object:
    """Read `test` on fake values {(row, column): {seed: value}} of table t1."""
    return read_runs((test,), {"t1": TableRead("t1", cells)})


def seeds(*values: float) -> dict[int, float]:
    return dict(enumerate(values))


def hand_interval(diffs: list[float]) -> tuple[float, float]:
    """mean ± t_{0.975, n-1} · sd / √n, by hand."""
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = T975[n - 1] * sd / math.sqrt(n)
    return mean - half, mean + half


# --- order: every verdict, the paired interval by hand ----------------------------------------


def test_order_supported_with_the_paired_interval_by_hand():
    test = build(form="order", row="a", over=["b"], columns=["x"])
    r = reading(test, {("a", "x"): seeds(80, 82, 81), ("b", "x"): seeds(70, 71, 72)})
    assert r.verdict == SUPPORTED
    iv = r.results[0].interval
    lo, hi = hand_interval([10, 11, 9])  # mean 10, sd 1: 10 ± 4.3027 / √3 = [7.516, 12.484]
    assert (iv.lo, iv.hi) == pytest.approx((lo, hi), abs=1e-6)
    assert (iv.lo, iv.hi) == pytest.approx((7.5158, 12.4842), abs=1e-4)
    assert iv.n == 3 and "paired" in iv.how


def test_order_contradicted_inconclusive_and_lower_is_better():
    test = build(form="order", row="a", over=["b"], columns=["x"])
    assert reading(
        test, {("a", "x"): seeds(70, 71, 72), ("b", "x"): seeds(80, 82, 81)}
    ).verdict == (CONTRADICTED)
    # differences 5, -5, 1: mean 1/3, sd 5.03, half-width 12.5: the interval straddles 0
    mixed = reading(test, {("a", "x"): seeds(75, 70, 71), ("b", "x"): seeds(70, 75, 70)})
    assert mixed.verdict == INCONCLUSIVE
    assert (mixed.results[0].interval.lo, mixed.results[0].interval.hi) == pytest.approx(
        hand_interval([5, -5, 1])
    )
    low = build(form="order", row="a", over=["b"], columns=["x"], better="lower")
    assert reading(low, {("a", "x"): seeds(1, 2, 1), ("b", "x"): seeds(5, 6, 7)}).verdict == (
        SUPPORTED
    )


def test_a_single_seed_is_never_a_verdict_and_an_empty_cell_is_not_run():
    test = build(form="order", row="a", over=["b"], columns=["x"])
    one = reading(test, {("a", "x"): {0: 99.0}, ("b", "x"): {0: 1.0}})
    assert one.verdict == NOT_RUN
    assert "single seed" in one.results[0].why
    empty = reading(test, {("a", "x"): seeds(1, 2, 3), ("b", "x"): {}})
    assert empty.verdict == NOT_RUN and "t1[b, x]" in empty.results[0].why


def test_cells_without_shared_seeds_take_welchs_interval_by_hand():
    test = build(form="order", row="a", over=["b"], columns=["x"])
    a, b = {0: 10.0, 1: 12.0}, {2: 5.0, 3: 6.0}  # no seed in common
    r = reading(test, {("a", "x"): a, ("b", "x"): b})
    # mean 11 − 5.5 = 5.5; var = 2/2 + 0.5/2 = 1.25; df = 1.25² / (1² + 0.25²) = 1.470588
    iv = r.results[0].interval
    assert iv.how == "Welch"
    from scipy import stats

    half = stats.t.ppf(0.975, 1.25**2 / (1.0 + 0.25**2)) * math.sqrt(1.25)
    assert (iv.lo, iv.hi) == pytest.approx((5.5 - half, 5.5 + half))
    assert r.verdict == (SUPPORTED if 5.5 - half > 0 else INCONCLUSIVE)


def test_exact_values_decide_alone():
    test = build(form="order", row="a", over=["b"], columns=["x"])
    exact = {("a", "x"): {EXACT: 0.6}, ("b", "x"): {EXACT: 0.5}}
    assert reading(test, exact).verdict == SUPPORTED
    tie = {("a", "x"): {EXACT: 0.5}, ("b", "x"): {EXACT: 0.5}}
    assert reading(test, tie).verdict == CONTRADICTED  # "above" is strict


def test_order_over_several_rows_and_columns_with_quantifiers():
    cells = {
        ("a", "x"): seeds(10, 10.5, 11),
        ("b", "x"): seeds(1, 1, 1),
        ("c", "x"): seeds(2, 2, 2),
        ("a", "y"): seeds(1, 1.5, 1),
        ("b", "y"): seeds(5, 5, 5),
        ("c", "y"): seeds(0, 0, 0),
        ("a", "z"): seeds(9, 9, 9.5),
        ("b", "z"): seeds(0, 0, 0),
        ("c", "z"): seeds(1, 1, 1),
    }
    every = build(form="order", row="a", over="all", columns=["x", "y", "z"])
    assert reading(every, cells).verdict == CONTRADICTED  # column y: b above a
    most_cols = build(form="order", row="a", over="all", columns=["x", "y", "z"], **{"in": "most"})
    assert reading(most_cols, cells).verdict == SUPPORTED  # 2 of 3 columns
    most_rows = build(form="order", row="a", over="all", columns=["y"], of="most")
    assert reading(most_rows, cells).verdict == CONTRADICTED  # 1 of 2 rows: not a majority


# --- margin, not_worse ---------------------------------------------------------------------------


def test_margin_subtracts_the_margin_from_each_paired_difference():
    cells = {("a", "x"): seeds(13, 13.5, 13.2), ("b", "x"): seeds(10, 10, 10)}  # 3, 3.5, 3.2
    wide = build(form="margin", row="a", over=["b"], columns=["x"], by=1)
    r = reading(wide, cells)
    assert r.verdict == SUPPORTED
    assert (r.results[0].interval.lo, r.results[0].interval.hi) == pytest.approx(
        hand_interval([2, 2.5, 2.2])
    )
    assert reading(
        build(form="margin", row="a", over=["b"], columns=["x"], by=3), cells
    ).verdict == (INCONCLUSIVE)
    assert reading(
        build(form="margin", row="a", over=["b"], columns=["x"], by=9), cells
    ).verdict == (CONTRADICTED)
    assert printed_verdict(74.87 - 71.81 - 3.06, strict=False) == HOLDS  # "at least", rounding


def test_not_worse_within_a_tolerance():
    cells = {("a", "x"): seeds(9.6, 9.5, 9.7), ("b", "x"): seeds(10, 10, 10)}  # a − b ≈ −0.4
    assert (
        reading(
            build(form="not_worse", row="a", over=["b"], columns=["x"], tolerance=1), cells
        ).verdict
        == SUPPORTED
    )
    assert (
        reading(
            build(form="not_worse", row="a", over=["b"], columns=["x"], tolerance=0.1), cells
        ).verdict
        == CONTRADICTED
    )


# --- trend ----------------------------------------------------------------------------------------


def test_trend_steps_and_ends():
    cells = {
        ("a", "x"): seeds(1, 1, 1.2),
        ("a", "y"): seeds(2, 2.1, 2),
        ("a", "z"): seeds(1.5, 1.5, 1.6),
    }
    steps = build(form="trend", row="a", points=["x", "y", "z"], direction="rises")
    assert reading(steps, cells).verdict == CONTRADICTED  # y -> z falls
    ends = build(form="trend", row="a", points=["x", "y", "z"], compare="ends")
    assert reading(ends, cells).verdict == SUPPORTED  # x -> z rises: diffs .5, .5, .4
    falls = build(form="trend", column="x", points=["a", "b"], direction="falls")
    assert reading(falls, {("a", "x"): seeds(5, 6, 7), ("b", "x"): seeds(1, 1, 1)}).verdict == (
        SUPPORTED
    )


# --- value, close, aggregate ---------------------------------------------------------------------


def test_value_is_a_band_around_the_printed_number():
    test = build(form="value", row="a", column="x", value=83.09, tolerance=1.0)
    assert reading(test, {("a", "x"): seeds(83.0, 83.2, 83.1)}).verdict == SUPPORTED
    assert reading(test, {("a", "x"): seeds(70.0, 71.0, 70.5)}).verdict == CONTRADICTED
    assert reading(test, {("a", "x"): seeds(82.0, 84.5, 83.0)}).verdict == INCONCLUSIVE
    # one-sample interval: the low side is Δ = x − 82.09, its mean 1.08 ± 4.3027·1.25/√3
    r = reading(test, {("a", "x"): seeds(82.0, 84.5, 83.0)})
    lo, hi = hand_interval([82.0 - 82.09, 84.5 - 82.09, 83.0 - 82.09])
    assert (r.results[0].interval.lo, r.results[0].interval.hi) == pytest.approx((lo, hi))
    diff = build(form="value", row="a", minus="b", column="x", value=2.2, tolerance=0.3)
    assert printed_verdict(diff.groups[0].comparisons[0].delta([10.0, 7.8]), False) == HOLDS


def test_close_is_within_the_tolerance_both_ways():
    test = build(form="close", row="a", to="b", columns=["x"], tolerance=1.0)
    near = {("a", "x"): seeds(10, 11, 12), ("b", "x"): seeds(10.1, 11.2, 11.9)}
    far = {("a", "x"): seeds(10, 11, 12), ("b", "x"): seeds(14, 15, 16.5)}
    assert reading(test, near).verdict == SUPPORTED
    assert reading(test, far).verdict == CONTRADICTED


def test_aggregate_mean_and_population_std():
    mean = build(
        form="aggregate",
        column="avg",
        **{"from": ["x", "y", "z"]},
        stat="mean",
        tolerance=0.05,
        rows=["a"],
    )
    pstd = build(
        form="aggregate",
        column="avg",
        **{"from": ["x", "y", "z"]},
        stat="pstd",
        tolerance=0.05,
        rows=["a"],
    )
    printed = [80.39, 64.26, 87.00, 89.90]  # ā, then the three clients (DQN-Fed's Table 9 FedAvg)
    for c in mean.groups[0].comparisons:
        assert printed_verdict(c.delta(printed), c.strict) == HOLDS  # 80.3867 ± 0.05
    # σ_a = √(((64.26 − m)² + (87 − m)² + (89.9 − m)²) / 3) = 11.4646, not 80.39
    assert pstd.groups[0].comparisons[0].delta(printed) == pytest.approx(
        80.39 - 11.4646 + 0.05, abs=1e-3
    )
    assert pstd.groups[0].comparisons[0].linear is None  # no Welch interval for a nonlinear Δ


# --- steadier, wider_gap ---------------------------------------------------------------------


def test_steadier_compares_absolute_changes_per_seed():
    test = build(form="steadier", row="a", over=["b"], between=[["x", "y"]])
    cells = {
        ("a", "x"): seeds(50, 51, 50),
        ("a", "y"): seeds(51, 51, 52),  # moves 1, 0, 2
        ("b", "x"): seeds(40, 41, 40),
        ("b", "y"): seeds(50, 48, 49),  # moves 10, 7, 9
    }
    r = reading(test, cells)
    assert r.verdict == SUPPORTED
    assert r.results[0].interval.mean == pytest.approx((9 + 7 + 7) / 3)


def test_wider_gap_is_a_difference_of_differences():
    test = build(form="wider_gap", row="a", over="b", wider="x", than=["y"])
    cells = {
        ("a", "x"): seeds(70, 72, 71),
        ("b", "x"): seeds(55, 56, 57),  # leads 15, 16, 14
        ("a", "y"): seeds(80, 81, 80),
        ("b", "y"): seeds(78, 78, 79),  # leads 2, 3, 1
    }
    r = reading(test, cells)
    assert r.verdict == SUPPORTED
    assert (r.results[0].interval.lo, r.results[0].interval.hi) == pytest.approx(
        hand_interval([13, 13, 13])
    )


# --- combine, printed readings, errors ---------------------------------------------------------


def test_combine_every_and_most():
    assert combine([SUPPORTED, SUPPORTED]) == SUPPORTED
    assert combine([SUPPORTED, NOT_RUN]) == NOT_RUN
    assert combine([SUPPORTED, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine([NOT_RUN, CONTRADICTED]) == CONTRADICTED
    assert combine([SUPPORTED, SUPPORTED, CONTRADICTED], "most") == SUPPORTED
    assert combine([SUPPORTED, CONTRADICTED], "most") == CONTRADICTED  # half cannot be most
    assert combine([SUPPORTED, INCONCLUSIVE, CONTRADICTED], "most") == INCONCLUSIVE
    assert combine([HOLDS, FAILS], "every") == FAILS
    assert combine([HOLDS, HOLDS, FAILS], "most") == HOLDS
    assert combine([HOLDS, NO_VALUES]) == NO_VALUES


def test_every_form_is_registered_and_tested_here():
    tested = {
        "order",
        "margin",
        "not_worse",
        "trend",
        "value",
        "close",
        "aggregate",
        "steadier",
        "wider_gap",
    }
    assert set(FORMS) == tested


@pytest.mark.parametrize(
    ("check", "says"),
    [
        ({"form": "ordr", "row": "a", "over": ["b"]}, "'ordr' is not a claim form"),
        ({"form": "order", "over": ["b"]}, "name exactly one of 'row' and 'column'"),
        ({"form": "order", "row": "a"}, "claim demo.check: missing key 'over'"),
        ({"form": "order", "row": "a", "over": ["q"]}, "claim demo.check.over: ['q'] not row(s)"),
        ({"form": "order", "row": "a", "over": ["b"], "columns": ["w"]}, ".columns: ['w'] not"),
        ({"form": "order", "row": "a", "over": ["b"], "by": 2}, "key(s) ['by'] do not apply"),
        ({"form": "value", "row": "a", "column": "x", "value": "x", "tolerance": 1}, ".value:"),
    ],
)
def test_a_bad_check_is_an_error_naming_the_claim_and_the_key(check, says):
    with pytest.raises(ClaimError, match="claim demo.check") as err:
        build(**check)
    assert says in str(err.value)


def test_an_unknown_table_is_an_error_naming_it():
    with pytest.raises(ClaimError, match=r"claim demo.check.table: the grid has no table 't9'"):
        build_test("claim demo.check", {"form": "order", "table": "t9", "row": "a"}, {}.get)


def test_comparison_result_names_the_empty_cell():
    test = build(form="order", row="a", over=["b"], columns=["x"])
    comp = test.groups[0].comparisons[0]
    r = comparison_result(comp, {Cell("t1", "a", "x"): seeds(1, 2)})
    assert r.verdict == NOT_RUN and "t1[b, x]" in r.why
