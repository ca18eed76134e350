"""Training objectives (fedbench/objectives.py): hand-computed losses and metrics."""

import math

import pytest
import torch

from fedbench.algorithms.base import Batch
from fedbench.engine.evaluate import evaluate_clients_shared
from fedbench.engine.train_config import TrainConfig
from fedbench.objectives import (
    OBJECTIVES,
    build_objective,
    client_class_weights,
    with_objective,
)


def _const(logits):
    """An apply returning fixed logits (the first len(x) rows), whatever the parameters."""

    def apply(params, x):
        return logits[x[:, 0, 0].long()] if x.ndim == 3 else logits[x[:, 0].long()]

    return apply


def test_bce_logit_by_hand():
    obj = build_objective("bce_logit")
    assert obj.outputs(2) == 1
    z = torch.tensor([[0.0], [2.0], [-1.0]])
    y = torch.tensor([1, 0, 0])
    # -log s(0) = ln 2; -log(1 - s(2)) = ln(1 + e^2); -log(1 - s(-1)) = ln(1 + e^-1)
    want = [math.log(2), math.log(1 + math.e**2), math.log(1 + math.exp(-1))]
    assert obj.sample_loss(z, None, y).tolist() == pytest.approx(want, abs=1e-6)
    assert float(obj.batch_loss(z, Batch(None, y))) == pytest.approx(sum(want) / 3, abs=1e-6)
    u = obj.units(z, None, y, None)
    assert u["hits"][1].tolist() == [0.0, 0.0, 1.0]  # logit > 0 predicts 1
    assert u["score"].tolist() == [0.0, 2.0, -1.0]  # AUROC ranks the logit
    # The padded sample (mask 0) does not count.
    masked = obj.batch_loss(z, Batch(None, y, torch.tensor([1.0, 0.0, 1.0])))
    assert float(masked) == pytest.approx((want[0] + want[2]) / 2, abs=1e-6)


def test_bce_logit_needs_two_classes():
    with pytest.raises(ValueError, match="bce_logit needs 2 classes"):
        build_objective("bce_logit").outputs(3)


def test_bce_logit_evaluation_auroc_and_accuracy():
    """One client: scores (0, 2, -1) for labels (1, 0, 0): the positive beats one negative of
    two, AUROC 1/2; accuracy 1/3 (only the last sample is right)."""
    z = torch.tensor([[0.0], [2.0], [-1.0]])
    x = torch.arange(3.0).unsqueeze(1)
    apply = with_objective(_const(z), build_objective("bce_logit"))
    res = evaluate_clients_shared(apply, {}, x, torch.tensor([1, 0, 0]), [torch.arange(3)], 2)
    assert res["auroc"] == [pytest.approx(0.5)]
    assert res["top1"] == [pytest.approx(1 / 3)]
    assert res["top5"] == [pytest.approx(1.0)]


def test_class_weights_from_counts():
    """Client labels (0, 0, 0, 1) over 3 classes: (count + 1) = (4, 2, 1), N + C = 7, so
    w = (7/4, 7/2, 7); a second client (2, 2) gets (5/1, 5/1, 5/3)."""
    y = torch.tensor([0, 0, 0, 1, 2, 2])
    w = client_class_weights(y, [torch.arange(4), torch.tensor([4, 5])], 3)
    assert w.tolist() == [
        pytest.approx([1.75, 3.5, 7.0]),
        pytest.approx([5.0, 5.0, 5 / 3]),
    ]


def test_class_weighted_ce_by_hand():
    """CE ln 3 at weight 1.75 and ln 4 at weight 3.5: the weighted mean torch's
    CrossEntropyLoss(weight=w) takes, sum w_i l_i / sum w_i."""
    obj = build_objective("class_weighted_ce")
    logits = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, math.log(2)]])
    y = torch.tensor([0, 1])
    w = torch.tensor([1.75, 3.5])
    want = (1.75 * math.log(3) + 3.5 * math.log(4)) / 5.25
    assert float(obj.batch_loss(logits, Batch(None, y, None, w))) == pytest.approx(want, abs=1e-6)
    table = torch.tensor([1.75, 3.5, 7.0])
    ref = torch.nn.CrossEntropyLoss(weight=table)(logits, y)
    assert float(ref) == pytest.approx(want, abs=1e-6)


def _token_batch():
    """Two sequences (V = 8, L = 4); targets in x row 1. Sequence 0: targets (5, 2, 6, 0), words
    at positions 0 and 2; sequence 1: targets (7, 7, 7, 3), words at 0-2."""
    V, L = 8, 4
    logits = torch.zeros(2, V, L)
    logits[0, 3, 0] = math.log(8)  # p(5) = 1/15 and a special token wins: a miss
    logits[0, 6, 2] = math.log(7)  # p(6) = 7/14: a hit
    logits[0, 1, 1] = logits[0, 1, 3] = 50.0  # special targets: huge losses, ignored
    logits[1, 0, :3] = 50.0  # sequence 1 predicts PAD everywhere: 3 misses, ce ~ 50
    targets = torch.tensor([[5, 2, 6, 0], [7, 7, 7, 3]], dtype=torch.float32)
    x = torch.stack([torch.zeros(2, L), targets], dim=1)
    x[1, 0, 0] = 1.0  # row index for _const
    return logits, x


def test_token_ce_ignores_specials_by_hand():
    obj = build_objective("token_ce")
    logits, x = _token_batch()
    seq0 = [math.log(15), math.log(2)]
    # Sequence 0 alone: the mean over its two word positions.
    one = obj.batch_loss(logits[:1], Batch(x[:1], torch.zeros(1, dtype=torch.long)))
    assert float(one) == pytest.approx(sum(seq0) / 2, abs=1e-5)
    # Both: the mean over all 5 word tokens (not the mean of the per-sequence means).
    ce1 = 50.0 + math.log(1 + 7 * math.exp(-50.0))  # -log p(7) with logit 50 on PAD
    both = obj.batch_loss(logits, Batch(x, torch.zeros(2, dtype=torch.long)))
    assert float(both) == pytest.approx((sum(seq0) + 3 * ce1) / 5, abs=1e-4)
    # A padded sequence (mask 0) drops out.
    pad = obj.batch_loss(logits, Batch(x, torch.zeros(2, dtype=torch.long), torch.tensor([1.0, 0])))
    assert float(pad) == pytest.approx(sum(seq0) / 2, abs=1e-5)


def test_token_accuracy_counts_word_tokens():
    """Top-1 over one client's 5 word tokens: 1 hit (sequence 0, position 2) -> 1/5, not the
    per-sequence mean (1/2 + 0) / 2; loss the mean over the same 5 tokens."""
    logits, x = _token_batch()
    apply = with_objective(_const(logits), build_objective("token_ce"))
    y = torch.zeros(2, dtype=torch.long)
    res = evaluate_clients_shared(apply, {}, x, y, [torch.arange(2)], 1)
    assert res["top1"] == [pytest.approx(1 / 5)]
    assert res["n"] == [2]  # the client's test-set size stays in samples (Avg. weights)
    ce1 = 50.0 + math.log(1 + 7 * math.exp(-50.0))
    assert res["loss"] == [pytest.approx((math.log(15) + math.log(2) + 3 * ce1) / 5, abs=1e-4)]
    assert "auroc" not in res


def test_cross_entropy_is_the_default_and_unchanged():
    obj = build_objective("cross_entropy")
    logits = torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, -1.0]])
    y = torch.tensor([2, 1])
    ref = torch.nn.functional.cross_entropy(logits, y, reduction="none")
    assert torch.equal(obj.sample_loss(logits, None, y), ref)
    assert torch.equal(obj.batch_loss(logits, Batch(None, y)), ref.mean())
    assert TrainConfig(
        rounds=1, batch_size=1, lr=1.0, local_epochs=1, participation=1.0
    ).objective == ("cross_entropy")


def test_unknown_objective_is_rejected_naming_the_key():
    with pytest.raises(ValueError, match=r"training\.objective.*bce_logit"):
        TrainConfig(
            rounds=1, batch_size=1, lr=1.0, local_epochs=1, participation=1.0, objective="bce"
        )
    with pytest.raises(ValueError, match=r"training\.objective"):
        build_objective("softmax")
    assert set(OBJECTIVES) == {"cross_entropy", "bce_logit", "class_weighted_ce", "token_ce"}


def test_catalog_training_block_rejects_unknown_objective():
    from fedbench.config import _check_training_block

    _check_training_block({"objective": "token_ce"})
    with pytest.raises(ValueError, match=r"training\.objective"):
        _check_training_block({"objective": "weighted"})
