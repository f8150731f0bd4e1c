#!/usr/bin/python3
"""Plots of the decode-crossover runs (papers/roofline/run.sh).

    /usr/bin/python3 papers/roofline/plot.py [--results results/roofline] [--out papers/roofline]

For each results/roofline/<name>.csv, writes <out>/<name>.png with
analysis/plot_roofline.py (step time and its compute and memory terms vs batch, the
weight-GEMM knee marked), and writes <out>/compare.png: decode step time per output
token and throughput vs batch for every curve on one pair of axes. Reads only the CSVs;
draws through analysis/style.py.
"""
import argparse
import glob
import importlib.util
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
import style  # noqa: E402  (analysis/style.py)
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
    for i, (name, c) in enumerate(curves):
        b = c["batch"]
        k = pr.knee(b, c["dense_compute_s"], c["dense_memory_s"])
        label = name if k is None else f"{name} (B* = {k:.0f})"
        (line,) = ax_ms.plot(b, [s * 1e3 for s in c["step_s"]], color=style.color(i), label=label)
        ax_tp.plot(b, c["tokens_per_s"], color=line.get_color(), label=label)
        if k is not None:
            for ax in (ax_ms, ax_tp):
                ax.axvline(k, color=line.get_color(), ls=":", alpha=0.8)
    style.log_axis(ax_ms, "y")
    ax_ms.set_ylabel("decode step time (ms, log)")
    ax_tp.set_ylabel("output tokens / s (one instance)")
    style.plain(ax_tp, "y")
    for ax in (ax_ms, ax_tp):
        style.log_axis(ax, "x", base=2)
        ax.set_xlabel("decode batch size (sequences, log), context 1024")
        ax.legend(title="model, GPU (knee)")
    fig.suptitle("Roofline decode step vs batch; dotted: weight-GEMM knee B* (compute = memory)")
    return style.savefig(fig, os.path.join(out, "compare.png"), dpi=110)


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
