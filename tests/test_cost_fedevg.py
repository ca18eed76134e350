"""fedbench.cost on the FedEvg grid: MedMNIST's nominal sizes, and FID timed with the proxy
where the Inception-v3 weights are absent (never fetched)."""

from __future__ import annotations

from fedbench import cost
from fedbench.config import resolve_run
from fedbench.grid import load_grid


def _spec(catalog, algorithm="fedevg", dataset="fedevg-dermamnist"):
    model = {"fedevg": "fedevg-resnet10", "fedcgan-k10": "fedevg-acgan"}[algorithm]
    return resolve_run(catalog, "paper", dataset, "fedevg-k10-a1", model, algorithm, 1)


def test_medmnist_nominal_sizes_are_the_official_splits():
    from fedbench.data import SOURCES

    for name in ("dermamnist", "organcmnist"):
        n = SOURCES[name].n_samples
        assert (cost.nominal(name).n_train, cost.nominal(name).n_test) == (n["train"], n["test"])


def test_every_fedevg_run_falls_in_a_cell(catalog):
    grid = load_grid("config/papers/fedevg.yaml", catalog)
    cells = cost.group_cells(catalog, grid, "paper")
    assert sum(len(c.runs) for c in cells) == 144
    assert {c.rounds for c in cells} == {100, 500, 1000}


def test_fid_is_timed_with_the_proxy_without_inception_weights(catalog, tmp_path):
    for algorithm in ("fedevg", "fedcgan-k10"):
        spec = _spec(catalog, algorithm)
        spec["algorithm"]["params"]["fid_weights"] = str(tmp_path / "absent.pth")
        timed, note = cost.timing_spec(spec)
        assert timed["algorithm"]["params"]["fid_extractor"] == "proxy"
        assert "FID timed with the proxy CNN" in note and "absent.pth" in note
        assert "fid_extractor" not in spec["algorithm"]["params"]  # the cell's spec is kept
        weights = tmp_path / "inception.pth"
        weights.write_bytes(b"")
        spec["algorithm"]["params"]["fid_weights"] = str(weights)
        assert cost.timing_spec(spec) == (spec, None)


def test_runs_without_inception_fid_are_timed_as_they_are(catalog):
    spec = _spec(catalog)
    spec["algorithm"]["params"]["fid"] = "none"
    assert cost.timing_spec(spec) == (spec, None)
    proxy = _spec(catalog)
    proxy["algorithm"]["params"]["fid_extractor"] = "proxy"
    assert cost.timing_spec(proxy) == (proxy, None)
    other = resolve_run(catalog, "paper", "mnist", "iid-k100", "twonn", "fedavg", 0)
    assert cost.timing_spec(other) == (other, None)  # no fid field at all
