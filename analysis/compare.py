#!/usr/bin/python3
"""Several runs' latency CDFs on one figure (the plot beside `testbed compare`).

    /usr/bin/python3 analysis/compare.py RUN RUN [RUN ...] [--out FILE]

Each RUN is a run directory (or its results.h5). Three columns, TTFT, TPOT and
E2E: the CDFs of every run on log time axes (top) and their tails, the share
of requests slower than x on log-log axes (bottom), since tails matter. Each
run is labelled by the config keys in which the runs differ (or by its path
when none differ). Writes FILE (default compare.png beside the first run)
and prints the label of each run. Draws through analysis/style.py.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

PANELS = ["ttft_s", "tpot_s", "e2e_s"]


def labels(runs):
    """Per run, 'key=value, ...' over the config keys whose values differ between the runs."""
    keys = sorted(set().union(*(r.config.keys() for r in runs)))
    differ = [k for k in keys if len({str(r.config.get(k, "(unset)")) for r in runs}) > 1]
    if not differ:
        return [r.path for r in runs]
    return [", ".join(f"{k.split('.')[-1]}={r.config.get(k, '(unset)')}" for k in differ) for r in runs]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if len(args.runs) < 2:
        sys.exit("compare.py: give at least two runs")
    runs = [results.load(p) for p in args.runs]
    names = labels(runs)
    out = args.out or os.path.join(os.path.dirname(runs[0].path), "compare.png")
    fig, axes = plt.subplots(2, 3, figsize=(15, 7), gridspec_kw={"height_ratios": [3, 2]})
    for j, column in enumerate(PANELS):
        top, bottom = axes[0][j], axes[1][j]
        for k, (r, name) in enumerate(zip(runs, names)):
            v = np.asarray(r.requests.get(column, []), dtype=float)
            style.cdf(top, v, name, column=column, percentiles=(), color=style.color(k))
            style.tail(bottom, v, name, column=column, color=style.color(k))
        top.set_xlabel(style.label(column, log=True))
        top.set_ylabel("share of requests at or below x")
        top.set_title(style.words(column))
        bottom.set_xlabel(style.label(column, log=True))
        bottom.set_ylabel("share of requests slower than x (log)")
        top.legend(loc="lower right", fontsize=7)
        bottom.legend(loc="lower left", fontsize=7)
    style.savefig(fig, out, dpi=110)
    for i, (r, name) in enumerate(zip(runs, names), 1):
        print(f"[{i}] {name}: {r.path}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
