"""Summarise a `make bench` run: print the table, check the targets, write summary.json.

Usage: python benchmarks/summary.py results/benchmarks/latest.json [--no-profile]

Times are the best (minimum) of each benchmark's timed rounds: other processes on the machine
only ever add time. The targets that compare two variants (sequential vs naive, vectorised vs
naive, bf16 vs fp32) read the paired benchmarks (test_paired.py) where the run has them: the
variants alternate round after round, and a target's value is the median over repetitions of
that repetition's ratio, so a drift of the machine between two best-of measurements cannot
decide it. The FLOP floor of a round is counted analytically (bench_lib.forward_flops):
forward 2·in·out per Linear and 2·(Cin/g)·kh·kw·Cout·Hout·Wout per Conv2d per sample (Conv1d and
LSTM layers likewise, for the local steps), backward 2x forward, times the samples trained (E x 50
per client); GFLOP/s = floor / vectorised time, and is compared with the best float32 matmul rate
measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections import defaultdict
from pathlib import Path

import torch

FORMULA = (
    "FLOP floor = clients x E x 50 samples x 3 x forward FLOPs per sample; forward = "
    "sum over Linear of 2*in*out + sum over Conv2d of 2*(Cin/groups)*kh*kw*Cout*Hout*Wout "
    "(activations, pooling and the loss not counted; backward = 2 x forward)"
)
# (arch, clients, what, threshold): vectorised >= threshold x naive / x sequential / of matmul.
TARGETS = (
    ("twonn", 100, "naive", 8.0),
    ("twonn", 100, "sequential", 3.0),
    ("twonn", 100, "matmul", 0.30),
    ("twonn", 10, "naive", 5.0),
    ("twocnn", 10, "naive", 2.0),
    ("twocnn", 10, "matmul", 0.70),
)
# The user path (a real run's median round) at most this many times the best-of round.
USER_PATH_TARGET = 1.2
USER_PATH_CLIENTS = (10, 100)


def load(path: Path) -> list[dict]:
    """The benchmarks of a pytest-benchmark JSON file."""
    return json.loads(path.read_text())["benchmarks"]


def best(b: dict) -> float:
    """Best time of a benchmark, in seconds."""
    return float(b["stats"]["min"])


def by_kind(benches: list[dict]) -> dict[str, list[dict]]:
    """Benchmarks grouped by extra_info['kind']."""
    out: dict[str, list[dict]] = defaultdict(list)
    for b in benches:
        out[b.get("extra_info", {}).get("kind", "other")].append(b)
    return out


def round_cases(rounds: list[dict], matmul: float | None) -> dict[str, dict]:
    """Per (arch, clients): each executor's time, speed-ups, GFLOP/s and the FLOP floor."""
    cases: dict[str, dict] = {}
    for b in rounds:
        info = b["extra_info"]
        key = f"fedavg-{info['arch']}-{info['clients']}"
        case = cases.setdefault(
            key,
            {"arch": info["arch"], "clients": info["clients"], "flops": info["flops"]},
        )
        case[f"{info['executor']}_s"] = best(b)
        case[f"{info['executor']}_median_s"] = float(b["stats"]["median"])
    for case in cases.values():
        vec, seq, naive = (case.get(f"{e}_s") for e in ("vectorised", "sequential", "naive"))
        case["speedup"] = seq / vec if vec and seq else None
        case["speedup_vs_naive"] = naive / vec if vec and naive else None
        case["sequential_vs_naive"] = naive / seq if seq and naive else None
        case["gflops"] = case["flops"] / vec / 1e9 if vec else None
        case["matmul_gflops"] = matmul
        case["matmul_fraction"] = case["gflops"] / matmul if case["gflops"] and matmul else None
    return dict(sorted(cases.items(), key=lambda kv: (kv[1]["arch"], kv[1]["clients"])))


# The sequential executor (every BatchNorm and recurrent model's) about as fast as the plain
# PyTorch loop: (arch, clients) with naive / sequential >= SEQUENTIAL_FLOOR.
SEQUENTIAL_TARGETS = (("twonn", 10), ("twonn", 100), ("twocnn", 10), ("twocnn", 100))
SEQUENTIAL_FLOOR = 0.95
# The vectorised lead over the naive loop does not shrink from 10 to 100 clients.
SCALING_TARGETS = ("twonn", "twocnn")
# bf16 over fp32 on the executor `auto` picks for the model: (arch, executor). The target is a
# share of this device's ceiling (test_paired.py: plain-PyTorch steps with the whole model in
# bf16); the absolute 2x only where the device can reach it (AMX tiles or a GPU).
PRECISION_TARGETS = (("twocnn", "vectorised"), ("resnet9", "sequential"))
CEILING_SHARE = 0.90
BF16_ABSOLUTE = 2.0


def bf16_device() -> bool:
    """Whether this machine has bf16 matrix units (AMX on x86, or a CUDA GPU)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    return "amx_bf16" in flags or torch.cuda.is_available()


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def paired_ratio(times: dict[str, list[float]], slow: str, fast: str) -> float | None:
    """Median over repetitions of times[slow][i] / times[fast][i] (how many times faster `fast`
    ran than `slow` in the same repetition)."""
    a, b = times.get(slow), times.get(fast)
    if not a or not b:
        return None
    return _median([x / y for x, y in zip(a, b)])


def paired_cases(benches: list[dict]) -> dict[str, dict]:
    """The paired benchmarks' per-repetition ratios: executors per (arch, clients), precisions
    per (arch, executor)."""
    out: dict[str, dict] = {}
    for b in benches:
        i = b["extra_info"]
        t = i["times"]
        if i["kind"] == "paired_executors":
            out[f"fedavg-{i['arch']}-{i['clients']}"] = {
                "arch": i["arch"],
                "clients": i["clients"],
                "repeats": len(t["naive"]),
                "best_s": {k: min(v) for k, v in t.items()},
                "sequential_vs_naive": paired_ratio(t, "naive", "sequential"),
                "speedup_vs_naive": paired_ratio(t, "naive", "vectorised"),
                "speedup": paired_ratio(t, "sequential", "vectorised"),
            }
        elif i["kind"] == "paired_ceiling":
            best_of = {  # each repetition's faster layout, per dtype
                d: [min(a, b) for a, b in zip(t[d], t[f"{d}_cl"])] for d in ("fp32", "bf16")
            }
            out[f"{i['arch']}-ceiling"] = {
                "arch": i["arch"],
                "repeats": len(t["fp32"]),
                "batch": i.get("batch"),
                "best_s": {k: min(v) for k, v in t.items()},
                "channels_last_fp32": paired_ratio(t, "fp32", "fp32_cl"),
                "channels_last_bf16": paired_ratio(t, "bf16", "bf16_cl"),
                "bf16_ceiling": paired_ratio(best_of, "fp32", "bf16"),
            }
        else:
            out[f"{i['arch']}-{i['executor']}"] = {
                "arch": i["arch"],
                "executor": i["executor"],
                "clients": i["clients"],
                "samples": i["samples"],
                "repeats": len(t["fp32"]),
                "best_s": {k: min(v) for k, v in t.items()},
                "bf16_speedup": paired_ratio(t, "fp32", "bf16"),
            }
    return out


def print_paired(paired: dict[str, dict]) -> None:
    """The paired ratios the targets read."""
    if not paired:
        return
    print("\nPaired (variants alternating; median over repetitions of each repetition's ratio)")
    print(f"  {'case':<26}{'reps':>5}{'seq/naive':>11}{'vec/naive':>11}{'vec/seq':>9}{'bf16':>8}")
    ceilings = {k: c for k, c in paired.items() if "bf16_ceiling" in c}
    for key, c in paired.items():
        if key in ceilings:
            continue
        print(
            f"  {key:<26}{c['repeats']:>5}{_f(c.get('sequential_vs_naive'), '.2f'):>10}x"
            f"{_f(c.get('speedup_vs_naive'), '.2f'):>10}x{_f(c.get('speedup'), '.2f'):>8}x"
            f"{_f(c.get('bf16_speedup'), '.2f'):>7}x"
        )
    if ceilings:
        print(
            "\nbf16 ceiling: plain-PyTorch SGD steps on one batch, the whole model in one dtype "
            "(no float32 master weights), NCHW or channels-last (cl); median of per-repetition "
            "ratios"
        )
        head = f"  {'model':<14}{'batch':>6}{'reps':>5}{'fp32/fp32 cl':>14}{'bf16/bf16 cl':>14}"
        print(f"{head}{'ceiling':>9}")
        for c in ceilings.values():
            print(
                f"  {c['arch']:<14}{_f(c['batch'], 'd'):>6}{c['repeats']:>5}"
                f"{_f(c['channels_last_fp32'], '.2f'):>13}x"
                f"{_f(c['channels_last_bf16'], '.2f'):>13}x{_f(c['bf16_ceiling'], '.2f'):>8}x"
            )


def precision_cases(benches: list[dict]) -> dict[str, dict]:
    """Per (arch, executor): the fp32 and bf16 round times and fp32 / bf16."""
    cases: dict[str, dict] = {}
    for b in benches:
        i = b["extra_info"]
        case = cases.setdefault(
            f"{i['arch']}-{i['executor']}",
            {"arch": i["arch"], "executor": i["executor"], "clients": i["clients"]},
        )
        case["samples"] = i["samples"]
        case[f"{i['precision']}_s"] = best(b)
    for case in cases.values():
        fp32, bf16 = case.get("fp32_s"), case.get("bf16_s")
        case["bf16_speedup"] = fp32 / bf16 if fp32 and bf16 else None
    return cases


def user_path(benches: list[dict], cases: dict[str, dict]) -> dict[str, dict]:
    """Per TwoNN case: the median round of a real run beside the best-of micro-benchmark."""
    out = {}
    for b in benches:
        i = b["extra_info"]
        key = f"fedavg-{i['arch']}-{i['clients']}"
        micro = cases.get(key, {}).get("vectorised_s")
        micro_median = cases.get(key, {}).get("vectorised_median_s")
        pairs = i.get("pairs")  # each user-path run with the best-of timed right after it
        unpaired = i["median_round_s"] / micro if micro else None
        out[key] = {
            "median_round_s": i["median_round_s"],
            "best_of_s": micro,
            # the target's: the median of the paired ratios (an older file: the unpaired one)
            "ratio": _pair_ratio(pairs, "median_round_s") if pairs else unpaired,
            "unpaired_ratio": unpaired,
            # what the user path adds apart from evaluating: its rounds that only train, paired
            "train_only_ratio": _pair_ratio(pairs, "train_only_s") if pairs else None,
            "pairs": pairs,
            # the micro-benchmark's own median: how far its best-of sits below its typical round
            "micro_median_s": micro_median,
            "rounds": i["rounds"],
            "threads": i["threads"],
            **_split_rounds(i),
        }
    return out


def _pair_ratio(pairs: list[dict], key: str) -> float | None:
    """The median over a user path's pairs of `key` / the pair's best-of, where a pair has it
    (`train_only_s`: its rounds that only train, from `_split_rounds`)."""
    values = [(p[key] if key in p else _split_rounds(p)[key], p["best_of_s"]) for p in pairs]
    ratios = [v / b for v, b in values if v is not None]
    return _median(ratios) if ratios else None


def _split_rounds(info: dict) -> dict[str, float | None]:
    """The median of the run's rounds that only train and of those that also evaluate (the
    rounds of its metrics.jsonl records; the best-of round evaluates nothing)."""
    times, evaluated = info.get("round_s"), info.get("eval_rounds")
    if not times or evaluated is None:
        return {"train_only_s": None, "with_eval_s": None}
    evaluated = set(evaluated)
    train = [s for t, s in enumerate(times, 1) if t not in evaluated]
    both = [s for t, s in enumerate(times, 1) if t in evaluated]
    return {
        "train_only_s": _median(train) if train else None,
        "with_eval_s": _median(both) if both else None,
    }


def print_user_path(paths: dict[str, dict]) -> None:
    """The user-path table."""
    if not paths:
        return
    print("\nUser path: median round of a real run (fedbench.jobs.train, the workflow's train job)")
    print(
        f"  {'case':<20}{'median round s':>15}{'best-of s':>11}{'median/best':>13}"
        f"{'paired':>9}{'train-only s':>14}{'with eval s':>13}{'micro median s':>16}"
    )
    for key, p in paths.items():
        paired = p["ratio"] if p.get("pairs") else None
        print(
            f"  {key:<20}{p['median_round_s']:>15.4f}{_f(p['best_of_s'], '.4f'):>11}"
            f"{_f(p.get('unpaired_ratio', p['ratio']), '.2f'):>12}x"
            f"{'-' if paired is None else f'{paired:.2f}x':>9}"
            f"{_f(p.get('train_only_s'), '.4f'):>14}{_f(p.get('with_eval_s'), '.4f'):>13}"
            f"{_f(p.get('micro_median_s'), '.4f'):>16}"
        )
        for q in p.get("pairs") or []:
            m, b, t = q["median_round_s"], q["best_of_s"], _split_rounds(q)["train_only_s"]
            only = "" if t is None else f" (train-only {t:.4f}: {t / b:.2f}x)"
            print(f"  {'':<20}pair: median round {m:.4f} / best-of {b:.4f} = {m / b:.2f}x{only}")
        if p.get("train_only_ratio") is not None:
            print(f"  {'':<20}paired, rounds that only train: {p['train_only_ratio']:.2f}x")


def chunk_sweep(benches: list[dict]) -> dict[str, dict]:
    """The vectorised TwoNN 100-client round per chunk size (the default's resolved size too)."""
    out = {}
    for b in benches:
        i = b["extra_info"]
        out[str(i["chunk"])] = {"s": best(b), "resolved": i.get("resolved")}
    if out:
        print("\nVectorised TwoNN round, 100 clients, by clients per chunk (best of 5), ms")
        for chunk, c in out.items():
            label = f"default ({c['resolved']})" if chunk == "default" else chunk
            print(f"  {label:<14}{c['s'] * 1e3:>10.2f}")
    return out


def conv_kernels(benches: list[dict], cases: dict[str, dict]) -> dict[str, dict]:
    """The vectorised TwoCNN round per training.conv_kernel, beside the default's (per_client)."""
    out = {}
    for b in benches:
        i = b["extra_info"]
        key = f"fedavg-{i['arch']}-{i['clients']}"
        row = out.setdefault(key, {"per_client": cases.get(key, {}).get("vectorised_s")})
        row[i["conv_kernel"]] = best(b)
        if i.get("chosen"):
            row["fastest_chose"] = i["chosen"]
    if out:
        print("\nVectorised round by training.conv_kernel (best of 3), s")
        for key, row in out.items():
            cells = "  ".join(
                f"{k} {_f(row.get(k), '.4f')}"
                for k in ("per_client", "channels_last", "gemm", "fastest")
            )
            print(f"  {key:<20}{cells}  (fastest chose {row.get('fastest_chose', '-')})")
    return out


def print_precision(cases: dict[str, dict]) -> None:
    """fp32 and bf16 round times per model and executor."""
    if not cases:
        return
    print("\nFedAvg round under training.precision (E=1, B=10; best of 3), s")
    print(
        f"  {'model':<14}{'executor':<12}{'clients x n':>12}"
        f"{'fp32':>10}{'bf16':>10}{'fp32/bf16':>11}"
    )
    for c in cases.values():
        print(
            f"  {c['arch']:<14}{c['executor']:<12}{c['clients']:>7} x {c['samples']:<3}"
            f"{_f(c.get('fp32_s'), '.4f'):>10}{_f(c.get('bf16_s'), '.4f'):>10}"
            f"{_f(c['bf16_speedup'], '.2f'):>10}x"
        )


def check_targets(
    cases: dict[str, dict],
    precision: dict[str, dict] | None = None,
    paired: dict[str, dict] | None = None,
    paths: dict[str, dict] | None = None,
) -> list[dict]:
    """Each target with its measured value and whether it is met: a comparison of two variants
    from the paired benchmark of its case where the run has one, else from the best-of ones."""
    paired = paired or {}
    cases = {k: {**cases.get(k, {}), **paired.get(k, {})} for k in {*cases, *paired}}
    precision = precision or {}
    precision = {k: {**precision.get(k, {}), **paired.get(k, {})} for k in {*precision, *paired}}
    out = []
    for arch, clients in SEQUENTIAL_TARGETS:
        value = cases.get(f"fedavg-{arch}-{clients}", {}).get("sequential_vs_naive")
        out.append(
            {
                "target": f"{arch} {clients} clients: sequential >= {SEQUENTIAL_FLOOR:g}x naive",
                "value": value,
                "met": value is not None and value >= SEQUENTIAL_FLOOR,
            }
        )
    for clients in USER_PATH_CLIENTS:
        ratio = (paths or {}).get(f"fedavg-twonn-{clients}", {}).get("ratio")
        limit = f"{USER_PATH_TARGET:g}x best-of"
        out.append(
            {
                "target": f"twonn {clients} clients: user path <= {limit}, paired",
                "value": ratio,
                "met": ratio is not None and ratio <= USER_PATH_TARGET,
            }
        )
    for arch in SCALING_TARGETS:
        at = {n: cases.get(f"fedavg-{arch}-{n}", {}).get("speedup_vs_naive") for n in (10, 100)}
        ok = None not in at.values()
        out.append(
            {
                "target": f"{arch}: vectorised/naive at 100 clients >= at 10 "
                f"({_f(at[10], '.2f')}x)",
                "value": at[100],
                "met": ok and at[100] >= at[10],
            }
        )
    for arch, executor in PRECISION_TARGETS:
        value = precision.get(f"{arch}-{executor}", {}).get("bf16_speedup")
        # what a step whose whole model is bf16 gains on this device (test_paired.py)
        ceiling = paired.get(f"{arch}-ceiling", {}).get("bf16_ceiling")
        need = None if ceiling is None else CEILING_SHARE * ceiling
        out.append(
            {
                "target": f"{arch} {executor}: bf16 >= {CEILING_SHARE:.0%} of the bf16 ceiling"
                f" ({_f(need, '.2f')}x fp32)",
                "value": value,
                "met": value is not None and need is not None and value >= need,
                **({"ceiling": ceiling} if ceiling is not None else {}),
            }
        )
        if bf16_device():
            out.append(
                {
                    "target": f"{arch} {executor}: bf16 >= {BF16_ABSOLUTE:g}x fp32 (AMX or GPU)",
                    "value": value,
                    "met": value is not None and value >= BF16_ABSOLUTE,
                }
            )
    for arch, clients, what, need in TARGETS:
        case = cases.get(f"fedavg-{arch}-{clients}", {})
        value = {
            "naive": case.get("speedup_vs_naive"),
            "sequential": case.get("speedup"),
            "matmul": case.get("matmul_fraction"),
        }[what]
        label = (
            f"{arch} {clients} clients: vectorised >= {need:.0%} of matmul GFLOP/s"
            if what == "matmul"
            else f"{arch} {clients} clients: vectorised >= {need:g}x {what}"
        )
        out.append({"target": label, "value": value, "met": value is not None and value >= need})
    return out


def _f(v, fmt: str, missing: str = "-") -> str:
    return missing if v is None else format(v, fmt)


def print_rounds(cases: dict[str, dict], matmul: float | None) -> None:
    """The main table: one row per round case."""
    print(
        f"\nFedAvg round, 50 samples/client, E=1, B=10 (best of N; matmul {_f(matmul, '.1f')} "
        "GFLOP/s float32, measured in this run)"
    )
    head = (
        f"{'case':<20}{'FLOP floor':>12}{'naive s':>10}{'seq s':>10}{'vec s':>10}"
        f"{'vec/naive':>10}{'vec/seq':>9}{'seq/naive':>10}{'GFLOP/s':>9}{'% matmul':>9}"
    )
    print(head)
    print("-" * len(head))
    for key, c in cases.items():
        print(
            f"{key:<20}{c['flops'] / 1e6:>9.1f} MF"
            f"{_f(c.get('naive_s'), '.4f'):>10}{_f(c.get('sequential_s'), '.4f'):>10}"
            f"{_f(c.get('vectorised_s'), '.4f'):>10}{_f(c['speedup_vs_naive'], '.1f'):>9}x"
            f"{_f(c['speedup'], '.1f'):>8}x{_f(c['sequential_vs_naive'], '.1f'):>9}x"
            f"{_f(c['gflops'], '.1f'):>9}{_f(c['matmul_fraction'], '.0%'):>9}"
        )
    print(FORMULA)


def print_others(kinds: dict[str, list[dict]]) -> dict:
    """Local steps, aggregation rules, partitioners, memory; returns their JSON summary."""
    out: dict = {}
    steps = kinds.get("local_step", [])
    if steps:
        print("\nOne local step (engine step loop, batch 10)")
        out["local_step"] = {}
        for b in steps:
            i = b["extra_info"]
            gf = i["flops"] / best(b) / 1e9
            out["local_step"][i["arch"]] = {"s": best(b), "params": i["params"], "gflops": gf}
            print(
                f"  {i['arch']:<18}{i['params']:>10,} params {best(b) * 1e3:>9.3f} ms "
                f"{gf:>7.2f} GFLOP/s"
            )
    algo_steps = kinds.get("algorithm_step", [])
    if algo_steps:
        print("\nOne local step per algorithm (pFedBreD's DNN 784-100-10, batch 20), ms")
        out["algorithm_step"] = {}
        for b in sorted(algo_steps, key=best):
            name = b["extra_info"]["algorithm"]
            out["algorithm_step"][name] = best(b)
            print(f"  {name:<14}{best(b) * 1e3:>10.3f}")
    agg = kinds.get("aggregate", [])
    if agg:
        print("\nAggregation rules (MLP 784-10-10, 7,960 parameters), ms")
        table: dict[str, dict[int, float]] = defaultdict(dict)
        sharing = {}
        for b in agg:
            i = b["extra_info"]
            table[i["rule"]][i["clients"]] = best(b)
            sharing[i["rule"]] = i["same_rule"]
        sizes = sorted({c for row in table.values() for c in row})
        print(f"  {'rule':<12}" + "".join(f"{c:>12,}" for c in sizes) + "   (same rule)")
        for rule, row in table.items():
            cells = "".join(f"{row[c] * 1e3:>12.3f}" if c in row else f"{'-':>12}" for c in sizes)
            print(f"  {rule:<12}{cells}   {', '.join(sharing[rule])}")
        out["aggregate"] = {r: {str(c): s for c, s in row.items()} for r, row in table.items()}
    parts = kinds.get("partition", [])
    if parts:
        print("\nPartitioners, 60,000 labels, 100 clients, ms")
        out["partition"] = {}
        for b in parts:
            out["partition"][b["extra_info"]["partition"]] = best(b)
            print(f"  {b['extra_info']['partition']:<14}{best(b) * 1e3:>10.2f}")
    mem = kinds.get("memory", [])
    if mem:
        print("\nPeak memory of a 100-client vectorised TwoNN round (fresh process)")
        out["memory"] = {}
        for b in mem:
            i = b["extra_info"]
            out["memory"][i["variant"]] = {
                k: i[k]
                for k in (
                    "chunk",
                    "chunks",
                    "chunk_reason",
                    "budget_mb",
                    "growth_mb",
                    "peak_mb",
                    "messages_mb",
                    "estimate_per_client_mb",
                    "method",
                    "device",
                )
            }
            print(
                f"  {i['variant']:<11} chunk {i['chunk']:>3} x {i['chunks']:>3}  peak growth "
                f"{i['growth_mb']:7.1f} MiB (of which messages {i['messages_mb']:.1f} MiB; chunk "
                f"estimate {i['chunk'] * i['estimate_per_client_mb']:.1f} MiB <= budget "
                f"{i['budget_mb']} MiB or override) [{i['chunk_reason']}; {i['method']}]"
            )
    return out


def profile_round(arch: str, clients: int, path: Path, rows: int = 12) -> str:
    """A torch.profiler table of one vectorised round (the top ops by self time)."""
    from bench_lib import RoundCase, engine_round
    from torch.profiler import ProfilerActivity, profile

    fed, model, cfg, _ = RoundCase(arch, clients).build()
    fn = engine_round(fed, model, cfg, "vectorised")
    fn()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
    path.write_text(table)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="summary.json (default: beside)")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args(argv)
    kinds = by_kind(load(args.json))
    rates = [b["extra_info"]["flops"] / best(b) / 1e9 for b in kinds.get("matmul", [])]
    matmul = max(rates) if rates else None
    cases = round_cases(kinds.get("round", []), matmul)
    print_rounds(cases, matmul)
    chunks = chunk_sweep(kinds.get("chunk", []))
    convs = conv_kernels(kinds.get("conv_kernel", []), cases)
    paths = user_path(kinds.get("user_path", []), cases)
    print_user_path(paths)
    precision = precision_cases(kinds.get("precision", []))
    print_precision(precision)
    paired = paired_cases(
        kinds.get("paired_executors", [])
        + kinds.get("paired_precision", [])
        + kinds.get("paired_ceiling", [])
    )
    print_paired(paired)
    others = print_others(kinds)
    targets = check_targets(cases, precision, paired, paths)
    print("\nTargets")
    for t in targets:
        value = t["value"]
        share = "matmul" in t["target"]
        shown = "-" if value is None else (f"{value:.0%}" if share else f"{value:.2f}x")
        ceiling = f" (this device's bf16 ceiling: {t['ceiling']:.2f}x)" if "ceiling" in t else ""
        print(f"  [{'met' if t['met'] else 'MISSED'}] {t['target']}: {shown}{ceiling}")
    missed = [t for t in targets if not t["met"]]
    profile_path = args.json.parent / "profile_twonn_100.txt"
    if missed and not args.no_profile:
        print("\nWhere the time goes: one vectorised TwoNN round, 100 clients (torch.profiler)")
        print(profile_round("twonn", 100, profile_path))
    summary = {
        "source": str(args.json),
        "statistic": "min",
        "flop_formula": FORMULA,
        "matmul_gflops": matmul,
        "cases": cases,
        "user_path": paths,
        "conv_kernels": convs,
        "chunks": chunks,
        "precision": precision,
        "paired": paired,
        "targets": targets,
        **others,
        "machine": {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
        },
    }
    out = args.out or args.json.parent / "summary.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
