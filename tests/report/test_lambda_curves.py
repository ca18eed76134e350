"""λ curves (SuPerFed Figs. 2.3 / 2.5): plotted numbers by hand, missing λ, files, checks."""

from __future__ import annotations

import math

import pytest

from fedbench.report.collect import RunDataError
from fedbench.report.figures import FigureSpec, learning_curves, make_figure, render_figure
from fedbench.report.lambda_curves import LAMBDA_GRID, lambda_panel
from fedbench.report.layout import STANDIN_NOTE, LayoutError, load_cells

LAMBDAS = tuple(f"lambda{lam}" for lam in LAMBDA_GRID)  # lambda0.0 … lambda1.0
# Client-mean top1 of protocol lambda<λ> = the round's value + 0.4 λ (1 − λ): peak +0.1 at 0.5.
BUMP = {f"lambda{lam}": 0.4 * lam * (1 - lam) for lam in LAMBDA_GRID}
CLIENT_STD = 0.05 * math.sqrt(2 / 3)  # population std of conftest's offsets (−0.05, 0, 0.05)
ROWS = [{"id": "mm", "label": "MM"}, {"id": "apfl", "label": "APFL"}]
COLS = [{"id": "a", "label": "ν=1, μ=0.01"}]


def lam_run(make, seed=0, algorithm="superfed", best=True, protocols=LAMBDAS, **kw):
    """A fake run holding the λ protocols (and best_lambda unless best=False)."""
    protocols = ("global", *protocols, *(("best_lambda",) if best else ()))
    return make(seed=seed, algorithm=algorithm, protocols=protocols, protocol_offset=BUMP, **kw)


def spec(cells: dict, **kw) -> FigureSpec:
    """A top1-mean λ figure in percent."""
    fields = dict(
        paper="superfed",
        name="figure2_3",
        caption="λ ablation",
        metric="top1",
        protocol="best_lambda",
        stat="mean",
        percent=True,
        rows=ROWS,
        columns=COLS,
        cells=cells,
        scale="quick",
        kind="lambda",
    )
    fields.update(kw)
    return FigureSpec(**fields)


def test_panel_numbers(make):
    # conftest: final round 20, client-mean top1 0.68 (seed 0) and 0.74 (seed 1)
    mm = [lam_run(make, 0), lam_run(make, 1), lam_run(make, 2, diverged_round=12)]
    apfl = [lam_run(make, 0, algorithm="apfl", best=False)]
    s = spec({("mm", "a"): mm, ("apfl", "a"): apfl})
    panel = lambda_panel(s, load_cells(s), "a")
    assert list(panel["lambda"].unique()) == list(LAMBDA_GRID)
    m = panel[panel["row"] == "mm"].set_index("lambda")
    assert m.loc[0.0, "value"] == pytest.approx(71.0)  # (0.68 + 0.74) / 2 + 0, ×100
    assert m.loc[0.1, "value"] == pytest.approx(74.6)  # + 0.4·0.1·0.9 = 0.036
    assert m.loc[0.5, "value"] == pytest.approx(81.0)  # + 0.1
    assert m.loc[1.0, "protocol"] == "lambda1.0"
    assert m["err"].to_numpy() == pytest.approx([100 * CLIENT_STD] * 11)
    assert set(m["seeds"]) == {2}  # the diverged seed is left out
    assert m["best"].to_numpy() == pytest.approx([86.0] * 11)  # best_lambda = value + 0.15
    assert set(m["source"]) == {"best_lambda"}
    a = panel[panel["row"] == "apfl"].set_index("lambda")
    assert a.loc[0.5, "value"] == pytest.approx(78.0)  # seed 0 only
    assert a["best"].to_numpy() == pytest.approx([78.0] * 11) and set(a["source"]) == {"max"}


def test_plotted_data_and_labels(make):
    cells = {("mm", "a"): [lam_run(make, 0)], ("apfl", "a"): [lam_run(make, 0, "apfl", False)]}
    fig = make_figure(spec(cells, percent=False))
    ax = fig.axes[0]
    line = ax.containers[0].lines[0]  # MM's errorbar
    assert list(line.get_xdata()) == pytest.approx(list(LAMBDA_GRID))
    assert line.get_ydata()[5] == pytest.approx(0.78)  # 0–1 scale without percent
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["MM: 0.830 (best λ per client)", "APFL: 0.780 (max over λ)"]
    title = " ".join(fig.get_suptitle().split())
    assert "max over λ of the mean curve" in title and "protocol best_lambda" in title
    assert "best λ per client, chosen on the client's test split (optimistic)" in title
    assert "small-scale run" in title and "STAND-IN" not in title
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["MM", "APFL"]


def test_missing_lambda_protocol(make):
    partial = lam_run(make, 0, protocols=tuple(p for p in LAMBDAS if p != "lambda0.7"))
    s = spec({("mm", "a"): [partial]})
    with pytest.raises(RunDataError, match=r"seed0: .*lacks protocol 'lambda0\.7'"):
        lambda_panel(s, load_cells(s), "a")
    none = make(seed=1, algorithm="fedavg")
    with pytest.raises(RunDataError, match=r"fedavg/seed1: .*lacks protocol 'lambda0\.0'"):
        make_figure(spec({("mm", "a"): [none]}))


def test_extra_lambda_required_everywhere(make):
    fine = lam_run(make, 0, protocols=(*LAMBDAS, "lambda0.25"))
    other = lam_run(make, 0, algorithm="apfl")
    s = spec({("mm", "a"): [fine], ("apfl", "a"): [other]})
    with pytest.raises(RunDataError, match=r"apfl/seed0: .*lambda0\.25"):
        lambda_panel(s, load_cells(s), "a")


def test_files_written(make, tmp_path):
    cols = [{"id": str(i), "label": f"setting {i}"} for i in range(5)]  # wraps onto 2 lines
    cells = {("mm", str(i)): [lam_run(make, 0)] for i in range(4)}
    cells[("mm", "4")] = [lam_run(make, 0, dataset="synthetic", standin=True)]
    s = spec(cells, columns=cols, rows=ROWS[:1])
    fig = make_figure(s)
    assert len(fig.axes) == 5
    assert STANDIN_NOTE in " ".join(fig.get_suptitle().split())
    out = tmp_path / "figs"
    paths = learning_curves(s, out / "figure2_3")
    assert [p.name for p in paths] == ["figure2_3.png", "figure2_3.pdf"]
    assert sorted(p.name for p in out.iterdir()) == ["figure2_3.pdf", "figure2_3.png"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths[1].read_bytes()[:5] == b"%PDF-"
    assert render_figure is learning_curves


def test_loss_not_scaled(make):
    s = spec({("mm", "a"): [lam_run(make, 0)]}, metric="loss", rows=ROWS[:1])
    m = lambda_panel(s, load_cells(s), "a").set_index("lambda")
    assert m.loc[0.5, "value"] == pytest.approx(1 - 0.78)  # conftest: loss = 1 − top1
    assert m.loc[0.5, "best"] == pytest.approx(1 - 0.83)  # best_lambda's loss, not a max


def test_spec_checks():
    with pytest.raises(LayoutError, match="unknown kind"):
        spec({}, kind="contour")
    rows = [{"id": "mm", "label": "MM", "protocol": "personal"}]
    with pytest.raises(LayoutError, match="overrides the protocol"):
        spec({}, rows=rows)
    with pytest.raises(LayoutError, match="per-client stat"):
        spec({}, protocol="global_test", stat="value")
    assert FigureSpec(**{**spec({}).__dict__, "kind": "rounds"}).kind == "rounds"


def test_cells_layout_blocks_of_4x4(make, tmp_path):
    # Figure 2.3's layout: a 4 × 4 block of panels per row (scheme), one line per panel.
    cols = [{"id": f"nu{i // 4}-mu{i % 4}", "label": f"ν{i // 4} μ{i % 4}"} for i in range(16)]
    rows = [{"id": "mm", "label": "SuPerFed-MM"}, {"id": "lm", "label": "SuPerFed-LM"}]
    base = {"mm": 0.50, "lm": 0.30}  # client-mean top1 of column i: base + 0.01 i (+ BUMP at λ)
    cells = {
        (r, c["id"]): [lam_run(make, 0, algorithm=f"{r}{i}", curve={20: base[r] + 0.01 * i})]
        for r in base
        for i, c in enumerate(cols)
    }
    s = spec(cells, rows=rows, columns=cols, percent=False, panels="cells")
    fig = make_figure(s)
    assert len(fig.axes) == 32 and len(fig.subfigs) == 2
    for b, (sub, row) in enumerate(zip(fig.subfigs, rows, strict=True)):
        assert sub._suptitle.get_text() == row["label"]
        assert len(sub.axes) == 16
        for i, ax in enumerate(sub.axes):
            ss = ax.get_subplotspec()
            assert (ss.rowspan.start, ss.colspan.start, ss.get_geometry()[:2]) == (
                i // 4,
                i % 4,
                (4, 4),
            )
            assert ax.get_title() == cols[i]["label"]
            (bars,) = ax.containers  # this row's line only
            y = bars.lines[0].get_ydata()
            assert y[0] == pytest.approx(base[row["id"]] + 0.01 * i)  # λ = 0
            assert y[5] == pytest.approx(base[row["id"]] + 0.01 * i + 0.1)  # λ = 0.5
            assert bars.lines[0].get_color() == f"C{b}"
            best = base[row["id"]] + 0.01 * i + 0.15  # best_lambda = value + 0.15
            texts = [t.get_text() for t in ax.get_legend().get_texts()]
            assert texts == [f"{best:.3f} (best λ per client)"]
    (lims,) = {ax.get_ylim() for ax in fig.axes}  # shared: top-1's whole range, 2% margins
    assert lims == pytest.approx((-0.02, 1.02))
    paths = learning_curves(s, tmp_path / "figs" / "figure2_3")
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cells_layout_only_for_lambda():
    with pytest.raises(LayoutError, match="for λ figures only"):
        spec({}, kind="rounds", panels="cells")
    with pytest.raises(LayoutError, match="unknown panels"):
        spec({}, panels="rows")


def test_rows_get_distinct_styles(make):
    """Two rows with the same numbers: other color, dash and marker (the second hollow and
    larger, so the first shows inside it), in the panel legend too."""
    cells = {("mm", "a"): [lam_run(make, 0)], ("apfl", "a"): [lam_run(make, 0, "apfl")]}
    fig = make_figure(spec(cells))
    ax = fig.axes[0]
    mm, apfl = (c.lines[0] for c in ax.containers)
    assert list(mm.get_ydata()) == pytest.approx(list(apfl.get_ydata()))
    assert mm.get_color() != apfl.get_color() and mm.get_marker() != apfl.get_marker()
    assert mm.get_linestyle() != apfl.get_linestyle()
    assert apfl.get_markerfacecolor() == "none" and apfl.get_markersize() > mm.get_markersize()
    handles = ax.get_legend().legend_handles
    assert [h.get_marker() for h in handles] == [mm.get_marker(), apfl.get_marker()]
    assert ax.get_ylabel() == "Top-1 accuracy (%)"
