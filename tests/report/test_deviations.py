"""Figures of kind 'deviation' (pFedBreD Figs 3 and 9: per-class loss deviations of one client)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from fedbench.config import ConfigError, load_catalog
from fedbench.grid import load_grid, output_spec
from fedbench.outputs.deviation import (
    DeviationFigureSpec,
    DeviationKind,
    deviations,
    write_deviation_figure,
)
from fedbench.report.collect import RunDataError

ROOT = Path(__file__).resolve().parents[2]
# Three clients' models, three classes (hand-built; no engine involved).
RECORD = {
    "global_n": [5, 4, 4],
    "global_loss": [[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [2.0, 2.0, 2.0]],
    "local_n": [[2, 0, 1], [2, 3, 0], [0, 1, 3]],
    "local_loss": [[1.0, 0.0, 4.0], [3.0, 2.0, 0.0], [0.0, 5.0, 6.0]],
}


def test_deltas_equal_the_hand_computation():
    d = deviations(RECORD, client=0)
    # 𝒢̄ = plain mean over models = (2, 2, 2).
    assert d["G"].tolist() == pytest.approx([-1.0, 0.0, 1.0])
    # ℒ̄_0 = (1·2 + 3·2) / 4 = 2; ℒ̄_1 = (2·3 + 5·1) / 4 = 2.75; ℒ̄_2 = (4·1 + 6·3) / 4 = 5.5.
    assert d["L"].tolist() == pytest.approx([1.0 - 2.0, 0.0 - 2.75, 4.0 - 5.5])
    assert d["present"].tolist() == [True, False, True]
    d2 = deviations(RECORD, client=2)
    assert d2["L"].tolist() == pytest.approx([0.0 - 2.0, 5.0 - 2.75, 6.0 - 5.5])
    with pytest.raises(ValueError, match="client 3"):
        deviations(RECORD, client=3)


def test_a_class_no_client_holds_has_mean_zero():
    rec = {**RECORD, "local_n": [[2, 0, 1], [2, 0, 0], [0, 0, 3]]}
    assert deviations(rec, 0)["L"][1] == 0.0


def _run(tmp_path, name, algorithm, record, status="ok"):
    run_dir = tmp_path / name
    run_dir.mkdir()
    last = {"round": 2, "status": "ok", "clients": {}, "summary": {}}
    if record is not None:
        last["per_class_loss"] = {"personal": record}
    lines = [{"round": 1, "status": "ok", "clients": {}, "summary": {}}, last]
    if status == "diverged":
        lines = [{"round": 1, "status": "diverged", "reason": "x"}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    info = {
        "run": {
            "scale": "smoke",
            "dataset": "d",
            "partition": "p",
            "model": "m",
            "algorithm": algorithm,
            "seed": 0,
        },
        "status": status,
        "diverged_round": 1 if status == "diverged" else None,
        "rounds": 2,
        "standin": True,
    }
    (run_dir / "run.yaml").write_text(yaml.safe_dump(info))
    return run_dir


def _spec(cells):
    return DeviationFigureSpec(
        paper="p",
        name="figure3",
        caption="test",
        scale="smoke",
        protocol="personal",
        client=0,
        seed=0,
        rows=[{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
        columns=[{"id": "c", "label": "C"}],
        cells=cells,
    )


def test_figure_files_written_and_a_missing_record_is_named(tmp_path):
    ok = _run(tmp_path, "a", "alg-a", RECORD)
    div = _run(tmp_path, "b", "alg-b", None, status="diverged")
    paths = write_deviation_figure(_spec({("a", "c"): ok, ("b", "c"): div}), tmp_path / "fig")
    assert [p.name for p in paths] == ["fig.png", "fig.pdf"]
    assert paths[0].read_bytes()[:4] == b"\x89PNG" and paths[0].stat().st_size > 1000
    assert not list(tmp_path.glob("*.tmp"))
    bare = _run(tmp_path, "bare", "alg-b", None)
    with pytest.raises(RunDataError, match="per_class_loss"):
        write_deviation_figure(_spec({("a", "c"): ok, ("b", "c"): bare}), tmp_path / "fig2")


CATALOG = {
    "datasets": {"d": {}},
    "partitions": {"p": {}},
    "models": {"m": {}},
    "algorithms": {"x": {}},
}


def _figure(**kw):
    out = {
        "kind": "deviation",
        "seeds": [0],
        "rows": [{"id": "r", "algorithm": "x"}],
        "columns": [{"id": "c", "dataset": "d", "partition": "p", "model": "m"}],
    }
    out.update(kw)
    return out


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"metric": "top1"}, "metric"),
        ({"seeds": [0, 1]}, "one seed"),
        ({"client": -1}, "client"),
        ({"rows": []}, "rows"),
        ({"rows": [{"id": "r", "algorithm": "nope"}]}, "unknown algorithm 'nope'"),
        ({"rows": [{"id": "r", "algorithm": "x", "stat": "mean"}]}, "stat"),
    ],
)
def test_bad_figures_are_rejected_naming_the_key(change, needle):
    DeviationKind().validate("g.figure3", _figure(), CATALOG)  # the unchanged one is fine
    with pytest.raises(ConfigError, match=needle):
        DeviationKind().validate("g.figure3", _figure(**change), CATALOG)


def test_pfedbred_grid_figures_share_table1_runs():
    catalog = load_catalog(ROOT / "config" / "config.yaml")
    grid = load_grid(ROOT / "config" / "papers" / "pfedbred.yaml", catalog)
    spec = output_spec(grid, "figures", "figure3", catalog, "paper")
    table = figure_or_table_runs(grid, catalog)
    assert set(map(str, spec.cells.values())) <= table
    # spec §9.23's methods (pFedMe, Per-FedAvg, FedAMP, lg, meg, mh) x MNIST MCLR / DNN
    rows = {r for r, _ in spec.cells}
    assert rows == {"pfedme", "perfedavg", "fedamp", "lg", "meg", "mh"}
    assert len(spec.cells) == 12 and spec.client == 0
    assert isinstance(spec, DeviationFigureSpec)  # the figure's kind built it
    for path in spec.cells.values():
        assert path.name == "seed0"


def figure_or_table_runs(grid, catalog):
    """Run folders of the grid's Tables 1 and 2 at paper scale."""
    from fedbench.grid import cells

    return {
        k.folder("paper")
        for name in ("table1", "table2")
        for keys in cells(grid, "tables", name, catalog, "paper").values()
        for k in keys
    }


def test_deltas_sum_to_zero_over_models_on_g():
    g = np.array(RECORD["global_loss"])
    total = sum(deviations(RECORD, i)["G"] for i in range(len(g)))
    assert np.allclose(total, 0.0)
