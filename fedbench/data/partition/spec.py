"""Partition kinds and their spec keys: the registry, the checks run when the catalog is loaded,
and `make_partition`, which builds what a catalog entry describes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbench.data.noise import KINDS as NOISE_KINDS
from fedbench.data.noise import VARIANTS as NOISE_VARIANTS
from fedbench.data.noise import noisy_partition_labels
from fedbench.data.partition.common import _is_int
from fedbench.data.partition.fedcorr import fedcorr_noniid
from fedbench.data.partition.fedevg import fedevg_code, fedevg_dirichlet
from fedbench.data.partition.groups import natural
from fedbench.data.partition.label_skew import (
    ASSIGNMENTS,
    _dirichlet,
    by_label,
    dirichlet_capped,
    dirichlet_equal,
    iid,
    random_classes,
    shards,
)
from fedbench.data.partition.powerlaw import POWERLAW_SIZES, label_powerlaw
from fedbench.data.partition.splits import (
    split_official,
    split_train_test,
    split_train_test_stratified,
)
from fedbench.data.partition.store import Partition

# A builder's info key carrying the pool labels it changed (popped before the meta is written).
RELABELLED = "_relabelled"


@dataclass(frozen=True)
class Partitioner:
    """A partition kind: how to build it and which spec keys it takes."""

    build: Callable[..., tuple[list[np.ndarray], dict[str, Any]]]
    required: tuple[str, ...]
    defaults: dict[str, Any]


def _build_iid(labels, groups, rng, num_clients):
    return iid(len(labels), num_clients, rng), {}


def _build_shards(labels, groups, rng, num_clients, shards_per_client, assignment):
    clients = shards(labels, num_clients, shards_per_client, rng, assignment)
    return clients, {"left_out": int(len(labels) - sum(len(c) for c in clients))}


def _build_dirichlet(labels, groups, rng, num_clients, alpha, min_size, max_tries):
    return _dirichlet(labels, num_clients, alpha, rng, min_size, max_tries)


def _build_dirichlet_capped(labels, groups, rng, num_clients, alpha, drop_at_most):
    clients = dirichlet_capped(labels, num_clients, alpha, rng, drop_at_most)
    return clients, {"clients_kept": len(clients), "clients_asked": num_clients}


def _build_dirichlet_equal(labels, groups, rng, num_clients, alpha):
    return dirichlet_equal(labels, num_clients, alpha, rng), {}


def _build_fedevg_code(labels, groups, rng, num_clients, alpha, mincls, min_samples, max_tries):
    return fedevg_code(labels, num_clients, alpha, rng, mincls, min_samples, max_tries)


def _build_fedevg_dirichlet(labels, groups, rng, num_clients, alpha, mincls, max_tries):
    return fedevg_dirichlet(labels, num_clients, alpha, rng, mincls, max_tries)


def _build_natural(labels, groups, rng, num_clients):
    if groups is None:
        raise ValueError("partition kind 'natural' needs a dataset with groups (natural clients)")
    clients = natural(groups)
    info: dict[str, Any] = {"groups_available": len(clients)}
    if num_clients is not None and num_clients < len(clients):
        keep = np.sort(rng.choice(len(clients), size=int(num_clients), replace=False))
        clients = [clients[i] for i in keep]
        info["groups_kept"] = keep.tolist()
    return clients, info


def _build_by_label(labels, groups, rng):
    clients = by_label(labels)
    return clients, {"labels": [int(labels[c[0]]) for c in clients]}


def _build_label_powerlaw(
    labels, groups, rng, num_clients, labels_per_client, sizes, mnist_label_bug
):
    clients, relabelled = label_powerlaw(
        labels, num_clients, labels_per_client, rng, sizes, mnist_label_bug
    )
    info: dict[str, Any] = {"left_out": int(len(labels) - sum(len(c) for c in clients))}
    if relabelled is not None:
        info["mislabelled"] = int((relabelled != np.asarray(labels)).sum())
        info[RELABELLED] = relabelled
    return clients, info


def _build_random_classes(labels, groups, rng, num_clients, classes_per_client):
    clients, drawn = random_classes(labels, num_clients, classes_per_client, rng)
    left_out = int(len(labels) - sum(len(c) for c in clients))
    return clients, {"client_classes": drawn, "left_out": left_out}


def _build_fedcorr_noniid(labels, groups, rng, num_clients, class_prob, alpha):
    return fedcorr_noniid(labels, num_clients, rng, class_prob, alpha)


PARTITIONERS: dict[str, Partitioner] = {
    "iid": Partitioner(_build_iid, ("num_clients",), {}),
    "shards": Partitioner(
        _build_shards, ("num_clients", "shards_per_client"), {"assignment": "sorted_roundrobin"}
    ),
    "dirichlet": Partitioner(
        _build_dirichlet, ("num_clients", "alpha"), {"min_size": 10, "max_tries": 100}
    ),
    "dirichlet_capped": Partitioner(
        _build_dirichlet_capped, ("num_clients", "alpha"), {"drop_at_most": 10}
    ),
    "dirichlet_equal": Partitioner(_build_dirichlet_equal, ("num_clients", "alpha"), {}),
    # FedEvg (fedevg.md §7 item 13): the release's split, overlap bug included, and the
    # thesis profile's disjoint one
    "fedevg_code": Partitioner(
        _build_fedevg_code,
        ("num_clients", "alpha"),
        {"mincls": 2, "min_samples": 5, "max_tries": 10_000},
    ),
    "fedevg_dirichlet": Partitioner(
        _build_fedevg_dirichlet, ("num_clients", "alpha"), {"mincls": 2, "max_tries": 10_000}
    ),
    "natural": Partitioner(_build_natural, (), {"num_clients": None}),
    # DQN-Fed's Table 9 (the q-FFL / AFL Fashion-MNIST protocol): one client per class
    "by_label": Partitioner(_build_by_label, (), {}),
    # DQN-Fed's FEMNIST-skewed (specs/qffl-dqnfed.md B.5.1 FEM-skew): k random classes a client
    "random_classes": Partitioner(_build_random_classes, ("num_clients", "classes_per_client"), {}),
    # DQN-Fed's Table 12: FedCorr's Clothing1M split (util/sampling.py; options.py's defaults)
    "fedcorr_noniid": Partitioner(
        _build_fedcorr_noniid, ("num_clients",), {"class_prob": 0.7, "alpha": 10.0}
    ),
    "label_powerlaw": Partitioner(
        _build_label_powerlaw,
        ("num_clients", "labels_per_client"),
        {"sizes": "mnist", "mnist_label_bug": False},
    ),
}
# Every kind. val_fraction: share of each client's training split held out for validation
# (choosing a personalisation setting, e.g. SuPerFed's λ, without looking at the test split).
# pool_fraction < 1: the clients are built on a seeded random share of the pool (small-scale
# grids on a full dataset); drawn first, and only then, so 1.0 leaves every partition unchanged.
# pool_max: the same with a number of samples (the whole pool when it is smaller, e.g. a smoke
# stand-in); at most one of the two.
# test_is_val: the validation split takes the test split's place and the test samples are left
# out (a hyperparameter selection, DQN-Fed's B-D13, reads a share of each client's training
# split held out, on the very clients and training samples of the partition at the same seed,
# and never sees its test samples); needs val_fraction > 0.
COMMON_KEYS = {
    "test_fraction": 0.0,
    "val_fraction": 0.0,
    "test_is_val": False,
    "label_noise": None,
    "pool_fraction": 1.0,
    "pool_max": None,
    # "random": int(f n) test samples; "random_round": round(f n); "leaf": n - max(1,
    # int((1 - f) n)) (LEAF's split); "stratified": ceil(f n) with the client's class shares
    # (sklearn's stratified split); "official": the client's rows that came from the source's
    # official test split (a pool the `pool: merged` transform built; test_fraction 0)
    "test_split": "random",
}
TEST_SPLITS = ("random", "random_round", "leaf", "stratified", "official")
NOISE_KEYS = ("kind", "eps", "variant")
LABEL_KEYS = ("name", "description")  # accepted and recorded, never used


def check_partition_spec(spec: dict[str, Any]) -> None:
    """Raise ValueError naming the bad key of a partition spec (kind, keys, fractions)."""
    kind = spec.get("kind")
    if kind not in PARTITIONERS:
        raise ValueError(f"partition kind {kind!r} is unknown; valid: {sorted(PARTITIONERS)}")
    p = PARTITIONERS[kind]
    valid = {"kind", *p.required, *p.defaults, *COMMON_KEYS, *LABEL_KEYS}
    unknown = sorted(set(spec) - valid)
    if unknown:
        raise ValueError(f"{kind} partition: unknown key(s) {unknown}; valid: {sorted(valid)}")
    missing = [k for k in p.required if k not in spec]
    if missing:
        raise ValueError(f"{kind} partition: missing key(s) {missing}; valid: {sorted(valid)}")
    if spec.get("test_is_val") is True and not spec.get("val_fraction"):
        raise ValueError(
            f"{kind} partition: test_is_val evaluates on the validation split; set val_fraction "
            "(e.g. 0.1: a tenth of each client's training split)"
        )
    for key in ("test_fraction", "val_fraction"):
        value = spec.get(key, COMMON_KEYS[key])
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (ok and 0.0 <= value < 1.0):
            raise ValueError(f"{kind} partition: {key} must be a number in [0, 1), got {value!r}")
    value = spec.get("pool_fraction", 1.0)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and 0.0 < value <= 1.0):
        raise ValueError(
            f"{kind} partition: pool_fraction must be a number in (0, 1], got {value!r}"
        )
    pool_max = spec.get("pool_max")
    if pool_max is not None and not (_is_int(pool_max) and pool_max >= 1):
        raise ValueError(
            f"{kind} partition: pool_max must be a positive integer or null, got {pool_max!r}"
        )
    if pool_max is not None and value < 1.0:
        raise ValueError(f"{kind} partition: give pool_fraction or pool_max, not both")
    for key, value in spec.items():
        why = _bad_value(key, value)
        if why is not None:
            raise ValueError(f"{kind} partition: {key} must be {why}, got {value!r}")
    if spec.get("test_split") == "official" and spec.get("test_fraction", 0.0):
        raise ValueError(
            f"{kind} partition: test_split official takes each client's official test rows as "
            f"its test split; drop test_fraction (got {spec['test_fraction']!r}) or choose "
            "another test_split"
        )


def _bad_value(key: str, v: Any) -> str | None:
    """Why a spec value is out of range (None = fine): checked when the config is loaded, so a
    bad value fails at DAG build rather than in the partition job."""
    if key == "num_clients":
        return None if v is None or (_is_int(v) and v >= 1) else "a positive integer"
    if key in ("shards_per_client", "labels_per_client", "classes_per_client", "max_tries"):
        return None if _is_int(v) and v >= 1 else "a positive integer"
    if key == "mincls":
        return None if _is_int(v) and v >= 1 else "a positive integer (at most the classes)"
    if key in ("min_size", "drop_at_most", "min_samples"):
        return None if _is_int(v) and v >= 0 else "an integer >= 0"
    if key == "alpha":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v > 0
        return None if ok else "a finite number > 0"
    if key == "class_prob":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1
        return None if ok else "a number in (0, 1]"
    if key == "test_is_val":
        return None if isinstance(v, bool) else "true or false"
    if key == "assignment":
        return None if v in ASSIGNMENTS else f"one of {list(ASSIGNMENTS)}"
    if key == "sizes":
        return None if v in POWERLAW_SIZES else f"one of {list(POWERLAW_SIZES)}"
    if key == "test_split":
        return None if v in TEST_SPLITS else f"one of {list(TEST_SPLITS)}"
    if key == "mnist_label_bug":
        return None if isinstance(v, bool) else "true or false"
    if key in LABEL_KEYS:
        return None if isinstance(v, str) else "a string"
    if key == "label_noise" and v is not None:
        ok = isinstance(v, dict) and not set(v) - set(NOISE_KEYS) and "kind" in v and "eps" in v
        eps = v.get("eps") if isinstance(v, dict) else None
        ok = ok and v["kind"] in NOISE_KINDS and v.get("variant", "thesis") in NOISE_VARIANTS
        ok = ok and isinstance(eps, (int, float)) and not isinstance(eps, bool) and 0 <= eps <= 1
        return (
            None
            if ok
            else (
                f"null or a mapping {{kind: {'|'.join(NOISE_KINDS)}, eps: a number in [0, 1], "
                f"variant: {'|'.join(NOISE_VARIANTS)} (optional)}}"
            )
        )
    return None


def make_partition(
    labels: np.ndarray,
    groups: np.ndarray | None,
    spec: dict[str, Any],
    rng: np.random.Generator,
    num_classes: int | None = None,
    official_test: np.ndarray | None = None,
) -> Partition:
    """Build the partition a catalog entry describes, split each client into train/test, apply
    the entry's `label_noise` ({kind: pair|symmetric, eps, variant: thesis|code}) if any, and
    hold out `val_fraction` of each client's training split for validation if set.

    `official_test`: the prepared dataset's marks of the pool rows from the official test split
    (`ArrayDataset.official_test`); `test_split: official` needs them."""
    check_partition_spec(spec)
    if spec.get("test_split") == "official":
        if official_test is None or len(official_test) != len(labels):
            raise ValueError(
                f"{spec['kind']} partition: test_split official needs a dataset whose pool marks "
                "its official test rows: give the dataset `transform: {pool: merged}`"
            )
    kind = spec["kind"]
    p = PARTITIONERS[kind]
    params = {**p.defaults, **{k: spec[k] for k in (*p.required, *p.defaults) if k in spec}}
    test_fraction = float(spec.get("test_fraction", COMMON_KEYS["test_fraction"]))
    val_fraction = float(spec.get("val_fraction", COMMON_KEYS["val_fraction"]))
    labels = np.asarray(labels)
    pool_fraction = float(spec.get("pool_fraction", 1.0))
    pool_max = spec.get("pool_max")
    pool = None
    if pool_fraction < 1.0 or (pool_max is not None and pool_max < len(labels)):
        size = max(1, int(round(pool_fraction * len(labels))))
        if pool_max is not None:
            size = int(pool_max)
        pool = np.sort(rng.choice(len(labels), size=size, replace=False))
        sub_groups = None if groups is None else np.asarray(groups)[pool]
        clients, info = p.build(labels[pool], sub_groups, rng, **params)
        clients = [pool[c] for c in clients]  # back to indices into the whole pool
        if RELABELLED in info:
            full = labels.copy()
            full[pool] = info[RELABELLED]
            info[RELABELLED] = full
    else:
        clients, info = p.build(labels, groups, rng, **params)
    relabelled = info.pop(RELABELLED, None)  # a generator's own labels (pFedBreD's MNIST bug)
    base = labels if relabelled is None else relabelled
    test_split = spec.get("test_split", COMMON_KEYS["test_split"])
    if test_split == "official":
        train, test = split_official(clients, official_test)
    elif test_split == "stratified":
        train, test = split_train_test_stratified(clients, base, test_fraction, rng)
    else:
        rounding = {"random_round": "round", "leaf": "leaf"}.get(test_split, "floor")
        train, test = split_train_test(clients, test_fraction, rng, rounding)
    noise = spec.get("label_noise")
    noisy = None
    if noise is not None:
        bad = sorted(set(noise) - set(NOISE_KEYS)) if isinstance(noise, dict) else ["?"]
        if bad or "kind" not in noise or "eps" not in noise:
            raise ValueError(
                f"{kind} partition: label_noise needs kind and eps (and optionally variant), "
                f"got {noise!r}"
            )
        classes = int(num_classes) if num_classes is not None else int(labels.max()) + 1
        noisy = noisy_partition_labels(
            base,
            train,
            noise["kind"],
            float(noise["eps"]),
            classes,
            rng,
            noise.get("variant", "thesis"),
        )
    meta = {
        "kind": kind,
        "params": params,
        "test_fraction": test_fraction,
        **({"test_split": test_split} if test_split != "random" else {}),
        "num_samples": int(len(labels)),
        **(
            {"pool_fraction": pool_fraction, "pool_size": int(len(pool))}
            if pool is not None
            else {}
        ),
        "num_clients": len(clients),
        "client_sizes": [len(c) for c in clients],
        "train_sizes": [len(t) for t in train],
        "test_sizes": [len(t) for t in test],
        **info,
        **{k: spec[k] for k in LABEL_KEYS if k in spec},
    }
    if noisy is not None:
        meta["label_noise"] = dict(noise)
        meta["flipped_train_labels"] = int(sum(int((noisy[t] != base[t]).sum()) for t in train))
    val: list[np.ndarray] = []
    if val_fraction > 0:
        # Drawn last, so the clients, test splits and label noise equal the val_fraction=0 ones;
        # validation labels carry the training noise, as a client's own labels would.
        train, val = split_train_test(train, val_fraction, rng)
        meta.update(
            val_fraction=val_fraction,
            train_sizes=[len(t) for t in train],
            val_sizes=[len(v) for v in val],
        )
    if spec.get("test_is_val"):  # the test samples are left out: nothing reads them
        meta.update(test_is_val=True, left_out_test_sizes=meta["test_sizes"])
        test, val = val, []
        meta["test_sizes"] = meta.pop("val_sizes")
    return Partition(train, test, meta, noisy if noisy is not None else relabelled, val)
