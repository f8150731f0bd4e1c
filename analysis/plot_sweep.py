#!/usr/bin/python3
"""Any metric of a sweep against any swept key (reads DIR/sweep.h5, written by `testbed sweep`).

    /usr/bin/python3 analysis/plot_sweep.py DIR --x KEY --y METRIC [--y METRIC ...] [--hue KEY]
        [--where KEY=VALUE ...] [--logx] [--logy] [--out FILE]

One line per value of --hue (if given), one panel per --y metric. Every other
swept key must take a single value among the plotted rows: fix the rest with
--where KEY=VALUE (values compare as numbers when the column is numeric).
Failed points are left out. Writes FILE (default DIR/<y>_vs_<x>.png) and prints
the plotted values as a markdown table (in the stored units). Reads through
analysis/results.py; the axes say what the keys and metrics are, in words and
the units of analysis/style.py (TPOT in ms, hit rates in %).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402


def fmt(v):
    """A cell or label: numbers in their shortest form (256, not 256.0)."""
    return f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)


def numeric(values):
    return np.asarray(values).dtype.kind in "fiu"


def swept_keys(sw):
    """The swept (and searched) key columns: those between status and the first metric."""
    return [k for k in sw.points if "." in k]


def parse_where(sw, items):
    where = {}
    for item in items:
        if "=" not in item:
            sys.exit(f"plot_sweep.py: --where {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        if key not in sw.points:
            sys.exit(f"plot_sweep.py: --where {key}: no such column (swept keys: {', '.join(swept_keys(sw))})")
        where[key] = float(value) if sw.points[key].dtype.kind == "f" else value
    return where


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="the sweep's output directory (or its sweep.h5)")
    ap.add_argument("--x", required=True, help="swept key on the x axis")
    ap.add_argument("--y", required=True, action="append", help="metric on the y axis (repeat for more panels)")
    ap.add_argument("--hue", help="swept key: one line per value")
    ap.add_argument("--where", action="append", default=[], help="KEY=VALUE: keep only these rows")
    ap.add_argument("--logx", action="store_true")
    ap.add_argument("--logy", action="store_true")
    ap.add_argument("--out", help="output image (default DIR/<y>_vs_<x>.png)")
    args = ap.parse_args(argv)

    try:
        sw = results.load_sweep(args.dir)
    except (FileNotFoundError, OSError) as e:
        sys.exit(f"plot_sweep.py: {e}")
    for key in [args.x] + ([args.hue] if args.hue else []):
        if key not in sw.points:
            sys.exit(f"plot_sweep.py: {key}: not a column of {sw.path} (swept keys: {', '.join(swept_keys(sw))})")
    for m in args.y:
        if m not in sw.points:
            sys.exit(f"plot_sweep.py: {m}: not a column of {sw.path}")
    rows = sw.select(**parse_where(sw, args.where))
    if len(rows["id"]) == 0:
        sys.exit("plot_sweep.py: no ok rows match")
    # Every other swept key must be fixed, or lines would mix points.
    for key in swept_keys(sw):
        if key in (args.x, args.hue):
            continue
        distinct = sorted(set(rows[key].tolist()))
        if len(distinct) > 1:
            sys.exit(f"plot_sweep.py: {key} takes {len(distinct)} values ({', '.join(map(fmt, distinct[:6]))}"
                     f"{', ...' if len(distinct) > 6 else ''}) among these rows: fix it with --where {key}=VALUE "
                     f"or plot it as --hue")
    hues = sorted(set(rows[args.hue].tolist())) if args.hue else [None]

    fig, axes = plt.subplots(1, len(args.y), figsize=(5.2 * len(args.y), 3.8), squeeze=False)
    print(f"| {args.hue + ' | ' if args.hue else ''}{args.x} | " + " | ".join(args.y) + " |")
    print("|" + " --- |" * (len(args.y) + 1 + (1 if args.hue else 0)))
    for hue in hues:
        mask = np.ones(len(rows["id"]), dtype=bool) if hue is None else rows[args.hue] == hue
        order = np.argsort(rows[args.x][mask], kind="stable")
        xs = rows[args.x][mask][order]
        x_plot = style.scaled(args.x, xs) if numeric(xs) else xs
        if hue is None:
            name = None
        else:
            u = style.unit(args.hue)
            name = f"{fmt(hue * style.scaled(args.hue, 1.0) if numeric([hue]) else hue)}{' ' + u if u else ''}"
        for ax, m in zip(axes[0], args.y):
            ax.plot(x_plot, style.scaled(m, rows[m][mask][order]), "o-", label=name)
        for i in range(len(xs)):
            cells = ([fmt(hue)] if args.hue else []) + [fmt(xs[i])] + [f"{rows[m][mask][order][i]:.6g}" for m in args.y]
            print("| " + " | ".join(cells) + " |")
    for ax, m in zip(axes[0], args.y):
        ax.set_xlabel(style.label(args.x, log=args.logx))
        ax.set_ylabel(style.label(m, log=args.logy))
        if args.logx:
            style.log_axis(ax, "x")
        if args.logy:
            style.log_axis(ax, "y")
        if args.hue:
            ax.legend(title=style.words(args.hue))
    fixed = ", ".join(args.where)
    fig.suptitle(f"{os.path.basename(os.path.dirname(sw.path))}{': ' + fixed if fixed else ''}", fontsize=10)
    out = args.out or os.path.join(sw.dir, f"{'_'.join(args.y)}_vs_{args.x}.png")
    style.savefig(fig, out, dpi=110)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
