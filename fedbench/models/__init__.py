"""The papers' networks, by catalog name (explicit registry; each splits into `body` and `head`).

Each entry names the class's module, imported on first lookup (fedbench.registry): a run imports
its own network's module, not the other papers'.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from fedbench.models.groups import mixing_groups
from fedbench.registry import LazyRegistry

MODELS: Mapping[str, type[nn.Module]] = LazyRegistry(
    {
        "linear": "fedbench.models.simple:Linear",
        "mlp": "fedbench.models.simple:MLP",
        "twonn": "fedbench.models.simple:TwoNN",
        "twocnn": "fedbench.models.simple:TwoCNN",
        "superfed_twonn": "fedbench.models.superfed:SuperFedTwoNN",
        "superfed_twocnn": "fedbench.models.superfed:SuperFedTwoCNN",
        "resnet9": "fedbench.models.superfed:ResNet9",
        "mobilenet": "fedbench.models.superfed:MobileNet",
        "vgg9": "fedbench.models.superfed:VGG9",
        "nextchar_lstm": "fedbench.models.superfed:NextCharLSTM",
        "pfedbred_dnn": "fedbench.models.pfedbred:PFedBreDDNN",
        "pfedbred_cnn": "fedbench.models.pfedbred:CifarNet",
        "pfedbred_lstm": "fedbench.models.pfedbred:Sent140LSTM",
        # AAggFF (aaggff.md §9.5); Berka and Heart use `linear`
        "leaf_cnn": "fedbench.models.aaggff:LeafCNN",
        "m5": "fedbench.models.aaggff:M5",
        "stacked_lstm": "fedbench.models.aaggff:StackedLSTM",
        "efficientnet_isic": "fedbench.models.aaggff:EfficientNetISIC",
        "distilbert": "fedbench.models.aaggff:DistilBertClassifier",
        "mobilevit": "fedbench.models.aaggff:MobileViT",
        # FedEvg (fedevg.md §2, §4): the ResNet-10 classifier/EBM, FedCGAN's and FedCVAE's models
        "fedevg_resnet10": "fedbench.models.fedevg:FedEvgResNet10",
        "fedevg_acgan": "fedbench.models.fedevg:FedEvgACGAN",
        "fedevg_cvae": "fedbench.models.fedevg:FedEvgCVAE",
        # DQN-Fed (qffl-dqnfed.md B.5.2 item 3, B-D23): torchvision's ResNet-18 with GroupNorm
        "resnet18_gn": "fedbench.models.resnet_gn:ResNet18GN",
        # FedCorr's Clothing1M network (DQN-Fed Table 12, B.5.2 item 9): torchvision's ResNet-50
        "resnet50": "fedbench.models.resnet50:ResNet50",
    },
    group="fedbench.models",
)


# Models whose backward gives the same bits with or without a double-backward graph
# (tests/models/test_plain_backward.py checks each): the sequential executor skips that graph for
# them (~10% of a small model's step). Recurrent nets (fused LSTM), SiLU (EfficientNet,
# MobileViT) and AAggFF's LEAF CNN take other paths without it; a model not listed keeps it.
PLAIN_BACKWARD = frozenset(
    {
        "linear",
        "mlp",
        "twonn",
        "twocnn",
        "superfed_twonn",
        "superfed_twocnn",
        "resnet9",
        "mobilenet",
        "vgg9",
        "pfedbred_dnn",
        "pfedbred_cnn",
    }
)


# Generative models: forward is not "images -> (B, num_classes) logits" for every input size
# (the AC-GAN takes 32 or 64 px only; the CVAE's forward needs labels and returns
# (reconstruction, mu, std)); their algorithms call the parts (`body`, `head`) themselves.
GENERATIVE = frozenset({"fedevg_acgan", "fedevg_cvae"})


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
            model = cls(input_shape=tuple(input_shape), num_classes=num_classes, **params)
        except TypeError as err:
            raise ValueError(f"model {arch!r}: bad parameter ({err})") from None
    model.plain_backward = arch in PLAIN_BACKWARD  # read by the sequential step loop
    return model


__all__ = ["GENERATIVE", "MODELS", "PLAIN_BACKWARD", "build_model", "mixing_groups"]
