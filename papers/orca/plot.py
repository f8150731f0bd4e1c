#!/usr/bin/python3
"""Plots and tables of the Orca sweeps (papers/orca/run.sh): static vs fcfs batching.

    /usr/bin/python3 papers/orca/plot.py [--results results/orca] [--out papers/orca]

Reads the merged table of the load sweep (results/orca/load/sweep.h5, papers/orca/load.ini:
one row per max_num_seqs x policy x rate, every /summary metric) and writes
  load_sweep_b64.png              throughput, normalized latency, TTFT and E2E vs offered rate
                                  (max_num_seqs = 64)
  latency_vs_throughput.png       median normalized latency vs achieved throughput, every
                                  max_num_seqs (the form of Orca's evaluation figures)
and prints the README's tables (markdown) on stdout, including where the time of the
saturated runs of the steps sweep (results/orca/steps/, papers/orca/steps.ini) goes: that
table comes from each of its points' own /steps table. Normalized latency is a request's
end-to-end latency divided by its output tokens (s/token), as in Orca's evaluation: the
summary's normalized_latency_{p50,mean}_s. Results are read through analysis/results.py,
figures drawn through analysis/style.py.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

POLICIES = [("static", "request-level (static)", style.COLORS["bad"]),
            ("fcfs", "iteration-level (fcfs)", style.COLORS["good"])]
NL_TARGETS_S = (0.025, 0.05)  # median normalized latency targets for "throughput at equal latency"


def read_sweep(folder):
    """results.load_sweep(folder), warning on stderr about points that failed (their rows are
    left out); None when the sweep has not been run."""
    try:
        sw = results.load_sweep(folder)
    except FileNotFoundError:
        return None
    failed = [i for i, s in zip(sw.points["id"], sw.points["status"]) if s != "ok"]
    if failed:
        print(f"warning: {sw.path}: {len(failed)} failed point(s) left out: {', '.join(failed)}", file=sys.stderr)
    return sw


def load_sweep(root):
    """{(max_num_seqs, policy): [(rate, summary), ...] sorted by rate}, from the merged table of
    the load sweep (root/load/sweep.h5); a summary is the point's row of /summary metrics plus
    mean_seqs_per_step. None when the sweep has not been run."""
    sw = read_sweep(os.path.join(root, "load"))
    if sw is None:
        return None
    rows = sw.select()
    sweep = {}
    for i in range(len(rows["id"])):
        s = {k: v[i] for k, v in rows.items()}
        # Every step samples one token for each sequence it carries (a prompt's last chunk
        # samples the first token), so output tokens / steps = mean sequences per step.
        s["mean_seqs_per_step"] = s["output_tokens"] / s["num_steps"]
        key = (int(s["scheduler.max_num_seqs"]), str(s["scheduler.policy"]))
        sweep.setdefault(key, []).append((float(s["workload.rate"]), s))
    for runs in sweep.values():
        runs.sort(key=lambda r: r[0])
    return sweep


def col(runs, key):
    return np.array([s[key] for _, s in runs])


def rate_at_target(runs, key, target):
    """Highest offered rate whose `key` stays <= target, interpolated linearly between
    swept rates (the curves are monotone in load); None if even the lowest rate misses."""
    rates = [r for r, _ in runs]
    vals = col(runs, key)
    if vals[0] > target:
        return None
    for i in range(1, len(rates)):
        if vals[i] > target:
            return rates[i - 1] + (rates[i] - rates[i - 1]) * (target - vals[i - 1]) / (vals[i] - vals[i - 1])
    return rates[-1]


def plot_load_sweep(sweep, b, out):
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    (a_tp, a_nl), (a_ttft, a_e2e) = axes
    for policy, label, color in POLICIES:
        runs = sweep.get((b, policy))
        if not runs:
            continue
        rates = np.array([r for r, _ in runs])
        a_tp.plot(rates, col(runs, "request_throughput_rps"), "o-", color=color, label=label)
        a_nl.plot(rates, col(runs, "normalized_latency_p50_s") * 1e3, "o-", color=color, label=f"{label}, median")
        a_nl.plot(rates, col(runs, "normalized_latency_mean_s") * 1e3, "s--", color=color, alpha=0.6, label=f"{label}, mean")
        a_ttft.plot(rates, col(runs, "ttft_p50_s"), "o-", color=color, label=f"{label}, p50")
        a_ttft.plot(rates, col(runs, "ttft_p90_s"), "s--", color=color, alpha=0.6, label=f"{label}, p90")
        a_e2e.plot(rates, col(runs, "e2e_p50_s"), "o-", color=color, label=f"{label}, p50")
        a_e2e.plot(rates, col(runs, "e2e_p90_s"), "s--", color=color, alpha=0.6, label=f"{label}, p90")
    lim = max(r for (bb, _), runs in sweep.items() if bb == b for r, _ in runs)
    a_tp.plot([0, lim], [0, lim], ":", color=style.COLORS["reference"], label="offered = achieved")
    a_tp.set_ylabel("achieved throughput (req/s)")
    a_nl.set_ylabel("normalized latency (ms / output token, log)")
    a_ttft.set_ylabel("time to first token (s, log)")
    a_e2e.set_ylabel("end-to-end latency (s, log)")
    for ax in (a_nl, a_ttft, a_e2e):
        style.log_axis(ax, "y")
    for ax in axes.flat:
        ax.set_xlabel("offered load (req/s, Poisson)")
        ax.legend()
    fig.suptitle(f"Llama-3.1-70B, TP=4 on H100 (roofline), Azure conv. lengths, max_num_seqs = {b}")
    return style.savefig(fig, os.path.join(out, f"load_sweep_b{b}.png"), dpi=110)


def plot_latency_vs_throughput(sweep, out):
    batch_sizes = sorted({b for b, _ in sweep})
    fig, ax = plt.subplots(figsize=(8, 5.5))
    markers = dict(zip(batch_sizes, "^os"))
    for policy, label, color in POLICIES:
        for b in batch_sizes:
            runs = sweep.get((b, policy))
            if runs:
                ax.plot(col(runs, "request_throughput_rps"), col(runs, "normalized_latency_p50_s") * 1e3, marker=markers[b],
                        color=color, alpha=0.4 + 0.6 * batch_sizes.index(b) / max(1, len(batch_sizes) - 1),
                        label=f"{label}, max_num_seqs {b}")
    for target in NL_TARGETS_S:
        ax.axhline(target * 1e3, color=style.COLORS["reference"], ls=":")
        ax.text(0.01, target * 1e3, f"{target * 1e3:g} ms/token", transform=ax.get_yaxis_transform(),
                color=style.COLORS["reference"], fontsize=8, va="bottom")
    style.log_axis(ax, "y")
    ax.set_xlabel("achieved throughput (req/s)")
    ax.set_ylabel("median normalized latency (ms / output token, log)")
    ax.set_title("Llama-3.1-70B, TP=4 on H100 (roofline), Azure conversation lengths")
    ax.legend()
    return style.savefig(fig, os.path.join(out, "latency_vs_throughput.png"), dpi=110)


def print_tables(sweep):
    print("### max_num_seqs = 64, per offered rate\n")
    print("| rate (req/s) | policy | achieved req/s | output tok/s | seqs/step | TTFT p50 / p90 (s) "
          "| E2E p50 / p90 (s) | TPOT p50 (ms) | norm. latency p50 / mean (ms/tok) |")
    print("|---|---|---|---|---|---|---|---|---|")
    rates = sorted({r for (b, _), runs in sweep.items() if b == 64 for r, _ in runs})
    for rate in rates:
        for policy, _, _ in POLICIES:
            s = dict(sweep.get((64, policy), [])).get(rate)
            if s is None:
                continue
            print(f"| {rate:g} | {policy} | {s['request_throughput_rps']:.2f} | {s['throughput_tok_s']:.0f} "
                  f"| {s['mean_seqs_per_step']:.1f} | {s['ttft_p50_s']:.2f} / {s['ttft_p90_s']:.2f} "
                  f"| {s['e2e_p50_s']:.2f} / {s['e2e_p90_s']:.2f} | {s['tpot_p50_s'] * 1e3:.1f} "
                  f"| {s['normalized_latency_p50_s'] * 1e3:.1f} / {s['normalized_latency_mean_s'] * 1e3:.1f} |")
    print("\n### every max_num_seqs: capacity and throughput at a latency target\n")
    targets = " | ".join(f"rate at median norm. latency <= {t * 1e3:g} ms/tok" for t in NL_TARGETS_S)
    print(f"| max_num_seqs | policy | max achieved req/s | output tok/s there | seqs/step there | {targets} "
          f"| norm. latency p50 at {min(r for runs in sweep.values() for r, _ in runs):g} req/s (ms/tok) |")
    print("|---|---|---|---|---|" + "---|" * len(NL_TARGETS_S) + "---|")
    for b in sorted({b for b, _ in sweep}):
        for policy, _, _ in POLICIES:
            runs = sweep.get((b, policy))
            if not runs:
                continue
            best = max((s for _, s in runs), key=lambda s: s["request_throughput_rps"])
            at = [rate_at_target(runs, "normalized_latency_p50_s", t) for t in NL_TARGETS_S]
            at_s = " | ".join("below the lowest rate" if a is None else f"{a:.2f}" for a in at)
            print(f"| {b} | {policy} | {best['request_throughput_rps']:.2f} | {best['throughput_tok_s']:.0f} "
                  f"| {best['mean_seqs_per_step']:.1f} | {at_s} | {runs[0][1]['normalized_latency_p50_s'] * 1e3:.1f} |")


def print_step_breakdown(root):
    """Where a saturated run's time goes: steps that carry a prompt vs decode-only steps.
    Reads each point's own /steps table (the merged table holds only /summary metrics)."""
    sw = read_sweep(os.path.join(root, "steps"))
    if sw is None:
        return
    rows = sw.select()
    if not len(rows["id"]):
        return
    order = {p: i for i, (p, _, _) in enumerate(POLICIES)}
    points = sorted(zip(rows["scheduler.max_num_seqs"].astype(int), rows["scheduler.policy"], rows["id"]),
                    key=lambda r: (r[0], order.get(r[1], 99)))
    print("\n### saturated (16 req/s offered): steps that carry a prompt vs decode-only steps\n")
    print("| max_num_seqs | policy | steps | steps with a prompt | busy time in them "
          "| mean step with a prompt (ms) | mean decode-only step (ms) | mean decode batch |")
    print("|---|---|---|---|---|---|---|---|")
    for b, policy, point_id in points:
        st = sw.point(point_id).steps
        if not st:
            sys.exit(f"{sw.dir}/points/{point_id}: no /steps table (the steps sweep needs output.steps = true)")
        d = np.asarray(st["duration_s"])
        prompt = np.asarray(st["prefill_tokens"]) > 0
        dec = np.asarray(st["decode_tokens"])
        print(f"| {b} | {policy} | {d.size} | {100 * prompt.mean():.1f}% | {100 * d[prompt].sum() / d.sum():.0f}% "
              f"| {1e3 * d[prompt].mean():.1f} | {1e3 * d[~prompt].mean():.1f} | {dec[~prompt].mean():.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/orca", help="folder run.sh wrote (holding load/ and steps/)")
    ap.add_argument("--out", default="papers/orca", help="folder for the PNGs")
    args = ap.parse_args()
    sweep = load_sweep(args.results)
    if not sweep:
        sys.exit(f"{args.results}/load/sweep.h5: no results; run papers/orca/run.sh first")
    os.makedirs(args.out, exist_ok=True)
    print_tables(sweep)
    print_step_breakdown(args.results)
    print()
    if any(b == 64 for b, _ in sweep):
        print(plot_load_sweep(sweep, 64, args.out))
    print(plot_latency_vs_throughput(sweep, args.out))


if __name__ == "__main__":
    main()
