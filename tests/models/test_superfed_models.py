"""SuPerFed networks (superfed.md §5): sizes, shapes, splits, purity, mixing groups."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import functional_call, vmap

from fedbench.models import build_model, mixing_groups
from fedbench.models.superfed import BasicBlock

# (arch, input shape, classes, #params from superfed.md §5 table, "#params (global)" column)
SPEC = [
    ("superfed_twonn", (1, 28, 28), 10, 238_800),
    ("superfed_twocnn", (3, 28, 28), 10, 722_800),
    ("resnet9", (3, 28, 28), 100, 5_054_784),
    ("mobilenet", (3, 64, 64), 200, 364_480),
    ("vgg9", (1, 28, 28), 62, 1_718_416),
    ("nextchar_lstm", (80,), 100, 821_024),
]
ARCHS = [s[0] for s in SPEC]


def _model(arch: str, **params) -> nn.Module:
    _, shape, classes, _ = next(s for s in SPEC if s[0] == arch)
    return build_model(arch, shape, classes, init_seed=0, **params)


def _inputs(arch: str, n: int = 2) -> torch.Tensor:
    _, shape, _, _ = next(s for s in SPEC if s[0] == arch)
    gen = torch.Generator().manual_seed(0)
    if arch == "nextchar_lstm":
        return torch.randint(0, 100, (n, *shape), generator=gen).float()
    return torch.randn(n, *shape, generator=gen)


@pytest.mark.parametrize(("arch", "shape", "classes", "expected"), SPEC)
def test_parameter_count_matches_spec(arch, shape, classes, expected):
    m = build_model(arch, shape, classes, init_seed=0)
    assert sum(p.numel() for p in m.parameters()) == expected


def test_fedavg_twonn_default_unchanged():
    m = build_model("twonn", (1, 28, 28), 10, init_seed=0)
    assert sum(p.numel() for p in m.parameters()) == 199_210


@pytest.mark.parametrize(("arch", "shape", "classes", "expected"), SPEC)
def test_forward_shape(arch, shape, classes, expected):
    assert _model(arch)(_inputs(arch)).shape == (2, classes)


def test_twocnn_flattens_to_3136_and_vgg9_to_512():
    assert _model("superfed_twocnn").head[0].in_features == 64 * 7 * 7
    assert _model("vgg9").head[1].in_features == 512


@pytest.mark.parametrize("arch", ARCHS)
def test_body_head_split_and_no_bias_outside_batchnorm(arch):
    m = _model(arch)
    names = [n for n, _ in m.named_parameters()]
    assert all(n.startswith(("body.", "head.")) for n in names)
    assert any(n.startswith("head.") for n in names)
    for module in m.modules():
        if isinstance(module, nn.BatchNorm2d):
            continue
        own = [n for n, _ in module.named_parameters(recurse=False)]
        assert not [n for n in own if n.startswith("bias")], (arch, type(module).__name__, own)


@pytest.mark.parametrize("arch", ["resnet9", "mobilenet"])
def test_batchnorm_is_stateless(arch):
    m = _model(arch)
    bns = [x for x in m.modules() if isinstance(x, nn.BatchNorm2d)]
    assert bns and all(not bn.track_running_stats for bn in bns)
    assert not list(m.buffers())
    x = _inputs(arch)
    train_out = m.train()(x)
    assert torch.allclose(m.eval()(x), train_out)  # batch statistics in evaluation too


def _vmap_matches_separate(model: nn.Module, x: torch.Tensor) -> None:
    base = {n: p.detach() for n, p in model.named_parameters()}
    other = {n: p + 0.05 * torch.randn_like(p) for n, p in base.items()}
    stacked = {n: torch.stack([base[n], other[n]]) for n in base}
    batched = vmap(lambda p: functional_call(model, p, (x,)))(stacked)
    for i, params in enumerate((base, other)):
        assert torch.allclose(batched[i], functional_call(model, params, (x,)), atol=1e-5)


def test_resnet9_vmap_over_two_parameter_sets_matches_separate_calls():
    m = build_model("resnet9", (3, 28, 28), 10, init_seed=0, widths=(8, 8, 16, 16), hidden=8)
    _vmap_matches_separate(m, torch.randn(3, 3, 28, 28))


def test_nextchar_lstm_vmap_and_native_agree():
    m = build_model("nextchar_lstm", (6,), 12, init_seed=0, vocab_size=12, hidden=16)
    x = torch.randint(0, 12, (3, 6)).float()
    _vmap_matches_separate(m, x)
    m.lstm_impl = "native"
    native = m(x)
    m.lstm_impl = "unrolled"
    assert torch.allclose(m(x), native, atol=1e-5)


def test_nextchar_lstm_float_ids_are_cast():
    m = build_model("nextchar_lstm", (5,), 80, init_seed=0, vocab_size=80, hidden=8)
    ids = torch.randint(0, 80, (2, 5))
    assert m.body.embedding.num_embeddings == 80
    assert torch.equal(m(ids.float()), m(ids))


def test_basic_block_identity_shortcut_option():
    torch.manual_seed(0)
    code = BasicBlock(4, 4, 1, identity_shortcut=False)
    plain = BasicBlock(4, 4, 1, identity_shortcut=True)
    plain.load_state_dict(code.state_dict())
    x = torch.randn(2, 4, 5, 5)
    assert code.downsample is None
    assert torch.allclose(code(x), torch.relu(code.module(x)))
    assert torch.allclose(plain(x), torch.relu(code.module(x) + x))


# Groups derived from each architecture: one per Linear / Conv2d / BatchNorm2d / Embedding / LSTM.
GROUPS = {
    "superfed_twonn": 4,  # FC784-200, FC200-200 | FC200-200, FC200-10
    "superfed_twocnn": 2 + 3,  # two convs | three FCs
    # stem conv+BN; block 1: 2 conv + 2 BN; blocks 2-4: 2 conv + 2 BN + downsample conv+BN; 2 FCs
    "resnet9": 2 + 4 + 3 * 6 + 2,
    "mobilenet": 2 + 4 * 4 + 2,  # stem conv+BN; 4 x (dw, BN, pw, BN); 2 FCs
    "vgg9": 6 + 2,  # six convs, two FCs
    "nextchar_lstm": 3,  # embedding, the 2-layer LSTM, FC
}


@pytest.mark.parametrize("arch", ARCHS)
def test_mixing_groups_partition_the_parameters(arch):
    m = _model(arch)
    groups = mixing_groups(m)
    assert len(groups) == GROUPS[arch]
    flat = [n for g in groups for n in g]
    assert sorted(flat) == sorted(n for n, _ in m.named_parameters())
    assert len(flat) == len(set(flat))


def test_mixing_groups_keep_batchnorm_and_lstm_whole():
    bn_groups = [g for g in mixing_groups(_model("resnet9")) if len(g) == 2]
    assert bn_groups and all(
        sorted(n.rsplit(".", 1)[1] for n in g) == ["bias", "weight"] for g in bn_groups
    )
    lstm = mixing_groups(_model("nextchar_lstm"))[1]
    expected = [f"body.lstm.weight_{k}_l{i}" for i in (0, 1) for k in ("ih", "hh")]
    assert sorted(lstm) == sorted(expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_unknown_param_error_names_arch(arch):
    with pytest.raises(ValueError, match=arch):
        _model(arch, hiden=3)


@pytest.mark.parametrize(
    ("arch", "shape"),
    [("mobilenet", (3, 28, 28)), ("nextchar_lstm", (1, 28, 28)), ("vgg9", (784,))],
)
def test_bad_input_shape_is_named(arch, shape):
    with pytest.raises(ValueError, match=arch):
        build_model(arch, shape, 10, init_seed=0)


def test_auto_lstm_impl_follows_the_executor():
    from fedbench.models.recurrent import choose_recurrent_impl

    for executor, want in (("sequential", "native"), ("vectorised", "unrolled")):
        m = build_model("nextchar_lstm", (6,), 12, init_seed=0, vocab_size=12, hidden=16)
        assert m.lstm_impl == "auto"
        assert choose_recurrent_impl(m, executor) == want and m.lstm_impl == want
    fixed = build_model("nextchar_lstm", (6,), 12, init_seed=0, vocab_size=12, lstm_impl="unrolled")
    assert choose_recurrent_impl(fixed, "sequential") == "unrolled"  # an explicit choice stays
    assert choose_recurrent_impl(build_model("twonn", (1, 28, 28), 10, init_seed=0), "x") is None
    with pytest.raises(ValueError, match="lstm_impl"):
        build_model("nextchar_lstm", (6,), 12, init_seed=0, lstm_impl="fused")
