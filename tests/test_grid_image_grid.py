"""Figures of kind 'image_grid' (FedEvg's Figures 4.1-4.4, specs/fedevg.md §5.3): real images | a
red bar | each method's final synthetic set, one row per class."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from fedbench.config import ConfigError
from fedbench.data.base import ArrayDataset, save_dataset
from fedbench.outputs.image_grid import (
    BAR_PX,
    GAP_PX,
    PADDING,
    ImageGridKind,
    ImageGridSpec,
    MethodPanel,
    build_image_grid,
    class_rows,
    write_image_grid,
)
from fedbench.report.collect import RunDataError

ROOT = Path(__file__).resolve().parent.parent
L, SIDE = 3, 4  # classes, image side in pixels
CATALOG = {
    "datasets": {"d": {}},
    "partitions": {"p": {}},
    "models": {"m": {}},
    "algorithms": {"evg": {"algorithm": "fedevg"}, "avg": {"algorithm": "fedavg"}},
}


def _figure(**kw):
    out = {
        "kind": "image_grid",
        "seeds": [1],
        "rows": [{"id": "evg", "label": "FedEvg", "algorithm": "evg"}],
        "columns": [{"id": "c", "dataset": "d", "partition": "p", "model": "m"}],
    }
    out.update(kw)
    return out


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"metric": "top1"}, r"key\(s\) \['metric'\] do not apply to an image grid"),
        ({"seeds": [1, 2]}, "seeds: an image grid draws one run per method"),
        ({"seeds": None}, "seeds"),
        ({"spc": 0}, "spc: expected an integer >= 1"),
        ({"real_range": [0, 255]}, r"real_range: expected \[0, 1\] or \[-1, 1\]"),
        (
            {"rows": [{"id": "evg", "algorithm": "evg", "range": [0, 2]}]},
            r"row 'evg'.range: expected \[0, 1\] or \[-1, 1\]",
        ),
        (
            {"rows": [{"id": "evg", "algorithm": "evg", "dataset": "d"}]},
            r"row 'evg': unknown key\(s\) \['dataset'\]",
        ),
        (
            {"columns": [{"id": "c", "dataset": "d", "partition": "p", "model": "m", "x": 1}]},
            r"column 'c': unknown key\(s\) \['x'\]",
        ),
        (
            {
                "columns": [
                    {"id": "a", "dataset": "d", "partition": "p", "model": "m"},
                    {"id": "b", "dataset": "d", "partition": "p", "model": "m"},
                ]
            },
            "give one column",
        ),
        ({"rows": [{"id": "evg", "algorithm": "nope"}]}, "unknown algorithm 'nope'"),
        ({"rows": [{"id": "avg", "algorithm": "avg"}]}, "'avg' .fedavg. keeps no artifacts"),
        ({"rows": []}, "rows"),
    ],
)
def test_bad_figures_are_rejected_naming_the_key(change, needle):
    ImageGridKind().validate("g.figure4_1", _figure(), CATALOG)  # the unchanged one is fine
    ImageGridKind().validate(
        "g.figure4_1",
        _figure(
            spc=2, real_range=[-1, 1], rows=[{"id": "e", "algorithm": "evg", "range": [-1, 1]}]
        ),
        CATALOG,
    )
    with pytest.raises(ConfigError, match=needle):
        ImageGridKind().validate("g.figure4_1", _figure(**change), CATALOG)


def _dataset(tmp_path, channels=1, standin=True):
    """Class c's training images are all c / 10 (tests read the class back from the pixels)."""
    y = np.repeat(np.arange(L), 5)
    x = np.broadcast_to((y / 10.0)[:, None, None, None], (len(y), channels, SIDE, SIDE)).astype(
        np.float32
    )
    ds = ArrayDataset(
        name="toy",
        x_train=np.ascontiguousarray(x),
        y_train=y.astype(np.int64),
        x_test=np.zeros((2, channels, SIDE, SIDE), dtype=np.float32),
        y_test=np.array([0, 1], dtype=np.int64),
        num_classes=L,
        standin=standin,
        provenance="test",
    )
    save_dataset(ds, tmp_path / "d.npz")
    return tmp_path / "d.npz"


def _run(tmp_path, name, spc=2, artifacts=True, value=None, lo=0.0, shuffle=False):
    """A fake run directory: run.yaml (+ artifacts.pt, synthetic_x of class c = 0.5 + c / 10,
    mapped into [lo, 1] when lo = -1)."""
    run = tmp_path / name
    run.mkdir()
    info = {
        "run": {"algorithm": name, "seed": 1},
        "status": "ok",
        "standin": True,
        "rounds": 2,
    }
    y = torch.arange(L).repeat_interleave(spc)
    x = (0.5 + y / 10.0 if value is None else torch.full((len(y),), value)).view(-1, 1, 1, 1)
    x = x.expand(len(y), 1, SIDE, SIDE).clone() * (1 - lo) + lo
    if shuffle:
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
        x, y = x[order], y[order]
    if artifacts:
        info["artifacts"] = "artifacts.pt"
        torch.save({"synthetic_x": x, "synthetic_y": y}, run / "artifacts.pt")
    (run / "run.yaml").write_text(yaml.safe_dump(info))
    return run


def _spec(tmp_path, methods, **kw):
    return ImageGridSpec(
        paper="fedevg_quick",
        name="figure4_1",
        caption="toy",
        scale="smoke",
        seed=1,
        data=_dataset(tmp_path),
        data_label="Toy K=10 α=0.01",
        dataset="Toy",
        methods=tuple(methods),
        **kw,
    )


def _row_value(array, x0, r, spc=2):
    """The first channel of the images of row r in the panel starting at column x0."""
    top, step = PADDING + r * (SIDE + PADDING), SIDE + PADDING
    cells = [array[top : top + SIDE, x0 + PADDING + j * step, 0] for j in range(spc)]
    return np.concatenate(cells)


def test_composes_real_bar_and_panels_with_rows_in_class_order(tmp_path):
    runs = [_run(tmp_path, "a"), _run(tmp_path, "b", lo=-1.0, shuffle=True)]
    spec = _spec(tmp_path, [MethodPanel("A", runs[0]), MethodPanel("B", runs[1], (-1.0, 1.0))])
    g = build_image_grid(spec)
    spc = 2
    panel_h = L * SIDE + (L + 1) * PADDING  # make_grid: padding around every image
    panel_w = spc * SIDE + (spc + 1) * PADDING
    assert g.array.shape == (panel_h, 3 * panel_w + BAR_PX + GAP_PX, 3)
    assert g.spans == [
        (0, panel_w),
        (panel_w + BAR_PX, 2 * panel_w + BAR_PX),
        (2 * panel_w + BAR_PX + GAP_PX, 3 * panel_w + BAR_PX + GAP_PX),
    ]
    bar = g.array[:, panel_w : panel_w + BAR_PX]
    assert np.array_equal(bar, np.broadcast_to([1.0, 0.0, 0.0], bar.shape))
    gap = g.array[:, 2 * panel_w + BAR_PX : 2 * panel_w + BAR_PX + GAP_PX]
    assert np.array_equal(gap, np.ones_like(gap))
    for r in range(L):
        assert np.allclose(_row_value(g.array, 0, r), r / 10)  # real: class r's images
        for x0, _ in g.spans[1:]:  # synthetic, sorted by label, [-1, 1] mapped back
            assert np.allclose(_row_value(g.array, x0, r), 0.5 + r / 10, atol=1e-6)
    for a, b in g.spans:  # grey repeated to 3 channels
        assert np.array_equal(g.array[:, a:b, 0], g.array[:, a:b, 1])
        assert np.array_equal(g.array[:, a:b, 0], g.array[:, a:b, 2])
    assert g.titles == ["stand-in (Toy)", "A", "B"] and g.spc == 2 and g.standin


def test_real_draw_is_seeded(tmp_path):
    from fedbench.outputs.image_grid import real_rows

    x = np.arange(30, dtype=np.float32).reshape(30, 1, 1, 1)
    y = np.repeat(np.arange(3), 10)
    a, b = real_rows(x, y, 3, 4, seed=1), real_rows(x, y, 3, 4, seed=1)
    assert np.array_equal(a, b) and not np.array_equal(a, real_rows(x, y, 3, 4, seed=2))
    assert (a.reshape(3, 4) // 10 == np.arange(3)[:, None]).all()  # class r in row r


def test_spc_cuts_each_class_and_refuses_more_than_held():
    x, y = torch.zeros(6, 1, 2, 2), torch.tensor([0, 0, 1, 1, 2, 2])
    rows, spc = class_rows(x, y, 3, None, "run")
    assert spc == 2 and rows.shape == (6, 1, 2, 2)
    assert class_rows(x, y, 3, 1, "run")[0].shape == (3, 1, 2, 2)
    with pytest.raises(RunDataError, match="fewer than the figure's spc 3"):
        class_rows(x, y, 3, 3, "run")


def test_a_run_without_artifacts_is_named_with_the_fix(tmp_path):
    run = _run(tmp_path, "fedavg-run", artifacts=False)
    spec = _spec(tmp_path, [MethodPanel("FedAvg", run)])
    with pytest.raises(RunDataError) as err:
        build_image_grid(spec)
    msg = str(err.value)
    assert str(run) in msg and "names no artifacts" in msg
    assert "drop this method" in msg and "--forcerun" in msg


def test_figure_files_written(tmp_path):
    spec = _spec(tmp_path, [MethodPanel("A", _run(tmp_path, "a"))])
    paths = write_image_grid(spec, tmp_path / "out" / "figure4_1")
    assert [p.name for p in paths] == ["figure4_1.png", "figure4_1.pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert not list((tmp_path / "out").glob("*.tmp*"))


def test_fedevg_quick_figure4_1(catalog):
    from fedbench.grid import cells, load_grid, output_files, output_inputs

    grid = load_grid(ROOT / "config" / "papers" / "fedevg_quick.yaml", catalog)
    fig = cells(grid, "figures", "figure4_1", catalog, "smoke")
    table = cells(grid, "tables", "table4_2", catalog, "smoke")
    assert all(keys == table[(row, "a0.01")] for (row, _), keys in fig.items())  # the same runs
    assert {k.seed for keys in fig.values() for k in keys} == {1}
    inputs = output_inputs(grid, "figures", "figure4_1", catalog, "smoke")
    assert inputs[-1] == "results/smoke/data/fedevg-fmnist.npz"
    assert "results/smoke/papers/fedevg_quick/figure4_1.png" in output_files(grid, "smoke")
