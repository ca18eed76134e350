"""The summary's paired ratios and which measurement a target reads (plain tests, no timing)."""

import pytest
from summary import check_targets, paired_cases, paired_ratio, user_path


def test_paired_ratio_is_the_median_of_each_repetitions_ratio():
    times = {"naive": [2.0, 9.0, 3.0], "sequential": [1.0, 10.0, 2.0]}
    # ratios 2.0, 0.9, 1.5: the median 1.5; the minima's ratio would be 2.0 / 1.0 = 2.0.
    assert paired_ratio(times, "naive", "sequential") == pytest.approx(1.5)
    assert paired_ratio({"naive": [4.0, 1.0]}, "naive", "sequential") is None
    assert paired_ratio({"a": [1.0, 3.0], "b": [1.0, 1.0]}, "a", "b") == pytest.approx(2.0)


def test_targets_read_the_paired_run_over_the_best_of():
    best_of = {"fedavg-twocnn-100": {"arch": "twocnn", "clients": 100, "sequential_vs_naive": 0.75}}
    bench = {
        "extra_info": {
            "kind": "paired_executors",
            "arch": "twocnn",
            "clients": 100,
            "times": {"naive": [5.0, 6.2], "sequential": [4.8, 6.0], "vectorised": [4.0, 4.5]},
        }
    }
    paired = paired_cases([bench])
    target = "twocnn 100 clients: sequential >= 0.95x naive"
    alone = {t["target"]: t for t in check_targets(best_of)}
    both = {t["target"]: t for t in check_targets(best_of, None, paired)}
    assert not alone[target]["met"] and alone[target]["value"] == pytest.approx(0.75)
    expected = (5.0 / 4.8 + 6.2 / 6.0) / 2
    assert both[target]["met"] and both[target]["value"] == pytest.approx(expected)


def test_the_bf16_ceiling_takes_each_repetitions_faster_layout_and_sits_beside_its_target():
    bench = {
        "extra_info": {
            "kind": "paired_ceiling",
            "arch": "resnet9",
            "times": {
                "fp32": [4.0, 6.0, 5.0],
                "fp32_cl": [5.0, 3.0, 5.0],
                "bf16": [2.0, 2.0, 4.0],
                "bf16_cl": [4.0, 1.0, 2.0],
            },
        }
    }
    paired = paired_cases([bench])
    ceiling = paired["resnet9-ceiling"]
    # per repetition: min fp32 layout / min bf16 layout = 4/2, 3/1, 5/2 -> median 2.5
    assert ceiling["bf16_ceiling"] == pytest.approx(2.5)
    assert ceiling["channels_last_fp32"] == pytest.approx(1.0)  # 0.8, 2.0, 1.0
    assert ceiling["channels_last_bf16"] == pytest.approx(2.0)  # 0.5, 2.0, 2.0
    target = {t["target"]: t for t in check_targets({}, None, paired)}
    resnet9 = target["resnet9 sequential: bf16 >= 90% of the bf16 ceiling (2.25x fp32)"]
    assert resnet9["ceiling"] == pytest.approx(2.5) and resnet9["value"] is None
    assert not resnet9["met"]
    assert "ceiling" not in target["twocnn vectorised: bf16 >= 90% of the bf16 ceiling (-x fp32)"]
    # the round's own bf16 gain against 90 % of the ceiling: 2.3x meets 2.25x, 2.2x does not
    for gain, met in ((2.3, True), (2.2, False)):
        precision = {"resnet9-sequential": {"bf16_speedup": gain}}
        got = {t["target"]: t for t in check_targets({}, precision, paired)}
        assert got["resnet9 sequential: bf16 >= 90% of the bf16 ceiling (2.25x fp32)"]["met"] is met


def test_the_user_path_target_reads_the_median_round_over_the_best_of():
    paths = {
        "fedavg-twonn-10": {"ratio": 1.19},
        "fedavg-twonn-100": {"ratio": 1.21},
    }
    got = {t["target"]: t for t in check_targets({}, None, None, paths)}
    assert got["twonn 10 clients: user path <= 1.2x best-of, paired"]["met"]
    assert not got["twonn 100 clients: user path <= 1.2x best-of, paired"]["met"]
    assert not check_targets({})[4]["met"]  # no user-path run: not met


def test_the_user_path_ratio_is_the_median_of_its_pairs():
    """Each user-path run over the best-of timed right after it; the target reads the median of
    those ratios, not the last run over test_round.py's best-of (printed beside it)."""
    info = {
        "kind": "user_path",
        "arch": "twonn",
        "clients": 10,
        "median_round_s": 0.9,
        "rounds": 5,
        "threads": 2,
        "pairs": [  # ratios 1.8, 1.2, 1.3; rounds that only train 1.2, 1.0, none
            {"median_round_s": 0.9, "round_s": [0.6, 1.2], "eval_rounds": [2], "best_of_s": 0.5},
            {"median_round_s": 0.6, "round_s": [0.5, 0.7], "eval_rounds": [2], "best_of_s": 0.5},
            {"median_round_s": 1.3, "round_s": [1.3], "eval_rounds": [1], "best_of_s": 1.0},
        ],
    }
    cases = {"fedavg-twonn-10": {"vectorised_s": 0.5}}
    got = user_path([{"extra_info": info}], cases)["fedavg-twonn-10"]
    assert got["ratio"] == pytest.approx(1.3) and got["unpaired_ratio"] == pytest.approx(1.8)
    assert got["train_only_ratio"] == pytest.approx(1.1)
    info.pop("pairs")  # an older run's file: the unpaired ratio
    assert user_path([{"extra_info": info}], cases)["fedavg-twonn-10"]["ratio"] == 1.8


def test_the_user_path_splits_rounds_that_evaluate_from_those_that_only_train():
    info = {
        "kind": "user_path",
        "arch": "twonn",
        "clients": 10,
        "median_round_s": 0.5,
        "rounds": 5,
        "threads": 2,
        "eval_rounds": [2, 4, 5],  # the rounds of the run's metrics.jsonl
        "round_s": [1.0, 5.0, 2.0, 7.0, 9.0],
    }
    cases = {"fedavg-twonn-10": {"vectorised_s": 0.25, "vectorised_median_s": 0.4}}
    got = user_path([{"extra_info": info}], cases)["fedavg-twonn-10"]
    assert got["ratio"] == 2.0 and got["micro_median_s"] == 0.4  # the target reads the best-of
    assert got["train_only_s"] == 1.5 and got["with_eval_s"] == 7.0
    info.pop("eval_rounds")  # an older run's file: no split
    got = user_path([{"extra_info": info}], cases)["fedavg-twonn-10"]
    assert got["train_only_s"] is None and got["with_eval_s"] is None
