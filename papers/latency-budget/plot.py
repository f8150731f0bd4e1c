#!/usr/bin/python3
"""Seed 001's latency budget, step by step, from papers/latency-budget/run.sh's results.

    /usr/bin/python3 papers/latency-budget/plot.py [--results DIR] [--out FILE]
    /usr/bin/python3 papers/latency-budget/plot.py --pool-sizes DIR

The baseline is shown on its fixed fleet (FIXED replicas; it meets the SLO at
no size swept). Steps 1-4 are sweeps over the replica count, each shown at its
cheapest point meeting the SLO (TTFT p95 <= 1 s and TPOT p95 <= 100 ms, the
configs' [slo]); a step with none at its point of lowest TTFT p95, marked
"SLO not met". Step 5 sizes each pool alone (step5_POOL sweeps: the
fewest replicas whose own requests meet the SLO) and runs them together; step
6 autoscales each pool up to those sizes. Also shown: steps 0-4 at one fixed
fleet (FIXED replicas), the issue's literal ablation, where only latency can
move, and costs against the baseline at that fleet. Writes FILE (default
DIR/latency_budget.png) and prints the tables in markdown, against seed 001's
TTFT p95 650 ms, GPU utilisation 82% and -46% cost per generation.
--pool-sizes prints the flags of the chosen pool sizes (--pool.NAME.size=N ...)
for run.sh's steps 5 and 6. The figure is drawn through analysis/style.py.
"""
import argparse
import math
import os
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
import results  # noqa: E402
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

STEPS = [
    ("step0_baseline", "baseline: static batching, no caches, bf16"),
    ("step1_continuous", "+ continuous batching"),
    ("step2_prefix", "+ prefix caching"),
    ("step3_semantic", "+ semantic cache"),
    ("step4_fp8", "+ FP8"),
    ("step5_routing", "+ model routing"),  # a run at the sizes chosen from step5_{small,medium,large}
    ("step6_autoscale", "+ autoscaling"),
    ("step6b_autoscale_one_model", "step 4 + autoscaling, no routing"),
]
TTFT_SLO, TPOT_SLO = 1.0, 0.1
FIXED = 16  # the fixed fleet of the literal ablation: 16 x 70B TP 4 = 64 H100s
SEED = {"ttft_p95_s": 0.65, "gpu_util": 0.82, "cost_change": -0.46}
POOLS = ["small", "medium", "large"]  # classes 0, 1, 2


def rows(table):
    n = len(table["id"])
    return [{k: table[k][i] for k in table} for i in range(n)]


def util(row):
    return row["busy_gpu_seconds"] / row["gpu_seconds"] if row["gpu_seconds"] > 0 else float("nan")


def meets(row):
    return row["ttft_p95_s"] <= TTFT_SLO and row["tpot_p95_s"] <= TPOT_SLO


def cheapest(points):
    """The cheapest point meeting the SLO, else the one of lowest TTFT p95 (flagged)."""
    ok = [p for p in points if meets(p)]
    if ok:
        return min(ok, key=lambda p: (p["usd_per_request"], p["ttft_p95_s"])), True
    return min(points, key=lambda p: p["ttft_p95_s"]), False


def p95(values):
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return float(np.percentile(v, 95)) if v.size else float("nan")


def pool_meets(sweep, point_id, pool_class):
    """Whether the requests the engines of class `pool_class`'s pool served meet the SLO."""
    req = sweep.point(point_id).requests
    mine = (req["routed_class"] == pool_class) & (req["answered_by"] == 0)
    return p95(req["ttft_s"][mine]) <= TTFT_SLO and p95(req["tpot_s"][mine]) <= TPOT_SLO


def load_steps(base):
    chosen = []
    for name, label in STEPS:
        path = os.path.join(base, name)
        if name == "step6b_autoscale_one_model":
            s = dict(results.load(path).summary)
            chosen.append((label, s, meets(s), f"up to {fleet_size(base)} x 70B, mean {s['replicas_mean']:.2f} replicas"))
            continue
        if name in ("step5_routing", "step6_autoscale"):
            r = results.load(path)
            s = dict(r.summary)
            sizes = chosen_sizes(base)
            what = " + ".join(f"{sizes[p]} x {m}" for p, m in zip(POOLS, ["1B", "8B", "70B"]))
            if name == "step6_autoscale":
                what = f"up to {what}, mean {s['replicas_mean']:.2f} replicas"
            chosen.append((label, s, meets(s), what))
            continue
        sweep = results.load_sweep(path)
        points = rows(sweep.select())
        if not points:
            sys.exit(f"plot.py: {path}: no completed point")
        if name == "step0_baseline":  # the baseline: fixed replicas (it meets the SLO at no size)
            at = [p for p in points if int(p["fleet.num_instances"]) == FIXED]
            if not at:
                sys.exit(f"plot.py: {path}: no point at {FIXED} replicas")
            chosen.append((label, at[0], meets(at[0]), f"{FIXED} x 70B (fixed)"))
            continue
        best, ok = cheapest(points)
        chosen.append((label, best, ok, f"{int(best['fleet.num_instances'])} x 70B"))
    return chosen


def chosen_sizes(base):
    """Per pool, the fewest replicas whose own requests meet the SLO (step5_POOL sweeps)."""
    out = {}
    for k, pool in enumerate(POOLS):
        sweep = results.load_sweep(os.path.join(base, f"step5_{pool}"))
        key = f"pool.{pool}.size"
        pts = sorted(rows(sweep.select()), key=lambda p: p[key])
        ok = [int(p[key]) for p in pts if pool_meets(sweep, p["id"], k)]
        if not ok:
            sys.exit(f"plot.py: {sweep.path}: no size of pool {pool} meets the SLO")
        out[pool] = ok[0]
    return out


def fleet_size(base):
    """Step 4's replicas: the fewest 70B instances meeting the SLO with every engine mechanism on."""
    best, ok = cheapest(rows(results.load_sweep(os.path.join(base, "step4_fp8")).select()))
    if not ok:
        sys.exit(f"plot.py: {base}/step4_fp8: no fleet size meets the SLO")
    return int(best["fleet.num_instances"])


def pool_sizes(base):
    print(" ".join(f"--pool.{p}.size={n}" for p, n in chosen_sizes(base).items()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(ROOT, "results", "latency-budget"))
    ap.add_argument("--out")
    ap.add_argument("--pool-sizes", metavar="DIR")
    ap.add_argument("--fleet-size", metavar="DIR")
    args = ap.parse_args(argv)
    if args.pool_sizes:
        pool_sizes(args.pool_sizes)
        return
    if args.fleet_size:
        print(fleet_size(args.fleet_size))
        return
    steps = load_steps(args.results)
    base_sweep = results.load_sweep(os.path.join(args.results, "step0_baseline"))
    fixed_base = rows(base_sweep.select(**{"fleet.num_instances": FIXED}))
    if not fixed_base:
        sys.exit(f"plot.py: {base_sweep.path}: no point at {FIXED} replicas")
    base_cost = fixed_base[0]["usd_per_request"]

    print(f"Right-sized: each step at its cheapest point with TTFT p95 <= {TTFT_SLO} s and TPOT p95 <= {TPOT_SLO * 1e3:.0f} ms")
    print()
    print(f"(cost change against the baseline on its fixed fleet of {FIXED} replicas)")
    print()
    print("| step | replicas | TTFT p95 (ms) | GPU util | $ per 1k generations | vs baseline | ingress hits | prefix hits | quality failures |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, s, ok, what in steps:
        hits = s.get("ingress_exact_hit_rate", 0) + s.get("ingress_semantic_hit_rate", 0)
        hits = 0.0 if math.isnan(hits) else hits
        qf = s.get("quality_failure_rate", 0.0)
        flag = "" if ok else " (SLO not met)"
        print(f"| {label} | {what} | {s['ttft_p95_s'] * 1e3:.0f}{flag} | {util(s):.3f} | {s['usd_per_request'] * 1e3:.3f} "
              f"| {s['usd_per_request'] / base_cost - 1:+.0%} | {hits:.1%} | {s['prefix_hit_rate']:.1%} | "
              f"{0.0 if math.isnan(qf) else qf:.1%} |")
    print()
    print(f"Seed 001: TTFT p95 {SEED['ttft_p95_s'] * 1e3:.0f} ms, GPU utilisation {SEED['gpu_util']:.0%}, "
          f"cost per generation {SEED['cost_change']:+.0%}")
    print()
    print(f"Fixed fleet: steps 0-4 on {FIXED} x 70B TP 4 ({4 * FIXED} H100s)")
    print()
    print("| step | TTFT p95 (ms) | TPOT p95 (ms) | GPU util | $ per 1k generations |")
    print("| --- | --- | --- | --- | --- |")
    fixed = []
    for name, label in STEPS[:5]:
        sweep = results.load_sweep(os.path.join(args.results, name))
        at = rows(sweep.select(**{"fleet.num_instances": FIXED}))
        if not at:
            continue
        p = at[0]
        fixed.append((label, p))
        print(f"| {label} | {p['ttft_p95_s'] * 1e3:.0f} | {p['tpot_p95_s'] * 1e3:.1f} | {util(p):.3f} | {p['usd_per_request'] * 1e3:.3f} |")

    labels = [s[0].replace(": ", ":\n").replace(", ", ",\n") for s in steps]
    x = np.arange(len(steps))
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    ttft = [s[1]["ttft_p95_s"] * 1e3 for s in steps]
    colors = [style.COLORS["bad"] if not s[2] else style.COLORS["good"] for s in steps]
    axes[0].bar(x, ttft, color=colors)
    style.log_axis(axes[0], "y")
    axes[0].axhline(SEED["ttft_p95_s"] * 1e3, color=style.COLORS["baseline"], ls="--", label="seed 001: 650 ms")
    axes[0].axhline(TTFT_SLO * 1e3, color=style.COLORS["reference"], ls=":", label=f"SLO {TTFT_SLO * 1e3:.0f} ms")
    axes[0].set_ylabel("time to first token, p95 (ms, log)")
    axes[0].set_title("TTFT p95 (vermillion: SLO not met at any size)")
    axes[1].bar(x, [util(s[1]) for s in steps], color=style.COLORS["good"])
    axes[1].axhline(SEED["gpu_util"], color=style.COLORS["baseline"], ls="--", label="seed 001: 82%")
    axes[1].set_ylim(0, 1.05)
    axes[1].set_ylabel("busy GPU-seconds / paid GPU-seconds")
    axes[1].set_title("GPU utilisation")
    change = [s[1]["usd_per_request"] / base_cost - 1 for s in steps]
    axes[2].bar(x, [100 * c for c in change], color=style.COLORS["good"])
    axes[2].axhline(100 * SEED["cost_change"], color=style.COLORS["baseline"], ls="--", label="seed 001: -46%")
    axes[2].set_ylabel(f"cost per generation vs the baseline on {FIXED} replicas (%)")
    axes[2].set_title("cost per generation")
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        ax.set_xlabel("step (each right-sized to the SLO)")
        ax.grid(False, axis="x")
        ax.legend(loc="lower center" if ax is axes[1] else "best")
    fig.suptitle("Llama-3.1-70B (TP 4, H100) on the Azure conversation trace x10: each step right-sized to the SLO")
    out = args.out or os.path.join(args.results, "latency_budget.png")
    style.savefig(fig, out, dpi=110)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
