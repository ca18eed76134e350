"""FedLF (fedbench/algorithms/fedlf.py, the zibinpan/FedLF release): one client is FedAvg's
full-batch gradient step; the fairness row is orthogonal to the loss vector and zero for equal
losses; a layer's direction is the min-norm point of its rows' hull, by hand for two rows; the
rescaling guard as written; clients that dropped out lend their last gradients for τ rounds."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientContext, ServerContext
from fedbench.algorithms.fedlf import fair_row, fedlf_direction, min_norm_point, rescale
from fedbench.engine.build import Run
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_one_client_takes_fedavgs_full_batch_gradient_step(federation_factory, executor):
    fed = federation_factory(num_clients=1, per_client=16)
    model = build_model("mlp", (6,), 3, init_seed=1, hidden=5)
    apply, p0 = make_apply(model), params_of(model)
    # Batches of 5 over 12 training samples (5, 5, 2): the pass's batch-size-weighted mean is
    # the full gradient, which FedAvg takes with one full batch.
    runs = {
        name: run_rounds(
            Run(
                build_algorithm(name),
                apply,
                TrainConfig(rounds=2, batch_size=b, lr=0.3, local_epochs=1, participation=1.0),
                p0,
                executor=executor,
            ),
            fed,
            Streams(0),
        )
        for name, b in (("fedlf", 5), ("fedavg", 12))
    }
    for k in p0:
        torch.testing.assert_close(
            runs["fedlf"].global_params[k], runs["fedavg"].global_params[k], rtol=1e-5, atol=1e-6
        )


def test_the_fairness_row_is_orthogonal_to_the_losses_and_zero_when_they_are_equal():
    l = torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64)
    h = fair_row(l)
    p = torch.full((3,), 3**-0.5, dtype=torch.float64)
    want = ((l @ p) * l / l.norm() - p * l.norm()) / l.norm() ** 2
    torch.testing.assert_close(h, want)
    assert float(h @ l) == pytest.approx(0.0, abs=1e-12)
    assert float(h @ p) < 0  # moving along -h turns the loss vector towards uniform
    assert fair_row(torch.full((4,), 1.3)).abs().max() < 1e-12


def test_the_min_norm_point_of_two_rows_by_hand():
    a = torch.tensor([2.0, 0.0, 1.0], dtype=torch.float64)
    b = torch.tensor([-1.0, 1.0, 0.5], dtype=torch.float64)
    lam = float(((b - a) @ b) / ((a - b) @ (a - b)))  # argmin of |λa + (1-λ)b|², inside (0, 1)
    assert 0 < lam < 1
    torch.testing.assert_close(
        min_norm_point(torch.stack([a, b])), lam * a + (1 - lam) * b, atol=1e-8, rtol=0
    )
    # One row dominates the other's direction: the hull's nearest point is a vertex.
    c = torch.tensor([0.1, 0.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(min_norm_point(torch.stack([a, c])), c, atol=1e-8, rtol=0)


def test_a_layers_rows_are_scaled_to_their_mean_norm_with_the_fairness_row():
    grads = torch.tensor([[3.0, 0.0, 1.0, 1.0], [0.0, 1.0, -1.0, 2.0]])
    losses = torch.tensor([1.0, 2.0])
    layers = [slice(0, 2), slice(2, 4)]
    d = fedlf_direction(grads, losses, None, layers)
    h = fair_row(losses)
    for sl in layers:
        q = grads[:, sl].double()
        norms = q.norm(dim=1, keepdim=True)
        q = q / norms * norms.mean()
        fair = h @ q
        rows = torch.cat([q, (fair / fair.norm() * norms.mean())[None]])
        torch.testing.assert_close(d[sl], min_norm_point(rows))


def test_rescale_keeps_the_mean_gradients_norm_or_falls_back_to_the_raw_direction():
    grads = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    d = torch.tensor([0.1, 0.1], dtype=torch.float64)
    out = rescale(d, grads)  # no conflict: d scaled to |mean g| = 1/√2
    torch.testing.assert_close(out.norm(), grads.mean(0).norm())
    # A direction that raises client 2's loss (g_2·d < 0) and is no more than twice as long
    # after scaling: the release takes the unscaled d.
    bad = torch.tensor([0.6, -0.2], dtype=torch.float64)
    torch.testing.assert_close(rescale(bad, grads), bad)
    # Scaled to more than twice its length, it is halved until within twice, then the raw d.
    tiny = torch.tensor([0.05, -0.01], dtype=torch.float64)
    torch.testing.assert_close(rescale(tiny, grads), tiny)


def test_clients_that_dropped_out_lend_their_last_gradient_for_tau_rounds():
    algo = build_algorithm("fedlf")
    p = {"w": torch.zeros(2)}
    state = algo.init_server_state(p)
    gen = torch.Generator().manual_seed(0)

    def step(state, t, ids):
        msgs = {
            "grad": {"w": torch.randn((len(ids), 2), generator=gen)},
            "loss": torch.rand(len(ids), generator=gen) + 0.5,
        }
        ctx = ServerContext(round=t, num_clients=4, client_ids=tuple(ids), lr=0.1)
        return algo.aggregate(p, msgs, state, ctx)[1]

    state = step(state, 1, [0, 1])
    assert state["history_rows"] == 0  # seen 2 = clients this round: nobody dropped out
    # Seen counts the clients of earlier rounds (the release updates it after the step): 2.
    state = step(state, 2, [2, 3])
    assert state["history_rows"] == 0
    state = step(state, 3, [0, 2])  # seen 4 > 2, tau = 2: 1 (round 1) and 3 (round 2) lend
    assert state["history_rows"] == 2
    state = step(state, 5, [0, 1])  # 2 (round 3) within tau; 3 (round 2) is 3 rounds old
    assert state["history_rows"] == 1
    assert state["seen"] == {0: 5, 1: 5, 2: 3, 3: 2}


def test_local_training_is_refused():
    algo = build_algorithm("fedlf")
    ctx = ClientContext(
        client_id=0, round=1, lr=0.1, rounds=1, num_train=8, num_steps=4, steps_per_epoch=2
    )
    with pytest.raises(ValueError, match="fedlf: .*local_epochs: 1"):
        algo.client_begin({"w": torch.zeros(2)}, {}, {}, ctx)
