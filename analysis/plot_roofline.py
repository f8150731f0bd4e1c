#!/usr/bin/python3
"""Decode step time against batch size, from `testbed roofline --output`.

    ./build/testbed roofline --model experiments/models/llama-3.1-8b.json \\
        --hardware experiments/hardware/h100-sxm.ini --context 1024 --output results/roofline-8b-h100.csv
    /usr/bin/python3 analysis/plot_roofline.py results/roofline-8b-h100.csv [--out FILE.png]

Writes FILE.png (default: the CSV's name with .png): step time and its compute
and memory terms against batch size (log-log), the weight-GEMM terms dashed, the
knee (where the weight GEMMs' compute time meets their memory time) marked, and
throughput (tokens/s) on a second panel. Reads only the CSV; draws through
analysis/style.py.
"""
import argparse
import csv
import math
import os
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402


def read_curve(path):
    """Returns (title line, columns as lists of floats) of a roofline CSV."""
    title = ""
    rows = []
    with open(path, newline="") as f:
        lines = []
        for line in f:
            if line.startswith("#"):
                title = title or line[1:].strip()
            else:
                lines.append(line)
        for row in csv.DictReader(lines):
            rows.append({k: float(v) for k, v in row.items()})
    if not rows:
        sys.exit(f"{path}: no rows")
    return title, {k: [r[k] for r in rows] for k in rows[0]}


def knee(batch, compute, memory):
    """First batch size where compute >= memory, interpolated linearly; None if never."""
    for i in range(1, len(batch)):
        if compute[i] >= memory[i] and compute[i - 1] < memory[i - 1]:
            d0 = memory[i - 1] - compute[i - 1]
            d1 = compute[i] - memory[i]
            return batch[i - 1] + (batch[i] - batch[i - 1]) * d0 / (d0 + d1)
    return batch[0] if compute[0] >= memory[0] else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="CSV written by `testbed roofline --output`")
    ap.add_argument("--out", help="PNG to write (default: CSV name with .png)")
    args = ap.parse_args()
    if not os.path.isfile(args.csv):
        sys.exit(f"{args.csv}: no such file")
    title, c = read_curve(args.csv)
    out = args.out or os.path.splitext(args.csv)[0] + ".png"

    b = c["batch"]
    ms = lambda xs: [x * 1e3 for x in xs]  # noqa: E731
    fig, (ax, ax_tp) = plt.subplots(2, 1, figsize=(8, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    compute, memory = style.COLORS["prefill"], style.COLORS["decode"]  # compute-bound like prefill
    ax.plot(b, ms(c["step_s"]), color=style.COLORS["baseline"], lw=2, label="step time (roofline + comm + overhead)")
    ax.plot(b, ms(c["compute_s"]), color=compute, label="compute term, all ops")
    ax.plot(b, ms(c["memory_s"]), color=memory, label="memory term, all ops")
    ax.plot(b, ms(c["dense_compute_s"]), color=compute, ls="--", label="compute term, weight GEMMs")
    ax.plot(b, ms(c["dense_memory_s"]), color=memory, ls="--", label="memory term, weight GEMMs")
    if any(x > 0 for x in c["comm_s"]):
        ax.plot(b, ms(c["comm_s"]), color=style.GREEN, label="tensor-parallel communication")
    style.log_axis(ax, "y")
    k = knee(b, c["dense_compute_s"], c["dense_memory_s"])
    if k is not None:
        for a in (ax, ax_tp):
            a.axvline(k, color=style.COLORS["reference"], ls=":")
        ax.annotate(f"knee B* ≈ {k:.0f}", (k, 1.0), xycoords=("data", "axes fraction"), xytext=(4, -4),
                    textcoords="offset points", va="top", color=style.COLORS["reference"])
    style.log_axis(ax, "x", base=2)
    ax.set_ylabel("decode step time (ms, log)")
    ax.set_title("\n".join(textwrap.wrap(title, 90)), fontsize=9)
    ax.grid(True, which="minor", axis="y", alpha=0.12)
    ax.legend(loc="upper left")

    ax_tp.plot(b, c["tokens_per_s"], color=style.COLORS["baseline"], label="output tokens / s")
    style.log_axis(ax_tp, "x", base=2)
    ax_tp.set_xlabel("decode batch size (sequences, log)")
    ax_tp.set_ylabel("output tokens / s (one instance)")
    style.plain(ax_tp, "y")
    if not math.isfinite(max(c["tokens_per_s"])):
        sys.exit(f"{args.csv}: non-finite throughput")
    style.savefig(fig, out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
