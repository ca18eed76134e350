"""Synthetic(alpha, beta): the generated federated logistic-regression data of FedProx and q-FFL."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fedbench.data.base import REQUIRED, ArrayDataset, Source


def generate_synthetic(
    rng: np.random.Generator,
    alpha: float,
    beta: float,
    num_clients: int = 30,
    dim: int = 60,
    num_classes: int = 10,
    iid: bool = False,
    max_samples: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Samples of Synthetic(alpha, beta) as (x float32 (N, dim), y int64, client id int64).

    Recipe of the generator released with FedProx (Li et al., 2020) and reused by q-FFL:
    client k has u_k ~ N(0, alpha), B_k ~ N(0, beta); W_k ~ N(u_k, 1) (dim x classes),
    b_k ~ N(u_k, 1); v_k ~ N(B_k, 1) per feature; x ~ N(v_k, Sigma), Sigma diagonal with
    Sigma_jj = j^-1.2 (j = 1..dim); y = argmax softmax(W_k^T x + b_k).
    Choices, following that released code: alpha and beta are standard deviations (it calls
    normal(0, alpha)); client sizes are int(lognormal(mean 4, sigma 2)) + 50 with no cap unless
    `max_samples` is given; iid=True uses v_k = B_k * 1 and one global W, b for every client.
    """
    if alpha < 0 or beta < 0:
        raise ValueError(f"synthetic: alpha and beta must be >= 0, got {alpha}, {beta}")
    for key, val in (("num_clients", num_clients), ("dim", dim), ("num_classes", num_classes)):
        if int(val) != val or val < 1:
            raise ValueError(f"synthetic: {key} must be a positive integer, got {val!r}")
    if max_samples is not None and max_samples < 1:
        raise ValueError(f"synthetic: max_samples must be a positive integer, got {max_samples}")
    sizes = rng.lognormal(4.0, 2.0, num_clients).astype(np.int64) + 50
    if max_samples is not None:
        sizes = np.minimum(sizes, max_samples)
    u = rng.normal(0.0, alpha, num_clients)
    big_b = rng.normal(0.0, beta, num_clients)
    sd = np.arange(1, dim + 1, dtype=np.float64) ** (-1.2 / 2)  # sqrt of Sigma's diagonal
    if iid:
        w_global = rng.normal(0.0, 1.0, (dim, num_classes))
        b_global = rng.normal(0.0, 1.0, num_classes)
    xs, ys = [], []
    for k in range(num_clients):
        v = np.full(dim, big_b[k]) if iid else rng.normal(big_b[k], 1.0, dim)
        if iid:
            w, b = w_global, b_global
        else:
            w = rng.normal(u[k], 1.0, (dim, num_classes))
            b = rng.normal(u[k], 1.0, num_classes)
        x = v + sd * rng.standard_normal((int(sizes[k]), dim))
        xs.append(x)
        ys.append(np.argmax(x @ w + b, axis=1))  # argmax of softmax = argmax of the logits
    groups = np.repeat(np.arange(num_clients, dtype=np.int64), sizes)
    x_all = np.concatenate(xs).astype(np.float32)
    return x_all, np.concatenate(ys).astype(np.int64), groups


class Synthetic(Source):
    """Synthetic(alpha, beta), naturally federated; `seed` fixes the data set itself."""

    name = "synthetic"
    input_shape = (60,)
    num_classes = 10
    files = []
    params = {
        "alpha": REQUIRED,
        "beta": REQUIRED,
        "num_clients": 30,
        "dim": 60,
        "num_classes": 10,
        "iid": False,
        "max_samples": None,
        "seed": 0,
    }

    def _dataset(
        self, rng: np.random.Generator, params: dict[str, Any], standin: bool, provenance: str
    ) -> ArrayDataset:
        gen = {k: v for k, v in params.items() if k != "seed"}
        x, y, groups = generate_synthetic(rng, **gen)
        return ArrayDataset(
            name=self.name,
            x_train=x,
            y_train=y,
            x_test=np.zeros((0, params["dim"]), dtype=np.float32),
            y_test=np.zeros(0, dtype=np.int64),
            num_classes=int(params["num_classes"]),
            standin=standin,
            provenance=provenance,
            groups=groups,
        )

    def load(self, raw_dir: str | os.PathLike | None = None, **params: Any) -> ArrayDataset:
        """Generate the data set (nothing to read): one fixed set per parameter set and seed."""
        params = self.check_params(params)
        rng = np.random.default_rng(int(params["seed"]))
        return self._dataset(
            rng, params, False, f"synthetic: FedProx/q-FFL Synthetic generator, params={params}"
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """The same generator at <= 10 clients, each capped at n_train // clients samples."""
        params = self.check_params(params)
        k = min(int(params["num_clients"]), 10)
        cap = max(1, n_train // k)
        if params["max_samples"] is not None:
            cap = min(cap, int(params["max_samples"]))
        params = {**params, "num_clients": k, "max_samples": cap}
        return self._dataset(
            rng, params, True, f"generated stand-in for synthetic (fewer clients), params={params}"
        )
