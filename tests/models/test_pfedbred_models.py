"""pFedBreD networks (pfedbred.md §4): sizes from the layer shapes, shapes, seeds, executors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.engine.vectorised import resolve_executor
from fedbench.models import build_model
from fedbench.models.recurrent import choose_recurrent_impl, unrolled_lstm
from fedbench.rng import Streams


def linear(i: int, o: int) -> int:
    return i * o + o


def conv(cin: int, cout: int, k: int) -> int:
    return cin * cout * k * k + cout


def lstm_layer(i: int, h: int) -> int:
    return 4 * h * (i + h) + 8 * h  # weight_ih, weight_hh, bias_ih, bias_hh


def bilstm(embed: int, h: int, layers: int) -> int:
    return 2 * sum(lstm_layer(embed if k == 0 else 2 * h, h) for k in range(layers))


# (arch, params, input shape, classes, #parameters derived from the spec's layers)
CASES = [
    ("linear", {}, (1, 28, 28), 10, linear(784, 10)),  # MCLR
    ("linear", {}, (1, 28, 28), 62, linear(784, 62)),  # MCLR, FEMNIST
    ("pfedbred_dnn", {}, (1, 28, 28), 10, linear(784, 100) + linear(100, 10)),
    ("pfedbred_dnn", {}, (1, 28, 28), 62, linear(784, 100) + linear(100, 62)),
    (
        "pfedbred_cnn",
        {},
        (3, 32, 32),
        10,
        conv(3, 6, 5) + conv(6, 16, 5) + linear(16 * 5 * 5, 120) + linear(120, 84) + linear(84, 10),
    ),
    (
        "pfedbred_lstm",
        {},
        (25, 50),
        2,
        bilstm(50, 50, 2) + linear(200, 5000) + linear(5000, 2),
    ),
    (
        "pfedbred_lstm",
        {"hidden": 100},
        (25, 50),
        2,
        bilstm(50, 50, 2) + linear(200, 100) + linear(100, 2),
    ),
]
IDS = [f"{a}-{c}-{p.get('hidden', 'default')}" for a, p, _, c, _ in CASES]


def _count(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize(("arch", "params", "shape", "classes", "expected"), CASES, ids=IDS)
def test_parameter_count_from_layer_shapes(arch, params, shape, classes, expected):
    assert _count(build_model(arch, shape, classes, init_seed=0, **params)) == expected


def test_cnn_matches_the_spec_total_and_lstm_defaults_to_the_code_width():
    assert _count(build_model("pfedbred_cnn", (3, 32, 32), 10, init_seed=0)) == 62_006
    lstm = build_model("pfedbred_lstm", (25, 50), 2, init_seed=0)
    assert lstm.head[0].out_features == 5000  # code (hidden_size*100), spec §9.13
    assert lstm.body.lstm.bidirectional and lstm.body.lstm.num_layers == 2


@pytest.mark.parametrize(("arch", "params", "shape", "classes", "expected"), CASES, ids=IDS)
def test_forward_shape_and_body_head_split(arch, params, shape, classes, expected):
    m = build_model(arch, shape, classes, init_seed=0, **params)
    assert m(torch.randn(3, *shape)).shape == (3, classes)
    names = [n for n, _ in m.named_parameters()]
    assert all(n.startswith(("body.", "head.")) for n in names)
    assert any(n.startswith("head.") for n in names)


@pytest.mark.parametrize(
    ("arch", "params", "shape", "classes", "expected"), CASES[1::2], ids=IDS[1::2]
)
def test_seeded_init(arch, params, shape, classes, expected):
    a, b, c = (build_model(arch, shape, classes, init_seed=s, **params) for s in (3, 3, 4))
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb), name
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))


def test_dnn_uses_leaky_relu_slope_0_1():
    m = build_model("pfedbred_dnn", (1, 2, 2), 2, init_seed=0, hidden=1)
    with torch.no_grad():
        m.body[1].weight.fill_(1.0)
        m.body[1].bias.zero_()
        m.head.weight.fill_(1.0)
        m.head.bias.zero_()
    out = m(torch.full((1, 1, 2, 2), -1.0))  # pre-activation -4 -> -0.4
    assert torch.allclose(out, torch.full((1, 2), -0.4))


def test_lstm_encoding_is_the_codes_concatenation():
    m = build_model("pfedbred_lstm", (4, 3), 2, init_seed=0, hidden=5, lstm_hidden=2)
    x = torch.randn(2, 4, 3)
    out, (h_n, _) = m.body.lstm(x)
    # out[:, -1, :H] is the forward final state h_n[-2]; out[:, -1, H:] the backward state after
    # the last token only, h_n[-1] the backward state after the whole sequence.
    enc = torch.cat([h_n[-2], out[:, -1, 2:], h_n[-1], h_n[-2]], dim=1)
    assert torch.allclose(m(x), m.head(enc))
    assert not torch.allclose(out[:, -1, 2:], h_n[-1])


def test_bad_input_shapes_are_rejected():
    with pytest.raises(ValueError, match="seq_len, embed_dim"):
        build_model("pfedbred_lstm", (2, 25, 50), 2, init_seed=0)
    with pytest.raises(ValueError, match="embedding"):
        build_model("pfedbred_lstm", (25,), 2, init_seed=0)  # token ids without a table
    with pytest.raises(ValueError, match="lstm_impl"):
        build_model("pfedbred_lstm", (25, 50), 2, init_seed=0, lstm_impl="cudnn")
    with pytest.raises(ValueError, match="C, H, W"):
        build_model("pfedbred_cnn", (784,), 10, init_seed=0)
    with pytest.raises(ValueError, match="too small"):
        build_model("pfedbred_cnn", (3, 8, 8), 10, init_seed=0)


# Small widths keep the runs in milliseconds; the layer structure is the spec's.
RUNS = [
    ("linear", {}, (1, 28, 28), 10, "vectorised"),
    ("pfedbred_dnn", {"hidden": 8}, (1, 28, 28), 10, "vectorised"),
    ("pfedbred_cnn", {}, (3, 32, 32), 10, "vectorised"),
    ("pfedbred_lstm", {"hidden": 8, "lstm_hidden": 4}, (6, 50), 2, "sequential"),
]


def _federation(shape, classes, clients=3, per_client=8):
    rng = np.random.default_rng(0)
    n = clients * per_client
    x = rng.normal(size=(n, *shape)).astype(np.float32)
    y = rng.integers(0, classes, n)
    idx = np.arange(n).reshape(clients, per_client)
    cut = per_client * 3 // 4
    return Federation.from_arrays(
        x, y, [r[:cut] for r in idx], [r[cut:] for r in idx], x[:4], y[:4], classes, "cpu"
    )


@pytest.mark.filterwarnings("ignore:There is a performance drop")  # vmap over nn.LSTM's kernel
@pytest.mark.parametrize(("arch", "params", "shape", "classes", "auto"), RUNS)
def test_runs_under_the_auto_executor_and_executors_agree(arch, params, shape, classes, auto):
    model = build_model(arch, shape, classes, init_seed=0, **params)
    chosen, _ = resolve_executor("auto", model)
    assert chosen == auto
    fed = _federation(shape, classes)
    apply, p0 = make_apply(model), params_of(model)
    cfg = TrainConfig(rounds=2, batch_size=3, lr=0.05, local_epochs=1, clients_per_round=2)
    runs = {
        ex: run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0, executor=ex), fed, Streams(1))
        for ex in ("sequential", "vectorised")
    }
    for k in p0:
        assert not torch.equal(runs[chosen].global_params[k], p0[k]), k  # it trained
        torch.testing.assert_close(
            runs["sequential"].global_params[k],
            runs["vectorised"].global_params[k],
            rtol=1e-4,
            atol=1e-5,
        )


# --- Sent140: token ids and the dataset's frozen GloVe table --------------------------------


@pytest.mark.parametrize(("bidirectional", "layers"), [(True, 2), (False, 2), (True, 1)])
def test_unrolled_lstm_equals_the_fused_kernel(bidirectional, layers):
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=layers, batch_first=True, bidirectional=bidirectional)
    x = torch.randn(2, 5, 3)
    out, (h_n, _) = lstm(x)
    u_out, u_h = unrolled_lstm(lstm, x)
    torch.testing.assert_close(u_out, out)
    torch.testing.assert_close(u_h, h_n)


def test_token_ids_are_looked_up_in_the_frozen_dataset_table():
    table = np.random.default_rng(0).normal(size=(7, 3)).astype(np.float32)
    table[0] = 0.0  # PAD
    kw = {"hidden": 5, "lstm_hidden": 2}
    ids = build_model("pfedbred_lstm", (4,), 2, init_seed=1, extras={"embedding": table}, **kw)
    emb = build_model("pfedbred_lstm", (4, 3), 2, init_seed=1, **kw)
    tokens = torch.tensor([[1, 6, 0, 0], [5, 5, 2, 3]])
    torch.testing.assert_close(ids(tokens.float()), emb(torch.from_numpy(table)[tokens]))
    # A buffer: not a parameter, so never trained or aggregated; the parameters are the same.
    assert "embedding" not in params_of(ids) and "embedding" in dict(ids.named_buffers())
    assert _count(ids) == _count(emb)
    # Models that do not declare the extra ignore it.
    dnn = build_model("pfedbred_dnn", (1, 2, 2), 2, init_seed=0, extras={"embedding": table})
    assert not list(dnn.buffers())


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_lstm_native_sequential_equals_unrolled_vectorised():
    """What run.py picks for each executor (lstm_impl auto) gives the same training."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 12, (24, 6)).astype(np.float32)  # token ids as floats, like sent140's
    y = rng.integers(0, 2, 24)
    idx = np.arange(24).reshape(3, 8)
    fed = Federation.from_arrays(
        x, y, [r[:6] for r in idx], [r[6:] for r in idx], x[:4], y[:4], 2, "cpu"
    )
    cfg = TrainConfig(
        rounds=1, batch_size=3, lr=0.05, local_epochs=1, clients_per_round=2, eval_every=1
    )
    out = {}
    for ex in ("sequential", "vectorised"):
        model = build_model(
            "pfedbred_lstm",
            (6,),
            2,
            init_seed=0,
            hidden=8,
            lstm_hidden=4,
            vocab_size=12,
            embed_dim=5,
        )
        assert choose_recurrent_impl(model, ex) == {"sequential": "native"}.get(ex, "unrolled")
        p0 = params_of(model)
        out[ex] = run_rounds(
            Run(build_algorithm("fedavg"), make_apply(model), cfg, p0, executor=ex), fed, Streams(1)
        ).global_params
    for k in p0:
        assert not torch.equal(out["sequential"][k], p0[k]), k
        torch.testing.assert_close(out["sequential"][k], out["vectorised"][k], rtol=1e-4, atol=1e-5)
