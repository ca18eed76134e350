"""Tables of run.yaml numbers (protocol `run`: DQN-Fed's Table 2 wall-clock) and the ratio summary
column to a reference row ("× FedAvg"): values by hand, the machines line, clear errors."""

from __future__ import annotations

import math

import pytest
import yaml

from fedbench.config import ConfigError
from fedbench.io import write_yaml
from fedbench.outputs.table import _check_summaries
from fedbench.papers import load_paper_values
from fedbench.report.collect import RunDataError, load_run, run_series
from fedbench.report.layout import LayoutError
from fedbench.report.tables import TableSpec, build_table, to_markdown

ROWS = [{"id": "fedavg", "label": "FedAvg"}, {"id": "dqnfed", "label": "DQN-Fed"}]
COLS = [{"id": "seconds", "label": "wall-clock (s)"}]
RATIO = {"id": "ratio", "label": "× FedAvg", "stat": "ratio", "columns": ["seconds"]}
SECONDS = {("fedavg", 0): 100.0, ("fedavg", 1): 140.0, ("dqnfed", 0): 150.0, ("dqnfed", 1): 210.0}


def _timed(make, algorithm, seed, seconds, device="cpu"):
    """A fake run whose run.yaml records `seconds` as train_seconds."""
    run_dir = make(seed=seed, algorithm=algorithm)
    info = yaml.safe_load((run_dir / "run.yaml").read_text())
    write_yaml(run_dir / "run.yaml", {**info, "train_seconds": seconds, "device": device})
    return run_dir


def _cells(make):
    return {
        (row, "seconds"): [_timed(make, row, s, SECONDS[(row, s)]) for s in (0, 1)]
        for row in ("fedavg", "dqnfed")
    }


def spec(cells, reference="fedavg", **kw):
    fields = dict(
        paper="demo",
        name="table2",
        caption="Wall-clock",
        metric="train_seconds",
        protocol="run",
        stat="value",
        round="final",
        percent=False,
        rows=ROWS,
        columns=COLS,
        cells=cells,
        scale="quick",
        summaries=[{**RATIO, "reference": reference}],
    )
    return TableSpec(**{**fields, **kw})


def _paper(tmp_path):
    values = [
        {"table": "table2", "row": r, "column": "seconds", "value": v, "where": "test"}
        for r, v in (("fedavg", 1250), ("dqnfed", 1810))
    ]
    write_yaml(tmp_path / "p" / "demo.yaml", {"paper": "demo", "source": "t", "values": values})
    return load_paper_values("demo", tmp_path / "p")


def test_seconds_and_ratio_by_hand(make, tmp_path):
    df = build_table(spec(_cells(make)), _paper(tmp_path))
    by = {(r.row, r.column): r for r in df.itertuples()}
    sec = by[("dqnfed", "seconds")]
    assert sec.ours_mean == pytest.approx(180.0)  # (150 + 210) / 2
    assert sec.ours_std == pytest.approx(math.sqrt(2 * 30.0**2))  # sample std of 150, 210
    assert sec.paper == 1810 and sec.delta == pytest.approx(180.0 - 1810)
    ratio = by[("dqnfed", "ratio")]
    assert ratio.ours_mean == pytest.approx(180.0 / 120.0)  # ratio of the seeds' means
    assert ratio.paper == pytest.approx(1810 / 1250)  # the paper's seconds divided the same way
    assert by[("fedavg", "ratio")].ours_mean == pytest.approx(1.0)
    assert ratio.n_runs == 2
    md = to_markdown(df, spec(_cells(make)))
    assert "| DQN-Fed | 1810.00 | 180.00 ± 42.43 (n=2) | -1630.00 | 1.45 | 1.50 | +0.05 |" in md
    assert "Machines: run.yaml device and torch threads: cpu, ? thread(s): 4 run(s)" in md
    assert "× FedAvg = this row's mean of column seconds over row fedavg's" in md


def test_ratio_without_paper_values_and_a_missing_reference_cell(make):
    cells = _cells(make)
    del cells[("fedavg", "seconds")]
    df = build_table(spec(cells))
    ratio = df[(df.row == "dqnfed") & (df.column == "ratio")].iloc[0]
    assert math.isnan(ratio.ours_mean) and ratio.status == "no runs"
    assert math.isnan(ratio.paper)


def test_machines_line_names_each_device(make):
    cells = _cells(make)
    cells[("dqnfed", "seconds")][1] = _timed(make, "dqnfed", 1, 210.0, device="cuda")
    md = to_markdown(build_table(spec(cells)), spec(cells))
    assert "cpu, ? thread(s): 3 run(s); cuda, ? thread(s): 1 run(s)" in md


def test_unknown_reference_row_is_named():
    with pytest.raises(LayoutError, match=r"reference 'fedavgg' is not a row.*'fedavg'"):
        spec({}, reference="fedavgg")
    out = {"rows": ROWS, "columns": COLS, "summaries": [{**RATIO, "reference": "fedavgg"}]}
    with pytest.raises(ConfigError, match=r"reference: 'fedavgg' is not a row .*'dqnfed'"):
        _check_summaries("dqnfed.table2", out)
    no_ref = {"rows": ROWS, "columns": COLS, "summaries": [RATIO]}
    with pytest.raises(ConfigError, match="reference: None is not a row"):
        _check_summaries("dqnfed.table2", no_ref)
    other = {**RATIO, "stat": "mean", "reference": "fedavg"}
    with pytest.raises(ConfigError, match="only stat 'ratio' takes a reference"):
        _check_summaries("t", {"rows": ROWS, "columns": COLS, "summaries": [other]})


def test_run_protocol_reads_only_run_yaml_numbers(make):
    with pytest.raises(LayoutError, match="protocol 'run' reads run.yaml's"):
        spec({}, metric="top1")
    with pytest.raises(LayoutError, match="needs stat 'value'"):
        spec({}, stat="mean")
    run = load_run(make(seed=0))  # run.yaml without train_seconds
    with pytest.raises(RunDataError, match="no number under 'train_seconds'"):
        run_series(run, "run", "train_seconds", "value")
    timed = load_run(_timed(make, "fedavg", 1, 12.5))
    series = run_series(timed, "run", "train_seconds", "value")
    assert series.to_dict() == {20: 12.5}  # one point, at the final evaluated round
