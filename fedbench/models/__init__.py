"""The papers' networks, by catalog name (explicit registry; each splits into `body` and `head`)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedbench.models.aaggff import (
    M5,
    DistilBertClassifier,
    EfficientNetISIC,
    LeafCNN,
    MobileViT,
    StackedLSTM,
)
from fedbench.models.groups import mixing_groups
from fedbench.models.pfedbred import CifarNet, PFedBreDDNN, Sent140LSTM
from fedbench.models.simple import MLP, Linear, TwoCNN, TwoNN
from fedbench.models.superfed import (
    VGG9,
    MobileNet,
    NextCharLSTM,
    ResNet9,
    SuperFedTwoCNN,
    SuperFedTwoNN,
)

MODELS: dict[str, type[nn.Module]] = {
    "linear": Linear,
    "mlp": MLP,
    "twonn": TwoNN,
    "twocnn": TwoCNN,
    "superfed_twonn": SuperFedTwoNN,
    "superfed_twocnn": SuperFedTwoCNN,
    "resnet9": ResNet9,
    "mobilenet": MobileNet,
    "vgg9": VGG9,
    "nextchar_lstm": NextCharLSTM,
    "pfedbred_dnn": PFedBreDDNN,
    "pfedbred_cnn": CifarNet,
    "pfedbred_lstm": Sent140LSTM,
    # AAggFF (aaggff.md §9.5); Berka and Heart use `linear`
    "leaf_cnn": LeafCNN,
    "m5": M5,
    "stacked_lstm": StackedLSTM,
    "efficientnet_isic": EfficientNetISIC,
    "distilbert": DistilBertClassifier,
    "mobilevit": MobileViT,
}


def build_model(
    arch: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    init_seed: int,
    extras: dict[str, np.ndarray] | None = None,
    **params,
) -> nn.Module:
    """Build `arch` with parameters initialised from `init_seed` (global RNG state is restored).

    `extras`: the prepared dataset's extra arrays; a model class receives those it names in
    `DATA_INPUTS` (e.g. Sent140's `embedding`) as keyword arguments.
    """
    if arch not in MODELS:
        raise ValueError(f"unknown model arch {arch!r}; valid: {', '.join(sorted(MODELS))}")
    cls = MODELS[arch]
    params = {
        **{k: v for k, v in (extras or {}).items() if k in getattr(cls, "DATA_INPUTS", ())},
        **params,
    }
    # fork_rng keeps the caller's global torch RNG untouched: the seed is local to this build.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)
        try:
            return cls(input_shape=tuple(input_shape), num_classes=num_classes, **params)
        except TypeError as err:
            raise ValueError(f"model {arch!r}: bad parameter ({err})") from None


__all__ = ["MODELS", "build_model", "mixing_groups"]
