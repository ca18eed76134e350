"""Data layer: sources (fetch, verify, load, stand-in), a registry of them, and partitioners."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, FetchError, Source, manifest_verifies
from fedbench.data.berka import Berka
from fedbench.data.cifar import Cifar10, Cifar100
from fedbench.data.heart import Heart
from fedbench.data.isic import ISIC2019
from fedbench.data.leaf_aaggff import LeafCelebA, LeafReddit
from fedbench.data.leaf_femnist import Femnist, FemnistLeaf
from fedbench.data.mnist import MNIST, FashionMNIST, MNIST5k
from fedbench.data.mqp import MQP
from fedbench.data.sent140 import Sent140
from fedbench.data.shakespeare import LeafShakespeare, ShakespearePlays
from fedbench.data.speechcommands import SpeechCommands
from fedbench.data.synthetic import Synthetic
from fedbench.data.tinyimagenet import TinyImageNet

__all__ = ["MODES", "SOURCES", "ArrayDataset", "FetchError", "Source", "prepare_dataset"]

SOURCES: dict[str, Source] = {
    "mnist": MNIST(),
    "fashion_mnist": FashionMNIST(),
    "mnist5k": MNIST5k(),
    "cifar10": Cifar10(),
    "cifar100": Cifar100(),
    "synthetic": Synthetic(),
    "shakespeare_plays": ShakespearePlays(),
    "leaf_shakespeare": LeafShakespeare(),
    "femnist": Femnist(),
    "femnist_leaf": FemnistLeaf(),
    "tinyimagenet": TinyImageNet(),
    # AAggFF (aaggff.md §9.4): natural clients in `groups`
    "berka": Berka(),
    "mqp": MQP(),
    "isic2019": ISIC2019(),
    "leaf_celeba": LeafCelebA(),
    "leaf_reddit": LeafReddit(),
    "speechcommands": SpeechCommands(),
    "heart": Heart(),
    "sent140": Sent140(),
}

MODES = ("real", "standin")


def get_source(name: str) -> Source:
    """The registered source called `name`."""
    if name not in SOURCES:
        raise ValueError(f"unknown data source {name!r}; valid: {', '.join(sorted(SOURCES))}")
    return SOURCES[name]


def prepare_dataset(
    source: str,
    params: dict[str, Any],
    raw_dir: Path | None,
    mode: str,
    rng: np.random.Generator,
) -> ArrayDataset:
    """Real data (fetched into raw_dir unless its manifest verifies) or a generated stand-in."""
    src = get_source(source)
    if mode == "standin":
        return src.standin(rng, **params)
    if mode != "real":
        raise ValueError(f"unknown data mode {mode!r}; valid: {', '.join(MODES)}")
    src.check_params(params)
    if not src.files:
        return src.load(raw_dir, **params)
    if raw_dir is None:
        raise ValueError(f"{source}: real data needs a raw_dir to hold its files")
    raw_dir = Path(raw_dir)
    if not manifest_verifies(raw_dir, src.files):
        src.fetch(raw_dir, **params)
    return src.load(raw_dir, **params)
