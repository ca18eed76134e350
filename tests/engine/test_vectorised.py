"""The vectorised executor's parts: batch plans, chunking, the batched-kernel fast path."""

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import masked_mean
from fedbench.engine.build import Run
from fedbench.engine.executors import RoundJob, SequentialExecutor, client_plan, host_plan
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.engine.vectorised import (
    LayerChain,
    VectorisedExecutor,
    _Sink,
    client_bytes,
    kernel_path,
    pick_chunk,
)
from fedbench.models import build_model
from fedbench.rng import Streams


def _job(fed, apply, p0, algo, cfg, ids=None):
    ids = list(range(fed.num_clients)) if ids is None else ids
    states = {i: algo.init_client_state(i, p0, lambda: p0) for i in range(fed.num_clients)}
    server = algo.init_server_state(p0)
    return RoundJob(
        algo=algo,
        apply=apply,
        fed=fed,
        cfg=cfg,
        streams=Streams(3),
        round=2,
        lr=cfg.lr,
        global_params=p0,
        server_state=server,
        client_states=states,
        client_ids=ids,
        pre_losses={},
    )


@pytest.mark.parametrize(
    "sizes, batch, epochs, steps",
    [((9, 5, 2), 4, 2, None), ((9, 5, 2), 4, None, 7), ((8, 3, 1), 8, 1, None)],
)
def test_host_plan_draws_the_same_batches_as_client_plan(
    federation_factory, sizes, batch, epochs, steps
):
    fed = federation_factory(num_clients=3, per_client=12)
    fed.train = [t[:n] for t, n in zip(fed.train, sizes)]
    model = build_model("mlp", (6,), 3, init_seed=0, hidden=4)
    cfg = TrainConfig(
        rounds=3,
        batch_size=batch,
        lr=0.1,
        local_epochs=epochs,
        local_steps=steps,
        clients_per_round=3,
    )
    job = _job(fed, make_apply(model), params_of(model), build_algorithm("fedavg"), cfg)
    for cid in range(3):
        batches, ctx = client_plan(job, cid)
        rows, real = host_plan(job, cid)
        assert len(rows) == len(real) == len(batches) == ctx.num_steps
        for b, r, n in zip(batches, rows, real):
            assert n == len(b) and r[:n].tolist() == b.tolist()
            assert set(r[n:].tolist()) <= set(fed.train[cid].tolist())  # padding: own samples


def test_a_tiny_budget_splits_the_round_into_chunks_with_the_same_result(federation_factory):
    fed = federation_factory(num_clients=4, per_client=8)
    model = build_model("mlp", (6,), 3, init_seed=0, hidden=5000)
    p0, apply = params_of(model), make_apply(model)
    num_params = sum(v.numel() for v in p0.values())
    assert client_bytes(num_params, 3, 6) > 2**20  # one client alone exceeds 1 MiB
    cfg = TrainConfig(
        rounds=1, batch_size=3, lr=0.1, local_epochs=1, clients_per_round=4, memory_budget_mb=1
    )
    algo = build_algorithm("scaffold")
    vec = VectorisedExecutor(cfg.chunk_size, cfg.memory_budget_mb)
    out_v = vec.run(_job(fed, apply, p0, algo, cfg))
    assert vec.last_chunk[0] == 1 and vec.chunks_run == 4
    out_s = SequentialExecutor().run(_job(fed, apply, p0, algo, cfg))
    for k in p0:
        torch.testing.assert_close(
            out_v.messages["delta"][k], out_s.messages["delta"][k], rtol=0, atol=1e-6
        )
    torch.testing.assert_close(out_v.train_losses, out_s.train_losses, rtol=0, atol=1e-6)


def test_the_chunk_fits_the_budget_and_the_override_wins():
    cpu = torch.device("cpu")
    size, why = pick_chunk(50_000, 10, 784, 64, None, cpu)
    assert size * client_bytes(50_000, 10, 784) <= 64 * 2**20 and "budget" in why
    assert pick_chunk(50_000, 10, 784, 64, 3, cpu) == (3, "chunk_size override")
    assert pick_chunk(10**9, 10, 784, 1, None, cpu)[0] == 1


class _Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))  # a function call, not a layer: no chain


def test_fast_path_only_for_the_plain_data_loss_and_plain_chains():
    twocnn = build_model("twocnn", (1, 12, 12), 10, init_seed=0, hidden=8, channels=(2, 4))
    keys = list(params_of(twocnn))
    assert kernel_path(build_algorithm("fedavg"), make_apply(twocnn), keys)[0] is not None
    assert kernel_path(build_algorithm("scaffold"), make_apply(twocnn), keys)[0] is not None
    chain, why = kernel_path(build_algorithm("fedprox"), make_apply(twocnn), keys)
    assert chain is None and "local objective" in why
    bn = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    assert kernel_path(build_algorithm("fedavg"), make_apply(bn), list(params_of(bn)))[0] is None
    f = _Functional()
    chain, why = kernel_path(build_algorithm("fedavg"), make_apply(f), list(params_of(f)))
    assert chain is None and "call_function" in why
    assert LayerChain.build(twocnn, keys[:-1])[0] is None  # a parameter missing from the dict


def _chain_case(conv_kernel="per_client"):
    """A chain of every supported layer kind, 3 clients' perturbed weights and a batch (client 1
    half padded, client 2 all padding); its convolutions run `conv_kernel`."""
    model = nn.Sequential(
        nn.Conv2d(2, 3, 3, stride=2, padding=1, dilation=1, bias=False),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
        nn.Conv2d(3, 4, 2, dilation=2),
        nn.Identity(),
        nn.Flatten(),
        nn.Linear(4, 5),
        nn.ReLU(),
        nn.Linear(5, 3, bias=False),
    )
    g = torch.Generator().manual_seed(0)
    p0 = params_of(model)
    C, B = 3, 4
    params = {k: v + 0.1 * torch.randn((C, *v.shape), generator=g) for k, v in p0.items()}
    x = torch.randn(C, B, 2, 11, 11, generator=g)
    y = torch.randint(0, 3, (C, B), generator=g)
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]])
    chain, why = LayerChain.build(model, list(p0), conv_kernel)
    assert chain is not None, why
    return model, chain, params, x, y, mask


def _client_loss(model, p, xb, yb, mb):
    logits = functional_call(model, p, (xb,))
    return masked_mean(nn.functional.cross_entropy(logits.float(), yb, reduction="none"), mb)


@pytest.mark.parametrize("conv_kernel", ["per_client", "channels_last", "gemm"])
def test_layer_chain_gradients_match_autograd_per_client(conv_kernel):
    """Strided, padded and dilated convolutions, with and without bias, every kernel."""
    model, chain, params, x, y, mask = _chain_case(conv_kernel)
    if conv_kernel == "channels_last":  # float32 operands in that layout, outputs too
        y0, (_, xs) = chain.layers[0].forward(params, x)
        assert all(xc.is_contiguous(memory_format=torch.channels_last) for xc in xs)
        assert y0[0].is_contiguous(memory_format=torch.channels_last)
    sink = _Sink(params, None)
    loss = chain.loss_and_grads(params, x, y, mask, sink)

    def ref(p, xb, yb, mb):
        return _client_loss(model, p, xb, yb, mb)

    want = vmap(grad(ref))(params, x, y, mask)
    torch.testing.assert_close(loss, vmap(ref)(params, x, y, mask), rtol=0, atol=1e-6)
    for k in params:
        torch.testing.assert_close(sink.grads[k], want[k], rtol=0, atol=1e-6)


@pytest.mark.parametrize("conv_kernel", ["per_client", "channels_last", "gemm"])
def test_layer_chain_bf16_gradients_match_autocast_per_client(conv_kernel):
    """On bf16 operands the per-client kernels run channels-last (the layout oneDNN's bf16
    convolutions and pooling are fast in); each client's gradients, under either kernel, still
    equal its autograd under autocast, to bfloat16's rounding, and come back float32."""
    model, chain, params, x, y, mask = _chain_case(conv_kernel)
    sink = _Sink(params, None)
    loss = chain.loss_and_grads(params, x, y, mask, sink, torch.bfloat16)
    if conv_kernel != "gemm":
        y0, (_, xs) = chain.layers[0].forward(
            {k: v.bfloat16() for k, v in params.items()}, x.bfloat16()
        )
        assert all(xc.is_contiguous(memory_format=torch.channels_last) for xc in xs)
        assert y0[0].is_contiguous(memory_format=torch.channels_last)
    for c in range(x.shape[0]):
        p = {k: v[c].clone().requires_grad_() for k, v in params.items()}
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want_loss = _client_loss(model, p, x[c], y[c], mask[c])
        want = dict(zip(p, torch.autograd.grad(want_loss, list(p.values()), allow_unused=True)))
        torch.testing.assert_close(loss[c], want_loss.detach(), rtol=0.02, atol=1e-6)
        for k, g in want.items():
            got = sink.grads[k][c]
            assert got.dtype == torch.float32
            g = torch.zeros_like(got) if g is None else g
            # bf16 keeps 8 significant bits; a gradient chains a few roundings
            assert (got - g).norm() <= 0.02 * g.norm() + 1e-6, (k, c)
    # client 2 has no real sample: nothing moves it, in either precision
    assert all(sink.grads[k][2].abs().max() == 0 for k in params)


@pytest.mark.parametrize("chunk", [None, 2])
def test_fused_update_with_uneven_clients_matches_sequential(tiny, chunk):
    fed, apply, p0 = tiny
    fed.train[1] = fed.train[1][:5]
    fed.train[2] = fed.train[2][:2]
    cfg = TrainConfig(
        rounds=3, batch_size=4, lr=0.2, local_epochs=2, clients_per_round=3, chunk_size=chunk
    )
    runs = [
        run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0, executor=ex), fed, Streams(7))
        for ex in ("sequential", "vectorised")
    ]
    for k in p0:
        torch.testing.assert_close(
            runs[0].global_params[k], runs[1].global_params[k], rtol=0, atol=1e-5
        )
    assert [r["train_loss"] for r in runs[0].records] == pytest.approx(
        [r["train_loss"] for r in runs[1].records], abs=1e-5
    )


def test_clients_without_training_data_do_not_move(federation_factory):
    fed = federation_factory(num_clients=3, per_client=8)
    fed.train[1] = fed.train[1][:0]
    model = build_model("mlp", (6,), 3, init_seed=0, hidden=4)
    p0, apply = params_of(model), make_apply(model)
    cfg = TrainConfig(rounds=1, batch_size=3, lr=0.1, local_epochs=1, clients_per_round=3)
    out = VectorisedExecutor().run(_job(fed, apply, p0, build_algorithm("fedavg"), cfg))
    assert all(out.messages["delta"][k][1].abs().max() == 0 for k in p0)
    assert np.isfinite(out.train_losses.numpy()).all()


def _image_federation(num_clients=4, per_client=10):
    """Random 1 x 8 x 8 images in 3 classes, split evenly (75/25 train/test)."""
    g = torch.Generator().manual_seed(1)
    n = num_clients * per_client
    x = torch.rand(n, 1, 8, 8, generator=g).numpy()
    y = torch.randint(0, 3, (n,), generator=g).numpy()
    idx = np.arange(n).reshape(num_clients, per_client)
    cut = per_client * 3 // 4
    return Federation.from_arrays(
        x, y, [r[:cut] for r in idx], [r[cut:] for r in idx], x[:6], y[:6], 3, torch.device("cpu")
    )


@pytest.mark.parametrize("conv_kernel", ["channels_last", "gemm", "fastest"])
@pytest.mark.parametrize("momentum", [0.0, 0.5])
def test_conv_kernels_agree_with_the_sequential_executor(
    assert_executors_agree, conv_kernel, momentum
):
    """TwoCNN through the layer chain with the GEMM convolutions (fused SGD update, or momentum's
    collected gradients) or the probe's choice, uneven clients in chunks of 3: the same training
    as the sequential executor's autograd, to float32 rounding; run.yaml's executor fields say
    which kernel each convolution ran."""
    fed = _image_federation()
    fed.train[1] = fed.train[1][:3]
    model = build_model("twocnn", (1, 8, 8), 3, init_seed=0, hidden=8, channels=(2, 4))
    p0, apply = params_of(model), make_apply(model)
    runs = {}
    for executor in ("sequential", "vectorised"):
        cfg = TrainConfig(
            rounds=2,
            batch_size=4,
            lr=0.1,
            momentum=momentum,
            local_epochs=2,
            clients_per_round=4,
            chunk_size=3,
            conv_kernel=conv_kernel,
        )
        run = Run(build_algorithm("fedavg"), apply, cfg, p0, executor=executor)
        runs[executor] = run_rounds(run, fed, Streams(5))
    assert_executors_agree(runs["sequential"], runs["vectorised"])
    info = runs["vectorised"].executor_info
    assert info["vectorised_path"] == "batched layer-chain kernels"
    conv = info["vectorised_conv"]
    assert conv["setting"] == conv_kernel and sorted(conv["layers"]) == ["body.0", "body.3"]
    if conv_kernel != "fastest":
        assert set(conv["layers"].values()) == {conv_kernel}
    else:  # one probe per layer and input shape: chunks of 3 and 1 clients
        for probes in conv["layers"].values():
            assert [p["input"][0] for p in probes] == [3, 1]
            for p in probes:
                assert sorted(p["probe_seconds"]) == ["channels_last", "gemm", "per_client"]
                assert p["probe_seconds"][p["kernel"]] == min(p["probe_seconds"].values())


def test_the_default_conv_kernel_is_per_client_and_a_bad_one_is_refused():
    assert (
        TrainConfig(rounds=1, batch_size=2, lr=0.1, local_epochs=1, participation=1.0).conv_kernel
        == "per_client"
    )
    with pytest.raises(ValueError, match="training.conv_kernel: must be one of"):
        TrainConfig(
            rounds=1, batch_size=2, lr=0.1, local_epochs=1, participation=1.0, conv_kernel="im2col"
        )
    with pytest.raises(ValueError, match="conv_kernel must be one of"):
        VectorisedExecutor(conv_kernel="winograd")
