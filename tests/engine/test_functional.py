import pytest
import torch

from fedbench.engine.functional import sgd_init, sgd_step, sgd_step_, sgd_update


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("momentum,weight_decay", [(0.0, 0.0), (0.9, 1e-2)])
def test_sgd_step_and_update_give_torch_optim_sgds_bits(foreach, momentum, weight_decay):
    # Leaves long enough for the vectorised kernels (and their tails) to run.
    torch.manual_seed(0)
    p0 = {"a": torch.randn(257, 31), "b": torch.randn(37)}
    grads = [{k: torch.randn_like(v) for k, v in p0.items()} for _ in range(3)]
    ref = {k: torch.nn.Parameter(v.clone()) for k, v in p0.items()}
    opt = torch.optim.SGD(
        ref.values(), lr=0.1, momentum=momentum, weight_decay=weight_decay, foreach=foreach
    )
    params, buf = dict(p0), sgd_init(p0)
    mine, mine_buf = dict(p0), sgd_init(p0)
    for step, g in enumerate(grads):
        for k in ref:
            ref[k].grad = g[k].clone()
        opt.step()
        params, buf = sgd_step(params, g, buf, 0.1, momentum, weight_decay)
        mine_buf = sgd_update(mine, g, mine_buf, 0.1, momentum, weight_decay, params_owned=step > 0)
    for k in ref:
        assert torch.equal(params[k], ref[k].detach()), k
        assert torch.equal(mine[k], ref[k].detach()), k


def test_in_place_sgd_on_stacked_clients_matches_sgd_step_per_client():
    g = torch.Generator().manual_seed(1)
    C = 3
    p0 = {"a": torch.randn(C, 3, 2, generator=g), "b": torch.randn(C, 2, generator=g)}
    # Client 0 trains everything; client 1 has no batch; client 2 freezes "b" (an update mask).
    scale = {"a": torch.tensor([1.0, 0.0, 1.0]), "b": torch.tensor([1.0, 0.0, 0.0])}
    params = {k: v.clone() for k, v in p0.items()}
    buf = {k: torch.randn(v.shape, generator=g) for k, v in p0.items()}
    ref_buf = {k: v.clone() for k, v in buf.items()}
    for _ in range(3):
        grads = {k: torch.randn(v.shape, generator=g) for k, v in p0.items()}
        want = []
        for c in range(C):
            p, b = sgd_step(
                {k: params[k][c] for k in params},
                {k: grads[k][c] for k in grads},
                {k: ref_buf[k][c] for k in ref_buf},
                0.1,
                0.9,
                1e-2,
                {k: scale[k][c] for k in scale},
            )
            want.append((p, b))
        sgd_step_(params, grads, buf, 0.1, 0.9, 1e-2, scale)
        ref_buf = {k: torch.stack([b[k] for _, b in want]) for k in buf}
        for k in params:
            torch.testing.assert_close(
                params[k], torch.stack([p[k] for p, _ in want]), rtol=0, atol=1e-6
            )
            torch.testing.assert_close(buf[k], ref_buf[k], rtol=0, atol=1e-6)


def _reference_step(p, g, b, lr, momentum, weight_decay, m):
    """torch.optim.SGD's single-tensor step written out leaf by leaf, out of place (the masked
    form of sgd_step's docstring): fused weight decay and fused update, as torch.optim computes."""
    d = g.add(p, alpha=weight_decay) if weight_decay else g
    nb = b * momentum + d if momentum else b
    d = nb if momentum else d
    if m is None:
        return p.add(d, alpha=-lr), nb
    return torch.addcmul(p, m, d, value=-lr), (m * nb + (1 - m) * b if momentum else b)


@pytest.mark.parametrize(
    "momentum,weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.0, 1e-3), (0.9, 1e-3)]
)
@pytest.mark.parametrize("masked", [False, True])
def test_sgd_update_and_step_match_the_written_out_step_bit_for_bit(momentum, weight_decay, masked):
    g = torch.Generator().manual_seed(0)
    start = {k: torch.randn(4, 3, generator=g) for k in ("a", "b", "c")}
    kept = {k: v.clone() for k, v in start.items()}
    mask = {"b": torch.tensor(0.0 if masked else 1.0)}
    ref, buf_ref = dict(start), sgd_init(start)
    mine, buf = dict(start), sgd_init(start)
    stepped, buf_s = dict(start), sgd_init(start)
    for step in range(4):
        grads = {k: torch.randn(4, 3, generator=g) for k in start}
        grads["c"] = grads["a"]  # one gradient tensor for two leaves, as autograd may hand out
        for k in start:
            ref[k], buf_ref[k] = _reference_step(
                ref[k], grads[k], buf_ref[k], 0.1, momentum, weight_decay, mask.get(k)
            )
        stepped, buf_s = sgd_step(stepped, grads, buf_s, 0.1, momentum, weight_decay, mask)
        buf = sgd_update(mine, grads, buf, 0.1, momentum, weight_decay, mask, params_owned=step > 0)
        for k in start:
            assert torch.equal(mine[k], ref[k]), (step, k)
            assert torch.equal(stepped[k], ref[k]), (step, k)
    for k, v in start.items():
        assert torch.equal(v, kept[k])  # the first step wrote new leaves
