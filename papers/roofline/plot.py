#!/usr/bin/python3
"""Plots of the decode-crossover runs (papers/roofline/run.sh).

    /usr/bin/python3 papers/roofline/plot.py [--results results/roofline] [--out papers/roofline]

For each results/roofline/<name>.csv, writes <out>/<name>.png with
analysis/plot_roofline.py (step time and its compute and memory terms vs batch, the
weight-GEMM knee marked), and writes <out>/compare.png: decode step time per output
token and throughput vs batch for every curve on one pair of axes. Reads only the CSVs.
"""
import argparse
import glob
import importlib.util
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PLOT_ROOFLINE = os.path.join("analysis", "plot_roofline.py")


def load_plot_roofline():
    """analysis/plot_roofline.py as a module, for its CSV reader and knee finder."""
    spec = importlib.util.spec_from_file_location("plot_roofline", PLOT_ROOFLINE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plot_compare(curves, pr, out):
    fig, (ax_ms, ax_tp) = plt.subplots(1, 2, figsize=(13, 5))
    for name, c in curves:
        b = c["batch"]
        k = pr.knee(b, c["dense_compute_s"], c["dense_memory_s"])
        label = name if k is None else f"{name} (B* = {k:.0f})"
        (line,) = ax_ms.plot(b, [s * 1e3 for s in c["step_s"]], label=label)
        ax_tp.plot(b, c["tokens_per_s"], color=line.get_color(), label=label)
        if k is not None:
            for ax in (ax_ms, ax_tp):
                ax.axvline(k, color=line.get_color(), ls=":", alpha=0.8)
    ax_ms.set_yscale("log")
    ax_ms.set_ylabel("decode step time (ms)")
    ax_tp.set_ylabel("output tokens / s (one instance)")
    for ax in (ax_ms, ax_tp):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("decode batch size (sequences), context 1024")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Roofline decode step vs batch; dotted: weight-GEMM knee B* (compute = memory)")
    fig.tight_layout()
    path = os.path.join(out, "compare.png")
    fig.savefig(path, dpi=110)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/roofline", help="folder run.sh wrote")
    ap.add_argument("--out", default="papers/roofline", help="folder for the PNGs")
    args = ap.parse_args()
    if not os.path.isfile(PLOT_ROOFLINE):
        sys.exit(f"{PLOT_ROOFLINE} not found: run from the repository root")
    paths = sorted(glob.glob(os.path.join(args.results, "*.csv")))
    if not paths:
        sys.exit(f"{args.results}: no CSVs; run papers/roofline/run.sh first")
    os.makedirs(args.out, exist_ok=True)
    pr = load_plot_roofline()
    curves = []
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        png = os.path.join(args.out, name + ".png")
        subprocess.run([sys.executable, PLOT_ROOFLINE, path, "--out", png], check=True)
        curves.append((name, pr.read_curve(path)[1]))
    print(plot_compare(curves, pr, args.out))


if __name__ == "__main__":
    main()
