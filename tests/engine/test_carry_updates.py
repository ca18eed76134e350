"""Per-step carry updates (Algorithm.carry_updates): both executors apply them alike."""

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.opt_in import LocalSteps
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.engine.vectorised import _keep_inactive, kernel_path
from fedbench.rng import Streams


@dataclass(frozen=True)
class Counter(Algorithm):
    """FedAvg whose carry counts the client's steps and sums its real samples' labels."""

    name: ClassVar[str] = "counter"
    carry_updates: ClassVar[bool] = True
    stray: bool = False  # update a key client_begin's carry does not have

    def client_begin(self, global_params, server_state, client_state, ctx):
        return dict(global_params), {"steps": torch.zeros(()), "sums": {"y": torch.zeros(())}}

    def local_loss(self, apply, params, batch, carry, noise):
        y = batch.y.to(torch.float32)
        if batch.mask is not None:
            y = y * batch.mask
        new = {"steps": carry["steps"] + 1, "sums": {"y": carry["sums"]["y"] + y.sum()}}
        if self.stray:
            new["other"] = carry["steps"]
        return self.data_loss(apply, params, batch), new

    def client_end(self, global_params, params, carry, client_state, ctx):
        message, _ = super().client_end(global_params, params, carry, client_state, ctx)
        return message, {"steps": carry["steps"].item(), "y": carry["sums"]["y"].item()}


CFG = dict(
    rounds=2, batch_size=4, lr=0.1, local_epochs=2, clients_per_round=4, momentum=0.9, eval_every=2
)


@pytest.mark.parametrize(
    "executor, chunk", [("sequential", None), ("vectorised", None), ("vectorised", 3)]
)
def test_carry_counts_each_clients_real_steps_and_training_is_fedavgs(executor, chunk, tiny):
    # Clients of 9, 5 and 2 samples at B = 4, E = 2: 6, 4 and 2 steps, the last batch of an
    # epoch short for the first two; under vmap the shorter clients idle for the last steps
    # and must keep their carry. Each epoch sees every sample once: label sum = 2 Σ y.
    fed, apply, p0 = tiny
    fed.train[1], fed.train[2] = fed.train[1][:5], fed.train[2][:2]
    cfg = TrainConfig(**CFG, chunk_size=chunk)
    ours = run_rounds(Run(Counter(), apply, cfg, p0, executor=executor), fed, Streams(3))
    ref = run_rounds(
        Run(build_algorithm("fedavg"), apply, cfg, p0, executor=executor), fed, Streams(3)
    )
    for cid, state in ours.client_states.items():
        n = len(fed.train[cid])
        assert state["steps"] == 2 * -(-n // 4)
        assert state["y"] == pytest.approx(2 * fed.y[fed.train[cid]].sum().item())
    for k in p0:
        torch.testing.assert_close(ours.global_params[k], ref.global_params[k], rtol=0, atol=1e-6)


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_an_update_of_a_key_not_in_the_carry_is_an_error(executor, tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**CFG)
    with pytest.raises(KeyError, match="other"):
        run_rounds(Run(Counter(stray=True), apply, cfg, p0, executor=executor), fed, Streams(3))


def test_layer_chain_kernels_refuse_carry_updates(tiny):
    _, apply, p0 = tiny
    chain, why = kernel_path(Counter(), apply, list(p0))
    assert chain is None and "updates its carry" in why
    for variant in ("code", "paper"):  # pFedMe keeps θ^f / θ̃ in the carry
        chain, why = kernel_path(build_algorithm("pfedme", variant=variant), apply, list(p0))
        assert chain is None and why == "pfedme updates its carry"
    assert kernel_path(build_algorithm("fedavg"), apply, list(p0))[0] is not None


def test_inactive_clients_keep_a_shared_or_stacked_carry():
    # Three clients, the second without a batch: it keeps its old entry, whether that was one
    # tensor shared by all clients (vmap in_dims None) or its own row of a stacked one.
    new = {"a": torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])}
    keep = torch.tensor([True, False, True])
    shared = _keep_inactive(new, {"a": torch.tensor([9.0, 8.0])}, {"a": None}, keep)
    torch.testing.assert_close(shared["a"], torch.tensor([[1.0, 1.0], [9.0, 8.0], [3.0, 3.0]]))
    old = {"a": torch.tensor([[7.0, 7.0], [6.0, 6.0], [5.0, 5.0]])}
    stacked = _keep_inactive(new, old, {"a": 0}, keep)
    torch.testing.assert_close(stacked["a"], torch.tensor([[1.0, 1.0], [6.0, 6.0], [3.0, 3.0]]))


@dataclass(frozen=True)
class Prepared(LocalSteps, Algorithm):
    """FedAvg whose before_step counts the client's steps in the carry (no carry updates, no
    objective of its own: what the layer-chain kernels would otherwise take)."""

    name: ClassVar[str] = "prepared"

    def client_begin(self, global_params, server_state, client_state, ctx):
        return dict(global_params), {"steps": torch.zeros(())}

    def before_step(self, apply, params, batch, carry, noise):
        return {"steps": carry["steps"] + 1}

    def client_end(self, global_params, params, carry, client_state, ctx):
        message, _ = super().client_end(global_params, params, carry, client_state, ctx)
        return message, {"steps": carry["steps"].item()}


def test_before_step_runs_in_both_executors_and_keeps_off_the_kernels(tiny):
    fed, apply, p0 = tiny
    chain, why = kernel_path(Prepared(), apply, list(p0))
    assert chain is None and why == "prepared prepares each step (before_step)"
    cfg = TrainConfig(**{**CFG, "momentum": 0.0})
    runs = {
        ex: run_rounds(Run(Prepared(), apply, cfg, p0, executor=ex), fed, Streams(3))
        for ex in ("sequential", "vectorised")
    }
    for cid, state in runs["vectorised"].client_states.items():
        assert state["steps"] == 2 * -(-len(fed.train[cid]) // 4) > 0
        assert runs["sequential"].client_states[cid] == state
