#!/usr/bin/python3
"""Plots and tables of the Splitwise sweeps (papers/splitwise/run.sh).

    /usr/bin/python3 papers/splitwise/plot.py [--results results/splitwise] [--out papers/splitwise]

Reads, for each trace (conv, code), the searches of <trace>/goodput_unified/sweep.h5 (8 unified
H100 machines) and <trace>/goodput_split/sweep.h5 (prompt pool + token pool designs) through
analysis/results.py. A design's cost ($/h) and power (kW of GPU TDP) come from the run at its
goodput: cost_usd and energy_kwh over duration_s; its $ per million output tokens is that run's
usd_per_million_output_tokens. Writes
  cost.png    goodput against the cluster's cost per hour, per trace and SLO
  power.png   goodput against the cluster's GPU power (TDP), per trace and SLO
and prints the README's tables (markdown) on stdout: per trace and SLO the best design of each
hardware mix within the baseline's cost, within its power, and within both, then every design.
Figures are drawn through analysis/style.py; a point's xPyD label that would overlap another
is left out (the tables name every design).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

TRACES = [("conv", "Azure conversation"), ("code", "Azure code")]
SLOS = [(0.25, "strict: TTFT ≤ 0.25 s, TPOT ≤ 20 ms"), (0.5, "relaxed: TTFT ≤ 0.5 s, TPOT ≤ 40 ms")]
GPU_NAMES = {"h100-sxm": "H100", "a100-80gb": "A100", "h200": "H200"}
MIXES = [("H100 + H100 (Splitwise-HH)", "H100"), ("H100 + A100 (Splitwise-HA)", "A100"), ("H100 + H200", "H200")]
TOLERANCE = 1.001  # a design within 0.1% of the baseline's cost or power counts as equal
COLOURS = {"unified": style.BLACK, "H100": style.BLUE, "A100": style.ORANGE, "H200": style.GREEN}


def gpu_name(path):
    base = os.path.splitext(os.path.basename(str(path)))[0]
    return GPU_NAMES.get(base, base)


def load(path):
    try:
        return results.load_sweep(path)
    except FileNotFoundError:
        return None


def at_goodput(sweep, i, grid_keys):
    """The point of search row i at its found rate: {metric: value}, or None."""
    s, p = sweep.search, sweep.points
    mask = (p["status"] == "ok") & (p["workload.rate"] == s["workload.rate"][i])
    for k in grid_keys:
        mask &= p[k] == s[k][i]
    idx = np.flatnonzero(mask)
    return None if not len(idx) else {k: v[idx[0]] for k, v in p.items()}


def designs(folder, trace):
    """[{name, kind, slo, goodput, status, usd_h, kw, usd_per_mtok}] of one trace."""
    out = []
    uni = load(os.path.join(folder, trace, "goodput_unified"))
    if uni is not None and uni.search:
        s = uni.search
        keys = [k for k in s if k not in ("id", "status", "workload.rate", "first_failing", "num_probes")]
        for i in range(len(s["status"])):
            chunked = s["scheduler.chunked_prefill"][i] == "true"
            name = "8×H100 unified, " + ("chunks of 512" if chunked else "whole prompts")
            out.append(dict(name=name, kind="unified", slo=float(s["slo.ttft_s"][i]), **row(uni, i, keys)))
    spl = load(os.path.join(folder, trace, "goodput_split"))
    if spl is not None and spl.search:
        s = spl.search
        keys = [k for k in s if k not in ("id", "status", "workload.rate", "first_failing", "num_probes")]
        for i in range(len(s["status"])):
            gpu = gpu_name(s["pool.token.cost_model.hardware"][i])
            name = f"{int(s['pool.prompt.size'][i])}×H100 + {int(s['pool.token.size'][i])}×{gpu}"
            out.append(dict(name=name, kind=gpu, slo=float(s["slo.ttft_s"][i]), **row(spl, i, keys)))
    return out


def row(sweep, i, keys):
    s = sweep.search
    r = dict(goodput=float(s["workload.rate"][i]), status=s["status"][i], usd_h=np.nan, kw=np.nan,
             usd_per_mtok=np.nan, usd_per_mtok_all=np.nan)
    p = at_goodput(sweep, i, keys)
    if p is not None and p.get("duration_s", 0) > 0:
        r.update(usd_h=3600 * p["cost_usd"] / p["duration_s"], kw=3600 * p["energy_kwh"] / p["duration_s"],
                 usd_per_mtok=p["usd_per_million_output_tokens"],
                 usd_per_mtok_all=1e6 * p["cost_usd"] / (p["prompt_tokens"] + p["output_tokens"]))
    return r


def short(d):
    """A point's label on the plots: the unified setting, or xPyD."""
    if d["kind"] == "unified":
        return d["name"].split(", ")[1]
    prompt, token = d["name"].split(" + ")
    return prompt.split("×")[0] + "P" + token.split("×")[0] + "D"


def fmt_rate(d):
    if d["status"] == "found":
        return f"{d['goodput']:.1f}"
    if d["status"] == "above_range":
        return f"> {d['goodput']:.0f}"
    return "0" if d["status"] == "below_range" else d["status"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/splitwise")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    all_designs = {t: designs(args.results, t) for t, _ in TRACES}
    if not any(all_designs.values()):
        sys.exit(f"plot.py: no sweep under {args.results}; run papers/splitwise/run.sh first")

    for fname, key, xlabel in [("cost.png", "usd_h", "cluster cost ($ per hour)"),
                               ("power.png", "kw", "cluster GPU power at TDP (kW)")]:
        fig, axes = plt.subplots(len(SLOS), len(TRACES), figsize=(12, 8.5), squeeze=False)
        labels_at = []
        for c, (trace, title) in enumerate(TRACES):
            ds = all_designs[trace]
            for r, (slo, slo_title) in enumerate(SLOS):
                ax = axes[r][c]
                base = [d for d in ds if d["kind"] == "unified" and d["slo"] == slo]
                for kind in ["unified", "H100", "A100", "H200"]:
                    pts = [d for d in ds if d["kind"] == kind and d["slo"] == slo]
                    if not pts:
                        continue
                    label = "8×H100 unified" if kind == "unified" else f"H100 prompt + {kind} token"
                    ax.scatter([d[key] for d in pts], [d["goodput"] for d in pts], color=COLOURS[kind],
                               marker="s" if kind == "unified" else "o", label=label, s=22)
                    labels_at.append((ax, [d[key] for d in pts], [d["goodput"] for d in pts],
                                      [short(d) for d in pts], COLOURS[kind]))
                if base and np.isfinite(base[0][key]):
                    ax.axvline(base[0][key], color=style.COLORS["reference"], ls=":", lw=1,
                               label="the unified baseline's " + ("cost" if key == "usd_h" else "power"))
                ax.set_xlabel(xlabel)
                ax.set_ylabel("goodput (req/s)")
                ax.set_title(f"{title} — {slo_title}")
        style.figure_legend(fig, where="bottom", ncol=5)
        fig.suptitle("Llama-3.1-70B, 8-GPU machines (TP 8): 8 unified H100 machines against split "
                     "prompt/token pools (labels: P prompt and D token machines)")
        fig.tight_layout()
        for ax, xs, ys, texts, colour in labels_at:
            style.point_labels(ax, xs, ys, texts, fontsize=6, color=colour)
        style.savefig(fig, os.path.join(args.out, fname), dpi=100)

    for trace, _ in TRACES:
        ds = all_designs[trace]
        for slo, slo_title in SLOS:
            here = [d for d in ds if d["slo"] == slo]
            base = [d for d in here if d["kind"] == "unified"]
            if not base:
                continue
            ref = max(base, key=lambda d: d["goodput"])
            cost0 = next((d["usd_h"] for d in base if np.isfinite(d["usd_h"])), np.nan)
            power0 = next((d["kw"] for d in base if np.isfinite(d["kw"])), np.nan)
            print(f"### {trace}, {slo_title}: best design per budget (× the best unified baseline, "
                  f"{short(ref)}: {ref['goodput']:.1f} req/s, ${ref['usd_per_mtok']:.2f} per M tokens)\n")
            print("| hardware | budget | design | $/h | kW | goodput (req/s) | × baseline | $ per M output tokens "
                  "| $ per M tokens, prompt + output |")
            print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            for d in sorted(base, key=lambda d: d["name"]):
                print(f"| 8×H100 unified | baseline | {d['name'].split(', ')[1]} | {d['usd_h']:.1f} | {d['kw']:.1f} | "
                      f"{fmt_rate(d)} | {d['goodput'] / ref['goodput']:.2f}× | {d['usd_per_mtok']:.2f} | "
                      f"{d['usd_per_mtok_all']:.3f} |")
            for mix, kind in MIXES:
                pts = [d for d in here if d["kind"] == kind]
                for budget, ok in [("equal cost", lambda d: d["usd_h"] <= cost0 * TOLERANCE),
                                   ("equal power", lambda d: d["kw"] <= power0 * TOLERANCE),
                                   ("cost and power", lambda d: d["usd_h"] <= cost0 * TOLERANCE
                                    and d["kw"] <= power0 * TOLERANCE)]:
                    fit = [d for d in pts if ok(d)]
                    if not fit:
                        print(f"| {mix} | {budget} | none within the budget | | | | | | |")
                        continue
                    b = max(fit, key=lambda d: (d["goodput"], -d["usd_h"]))
                    print(f"| {mix} | {budget} | {b['name']} | {b['usd_h']:.1f} | {b['kw']:.1f} | {fmt_rate(b)} | "
                          f"{b['goodput'] / ref['goodput']:.2f}× | {b['usd_per_mtok']:.2f} | "
                          f"{b['usd_per_mtok_all']:.3f} |")
            print()

    # Every design, both SLOs.
    for trace, _ in TRACES:
        ds = all_designs[trace]
        if not ds:
            continue
        names = list(dict.fromkeys(d["name"] for d in ds))
        print(f"### {trace}: every design (goodput req/s and $ per M output tokens at it)\n")
        print("| design | $/h | kW | " + " | ".join(t.split(":")[0] for _, t in SLOS) + " |")
        print("| --- | ---: | ---: |" + " ---: |" * len(SLOS))
        for n in names:
            cells = []
            first = None
            for slo, _ in SLOS:
                d = next((d for d in ds if d["name"] == n and d["slo"] == slo), None)
                first = first or d
                cells.append("—" if d is None else f"{fmt_rate(d)} (${d['usd_per_mtok']:.2f})")
            print(f"| {n} | {first['usd_h']:.1f} | {first['kw']:.1f} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
