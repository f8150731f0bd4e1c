#!/usr/bin/python3
"""A disaggregated (or any multi-pool) run at a glance: one results file of `testbed run`.

    /usr/bin/python3 analysis/plot_pools.py RESULTS [--out FILE]

RESULTS is a run directory or its results.h5. Three panels:
  - KV usage over time, the mean over each pool's instances (needs
    fleet.sample_interval_s > 0; otherwise each pool's mean KV usage over the run);
  - utilization per pool (busy time / wall time of its instances);
  - the CDFs of each request's KV transfer time and back-pressure wait
    (first token -> transfer start), when requests were handed off, on a log time axis.
Writes FILE (default DIR/pools.png) and prints a markdown table per pool.
Reads through analysis/results.py; draws through analysis/style.py.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402


def text(values):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def pool_table(r):
    """{pool name: {column: value}} from /pools, in pool order."""
    pools = r.table("pools")
    if not pools:
        sys.exit(f"plot_pools.py: {r.path} has no /pools table (a run with several [pool.NAME] sections writes one)")
    names = text(pools["name"])
    return {n: {k: (text(v)[i] if v.dtype.kind == "S" else v[i]) for k, v in pools.items()} for i, n in enumerate(names)}


def kv_over_time(r):
    """{pool: (t, mean kv_usage over its instances)} from /instance_samples, or {} without samples."""
    samples, inst = r.table("instance_samples"), r.table("instances")
    if not samples or "pool" not in inst:
        return {}
    pool_of = dict(zip(inst["instance"].astype(int), text(inst["pool"])))
    t = samples["t"]
    out = {}
    for pool in dict.fromkeys(pool_of.values()):
        mine = np.array([pool_of[int(i)] == pool for i in samples["instance"]])
        times = np.unique(t[mine])
        usage = np.array([samples["kv_usage"][mine & (t == x)].mean() for x in times])
        out[pool] = (times, usage)
    return out


def cdf(ax, values, column):
    """The CDF of one hand-off column on a log axis; the share of zeros (not drawable on it) is named."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    zeros = float(np.mean(v <= 0)) if v.size else 0.0
    name = style.words(column) + (f" ({100 * zeros:.0f}% are 0)" if zeros > 0 else "")
    style.cdf(ax, v, name, column=column, percentiles=(99,), color=style.color(len(ax.get_legend_handles_labels()[0])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    r = results.load(args.results)
    pools = pool_table(r)
    out = args.out or os.path.join(os.path.dirname(r.path), "pools.png")

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    kv = kv_over_time(r)
    names = list(pools)
    colours = [style.color(k) for k in range(len(names))]
    if kv:
        for k, (pool, (t, usage)) in enumerate(kv.items()):
            axes[0].plot(t, usage, color=style.color(names.index(pool) if pool in names else k),
                         label=f"{pool} ({pools[pool]['role']})")
        axes[0].set_xlabel("time (s)")
        axes[0].set_ylabel("KV-cache usage (share of blocks,\nmean over the pool's instances)")
        axes[0].legend()
    else:
        axes[0].bar(names, [p["kv_usage_mean"] for p in pools.values()], color=colours)
        axes[0].set_xlabel("pool")
        axes[0].set_ylabel("KV-cache usage, mean over the run\n(share of blocks)")
    axes[0].set_title("KV cache")
    axes[1].bar(names, [p["utilization"] for p in pools.values()], color=colours)
    axes[1].set_ylim(0, 1.05)
    axes[1].set_xlabel("pool")
    axes[1].set_ylabel("utilization (busy time / wall time)")
    axes[1].set_title("utilization per pool")
    req = r.requests
    if "transfer_s" in req:
        cdf(axes[2], req["transfer_s"], "transfer_s")
        cdf(axes[2], req["handoff_wait_s"], "handoff_wait_s")
        axes[2].set_xlabel("time per handed-off request (ms, log)")
        axes[2].set_ylabel("share of requests at or below x")
        axes[2].legend(loc="lower right")
    else:
        axes[2].text(0.5, 0.5, "no hand-offs", ha="center", va="center", transform=axes[2].transAxes)
        axes[2].set_axis_off()
    axes[2].set_title("hand-offs")
    style.savefig(fig, out, dpi=110)
    print("| pool | role | size | GPUs each | utilization | KV usage | batch size |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, p in pools.items():
        print(f"| {name} | {p['role']} | {int(p['size'])} | {int(p['gpus_per_instance'])} | "
              f"{p['utilization']:.3f} | {p['kv_usage_mean']:.3f} | {p['batch_size_mean']:.1f} |")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
