"""Data layer: sources (fetch, verify, load, stand-in), a registry of them, and partitioners.

Each source's module is imported (and the source made) on first lookup (fedbench.registry): a
training job that only loads a prepared .npz imports none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, FetchError, Source, manifest_verifies
from fedbench.registry import LazyRegistry

__all__ = ["MODES", "SOURCES", "ArrayDataset", "FetchError", "Source", "prepare_dataset"]

SOURCES: Mapping[str, Source] = LazyRegistry(
    {
        "mnist": "fedbench.data.mnist:MNIST",
        "fashion_mnist": "fedbench.data.mnist:FashionMNIST",
        "mnist5k": "fedbench.data.mnist:MNIST5k",
        # DQN-Fed Table 5's FEMNIST-skewed (spec B.5.1 FEM-skew): ByClass's lower-case 'a'-'j'
        "emnist": "fedbench.data.emnist:EMNIST",
        "cifar10": "fedbench.data.cifar:Cifar10",
        "cifar100": "fedbench.data.cifar:Cifar100",
        "synthetic": "fedbench.data.synthetic:Synthetic",
        "shakespeare_plays": "fedbench.data.shakespeare:ShakespearePlays",
        "leaf_shakespeare": "fedbench.data.shakespeare:LeafShakespeare",
        "femnist": "fedbench.data.leaf_femnist:Femnist",
        "femnist_leaf": "fedbench.data.leaf_femnist:FemnistLeaf",
        "tinyimagenet": "fedbench.data.tinyimagenet:TinyImageNet",
        # DQN-Fed Table 10 (spec B.5.2 item 7): Hugging Face hub copy through `datasets`
        "cinic10": "fedbench.data.cinic10:Cinic10",
        # DQN-Fed Table 12 / FedCorr (B.5.2 item 9): the authors' release, placed by hand
        "clothing1m": "fedbench.data.clothing1m:Clothing1M",
        # FedEvg (fedevg.md §3): MedMNIST+ at 64 px, one source per subset
        "dermamnist": "fedbench.data.medmnist:DermaMNIST",
        "organcmnist": "fedbench.data.medmnist:OrganCMNIST",
        # AAggFF (aaggff.md §9.4): natural clients in `groups`
        "berka": "fedbench.data.berka:Berka",
        "mqp": "fedbench.data.mqp:MQP",
        "isic2019": "fedbench.data.isic:ISIC2019",
        "leaf_celeba": "fedbench.data.leaf_aaggff:LeafCelebA",
        "leaf_reddit": "fedbench.data.leaf_aaggff:LeafReddit",
        "speechcommands": "fedbench.data.speechcommands:SpeechCommands",
        "heart": "fedbench.data.heart:Heart",
        "sent140": "fedbench.data.sent140:Sent140",
    },
    build=lambda cls: cls(),  # one instance per source, made on first lookup
    group="fedbench.datasets",
)

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
    src = src.routed(params)  # `source: hub | original`: the files of the route asked for
    if not src.files:
        return src.load(raw_dir, **params)
    if raw_dir is None:
        raise ValueError(f"{source}: real data needs a raw_dir to hold its files")
    raw_dir = Path(raw_dir)
    if not manifest_verifies(raw_dir, src.files):
        src.fetch(raw_dir, **params)
    return src.load(raw_dir, **params)
