#!/usr/bin/python3
"""Autoscaled runs side by side: replicas, load and signals over time.

    /usr/bin/python3 analysis/plot_autoscale.py RESULTS [RESULTS ...] [--out FILE]

Each RESULTS is a run directory (or its results.h5) of `testbed run` with an
autoscaler (/autoscale: sim/autoscaler.h). Three panels, sharing the time axis:
  - replicas paid for (active + starting + draining) of every run, each
    labelled with its autoscale.signal and policy;
  - the offered load: arrivals per second in 10 s bins (of the first run);
  - the first run's signals over time, each divided by its largest value, so
    one sees which follow the load (queue depth, active sequences, request
    rate) and which saturate or stay flat (GPU and CPU-like utilisation, KV usage).
Writes FILE (default: the first run's DIR/autoscale.png) and prints a markdown
table: replicas, GPU-hours, SLO attainment, TTFT p95 and cost per run.
Draws through analysis/style.py (the legends name the signals in words).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

SIGNALS = ["queue_depth", "active_seqs", "kv_usage", "gpu_util", "cpu_util", "request_rate", "ttft_p95_s"]


def label(r):
    signal = r.get_config("autoscale.signal", default="?")
    policy = r.get_config("autoscale.policy", default="?")
    if policy == "target":
        return f"{signal} (target {r.get_config('autoscale.target', default='?')})"
    if policy == "threshold":
        return f"{signal} (> {r.get_config('autoscale.up_above', default='?')})"
    return f"{signal} ({policy})"


def figure_label(r):
    """label(r) in words, for the figure: 'queue depth, target 4', 'time to first token, p95 > 1 s'."""
    signal = r.get_config("autoscale.signal", default="?")
    policy = r.get_config("autoscale.policy", default="?")
    name, seconds = style.words(signal), " s" if style.unit(signal) == "s" else ""
    if policy == "target":
        return f"{name}, target {r.get_config('autoscale.target', default='?')}{seconds}"
    if policy == "threshold":
        return f"{name} > {r.get_config('autoscale.up_above', default='?')}{seconds}"
    return f"{name} ({policy})"


def paid(a):
    return a["active"] + a["starting"] + a["draining"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    runs = [results.load(p) for p in args.results]
    for r in runs:
        if not r.table("autoscale"):
            sys.exit(f"plot_autoscale.py: {r.path} has no /autoscale table (run with autoscale.policy = threshold or target)")
    out = args.out or os.path.join(os.path.dirname(runs[0].path), "autoscale.png")

    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    for k, r in enumerate(runs):
        a = r.table("autoscale")
        axes[0].step(a["t"], paid(a), where="post", color=style.color(k),
                     ls=style.LINESTYLES[k // len(style.PALETTE) % len(style.LINESTYLES)], label=figure_label(r))
    axes[0].set_ylabel("replicas paid for\n(active + starting + draining)")
    axes[0].set_title("replicas over time, per autoscaling signal")
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="signal and policy")

    arrivals = runs[0].requests["arrival_s"]
    if "cancelled" in runs[0].tables:
        arrivals = np.concatenate([arrivals, runs[0].table("cancelled")["arrival_s"]])
    edges = np.arange(0.0, max(float(arrivals.max()), 10.0) + 10.0, 10.0)
    counts, _ = np.histogram(arrivals, bins=edges)
    axes[1].step(edges[:-1], counts / 10.0, where="post", color=style.COLORS["baseline"], label="arrivals")
    axes[1].set_ylabel("arrivals per second")
    axes[1].set_title("offered load (10 s bins)")

    a = runs[0].table("autoscale")
    for k, s in enumerate(SIGNALS):
        v = np.asarray(a[s], dtype=float)
        top = np.nanmax(v) if v.size else 0.0
        what = style.unit(s)
        axes[2].plot(a["t"], v / top if top > 0 else v, color=style.color(k),
                     label=f"{style.words(s)} (max {style.number(top)}{', ' + what if what else ''})")
    axes[2].set_ylabel("signal / its maximum")
    axes[2].set_xlabel("time (s)")
    axes[2].set_title(f"signals of the first run ({figure_label(runs[0])}), per active replica")
    axes[2].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="signal (its maximum)")
    style.savefig(fig, out, dpi=110)

    print("| signal | replicas (mean) | GPU-hours | SLO attainment | TTFT p95 (s) | $ per request |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in runs:
        s = r.summary
        print(f"| {label(r)} | {s.get('replicas_mean', float('nan')):.2f} | {s.get('gpu_seconds', float('nan')) / 3600:.3f} "
              f"| {s.get('slo_attainment', float('nan')):.3f} | {s.get('ttft_p95_s', float('nan')):.2f} "
              f"| {s.get('usd_per_request', float('nan')):.5f} |")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
