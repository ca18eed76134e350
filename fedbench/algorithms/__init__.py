"""Every algorithm, by registry name (explicit dict: `ls fedbench/algorithms` shows them).

Each entry names the class's module, imported on first lookup (fedbench.registry): a run imports
its own algorithm's module only, not the others' (nor scipy, which AAggFF and FedPAC use).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# opt_in is imported for its effect: it registers the check every Algorithm subclass passes.
import fedbench.algorithms.opt_in  # noqa: F401
from fedbench.algorithms.base import Algorithm, ClientContext, ServerContext
from fedbench.registry import LazyRegistry

ALGORITHMS: Mapping[str, type[Algorithm]] = LazyRegistry(
    {
        "fedavg": "fedbench.algorithms.base:Algorithm",
        "fedavg_am": "fedbench.algorithms.fedavg_am:FedAvgAM",
        "fedprox": "fedbench.algorithms.fedprox:FedProx",
        "scaffold": "fedbench.algorithms.scaffold:Scaffold",
        "superfed": "fedbench.algorithms.superfed:SuPerFed",
        "fedper": "fedbench.algorithms.partial_sharing:FedPer",
        "lgfedavg": "fedbench.algorithms.partial_sharing:LGFedAvg",
        "fedrep": "fedbench.algorithms.partial_sharing:FedRep",
        "apfl": "fedbench.algorithms.apfl:APFL",
        "ditto": "fedbench.algorithms.ditto:Ditto",
        "pfedme": "fedbench.algorithms.pfedme:PFedMe",
        "perfedavg": "fedbench.algorithms.perfedavg:PerFedAvg",
        "fedamp": "fedbench.algorithms.fedamp:FedAMP",
        "pfedbred": "fedbench.algorithms.pfedbred:PFedBreD",
        # AAggFF chapter (thesis ch. III): AAggFF, its fair-FL baselines, server optimisers.
        "aaggff_s": "fedbench.algorithms.aaggff:AAggFFS",
        "aaggff_d": "fedbench.algorithms.aaggff:AAggFFD",
        "aaggff_s_prox": "fedbench.algorithms.aaggff:AAggFFSProx",
        "aaggff_d_prox": "fedbench.algorithms.aaggff:AAggFFDProx",
        "afl": "fedbench.algorithms.fair_baselines:AFL",
        "qfedavg": "fedbench.algorithms.fair_baselines:QFedAvg",
        "term": "fedbench.algorithms.fair_baselines:TERM",
        "fedmgda": "fedbench.algorithms.fair_baselines:FedMGDA",
        "propfair": "fedbench.algorithms.fair_baselines:PropFair",
        "fedavgm": "fedbench.algorithms.server_opt:FedAvgM",
        "fedadam": "fedbench.algorithms.server_opt:FedAdam",
        "fedyogi": "fedbench.algorithms.server_opt:FedYogi",
        "fedadagrad": "fedbench.algorithms.server_opt:FedAdagrad",
        "fedprox_opt": "fedbench.algorithms.server_opt:FedProxOpt",
        "fedem": "fedbench.algorithms.fedem:FedEM",
        "pfedbayes": "fedbench.algorithms.pfedbayes:PFedBayes",
        "pfedhn": "fedbench.algorithms.pfedhn:PFedHN",
        "fedfomo": "fedbench.algorithms.fedfomo:FedFomo",
        "fedpac": "fedbench.algorithms.fedpac:FedPAC",
        # FedEvg chapter (thesis ch. IV): synthetic data refined on the server.
        "fedevg": "fedbench.algorithms.fedevg:FedEvg",
        "fedcgan": "fedbench.algorithms.fedcgan_fedcvae:FedCGAN",
        "fedcvae": "fedbench.algorithms.fedcgan_fedcvae:FedCVAE",
        # DQN-Fed (specs/qffl-dqnfed.md Part B) and its baseline FedHEAL (§B.4).
        "dqnfed": "fedbench.algorithms.dqnfed:DQNFed",
        "fedheal": "fedbench.algorithms.fedheal:FedHEAL",
        "fedlf": "fedbench.algorithms.fedlf:FedLF",
        "fednl": "fedbench.algorithms.fednl:FedNL",
        "fednew": "fedbench.algorithms.fednew:FedNew",
        # FedCorr's three stages (Table 12), alone and with DQN-Fed's server step (B-D29).
        "fedcorr": "fedbench.algorithms.fedcorr:FedCorr",
        "fedcorr_dqnfed": "fedbench.algorithms.fedcorr:FedCorrDQN",
        # The q-FFL preprint's Algorithm 1 (specs/qffl-dqnfed.md Part A).
        "qffl_localpow": "fedbench.algorithms.qffl_localpow:QFFLLocalPow",
    },
    group="fedbench.algorithms",
)


def hyperparameters(name: str) -> dict[str, Any]:
    """The hyperparameter names of algorithm `name` with their defaults."""
    cls = _cls(name)
    return {f.name: f.default for f in dataclasses.fields(cls)}


def build_algorithm(name: str, **params: Any) -> Algorithm:
    """Instantiate algorithm `name`; an unknown hyperparameter is an error naming the valid ones."""
    cls = _cls(name)
    valid = hyperparameters(name)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(
            f"algorithm {name!r}: unknown hyperparameter(s) {unknown}; "
            f"valid: {sorted(valid) or 'none'}"
        )
    return cls(**params)


def _cls(name: str) -> type[Algorithm]:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; valid: {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


__all__ = ["ALGORITHMS", "Algorithm", "ClientContext", "ServerContext", "build_algorithm"]
