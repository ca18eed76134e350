"""Catalog sweeps: one named algorithm variant per point of `sweep: {param: [values]}`."""

from __future__ import annotations

import pytest

from fedbench.config import ConfigError, expand_sweeps, sweep_name, sweep_tag


def _entry(**sweep):
    return {"algorithm": "pfedbred", "prior": "mh", "lam": 15.0, "sweep": sweep}


def test_a_sweep_expands_to_one_named_variant_per_point():
    out = expand_sweeps(
        {"before": {"algorithm": "fedavg"}, "mh-l{lam}-e{eta}": _entry(lam=[5, 30], eta=[0, 0.1])},
        "t.yaml",
    )
    assert list(out) == ["before", "mh-l5-e0", "mh-l5-e0.1", "mh-l30-e0", "mh-l30-e0.1"]
    # The swept value replaces the entry's own λ; float fields get floats whatever the YAML wrote.
    assert out["mh-l30-e0.1"] == {"algorithm": "pfedbred", "prior": "mh", "lam": 30.0, "eta": 0.1}
    assert isinstance(out["mh-l5-e0"]["eta"], float)
    assert "sweep" not in out["mh-l5-e0"]


@pytest.mark.parametrize(
    ("value", "tag"), [(30, "30"), (30.0, "30"), (0.05, "0.05"), (1e-05, "1e-05"), (0, "0")]
)
def test_sweep_tags_are_stable_and_path_safe(value, tag):
    assert sweep_tag(value) == tag
    assert sweep_name("a-l{lam}", {"lam": value}) == f"a-l{tag}"


@pytest.mark.parametrize(
    ("name", "sweep", "needle"),
    [
        ("m-l{lam}", {"lamda": [1]}, r"sweep\.lamda: not a parameter of pfedbred"),
        ("m-l{lam}", {"lam": []}, r"sweep\.lam: expected a non-empty list"),
        ("m-l{lam}", {"lam": "15"}, r"sweep\.lam: expected a non-empty list"),
        ("m-l{lam}", {"lam": [1, 1.0]}, r"sweep\.lam: repeated"),
        ("m-l{lam}", {"lam": [True]}, r"sweep\.lam: a swept value must be a finite number"),
        ("m-l{lam}", {"lam": [float("nan")]}, r"sweep\.lam: a swept value must be a finite"),
        ("m-k{prox_iters}", {"prox_iters": [1.5]}, r"sweep\.prox_iters: must be an integer"),
        ("m-l{lam}", {"lam": [1], "eta": [0.1]}, r"placeholders \['lam'\] must be the swept"),
        ("m-{lam}/x", {"lam": [1]}, "not path-safe"),
        ("m-l{lam", {"lam": [1]}, "bad name template"),
    ],
)
def test_bad_sweeps_are_rejected_naming_the_key(name, sweep, needle):
    with pytest.raises(ConfigError, match=needle):
        expand_sweeps({name: _entry(**sweep)}, "t.yaml")


def test_a_sweep_may_not_redefine_a_name():
    with pytest.raises(ConfigError, match="'m-l5' is already defined"):
        expand_sweeps({"m-l5": {"algorithm": "pfedbred"}, "m-l{lam}": _entry(lam=[5])}, "t.yaml")
