"""AAggFF's networks (aaggff.md §9.5): parameter counts derived by hand, shapes, splits, purity,
and the pre-trained weight paths (local files only, a clear error when missing)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from torch.func import functional_call, vmap

from fedbench.models import build_model
from fedbench.models.aaggff import DistilBertClassifier

TINY_BERT = {"vocab_size": 50, "dim": 16, "layers": 1, "heads": 2, "hidden": 32, "positions": 16}


def _count(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_parameter_counts_by_hand():
    # M5: conv(1->64, k80) + 3 conv(k3) with biases, BatchNorm affine pairs, Linear(256, 35)
    m5 = 1 * 64 * 80 + 64 + 64 * 64 * 3 + 64 + 64 * 128 * 3 + 128 + 128 * 256 * 3 + 256
    m5 += 2 * (64 + 64 + 128 + 256) + 256 * 35 + 35
    assert _count(build_model("m5", (1, 16000), 35, init_seed=0)) == m5 == 150_819
    # LEAF CNN: 4 bias-free conv3x3 with 32 filters, GroupNorm affine pairs, Linear(800, 2)
    cnn = 3 * 32 * 9 + 3 * (32 * 32 * 9) + 4 * 2 * 32 + 32 * 25 * 2 + 2
    assert _count(build_model("leaf_cnn", (3, 84, 84), 2, init_seed=0)) == cnn
    # Reddit: Embedding(10000, 200), LSTM 200->256 and 256->256 (two bias vectors each),
    # Linear(256, 10000)
    lstm = 10000 * 200 + 4 * 256 * (200 + 256 + 2) + 4 * 256 * (256 + 256 + 2) + 256 * 10000
    lstm += 10000
    assert _count(build_model("stacked_lstm", (2, 10), 10000, init_seed=0)) == lstm


def _bert_count(vocab: int, positions: int, dim: int, layers: int, ffn: int, classes: int) -> int:
    """DistilBERT's size by hand: word and position embeddings + LayerNorm; per layer four
    attention Linear(dim, dim), two LayerNorms, FFN dim -> ffn -> dim; the thesis's head."""
    per_layer = 4 * (dim * dim + dim) + 2 * 2 * dim + dim * ffn + ffn + ffn * dim + dim
    return (vocab + positions) * dim + 2 * dim + layers * per_layer


def test_distilbert_size():
    tiny = build_model("distilbert", (2, 8), 2, init_seed=0, pretrained=False, **TINY_BERT)
    assert _count(tiny.body) == _bert_count(50, 16, 16, 1, 32, 2)
    assert _count(tiny.head) == 16 * 16 + 16 + 16 * 2 + 2
    # the same formula at distilbert-base-uncased's sizes gives its published 66M parameters
    assert _bert_count(30522, 512, 768, 6, 3072, 2) == 66_362_880
    defaults = {k: v.default for k, v in inspect.signature(DistilBertClassifier).parameters.items()}
    sizes = ("vocab_size", "positions", "dim", "layers", "hidden", "heads")
    assert [defaults[k] for k in sizes] == [30522, 512, 768, 6, 3072, 12]


def test_efficientnet_count_and_shape():
    from torchvision.models import EfficientNet_B0_Weights

    m = build_model("efficientnet_isic", (3, 32, 32), 8, init_seed=0, pretrained=False)
    torchvision_total = EfficientNet_B0_Weights.IMAGENET1K_V1.meta["num_params"]
    features = torchvision_total - (1280 * 1000 + 1000)  # minus torchvision's ImageNet head
    assert _count(m.body) == features and _count(m.head) == 1280 * 49 * 8 + 8
    assert not any(b is not None and b.numel() for b in m.buffers())  # no running statistics
    # shapes only (meta tensors, no arithmetic): the head sees 1280 x 7 x 7 at any input size
    assert m.to("meta")(torch.empty(2, 3, 32, 32, device="meta")).shape == (2, 8)


def test_efficientnet_truncated_for_smoke_runs():
    # stem (32 channels) and the first MBConv stage (16): the head reads 16 x 7 x 7
    m = build_model(
        "efficientnet_isic", (3, 40, 40), 8, init_seed=0, pretrained=False, feature_blocks=2
    )
    assert _count(m.head) == 16 * 49 * 8 + 8 and _count(m.body) < 3000
    assert m(torch.randn(2, 3, 40, 40)).shape == (2, 8)
    with pytest.raises(ValueError, match="feature_blocks must be 1..9"):
        build_model(
            "efficientnet_isic", (3, 40, 40), 8, init_seed=0, pretrained=False, feature_blocks=10
        )


def test_missing_pretrained_weights_are_named(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    with pytest.raises(ValueError, match="efficientnet_b0_rwightman.*pretrained: false"):
        build_model("efficientnet_isic", (3, 32, 32), 8, init_seed=0)
    missing = tmp_path / "none.bin"
    with pytest.raises(ValueError, match=f"{missing}.*huggingface.co.*pretrained: false"):
        build_model("distilbert", (2, 8), 2, init_seed=0, weights=str(missing), **TINY_BERT)


def test_distilbert_loads_huggingface_keys(tmp_path):
    src = build_model("distilbert", (2, 8), 2, init_seed=1, pretrained=False, **TINY_BERT)
    state = {"distilbert." + k: v for k, v in src.body.state_dict().items()}
    state["vocab_projector.weight"] = torch.zeros(50, 16)  # the masked-LM head, ignored
    path = Path(tmp_path, "pytorch_model.bin")
    torch.save(state, path)
    m = build_model("distilbert", (2, 8), 2, init_seed=2, weights=str(path), **TINY_BERT)
    for (k, a), b in zip(src.body.state_dict().items(), m.body.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    torch.save({"distilbert.embeddings.bad.weight": torch.zeros(1)}, path)
    with pytest.raises(ValueError, match="does not fit"):
        build_model("distilbert", (2, 8), 2, init_seed=2, weights=str(path), **TINY_BERT)
    re = build_model(
        "distilbert", (2, 8), 2, init_seed=0, pretrained=False, reinit_after_load=True, **TINY_BERT
    )
    assert torch.count_nonzero(re.head[0].bias) == 0  # Xavier re-init zeroes Linear biases


def test_distilbert_ignores_padded_positions():
    m = build_model("distilbert", (2, 8), 2, init_seed=0, pretrained=False, **TINY_BERT)
    ids = torch.tensor([[2.0, 7, 9, 3, 0, 0, 0, 0]])
    mask = torch.tensor([[1.0, 1, 1, 1, 0, 0, 0, 0]])
    other = ids.clone()
    other[0, 5:] = 11.0  # different tokens where the mask is 0
    out = m(torch.stack([ids, mask], 1))
    assert out.shape == (1, 2)
    torch.testing.assert_close(out, m(torch.stack([other, mask], 1)))


def test_stacked_lstm_picks_the_last_word_target():
    kw = {"vocab_size": 30, "embed_dim": 4, "hidden": 6}
    m = build_model("stacked_lstm", (2, 5), 30, init_seed=0, lstm_impl="native", **kw)
    x = torch.tensor([[[2.0, 9, 8, 3, 0], [9, 8, 3, 0, 0]], [[2.0, 1, 5, 6, 7], [1, 5, 6, 7, 2]]])
    out = m(x)
    states = m.body.lstm(m.body.embedding(x[:, 0].long()))[0]
    # last target >= 4: position 1 (8) in the first sequence, position 3 (7) in the second
    torch.testing.assert_close(out, m.head(torch.stack([states[0, 1], states[1, 3]])))
    unrolled = build_model("stacked_lstm", (2, 5), 30, init_seed=0, lstm_impl="unrolled", **kw)
    torch.testing.assert_close(unrolled(x), out, atol=1e-5, rtol=1e-5)
    seq = build_model("stacked_lstm", (2, 5), 30, init_seed=0, output="all", **kw)
    assert seq(x).shape == (2, 30, 5)


@pytest.mark.parametrize(
    "arch, shape, classes",
    [("m5", (1, 1200), 35), ("leaf_cnn", (3, 20, 20), 2)],
)
def test_pure_under_vmap_and_split(arch, shape, classes):
    m = build_model(arch, shape, classes, init_seed=0)
    assert all(k.startswith(("body.", "head.")) for k in dict(m.named_parameters()))
    params = {k: torch.stack([v, v + 0.01]) for k, v in m.named_parameters()}
    x = torch.randn(3, *shape)
    out = vmap(lambda p: functional_call(m, p, (x,)))(params)
    assert out.shape == (2, 3, classes)
    one = {k: v[1] for k, v in params.items()}
    torch.testing.assert_close(out[1], functional_call(m, one, (x,)), atol=1e-5, rtol=1e-4)


def test_mobilevit_sizes_match_the_paper():
    # Mehta & Rastegari (ICLR 2022) report 1.3 M parameters for XXS with an ImageNet head
    # (1000 classes); XS (2.3 M) and S (5.6 M) agree too but take longer to build
    m = build_model("mobilevit", (3, 256, 256), 1000, init_seed=0, variant="xxs")
    assert abs(_count(m) / 1e6 - 1.3) < 0.05
    small = build_model("mobilevit", (3, 64, 64), 200, init_seed=0, variant="xxs")
    assert small(torch.randn(2, 3, 64, 64)).shape == (2, 200)
    with pytest.raises(ValueError, match="multiples of 64"):
        build_model("mobilevit", (3, 32, 32), 200, init_seed=0)
    # width_mult 1 is the paper's network; a quarter is a tiny one for smoke runs
    same = build_model("mobilevit", (3, 256, 256), 1000, init_seed=0, variant="xxs", width_mult=1.0)
    assert _count(same) == _count(m)
    tiny = build_model("mobilevit", (3, 64, 64), 200, init_seed=0, variant="xxs", width_mult=0.25)
    assert _count(tiny) < _count(small) / 8
    assert tiny(torch.randn(2, 3, 64, 64)).shape == (2, 200)
