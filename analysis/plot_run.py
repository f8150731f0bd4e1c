#!/usr/bin/python3
"""Plots of one run's results file (written by `testbed run`).

    /usr/bin/python3 analysis/plot_run.py results/quickstart/results.h5 [--out DIR]

RESULTS may also be the run directory holding results.h5.
Writes into DIR (default: the results file's folder):
  latency_cdf.png        CDFs of TTFT, TPOT and E2E per request
  batch_composition.png  per step: prefill and decode tokens, running sequences, KV blocks used
Reads only the results file, through analysis/results.py.
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


def cdf(ax, values, label):
    v = np.sort(values[~np.isnan(values)])
    if v.size == 0:
        return
    ax.plot(v, np.arange(1, v.size + 1) / v.size, label=label)


def plot_latency(r, out):
    req = r.requests
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, col, title in zip(axes, ["ttft_s", "tpot_s", "e2e_s"], ["TTFT", "TPOT", "E2E latency"]):
        values = np.asarray(req[col], dtype=float)
        cdf(ax, values, col)
        for p, style in [(50, ":"), (99, "--")]:
            if np.any(~np.isnan(values)):
                ax.axvline(np.nanpercentile(values, p), color="grey", linestyle=style, label=f"p{p}")
        ax.set_xlabel(f"{title} (s)")
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    s = r.summary
    fig.suptitle(f"{int(s['num_finished'])} requests, prefix hit rate {100 * s['prefix_hit_rate']:.1f}%, "
                 f"{s['throughput_tok_s']:.1f} output tok/s")
    fig.tight_layout()
    path = os.path.join(out, "latency_cdf.png")
    fig.savefig(path, dpi=120)
    return path


def plot_steps(r, out):
    st = r.steps
    if not st:
        return None
    t = np.asarray(st["start_s"])
    instance = np.asarray(st["instance"])
    keep = instance == instance.min() if instance.size else instance == 0  # first instance
    t = t[keep]
    prefill = np.asarray(st["prefill_tokens"])[keep]
    decode = np.asarray(st["decode_tokens"])[keep]
    seqs = np.asarray(st["num_seqs"])[keep]
    blocks = np.asarray(st["kv_blocks_used"])[keep]
    fig, (a, b) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    width = np.diff(t, append=t[-1] + (t[-1] - t[-2] if t.size > 1 else 1.0)) if t.size else t
    a.bar(t, decode, width=width, align="edge", label="decode tokens", color="tab:blue")
    a.bar(t, prefill, width=width, align="edge", bottom=decode, label="prefill tokens", color="tab:orange")
    a.set_ylabel("tokens per step")
    a.legend(loc="upper right")
    a.grid(alpha=0.3)
    b.plot(t, seqs, label="sequences in batch", color="tab:green")
    b.set_ylabel("sequences")
    b2 = b.twinx()
    b2.plot(t, blocks, label="KV blocks used", color="tab:red", alpha=0.6)
    b2.set_ylabel("KV blocks used")
    b.set_xlabel("time (s)")
    b.grid(alpha=0.3)
    fig.suptitle("Batch composition per step" + (" (instance 0)" if np.unique(instance).size > 1 else ""))
    fig.tight_layout()
    path = os.path.join(out, "batch_composition.png")
    fig.savefig(path, dpi=120)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    try:
        r = results.load(args.results)
    except OSError as e:
        sys.exit(f"plot_run: {e}")
    out = args.out or os.path.dirname(os.path.abspath(r.path))
    os.makedirs(out, exist_ok=True)
    for path in [plot_latency(r, out), plot_steps(r, out)]:
        if path:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
