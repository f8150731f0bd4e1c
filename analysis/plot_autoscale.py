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
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402  (analysis/results.py)

SIGNALS = ["queue_depth", "active_seqs", "kv_usage", "gpu_util", "cpu_util", "request_rate", "ttft_p95_s"]


def label(r):
    signal = r.get_config("autoscale.signal", default="?")
    policy = r.get_config("autoscale.policy", default="?")
    if policy == "target":
        return f"{signal} (target {r.get_config('autoscale.target', default='?')})"
    if policy == "threshold":
        return f"{signal} (> {r.get_config('autoscale.up_above', default='?')})"
    return f"{signal} ({policy})"


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
    for r in runs:
        a = r.table("autoscale")
        axes[0].step(a["t"], paid(a), where="post", label=label(r))
    axes[0].set_ylabel("replicas paid for")
    axes[0].set_title("replicas over time")
    axes[0].legend(fontsize=8)

    arrivals = runs[0].requests["arrival_s"]
    if "cancelled" in runs[0].tables:
        arrivals = np.concatenate([arrivals, runs[0].table("cancelled")["arrival_s"]])
    edges = np.arange(0.0, max(float(arrivals.max()), 10.0) + 10.0, 10.0)
    counts, _ = np.histogram(arrivals, bins=edges)
    axes[1].step(edges[:-1], counts / 10.0, where="post", color="black")
    axes[1].set_ylabel("arrivals per second")
    axes[1].set_title("offered load (10 s bins)")

    a = runs[0].table("autoscale")
    for s in SIGNALS:
        v = np.asarray(a[s], dtype=float)
        top = np.nanmax(v) if v.size else 0.0
        axes[2].plot(a["t"], v / top if top > 0 else v, label=f"{s} (max {top:.3g})")
    axes[2].set_ylabel("signal / its maximum")
    axes[2].set_xlabel("time (s)")
    axes[2].set_title(f"signals of the first run: {label(runs[0])}")
    axes[2].legend(fontsize=7, ncol=2)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)

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
