#!/usr/bin/python3
"""Several runs' latency CDFs on one figure (the plot beside `testbed compare`).

    /usr/bin/python3 analysis/compare.py RUN RUN [RUN ...] [--out FILE]

Each RUN is a run directory (or its results.h5). Three panels: the CDFs of
TTFT, TPOT and E2E of every run, each run labelled by the config keys in
which the runs differ (or by its path when none differ), with log time axes
since tails matter. Writes FILE (default compare.png beside the first run)
and prints the label of each run.
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

PANELS = [("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E latency")]


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
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, (column, title) in zip(axes, PANELS):
        for r, name in zip(runs, names):
            v = np.sort(np.asarray(r.requests.get(column, []), dtype=float))
            v = v[np.isfinite(v) & (v > 0)]
            if v.size:
                ax.plot(v, np.arange(1, v.size + 1) / v.size, label=name)
        ax.set_xscale("log")
        ax.set_xlabel(f"{title} (s, log)")
        ax.set_ylabel("share of requests")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    for i, (r, name) in enumerate(zip(runs, names), 1):
        print(f"[{i}] {name}: {r.path}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
