import pytest
import torch

from fedbench.models import GENERATIVE, MODELS, build_model


def _count(m):
    return sum(p.numel() for p in m.parameters())


def test_fedavg_2nn_and_cnn_sizes():
    # 2NN: 784*200+200 + 200*200+200 + 200*10+10
    # CNN (28x28x1): conv 1->32, 32->64 (5x5), FC 3136->512->10
    assert _count(build_model("twonn", (1, 28, 28), 10, init_seed=0)) == 199_210
    cnn = 32 * 25 + 32 + 64 * 32 * 25 + 64 + 3136 * 512 + 512 + 512 * 10 + 10
    assert _count(build_model("twocnn", (1, 28, 28), 10, init_seed=0)) == cnn


SHAPES = {
    "twocnn": (3, 32, 32),
    "mobilenet": (3, 64, 64),
    "nextchar_lstm": (80,),
    "pfedbred_lstm": (25, 50),  # GloVe-embedded tokens
    "distilbert": (2, 8),  # token ids and attention mask
    "efficientnet_isic": (3, 32, 32),
    "m5": (1, 1200),  # raw audio
    "mobilevit": (3, 64, 64),
    "stacked_lstm": (2, 5),  # input and target token ids
    "resnet50": (3, 32, 32),
}
# Small sizes (and no pretrained weights: nothing is downloaded in tests) where the defaults are
# the papers' full-size networks; their own sizes are tested in test_aaggff_models.py.
KWARGS = {
    "distilbert": {
        "pretrained": False,
        "vocab_size": 50,
        "positions": 16,
        "dim": 16,
        "layers": 1,
        "hidden": 32,
        "heads": 2,
    },
    "efficientnet_isic": {"pretrained": False},
    "mobilevit": {"variant": "xxs"},
    "stacked_lstm": {"vocab_size": 7, "embed_dim": 4, "hidden": 6},
    "resnet50": {"pretrained": False, "layers": [1, 1, 1, 1], "base": 4},
}


# The generative models (FedCGAN's AC-GAN, FedCVAE's CVAE) are built at 32 or 64 px only and
# map (noise or image, labels) to images: tests/models/test_fedevg_models.py covers them.
@pytest.mark.parametrize("arch", sorted(set(MODELS) - GENERATIVE))
def test_shapes_and_body_head_split(arch):
    shape = SHAPES.get(arch, (1, 28, 28))
    m = build_model(arch, shape, 7, init_seed=0, **KWARGS.get(arch, {}))
    x = torch.ones(2, *shape) if arch == "distilbert" else torch.zeros(2, *shape)
    assert m(x).shape == (2, 7)
    names = [n for n, _ in m.named_parameters()]
    assert any(n.startswith("head.") for n in names)
    assert all(n.startswith(("body.", "head.")) for n in names)


def test_init_is_seeded_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    a = build_model("twonn", (1, 28, 28), 10, init_seed=3)
    b = build_model("twonn", (1, 28, 28), 10, init_seed=3)
    c = build_model("twonn", (1, 28, 28), 10, init_seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.head.weight, b.head.weight)
    assert not torch.equal(a.head.weight, c.head.weight)


def test_unknown_arch_and_param_are_named():
    with pytest.raises(ValueError, match="twonnn"):
        build_model("twonnn", (1, 28, 28), 10, init_seed=0)
    with pytest.raises(ValueError, match="twonn"):
        build_model("twonn", (1, 28, 28), 10, init_seed=0, hiden=3)
