"""Plots and tables of papers/prefix-routing from results/prefix-routing/.

    papers/prefix-routing/run.sh && /usr/bin/python3 papers/prefix-routing/plot.py \
        [--results results/prefix-routing] [--out papers/prefix-routing]

Reads the merged table of each section's sweep (results/prefix-routing/<section>/sweep.h5,
written by `testbed sweep papers/prefix-routing/<section>.ini`: one row per point, the swept
keys and every /summary metric) through analysis/results.py; writes PNGs to --out (beside
this script) and the tables to <results>/tables.md. Sections that were not run are skipped.

Two things are not in the merged tables and come from a point's own results file: the
share of requests with any cached token ("requests with a hit", from /requests; used when
the summary has no request_hit_share metric) and the trace a Mooncake point read (its
config's trace.path, for the titles). Figures are drawn through analysis/style.py.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

RES = os.path.join(ROOT, "results", "prefix-routing")  # --results
OUT = HERE  # --out
ROUTERS = ["round_robin", "random", "least_loaded", "prefix_approx", "prefix_precise", "weighted", "cache_aware"]
# cache-blind balancers in muted colours, the prefix-aware routers in strong ones
COLORS = dict(zip(ROUTERS, [style.GREY, style.YELLOW, style.SKY, style.ORANGE, style.VERMILLION, style.PURPLE,
                            style.GREEN]))
UNBOUNDED_MOONCAKE = 0.3736  # traces/README.md: unbounded replay in 16-token blocks
BLOCK = 16
# prefix_approx often lies exactly under prefix_precise: dashed, square markers.
STYLE = {r: dict(color=COLORS[r], marker="o", ls="-") for r in ROUTERS}
STYLE["prefix_approx"].update(marker="s", ls="--", markersize=9, mfc="none")

_sweeps = {}


def section(name):
    """The merged table (results.Sweep) of section `name`, or None if it was not run; points
    that failed are left out of every table, with a warning on stderr."""
    if name not in _sweeps:
        try:
            sw = results.load_sweep(os.path.join(RES, name))
        except FileNotFoundError:
            sw = None
        if sw is not None:
            failed = [i for i, st in zip(sw.points["id"], sw.points["status"]) if st != "ok"]
            if failed:
                print(f"warning: {sw.path}: {len(failed)} failed point(s) left out: {', '.join(failed)}",
                      file=sys.stderr)
        _sweeps[name] = sw
    return _sweeps[name]


class Point(dict):
    """One ok row of a merged table: {column -> float | str}, and the point's own results
    file for what the table does not hold."""

    def __init__(self, sw, columns):
        super().__init__(columns)
        self.sweep = sw

    def own(self):
        if not hasattr(self, "_own"):
            self._own = self.sweep.point(self["id"])
        return self._own

    def request_hit_share(self):
        """Share of requests with any cached prompt token."""
        if "request_hit_share" not in self:
            self["request_hit_share"] = float((self.own().requests["cached_tokens"] > 0).mean())
        return self["request_hit_share"]

    def trace_path(self):
        return self.own().config.get("trace.path", "")


def points(name, **where):
    """The ok points of section `name` whose columns equal `where` (dotted keys:
    **{"workload.rate": 6}), in table order; [] if the section was not run."""
    sw = section(name)
    if sw is None:
        return []
    rows = sw.select(**where)
    return [Point(sw, {k: (v[i] if isinstance(v[i], str) else float(v[i])) for k, v in rows.items()})
            for i in range(len(rows["id"]))]


def single(pts, what):
    if len(pts) > 1:
        sys.exit(f"{what}: {len(pts)} points match, expected one")
    return pts[0] if pts else None


def runs(name, routers=ROUTERS, **where):
    """{router: point} of section `name` at `where`, in the order of `routers`."""
    out = {}
    for r in routers:
        d = single(points(name, **{"router.type": r}, **where), f"{name} {where} router {r}")
        if d is not None:
            out[r] = d
    return out


def row(name, d, base=None):
    saved_vs_base = (d["gpu_hours_saved_per_day"] - base["gpu_hours_saved_per_day"]) if base else float("nan")
    return (f"| {name} | {100 * d['prefix_hit_rate']:.1f}% | {100 * d.request_hit_share():.1f}% | "
            f"{d['ttft_p50_s']:.3f} | {d['ttft_p90_s']:.3f} | {d['ttft_p99_s']:.2f} | "
            f"{d['request_throughput_rps']:.2f} | {d['load_imbalance_requests']:.2f} | {int(d['preemptions'])} | "
            f"{d['gpu_hours_saved_per_day']:.1f} | {saved_vs_base:+.1f} |")


HEADER = ("| router | hit rate (tokens) | requests with a hit | TTFT p50 (s) | TTFT p90 (s) | TTFT p99 (s) | "
          "req/s | load imbalance (max/mean requests) | preemptions | GPU-h saved/day vs no cache | vs round_robin |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def router_table(title, data, out):
    if not data:
        return
    out.append(f"\n### {title}\n\n{HEADER}")
    base = data.get("round_robin")
    for r, d in data.items():
        out.append(row(r, d, base))


def fig_routers(workloads):
    present = [(t, d) for t, d in workloads if d]
    if not present:
        return
    fig, axes = plt.subplots(2, len(present), figsize=(4.6 * len(present), 6.6), squeeze=False)
    for j, (title, data) in enumerate(present):
        names = list(data)
        x = np.arange(len(names))
        col = [COLORS[n] for n in names]
        hit = [100 * data[n]["prefix_hit_rate"] for n in names]
        ttft = [data[n]["ttft_p90_s"] for n in names]
        ax = axes[0][j]
        ax.bar(x, hit, color=col)
        ax.set_ylim(0, 100)
        style.bar_labels(ax, x, hit, fmt=lambda v: f"{v:.0f}")
        ax.set_title(title)
        ax.set_ylabel(style.label("prefix_hit_rate"))
        ax.set_xticks(x, [])
        ax = axes[1][j]
        ax.bar(x, ttft, color=col)
        style.log_axis(ax, "y")
        style.bar_labels(ax, x, ttft, log=True)  # headroom above the tallest: no label leaves the axes
        ax.set_ylabel(style.label("ttft_p90_s", log=True))
        ax.set_xticks(x, names, rotation=40, ha="right", fontsize=8)
        ax.set_xlabel("router")
    style.savefig(fig, os.path.join(OUT, "routers.png"), dpi=130)


def fig_capacity(out):
    pts = sorted(((int(d["cache.num_blocks"]), d) for d in points("mooncake_capacity")), key=lambda p: p[0])
    if not pts:
        return
    tokens = np.array([b * BLOCK for b, _ in pts], dtype=float)
    hit = np.array([100 * d["prefix_hit_rate"] for _, d in pts])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(tokens, hit, "o-", color=COLORS["prefix_precise"], label="one instance (simulated, LRU in 16-token blocks)")
    ax.axhline(100 * UNBOUNDED_MOONCAKE, color=style.COLORS["baseline"], ls="--", lw=1, label="unbounded replay: 37.4%")
    ax.axhline(40, color=style.COLORS["reference"], ls=":", lw=1, label="Mooncake paper's cache ratio: 40%")
    for t, lab in [(28020 * BLOCK, "1 x H100 (8B)"), (8 * 28020 * BLOCK, "8 x H100")]:
        ax.axvline(t, color=style.BLUE, lw=0.8, alpha=0.6)
        ax.text(t * 1.05, 2, lab, color=style.BLUE, fontsize=8, rotation=90, va="bottom")
    style.log_axis(ax, "x")
    ax.set_xlabel("KV cache capacity (tokens, log)")
    ax.set_ylabel(style.label("prefix_hit_rate"))
    ax.set_ylim(0, 50)
    trace = pts[0][1].trace_path()
    ax.set_title(f"Mooncake conversation trace, one instance\n({os.path.basename(trace)})")
    ax.legend(loc="upper left")
    style.savefig(fig, os.path.join(OUT, "mooncake_capacity.png"), dpi=130)
    out.append(f"\n### Mooncake, one instance: hit rate vs KV capacity ({trace})\n")
    out.append("| KV blocks | tokens | hit rate | TTFT p90 (s) | preemptions |\n|---:|---:|---:|---:|---:|")
    for (b, d), t in zip(pts, tokens):
        out.append(f"| {b:,} | {t / 1e6:.2f}M | {100 * d['prefix_hit_rate']:.2f}% | {d['ttft_p90_s']:.2f} | "
                   f"{int(d['preemptions'])} |")


def sweep(name, key, routers):
    """({router: [(value, point)] sorted by value}, the values) of section `name`, swept over
    the config key `key` and router.type; ({}, []) if the section was not run."""
    sw = section(name)
    if sw is None:
        return {}, []
    res = {}
    for r in routers:
        pts = sorted(((d[key], d) for d in points(name, **{"router.type": r})), key=lambda p: p[0])
        if pts:
            res[r] = pts
    return res, sorted({v for pts in res.values() for v, _ in pts})


def fig_prefixes(out):
    routers = ["round_robin", "least_loaded", "prefix_approx", "prefix_precise", "weighted", "cache_aware"]
    res, vals = sweep("shared_prefixes", "workload.num_prefixes", routers)
    if not res:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for r, pts in res.items():
        x = [v for v, _ in pts]
        axes[0].plot(x, [100 * d["prefix_hit_rate"] for _, d in pts], **STYLE[r], label=r)
        axes[1].plot(x, [d["ttft_p90_s"] for _, d in pts], **STYLE[r], label=r)
        axes[2].plot(x, [d["load_imbalance_requests"] for _, d in pts], **STYLE[r], label=r)
    one = 28020 * BLOCK / 8400
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("distinct 8,400-token system prompts (log)")
        ax.axvline(one, color=style.COLORS["baseline"], lw=0.8, ls=":")
        ax.axvline(16 * one, color=style.COLORS["baseline"], lw=0.8, ls="--")
        ax.set_xticks(vals, [f"{v:g}" for v in vals])
        ax.minorticks_off()
    axes[0].text(one * 0.92, 3, "prompts = 1 instance's cache", fontsize=8, rotation=90, ha="right")
    axes[0].text(16 * one * 0.92, 3, "= 16 instances' caches", fontsize=8, rotation=90, ha="right")
    axes[0].axhline(70, color=style.COLORS["reference"], lw=0.8)
    axes[0].set_ylabel(style.label("prefix_hit_rate"))
    axes[0].set_ylim(0, 80)
    style.log_axis(axes[1], "y")
    axes[1].set_ylabel(style.label("ttft_p90_s", log=True))
    axes[2].set_ylabel("requests per instance, max / mean")
    style.figure_legend(fig, axes[0], title="router")
    fig.suptitle("Shared-prompt workload, 16 x Llama-3.1-8B / H100, 24 req/s: the regime")
    style.savefig(fig, os.path.join(OUT, "shared_prefixes.png"), dpi=130)
    out.append("\n### Shared-prompt regime sweep (24 req/s, 10k requests): hit rate / TTFT p90 (s) / "
               "load imbalance\n")
    out.append("| prompts | " + " | ".join(res) + " |\n|---:|" + "---:|" * len(res))
    for v in vals:
        cells = []
        for r in res:
            d = dict(res[r]).get(v)
            cells.append(f"{100 * d['prefix_hit_rate']:.0f}% / {d['ttft_p90_s']:.2f} / "
                         f"{d['load_imbalance_requests']:.2f}" if d else "")
        out.append(f"| {v:g} | " + " | ".join(cells) + " |")


def fig_load(name, title, fname, out):
    res, rates = sweep(name, "workload.rate", ROUTERS)
    if not res:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for r, pts in res.items():
        x = [v for v, _ in pts]
        axes[0].plot(x, [d["ttft_p90_s"] for _, d in pts], **STYLE[r], label=r)
        axes[1].plot(x, [d["throughput_tok_s"] for _, d in pts], **STYLE[r], label=r)
        axes[2].plot(x, [100 * d["prefix_hit_rate"] for _, d in pts], **STYLE[r], label=r)
    style.log_axis(axes[0], "y")
    axes[0].set_ylabel(style.label("ttft_p90_s", log=True))
    axes[1].set_ylabel(style.label("throughput_tok_s"))
    style.plain(axes[1], "y")
    axes[2].set_ylabel(style.label("prefix_hit_rate"))
    for ax in axes:
        ax.set_xlabel(style.label("workload.rate"))
    style.figure_legend(fig, axes[0], title="router")
    fig.suptitle(title)
    style.savefig(fig, os.path.join(OUT, fname), dpi=130)
    out.append(f"\n### {title}: TTFT p90 (s) / output tok/s / hit rate / busy GPU-s per request\n")
    out.append("| rate | " + " | ".join(res) + " |\n|---:|" + "---:|" * len(res))
    for v in rates:
        cells = []
        for r in res:
            d = dict(res[r]).get(v)
            cells.append(f"{d['ttft_p90_s']:.2f} / {d['throughput_tok_s']:.0f} / {100 * d['prefix_hit_rate']:.0f}% / "
                         f"{d['busy_gpu_seconds_per_request']:.3f}" if d else "")
        out.append(f"| {v:g} | " + " | ".join(cells) + " |")


def claims_table(out):
    """The GPU-hour and cost claims, round_robin vs the prefix routers, per workload."""
    cases = [("shared prompts, 24 req/s", "shared", {}),
             ("shared prompts, 64 req/s (saturated)", "shared_load", {"workload.rate": 64}),
             ("llm-d, 6 req/s", "llmd", {"workload.rate": 6}), ("llm-d, 20 req/s (saturated)", "llmd", {"workload.rate": 20}),
             ("Mooncake, trace rate", "mooncake", {"trace.time_scale": 1.0})]
    lines = []
    for title, name, where in cases:
        data = runs(name, ["round_robin", "prefix_precise", "weighted"], **where)
        base = data.get("round_robin")
        if not base:
            continue
        for r in ["prefix_precise", "weighted"]:
            d = data.get(r)
            if not d:
                continue
            per_day = d["requests_per_day"] / 3600.0
            lines.append(
                f"| {title} | {r} | {100 * base['prefix_hit_rate']:.1f}% -> {100 * d['prefix_hit_rate']:.1f}% | "
                f"{d['gpu_hours_saved_per_day'] - base['gpu_hours_saved_per_day']:.1f} | "
                f"{base['busy_gpu_seconds_per_request']:.3f} -> {d['busy_gpu_seconds_per_request']:.3f} | "
                f"{(base['busy_gpu_seconds_per_request'] - d['busy_gpu_seconds_per_request']) * per_day:.1f} | "
                f"{(1 - base['prefix_hit_rate']) / (1 - d['prefix_hit_rate']):.2f}x | "
                f"{d['throughput_tok_s'] / base['throughput_tok_s']:.2f}x |")
    if not lines:
        return
    out.append("\n### GPU-hours and cost: round_robin -> prefix router (1,000,000 requests/day)\n")
    out.append("| workload | router | hit rate | GPU-h/day saved (from cached tokens) | busy GPU-s per request | "
               "GPU-h/day saved (from busy GPU-s) | prefill tokens computed, RR / router | output tok/s, router / RR |\n"
               "|---|---|---:|---:|---:|---:|---:|---:|")
    out.extend(lines)


def main():
    global RES, OUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=RES, help="folder run.sh wrote (one sweep folder per section)")
    ap.add_argument("--out", default=OUT, help="folder for the PNGs")
    args = ap.parse_args()
    RES, OUT = args.results, args.out
    _sweeps.clear()
    if not os.path.isdir(RES):
        sys.exit(f"no results in {RES}: run papers/prefix-routing/run.sh first")
    os.makedirs(OUT, exist_ok=True)
    out = ["# papers/prefix-routing tables (generated by plot.py)"]
    shared = runs("shared")
    moon1 = runs("mooncake", **{"trace.time_scale": 1.0})
    moon2 = runs("mooncake", **{"trace.time_scale": 0.5})
    llmd = runs("llmd", **{"workload.rate": 6})
    router_table("Shared-prompt workload (16 x Llama-3.1-8B / H100, 24 req/s, 20k requests)", shared, out)
    trace = next(iter(moon1.values())).trace_path() if moon1 else ""
    router_table(f"Mooncake conversation trace, its own arrival times (8 x Llama-3.1-8B / H100; {trace})", moon1, out)
    router_table(f"Mooncake conversation trace, 2x its rate ({trace})", moon2, out)
    router_table("llm-d benchmark workload, 6 req/s (8 x Qwen3-32B TP2 / H100)", llmd, out)
    fig_routers([("shared prompts, 16 x 8B, 24 req/s", shared),
                 ("Mooncake conversation, 8 x 8B, trace rate", moon1),
                 ("Mooncake conversation, 8 x 8B, 2x rate", moon2),
                 ("llm-d workload, 8 x 32B TP2, 6 req/s", llmd)])
    fig_capacity(out)
    fig_prefixes(out)
    stale = {f"prefix_approx_cap{int(d['router.approx_capacity_blocks'])}": d
             for d in sorted(points("staleness", **{"router.type": "prefix_approx"}),
                             key=lambda d: d["router.approx_capacity_blocks"])}
    ref = runs("shared_prefixes", ["round_robin", "prefix_precise"], **{"workload.num_prefixes": 1024})
    router_table("Staleness: 1,024 prompts (overflows the fleet), 24 req/s, 10k requests", {**ref, **stale}, out)
    fig_load("shared_load", "Shared-prompt workload, 16 x Llama-3.1-8B / H100, rate sweep", "shared_load.png", out)
    fig_load("llmd", "llm-d workload, 8 x Qwen3-32B TP2 / H100, rate sweep", "llmd_load.png", out)
    claims_table(out)
    with open(os.path.join(RES, "tables.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
