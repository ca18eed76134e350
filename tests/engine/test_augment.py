"""Training-time augmentation: the transforms by hand, config errors, and both executors."""

import numpy as np
import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.engine.augment import Augment
from fedbench.engine.build import Run
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams


def _img(n=2, c=3, side=4):
    return torch.arange(n * c * side * side, dtype=torch.float32).reshape(n, c, side, side)


def test_quarter_turn_is_an_exact_pixel_permutation():
    x = _img()
    aug = Augment(rotate=90)
    half_pi = torch.full((2,), torch.pi / 2)
    out = aug.apply(x, {"angle": half_pi, "flip": torch.zeros(2, dtype=torch.bool)})
    # A quarter turn maps pixel centres of a square image onto pixel centres: nothing is filled;
    # positive angles turn counter-clockwise, as torchvision's rotate does.
    torch.testing.assert_close(out, torch.rot90(x, k=1, dims=(-2, -1)))
    same = aug.apply(x, {"angle": torch.zeros(2), "flip": torch.zeros(2, dtype=torch.bool)})
    torch.testing.assert_close(same, x)


def test_flip_only_where_drawn():
    x = _img()
    out = Augment(hflip=0.5).apply(
        x, {"angle": torch.zeros(2), "flip": torch.tensor([True, False])}
    )
    torch.testing.assert_close(out[0], x[0].flip(-1))
    torch.testing.assert_close(out[1], x[1])


def test_rotation_fills_black_in_normalised_space():
    x = torch.ones(1, 3, 8, 8)  # a white image
    aug = Augment(rotate=45, normalize="imagenet")
    xn = aug.normalise_pool(x)
    mean = torch.tensor([0.485, 0.456, 0.406])
    std = torch.tensor([0.229, 0.224, 0.225])
    torch.testing.assert_close(xn[0, :, 0, 0], (1 - mean) / std)
    out = aug.apply(xn, {"angle": torch.tensor([torch.pi / 4]), "flip": torch.tensor([False])})
    # After 45 degrees the corner comes from outside the image (black = -mean/std), the centre
    # from inside (still white).
    torch.testing.assert_close(out[0, :, 0, 0], -mean / std)
    torch.testing.assert_close(out[0, :, 4, 4], (1 - mean) / std)
    plain = Augment(rotate=45).apply(
        x, {"angle": torch.tensor([torch.pi / 4]), "flip": torch.tensor([False])}
    )
    assert plain[0, 0, 0, 0] == 0 and plain[0, 0, 4, 4] == 1


def test_draws_are_seeded_and_in_range():
    aug = Augment(rotate=20, hflip=0.5)
    a = aug.draw(torch.Generator().manual_seed(3), (50, 10))
    b = aug.draw(torch.Generator().manual_seed(3), (50, 10))
    torch.testing.assert_close(a["angle"], b["angle"])
    assert a["angle"].abs().max() <= 20 * torch.pi / 180 + 1e-6
    assert 0.3 < a["flip"].float().mean() < 0.7


@pytest.mark.parametrize(
    "block, key",
    [({"rotat": 20}, "rotat"), ({"rotate": -1}, "rotate"), ({"hflip": 2}, "hflip")],
)
def test_bad_augment_config_names_the_key(block, key):
    with pytest.raises(ValueError, match=key):
        TrainConfig(
            rounds=1, batch_size=2, lr=0.1, local_epochs=1, clients_per_round=1, augment=block
        )
    with pytest.raises(ValueError, match="normalize"):
        Augment(normalize="cifar").stats(3)


def _image_fed():
    rng = np.random.default_rng(0)
    x = rng.random((36, 1, 6, 6), dtype=np.float32)
    y = rng.integers(0, 3, 36)
    idx = np.arange(36).reshape(3, 12)
    return Federation.from_arrays(
        x, y, [i[:9] for i in idx], [i[9:] for i in idx], x[:0], y[:0], 3, torch.device("cpu")
    )


def _run(executor=None, **cfg):
    """FedAvg on the image federation: 2 rounds, B = 4, lr 0.1, E = 1, 3 clients, unless `cfg`
    says otherwise."""
    model = build_model("mlp", (1, 6, 6), 3, init_seed=0, hidden=8)
    base = dict(rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3)
    return run_rounds(
        Run(
            build_algorithm("fedavg"),
            make_apply(model),
            TrainConfig(**{**base, **cfg}),
            params_of(model),
            executor=executor,
        ),
        _image_fed(),
        Streams(2),
    )


def test_executors_agree_with_augmentation_and_it_changes_training():
    augment = {"rotate": 20, "hflip": 0.5}
    seq, vec = _run("sequential", augment=augment), _run("vectorised", augment=augment)
    plain = _run("sequential", augment=None)
    for k in seq.global_params:
        assert (seq.global_params[k] - vec.global_params[k]).abs().max() <= 1e-5
    assert any(
        (seq.global_params[k] - plain.global_params[k]).abs().max() > 1e-4
        for k in seq.global_params
    )


def test_augment_test_flag_is_validated():
    assert Augment.from_dict({"hflip": 1.0, "test": True}).test is True
    with pytest.raises(ValueError, match="augment.test"):
        Augment.from_dict({"hflip": 1.0, "test": "yes"})


def test_augmented_test_split_transforms_each_client_sample():
    from fedbench.engine.loop import augmented_test_split

    fed = _image_fed()
    # hflip = 1 flips every image: the expected split is the pool's test samples, mirrored.
    x, y, local = augmented_test_split(fed, Augment(hflip=1.0, test=True), Streams(0), 3)
    for c, idx in enumerate(fed.test):
        assert torch.equal(x[local[c]], fed.x[idx].flip(-1))
        assert torch.equal(y[local[c]], fed.y[idx])
    # Random draws: fresh per evaluation round, the same for the same round and seed.
    half = Augment(hflip=0.5, test=True)
    a, _, _ = augmented_test_split(fed, half, Streams(0), 3)
    b, _, _ = augmented_test_split(fed, half, Streams(0), 3)
    c, _, _ = augmented_test_split(fed, half, Streams(0), 4)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_augment_test_changes_only_the_client_test_metrics():
    def first_eval(test):
        augment = {"rotate": 30, "hflip": 0.5, "test": test}
        return _run(rounds=1, eval_every=1, augment=augment)

    plain, augmented = first_eval(False), first_eval(True)
    # Training is the same (same draws); only the evaluation of the test splits differs.
    for k in plain.global_params:
        assert torch.equal(plain.global_params[k], augmented.global_params[k])
    loss = [r.records[0]["clients"]["global"]["loss"] for r in (plain, augmented)]
    assert loss[0] != loss[1]
