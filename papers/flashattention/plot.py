#!/usr/bin/python3
"""The FlashAttention figures (papers/flashattention/README.md).

    /usr/bin/python3 papers/flashattention/plot.py [--results results/flashattention] [--out papers/flashattention]

Always writes memory.png: the naive kernel's materialised S (fp32) and P (bf16) against
the tiled kernel's nothing, per sequence, 32 query heads, over N (the README's analytical
table: num_q_heads x N^2 x (4 + 2) bytes). When run.sh has measured on a GPU
(results/flashattention/prefill_profile.csv), also writes prefill.png: time and TFLOP/s of
the tiled prefill kernels and the naive one against the sequence length, and prints the
measured rows as a markdown table. Without measurements it says so; it never invents them.
Figures are drawn through analysis/style.py.
"""
import argparse
import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

NUM_Q_HEADS = 32
H200_GB = 141.0


def naive_workspace_bytes(n, heads=NUM_Q_HEADS):
    """S in fp32 and P in bf16 for one sequence of n tokens (naive_attention_workspace_bytes)."""
    return heads * n * n * (4 + 2)


def read_profile(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/flashattention")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    n = np.array([512, 1024, 2048, 4096, 8192, 16384, 32768])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(n, naive_workspace_bytes(n) / 2**30, "o-", color=style.COLORS["bad"], label="naive: S (fp32) + P (bf16)")
    ax.text(0.03, 0.72, "tiled (ours): no workspace beyond Q, K, V, O\n(shared memory only)", transform=ax.transAxes,
            fontsize=8, va="top", color=style.COLORS["good"])
    ax.axhline(H200_GB * 1e9 / 2**30, color=style.COLORS["reference"], ls="--", lw=1, label="an H200's 141 GB")
    style.log_axis(ax, "x", base=2)
    style.log_axis(ax, "y")
    ax.set_xlabel("sequence length N (tokens, log)")
    ax.set_ylabel("attention workspace per sequence (GiB, log)")
    ax.set_title("32 query heads, analytical (exact for our kernels)")
    ax.legend(loc="lower right")
    style.savefig(fig, os.path.join(args.out, "memory.png"), dpi=100)
    print("| N | naive S + P | tiled extra |\n| --- | ---: | ---: |")
    for x in [1024, 4096, 8192, 32768]:
        print(f"| {x:,} | {naive_workspace_bytes(x) / 2**30:g} GiB | 0 |")

    profile = os.path.join(args.results, "prefill_profile.csv")
    if not os.path.isfile(profile):
        print(f"\nplot.py: {profile} is absent: no GPU timing was measured (run papers/flashattention/run.sh "
              "on a machine with a CUDA device)", file=sys.stderr)
        return
    rows = read_profile(profile)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    print("\n| kernel | dtype | batch | q_len | kv_len | causal | time (µs) | TFLOP/s | workspace |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for kernel, colour in [("paged_prefill", style.BLUE), ("varlen_prefill", style.GREEN), ("naive", style.VERMILLION)]:
        mine = sorted((r for r in rows if r["kernel"] == kernel), key=lambda r: int(r["kv_len"]))
        if not mine:
            continue
        x = [int(r["kv_len"]) for r in mine]
        axes[0].plot(x, [float(r["time_us"]) for r in mine], "o-", color=colour, label=kernel)
        axes[1].plot(x, [float(r["tflops"]) for r in mine], "o-", color=colour, label=kernel)
        for r in mine:
            print(f"| {kernel} | {r['dtype']} | {r['batch']} | {r['q_len']} | {r['kv_len']} | {r['causal']} | "
                  f"{float(r['time_us']):.1f} | {float(r['tflops']):.1f} | {int(r['workspace_bytes']) / 2**20:.0f} MiB |")
    for a, label in zip(axes, ["time per call (µs, log)", "throughput (TFLOP/s)"]):
        style.log_axis(a, "x", base=2)
        a.set_xlabel("keys per sequence kv_len (tokens, log)")
        a.set_ylabel(label)
        a.legend(title="kernel")
    style.log_axis(axes[0], "y")
    style.savefig(fig, os.path.join(args.out, "prefill.png"), dpi=100)


if __name__ == "__main__":
    main()
