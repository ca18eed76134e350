"""The per-run summary CSV: final and best-round values by hand, missing runs listed."""

from __future__ import annotations

import pytest

from fedbench.record import main
from fedbench.report.collect import load_run, run_series
from fedbench.report.runs import summarise_runs


def test_final_and_best_round_per_protocol(runs, tmp_path):
    missing = runs["avg0"].parent.parent / "fedopt" / "seed0"
    frame = summarise_runs([runs["avg0"], runs["avg1"], runs["avg0"], missing], "top1", "mean")
    assert len(frame) == 3  # a directory given twice is one run
    first = frame.iloc[0]
    series = run_series(load_run(runs["avg0"]), "global", "top1", "mean")
    # seed 0's client-mean curve peaks at round 10 and ends at round 20 (conftest CURVES)
    assert first["global_best_round"] == 10
    assert first["global_top1_mean_best"] == pytest.approx(series[10])
    assert first["global_top1_mean_final"] == pytest.approx(series[20])
    assert series[10] > series[20]
    assert (first["dataset"], first["algorithm"], first["seed"]) == ("mnist", "fedavg", 0)
    assert frame.iloc[1]["seed"] == 1 and frame.iloc[1]["status"] == "ok"
    assert frame.iloc[2]["status"] == "missing" and frame.iloc[2]["algorithm"] == "fedopt"


def test_cli_writes_one_row_per_run_of_a_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no runs exist here: every run of the table is listed missing
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "runs.csv"
    main(["quick", "table1", "--config", str(root / "config" / "config.yaml"), "--out", str(out)])
    lines = out.read_text().splitlines()
    assert lines[0].startswith("dataset,partition,model,algorithm,seed,scale,status")
    assert len(lines) == 1 + 27 and all(line.endswith(",missing") for line in lines[1:])
    with pytest.raises(SystemExit, match="no table"):
        main(["quick", "table9", "--config", str(root / "config" / "config.yaml"), "--out", "x"])


def test_cli_table_out_builds_the_table_from_the_finished_runs(tmp_path, monkeypatch, make):
    import shutil
    from pathlib import Path

    from fedbench.record import table_run_dirs

    root = Path(__file__).resolve().parents[2]
    config = str(root / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)
    dirs, _ = table_run_dirs("quick", "table1", None, config)
    first = dirs[0]  # the first cell's seeds 0 and 1 finished, nothing else
    for seed in (0, 1):
        shutil.copytree(make(seed=seed), first.parent / f"seed{seed}")
    prefix = tmp_path / "partial"
    main(["quick", "table1", "--config", config, "--out", "r.csv", "--table-out", str(prefix)])
    md = (tmp_path / "partial.md").read_text()
    assert "PARTIAL: built from the 2 of 27 runs that have finished" in md
    # seed 0 ends at 0.68, seed 1 at 0.74 (conftest CURVES; sample-weighted clients around them)
    body = [line for line in md.splitlines() if line.startswith("| ")]
    assert "(n=2)" in body[1] and body[1].count("—") >= 2
    assert all("(n=" not in line for line in body[2:])
    assert {p.suffix for p in tmp_path.glob("partial.*")} == {
        ".md",
        ".tex",
        ".csv",
        ".json",
        ".html",
    }


def test_partial_table_counts_a_run_shared_by_two_rows_once(tmp_path, monkeypatch):
    """pFedBreD's Fashion-MNIST table reads pfb-perfedavg in two rows (the release's +FT and the
    paper's 2-step P): 13 + 3 rows x 2 columns x 5 seeds = 160 cells' runs, 150 distinct."""
    from pathlib import Path

    from fedbench.record import table_run_dirs, write_partial_table

    config = str(Path(__file__).resolve().parents[2] / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)  # no runs here
    dirs, _ = table_run_dirs("pfedbred", "table1_2_fmnist", None, config)
    assert len(dirs) == 160 and len(set(map(str, dirs))) == 150
    assert write_partial_table("pfedbred", "table1_2_fmnist", None, config, "t") == (0, 150)
    assert "PARTIAL: built from the 0 of 150 runs" in Path("t.md").read_text()


def _quick_table1(tmp_path, monkeypatch, make):
    """quick/table1 (round: final) in tmp_path with its first cell's seeds 0 and 1 finished."""
    import shutil
    from pathlib import Path

    from fedbench.record import table_run_dirs

    config = str(Path(__file__).resolve().parents[2] / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)
    dirs, _ = table_run_dirs("quick", "table1", None, config)
    for seed in (0, 1):
        shutil.copytree(make(seed=seed), dirs[0].parent / f"seed{seed}")
    return config, dirs


def test_a_record_carries_finished_runs_to_a_machine_without_them(tmp_path, monkeypatch, make):
    """The table from a record alone equals the table from the runs it recorded."""
    import shutil

    import pandas as pd

    config, dirs = _quick_table1(tmp_path, monkeypatch, make)
    args = ["quick", "table1", "--config", config]
    main([*args, "--out", "r.csv", "--table-out", "runs"])
    shutil.rmtree(dirs[0].parent)  # another machine: the record only
    main([*args, "--out", "r2.csv", "--table-out", "rec", "--record", "r.csv"])
    cols = ["row", "column", "ours_mean", "ours_std", "n_runs", "delta", "seeds", "rounds"]
    table = {p: pd.read_csv(f"{p}.csv")[cols] for p in ("runs", "rec")}
    pd.testing.assert_frame_equal(table["runs"], table["rec"])
    assert table["rec"]["n_runs"].iloc[0] == 2
    assert "2 of the 2 runs read from the run record r.csv" in (tmp_path / "rec.md").read_text()
    first, second = pd.read_csv("r.csv"), pd.read_csv("r2.csv")
    assert list(first["source"].iloc[:2]) == ["run", "run"]
    assert list(second["source"].iloc[:2]) == ["record", "record"]
    value = "global_top1_wmean_final"
    assert list(second[value].iloc[:2]) == list(first[value].iloc[:2])
    assert (second["status"].iloc[2:] == "missing").all()
    # Back on a machine with one run: the run is read, the other comes from the record.
    shutil.copytree(make(seed=1), dirs[0].parent / "seed1")
    main([*args, "--out", "r3.csv", "--record", "r2.csv"])
    assert list(pd.read_csv("r3.csv")["source"].iloc[:2]) == ["record", "run"]


def test_a_recorded_run_reads_its_best_and_final_round_as_the_run_did(runs):
    from types import SimpleNamespace

    import yaml

    from fedbench.report.layout import Quantity
    from fedbench.report.runs import recorded_run
    from fedbench.report.tables import run_value

    run_dir = runs["avg0_personal"]
    info = yaml.safe_load((run_dir / "run.yaml").read_text())
    info["eval_protocols"] = ["global", "personal"]  # as the engine writes it
    (run_dir / "run.yaml").write_text(yaml.safe_dump(info))
    row = summarise_runs([run_dir], "top1", "mean", "quick").iloc[0]
    rebuilt = recorded_run(row, run_dir, "quick", "top1", "mean", "r.csv")
    run = load_run(run_dir)
    assert rebuilt.key == run.key and rebuilt.status == "ok"
    for protocol in ("global", "personal"):
        q = Quantity("top1", protocol, "mean")
        for mode in ("best", "final"):
            spec = SimpleNamespace(round=mode)
            assert run_value(rebuilt, spec, q) == pytest.approx(run_value(run, spec, q), abs=1e-6)
    # seed 0 peaks at round 10 and ends at round 20 (conftest CURVES)
    assert run_value(rebuilt, SimpleNamespace(round="best"), q)[1] == 10


def test_a_bad_record_is_refused_naming_the_file_and_line(tmp_path, monkeypatch, make):
    import pandas as pd

    config, _ = _quick_table1(tmp_path, monkeypatch, make)
    args = ["quick", "table1", "--config", config, "--out", "o.csv"]
    with pytest.raises(SystemExit, match="--record nope.csv: no such file"):
        main([*args, "--record", "nope.csv"])
    main(["quick", "table1", "--config", config, "--out", "r.csv"])
    good = pd.read_csv("r.csv")
    good.drop(columns="scale").to_csv("noscale.csv", index=False)
    with pytest.raises(SystemExit, match=r"noscale.csv: lacks column\(s\) \['scale'\]"):
        main([*args, "--record", "noscale.csv"])
    good.assign(scale="paper").to_csv("paper.csv", index=False)
    with pytest.raises(SystemExit, match="paper.csv line 2: scale 'paper', the table is at"):
        main([*args, "--record", "paper.csv"])
    other = good.copy()
    other.loc[1, "algorithm"] = "nosuch"
    other.to_csv("other.csv", index=False)
    with pytest.raises(SystemExit, match="other.csv line 3: .*/nosuch/1 is not a run of this"):
        main([*args, "--record", "other.csv"])
    assert not (tmp_path / "o.csv").exists()  # nothing written on a refused record


def test_a_run_from_a_dirty_tree_is_refused_unless_allowed(tmp_path, monkeypatch, make):
    import shutil

    import pandas as pd

    config, dirs = _quick_table1(tmp_path, monkeypatch, make)
    clean, dirty = "0" * 40, "1" * 40 + "-dirty"
    shutil.rmtree(dirs[0].parent)
    shutil.copytree(make(seed=0, git_commit=clean), dirs[0].parent / "seed0")
    shutil.copytree(make(seed=1, git_commit=dirty), dirs[0].parent / "seed1")
    args = ["quick", "table1", "--config", config, "--out", "o.csv", "--table-out", "t"]
    refused = r"1 run\(s\) ran on uncommitted code.*seed1 \(1{40}-dirty\).*--allow-dirty"
    with pytest.raises(SystemExit, match=refused):
        main(args)
    assert not list(tmp_path.glob("o.csv")) and not list(tmp_path.glob("t.*"))  # nothing written
    main([*args, "--allow-dirty"])
    notes = (tmp_path / "t.md").read_text()
    assert f"DIRTY: 1 run(s) ran on uncommitted code (commit(s) {dirty})" in notes
    assert pd.read_csv("o.csv")["git_commit"].tolist()[:2] == [clean, dirty]
    # a record row carrying a dirty commit is refused as the run itself would be
    shutil.rmtree(dirs[0].parent / "seed1")
    with pytest.raises(SystemExit, match="ran on uncommitted code"):
        main(["quick", "table1", "--config", config, "--out", "o2.csv", "--record", "o.csv"])
    # --skip-dirty: the recorded dirty run is left out of the table and the cells (as not run),
    # the record keeps its row; a dirty run on this machine is refused (delete it first)
    main([*args[:4], "--out", "o3.csv", "--record", "o.csv", "--table-out", "t3", "--skip-dirty"])
    t3 = (tmp_path / "t3.md").read_text()
    assert "1 run(s) made from uncommitted code" in t3 and "left out (--skip-dirty)" in t3
    assert "PARTIAL" in t3 and "DIRTY" not in t3
    assert dirty in pd.read_csv("o3.csv")["git_commit"].tolist()
    shutil.copytree(make(seed=1, git_commit=dirty), dirs[0].parent / "seed1")
    with pytest.raises(SystemExit, match="--skip-dirty: 1 run.*delete their folders"):
        main([*args, "--skip-dirty"])
    with pytest.raises(SystemExit, match="exclude each other"):
        main([*args, "--skip-dirty", "--allow-dirty"])
    shutil.rmtree(dirs[0].parent / "seed1")
    # clean runs only: written, no note
    shutil.copytree(make(seed=1, git_commit=clean), dirs[0].parent / "seed1")
    main(args)
    assert "DIRTY" not in (tmp_path / "t.md").read_text()


def test_a_recorded_run_carries_its_final_round_whole(runs):
    """With the final round's detail a record rebuilds every round: final column of the run, not
    only the table's own stat: the spread, the q-FFL tails, Angle and each client's own value."""
    from types import SimpleNamespace

    from fedbench.report.layout import Quantity
    from fedbench.report.runs import recorded_run
    from fedbench.report.tables import run_value

    run_dir = runs["avg1"]
    row = summarise_runs([run_dir], "top1", "mean", "quick").iloc[0]
    assert isinstance(row["global_top1_final_detail"], str)
    rebuilt = recorded_run(row, run_dir, "quick", "top1", "mean", "r.csv")
    run, final = load_run(run_dir), SimpleNamespace(round="final")
    for stat in ("mean", "wmean", "std", "worst10_qffl", "best10_qffl", "angle", "client2"):
        q = Quantity("top1", "global", stat)
        assert run_value(rebuilt, final, q) == run_value(run, final, q), stat
    # by hand: seed 1 ends at 0.74 (conftest CURVES), client 2 at +0.05 (OFFSETS)
    assert run_value(rebuilt, final, Quantity("top1", "global", "client2"))[0] == pytest.approx(
        0.79
    )
    # Without the detail (a record written before it), a per-client column is refused by name.
    bare = recorded_run(
        row.drop("global_top1_final_detail"), run_dir, "quick", "top1", "mean", "r.csv"
    )
    from fedbench.report.collect import RunDataError

    with pytest.raises(RunDataError, match="no global/top1 value of client 2"):
        run_value(bare, final, Quantity("top1", "global", "client2"))


def test_a_damaged_final_detail_is_refused_naming_the_run(runs):
    from fedbench.report.runs import recorded_run

    row = summarise_runs([runs["avg0"]], "top1", "mean", "quick").iloc[0].copy()
    for bad, why in (("{not json", "not the detail"), ('{"summary": {"mean": 0.1}}', "differs")):
        row["global_top1_final_detail"] = bad
        with pytest.raises(SystemExit, match=f"global_top1_final_detail: .*{why}"):
            recorded_run(row, runs["avg0"], "quick", "top1", "mean", "r.csv")


def test_a_best_round_table_reading_more_than_its_own_stat_refuses_a_record(tmp_path, monkeypatch):
    """A record keeps each run's best round of the table's own quantity only."""
    import dataclasses
    from pathlib import Path

    from fedbench.config import load_catalog
    from fedbench.grid import load_grid, output_spec
    from fedbench.record import _best_round_from_record

    config = Path(__file__).resolve().parents[2] / "config"
    catalog = load_catalog(str(config / "config.yaml"))
    grid = load_grid(config / "papers" / "pfedbred_quick.yaml", catalog)
    name = next(n for n, t in grid.outputs("tables").items() if t.get("round") == "best")
    spec = output_spec(grid, "tables", name, catalog, "quick")
    _best_round_from_record(spec, "pfedbred_quick", name)  # its own quantity only: fine
    with pytest.raises(SystemExit, match="spread std at each run's best round"):
        _best_round_from_record(dataclasses.replace(spec, spread="std"), "pfedbred_quick", name)


def _fake_selection_run(run_dir, key, top1: float, scale: str) -> None:
    """A finished run of three clients at top1 - 0.1, top1, top1 + 0.1 (ids 0-2)."""
    from fedbench.io import write_jsonl, write_yaml
    from fedbench.metrics import distribution_pack

    clients = {"ids": [0, 1, 2], "n": [10, 20, 30], "top1": [top1 - 0.1, top1, top1 + 0.1]}
    summary = {"global": {"top1": distribution_pack(clients["top1"], clients["n"])}}
    record = {"round": 3, "status": "ok", "clients": {"global": clients}, "summary": summary}
    write_jsonl(run_dir / "metrics.jsonl", [record])
    run = {"scale": scale, "seed": key.seed}
    run |= {f: getattr(key, f) for f in ("dataset", "partition", "model", "algorithm")}
    write_yaml(run_dir / "run.yaml", {"run": run, "status": "ok", "rounds": 3, "standin": False})


def test_a_selections_choice_is_written_from_its_record(tmp_path, monkeypatch):
    """DQN-Fed's Table 9 selection (ā, σ_a and each class-client's accuracy): the choice file
    from the run record alone equals the workflow's from the runs, so the chosen rows can be made
    in a later sitting without re-making the selection; a part of the selection is refused."""
    import json
    import shutil
    from pathlib import Path

    from fedbench.config import load_catalog
    from fedbench.grid import cells, load_grid
    from fedbench.jobs import choice

    config = Path(__file__).resolve().parents[2] / "config" / "config.yaml"
    catalog = load_catalog(str(config))
    grid = load_grid(config.parent / "papers" / "dqnfed.yaml", catalog)
    monkeypatch.chdir(tmp_path)
    keys = {
        k for ks in cells(grid, "tables", "table9_select", catalog, "smoke").values() for k in ks
    }
    for i, key in enumerate(sorted(keys, key=str)):
        _fake_selection_run(Path(key.folder("smoke")), key, 0.5 + 0.01 * (i % 7), "smoke")
    choice(grid, "table9_select", catalog, "smoke", "from_runs.json", "choice.log")
    argv = ["dqnfed", "table9_select", "--scale", "smoke", "--config", str(config)]
    main([*argv, "--out", "r.csv"])
    shutil.rmtree("results")  # a later sitting: the record only
    main([*argv, "--out", "r2.csv", "--record", "r.csv", "--choice-out", "from_record.json"])
    made = json.loads(Path("from_runs.json").read_text())
    assert json.loads(Path("from_record.json").read_text()) == made
    assert len(made["choices"]["mean"]) >= 3  # q-FFL, FedMGDA+, DQN-Fed ... each chose a row
    lines = Path("r.csv").read_text().splitlines()
    Path("part.csv").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(SystemExit, match="1 of the table's 18 runs are neither here nor in"):
        main([*argv, "--out", "r3.csv", "--record", "part.csv", "--choice-out", "x.json"])
    assert not Path("x.json").exists()
