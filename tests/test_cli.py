"""The `fedbench` command: subcommands, delegation to the entry-point modules, fast --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fedbench.cli import main

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "config" / "config.yaml")
SUBCOMMANDS = ("cost", "record", "compare", "spec", "data", "catalog")


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert all(f"    {name}  " in out for name in SUBCOMMANDS), out


def test_python_m_fedbench_help_imports_neither_torch_nor_the_catalog():
    code = (
        "import sys, runpy; sys.argv = ['fedbench', '--help']\n"
        "try: runpy.run_module('fedbench', run_name='__main__')\n"
        "except SystemExit as e: assert e.code == 0\n"
        "print(sorted(m for m in ('torch', 'fedbench.config') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "spec" in result.stdout and result.stdout.strip().endswith("[]"), result.stdout


def test_spec_prints_the_resolved_run(capsys):
    args = ["quick", "fmnist", "shards2-k100", "twonn", "fedprox-mu0.01", "1"]
    assert main(["spec", *args, "--config", CONFIG]) == 0
    spec = yaml.safe_load(capsys.readouterr().out)
    assert spec["algorithm"] == {
        "name": "fedprox-mu0.01",
        "algorithm": "fedprox",
        "params": {"mu": 0.01},
    }
    assert spec["scale"] == "quick" and spec["seed"] == 1 and spec["dataset"]["name"] == "fmnist"


def test_spec_with_a_typo_names_the_nearest_algorithms(capsys):
    args = ["quick", "fmnist", "shards2-k100", "twonn", "fedprx-mu0.01", "1"]
    assert main(["spec", *args, "--config", CONFIG]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fedbench spec: unknown algorithm 'fedprx-mu0.01'; nearest: ")
    assert "'fedprox-mu0.01'" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("command", ["cost", "record", "compare", "data"])
def test_every_subcommand_delegates_and_its_usage_says_fedbench_command(command, capsys):
    """One spelling in every usage line: `fedbench <command>` (the modules' `python -m` runs
    take the same arguments)."""
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: fedbench {command} ")


def test_record_passes_its_arguments_on(capsys):
    with pytest.raises(SystemExit) as info:
        main(["record", "quick"])  # its own parser: the table and --out are missing
    assert info.value.code == 2
    assert "the following arguments are required: table, --out" in capsys.readouterr().err


def test_data_status_lists_each_grids_datasets(capsys):
    assert main(["data", "status", "--raw", "/nonexistent", "--scale", "paper"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["scale", "dataset", "source", "state"]
    rows = {line.split()[1]: line for line in lines[1:] if line.startswith("paper ")}
    assert "fashion_mnist" in rows["fmnist"] and "fetchable" in rows["fmnist"]  # nothing fetched
    assert "generated" in rows["synthetic-1-1"]


def test_catalog_lists_names(capsys):
    assert main(["catalog", "algorithms", "--config", CONFIG]) == 0
    names = capsys.readouterr().out.split()
    assert "fedavg" in names and "pfedbred-mh-l30-e0.1" in names  # sweep variants expanded
    assert main(["catalog", "--config", CONFIG]) == 0
    assert "algorithms: " in capsys.readouterr().out
