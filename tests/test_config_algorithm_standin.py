"""An algorithm entry's `standin_params`: hyperparameters merged over its own only at scales whose
data is generated (FedEvg's FID-proxy at the smoke scale), recorded in the run's spec, and
validated like the entry's own."""

from __future__ import annotations

import copy

import pytest

from fedbench.config import ConfigError, resolve_run, validate_catalog

RUN = ("fedevg-mnist", "fedevg-k10-a0.01", "fedevg-resnet10", "fedevg", 1)


def test_standin_params_apply_only_on_standin_data(catalog):
    standin = catalog["algorithms"]["fedevg"]["standin_params"]
    paper = resolve_run(catalog, "paper", *RUN)["algorithm"]
    smoke = resolve_run(catalog, "smoke", *RUN)["algorithm"]
    assert paper == {"name": "fedevg", "algorithm": "fedevg", "params": {}}
    assert smoke["params"] == standin and smoke["params"]["fid_extractor"] == "proxy"
    assert smoke["standin_params"] == standin  # run.yaml shows what was swapped


def test_standin_params_override_the_entrys_own(catalog):
    c = copy.deepcopy(catalog)
    c["algorithms"]["fedevg"] = {
        "algorithm": "fedevg",
        "spc": 5,
        "server_epochs": 3,
        "standin_params": {"spc": 2},
    }
    assert resolve_run(c, "paper", *RUN)["algorithm"]["params"] == {"spc": 5, "server_epochs": 3}
    assert resolve_run(c, "smoke", *RUN)["algorithm"]["params"] == {"spc": 2, "server_epochs": 3}


@pytest.mark.parametrize(
    "standin, named",
    [
        ({"spcc": 2}, r"algorithms\.fedevg\.standin_params \(fedevg\): unknown hyperparameter"),
        ({"spc": "two"}, r"algorithms\.fedevg\.standin_params\.spc: must be an integer"),
        ({"fid_extractor": "clip"}, r"algorithms\.fedevg\.standin_params: fedevg: fid_extractor"),
        ([2], r"algorithms\.fedevg\.standin_params: expected a mapping"),
    ],
)
def test_bad_standin_params_are_named(catalog, standin, named):
    c = copy.deepcopy(catalog)
    c["algorithms"]["fedevg"]["standin_params"] = standin
    with pytest.raises(ConfigError, match=named):
        validate_catalog(c)
