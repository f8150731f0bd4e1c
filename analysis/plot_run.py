#!/usr/bin/python3
"""Plots of one run's results file (written by `testbed run`).

    /usr/bin/python3 analysis/plot_run.py results/quickstart/results.h5 [--out DIR]
        [--instance I | --per-instance] [--bin SECONDS]

RESULTS may also be the run directory holding results.h5.
Writes into DIR (default: the results file's folder):
  latency_cdf.png        TTFT, TPOT and E2E of every request: CDFs on log time axes (p50 and
                         p99 marked) and, below, their tails (share of requests slower, log-log)
  batch_composition.png  over time: prefill tokens, decode tokens (each on its own panel, so
                         neither hides the other), sequences in the batch, KV blocks in use.
                         One instance (a run of one, or --instance I): per step. A fleet: by
                         default the fleet view in time bins (--bin, default about 1/200 of the
                         run): tokens per second summed over the instances, sequences and KV
                         blocks as the mean per instance with the min-max range over them;
                         --per-instance draws one line per instance in the same bins instead.
Reads only the results file, through analysis/results.py; draws through analysis/style.py.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py: the shared figure style)
import matplotlib.pyplot as plt  # noqa: E402  (after style: the Agg backend)

LATENCIES = ["ttft_s", "tpot_s", "e2e_s"]


def plot_latency(r, out):
    req = r.requests
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.6), gridspec_kw={"height_ratios": [3, 2]})
    for j, col in enumerate(LATENCIES):
        values = np.asarray(req.get(col, []), dtype=float)
        name = style.words(col)
        top, bottom = axes[0][j], axes[1][j]
        style.cdf(top, values, name, column=col, color=style.color(j))
        top.set_xlabel(style.label(col, log=True))
        top.set_ylabel("share of requests at or below x")
        top.set_title(name)
        style.tail(bottom, values, f"{name}: tail", column=col, color=style.color(j))
        for share, text in [(0.1, "p90"), (0.01, "p99")]:
            bottom.axhline(share, color=style.COLORS["reference"], lw=0.8, ls=":")
            bottom.annotate(text, (0.0, share), xycoords=("axes fraction", "data"), xytext=(3, 2),
                            textcoords="offset points", fontsize=7, color=style.COLORS["reference"])
        bottom.set_xlabel(style.label(col, log=True))
        bottom.set_ylabel("share of requests slower than x (log)")
        for ax in (top, bottom):
            if ax.lines:
                ax.legend(loc="lower right" if ax is top else "upper right")
            else:
                ax.text(0.5, 0.5, "no values", ha="center", va="center", transform=ax.transAxes)
    s = r.summary
    n = int(s.get("num_instances", 1) or 1)
    fig.suptitle(f"{int(s['num_finished'])} requests{f' on {n} instances' if n > 1 else ''}, "
                 f"prefix-cache hit rate {100 * s['prefix_hit_rate']:.1f}%, {s['throughput_tok_s']:.1f} output tokens/s")
    return style.savefig(fig, os.path.join(out, "latency_cdf.png"))


# ---- batch composition ---------------------------------------------------------------------

def nice_bin(span, bins=200):
    """A bin width near span / bins, rounded to 1, 2 or 5 times a power of ten."""
    raw = max(span / bins, 1e-6)
    p = 10 ** np.floor(np.log10(raw))
    return float(min((m * p for m in (1, 2, 5, 10)), key=lambda w: abs(np.log(w / raw))))


def held_mean(starts, ends, values, edges):
    """The time mean over each bin [edges[i], edges[i+1]) of a function that is values[k] on
    [starts[k], ends[k]) (non-overlapping, sorted) and 0 elsewhere."""
    starts, ends, values = (np.asarray(a, dtype=float) for a in (starts, ends, values))
    lengths = np.clip(ends - starts, 0.0, None)
    whole = np.concatenate([[0.0], np.cumsum(values * lengths)])  # integral up to each segment's start

    def integral(t):
        k = np.searchsorted(starts, t, side="right")  # segments starting at or before t
        last = np.maximum(k - 1, 0)
        inside = np.where(k > 0, values[last] * np.clip(t - starts[last], 0.0, lengths[last]), 0.0)
        return whole[last] * (k > 0) + inside

    f = integral(np.asarray(edges, dtype=float))
    return np.diff(f) / np.diff(edges)


def instance_series(st, inst, edges):
    """{quantity: per-bin values} of one instance: tokens per second (prefill, decode), time mean
    of sequences in the batch (0 between steps) and of KV blocks in use (held until the next step)."""
    mine = np.flatnonzero(st["instance"] == inst)
    order = mine[np.argsort(st["start_s"][mine], kind="stable")]
    s = np.asarray(st["start_s"], dtype=float)[order]
    d = np.asarray(st["duration_s"], dtype=float)[order]
    e = s + d
    nxt = np.append(s[1:], e[-1]) if s.size else s
    per_s = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
    return {
        "prefill": held_mean(s, e, np.asarray(st["prefill_tokens"])[order] * per_s, edges),
        "decode": held_mean(s, e, np.asarray(st["decode_tokens"])[order] * per_s, edges),
        "seqs": held_mean(s, e, np.asarray(st["num_seqs"])[order], edges),
        "kv": held_mean(s, np.maximum(nxt, e), np.asarray(st["kv_blocks_used"])[order], edges),
    }


PANELS = [("prefill", "prefill tokens", style.COLORS["prefill"]),
          ("decode", "decode tokens", style.COLORS["decode"]),
          ("seqs", "sequences in the batch", style.COLORS["sequences"]),
          ("kv", "KV blocks in use", style.COLORS["kv"])]


def steps_of(st, inst):
    mine = np.flatnonzero(st["instance"] == inst)
    return mine[np.argsort(st["start_s"][mine], kind="stable")]


def draw_per_step(axes, st, inst):
    """One instance, step by step: each step's value over its duration (0 in the gaps)."""
    order = steps_of(st, inst)
    s = np.asarray(st["start_s"], dtype=float)[order]
    e = s + np.asarray(st["duration_s"], dtype=float)[order]
    e = np.maximum(e, s)
    edges = np.empty(2 * s.size)
    edges[0::2], edges[1::2] = s, e
    edges = np.maximum.accumulate(edges)
    edges = np.append(edges, edges[-1])
    cols = {"prefill": "prefill_tokens", "decode": "decode_tokens", "seqs": "num_seqs", "kv": "kv_blocks_used"}
    for ax, (key, name, colour) in zip(axes, PANELS):
        v = np.asarray(st[cols[key]], dtype=float)[order]
        held = np.zeros(2 * v.size)
        held[0::2] = v
        if key == "kv":  # blocks stay allocated between steps
            held[1::2] = v
        ax.stairs(held, edges, fill=key in ("prefill", "decode"), color=colour, lw=1.2, label=f"{name}, each step")
    if "num_waiting" in st:
        w = np.asarray(st["num_waiting"], dtype=float)[order]
        held = np.repeat(w, 2)
        axes[2].stairs(held, edges, color=style.COLORS["waiting"], lw=1, label="requests waiting")
    axes[0].set_ylabel("prefill tokens per step")
    axes[1].set_ylabel("decode tokens per step")


def draw_binned(axes, st, instances, per_instance, width):
    t0 = float(np.min(st["start_s"]))
    t1 = float(np.max(np.asarray(st["start_s"]) + np.asarray(st["duration_s"])))
    edges = np.arange(t0, t1 + width, width)
    if edges.size < 2:
        edges = np.array([t0, t0 + width])
    per = {i: instance_series(st, i, edges) for i in instances}
    for ax, (key, name, colour) in zip(axes, PANELS):
        stack = np.array([per[i][key] for i in instances])
        if per_instance:
            for k, i in enumerate(instances):
                ax.stairs(stack[k], edges, color=style.color(k), lw=1,
                          ls=style.LINESTYLES[(k // len(style.PALETTE)) % len(style.LINESTYLES)],
                          label=f"instance {i}")
        elif key in ("prefill", "decode"):
            ax.stairs(stack.sum(axis=0), edges, fill=True, color=colour,
                      label=f"{name}, sum over {len(instances)} instances")
        else:
            ax.stairs(stack.max(axis=0), edges, baseline=stack.min(axis=0), fill=True, color=colour, alpha=0.25,
                      label=f"min–max over {len(instances)} instances")
            ax.stairs(stack.mean(axis=0), edges, color=colour, lw=1.3, label="mean per instance")
    where = "per instance" if per_instance else "fleet total"
    axes[0].set_ylabel(f"prefill tokens / s\n({where})")
    axes[1].set_ylabel(f"decode tokens / s\n({where})")


def plot_steps(r, out, instance=None, per_instance=False, bin_s=None):
    st = r.steps
    if not st or not len(st.get("start_s", [])):
        return None
    instances = [int(i) for i in np.unique(st["instance"])]
    if instance is not None and instance not in instances:
        sys.exit(f"plot_run: --instance {instance}: the run's steps are of instances {instances}")
    fleet = len(instances) > 1 and instance is None
    fig, axes = plt.subplots(4, 1, figsize=(11, 8.4), sharex=True, gridspec_kw={"height_ratios": [3, 2, 2, 2]})
    if fleet:
        span = float(np.max(np.asarray(st["start_s"]) + np.asarray(st["duration_s"])) - np.min(st["start_s"]))
        width = bin_s or nice_bin(span)
        draw_binned(axes, st, instances, per_instance, width)
        view = (f"one line per instance, {style.number(width)} s bins" if per_instance
                else f"fleet of {len(instances)} instances, {style.number(width)} s bins")
        axes[2].set_ylabel("sequences in the batch\n(time mean)")
        axes[3].set_ylabel("KV blocks in use\n(time mean)")
    else:
        inst = instances[0] if instance is None else instance
        draw_per_step(axes, st, inst)
        view = "per step" + (f", instance {inst} of {len(instances)}" if len(instances) > 1 else "")
        axes[2].set_ylabel("sequences")
        axes[3].set_ylabel("KV blocks in use")
    for ax in axes:
        ax.set_ylim(bottom=0)
        style.plain(ax, "y")
        if fleet and per_instance:  # one entry per instance: beside the panel, not over the lines
            ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), ncol=1 if len(instances) <= 8 else 2, fontsize=7)
        else:
            ax.legend(loc="upper right", fontsize=7)
    axes[-1].set_xlabel("time (s)")
    fig.suptitle(f"Batch composition over time ({view})")
    return style.savefig(fig, os.path.join(out, "batch_composition.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--out", default=None)
    view = ap.add_mutually_exclusive_group()
    view.add_argument("--instance", type=int, default=None, help="batch composition of this instance, per step")
    view.add_argument("--per-instance", action="store_true", help="a fleet: one line per instance (in time bins)")
    ap.add_argument("--bin", type=float, default=None, metavar="SECONDS", help="time bin of the fleet views")
    args = ap.parse_args()
    if args.bin is not None and args.bin <= 0:
        sys.exit("plot_run: --bin must be positive")
    try:
        r = results.load(args.results)
    except OSError as e:
        sys.exit(f"plot_run: {e}")
    out = args.out or os.path.dirname(os.path.abspath(r.path))
    os.makedirs(out, exist_ok=True)
    for path in [plot_latency(r, out), plot_steps(r, out, args.instance, args.per_instance, args.bin)]:
        if path:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
