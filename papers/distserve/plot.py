#!/usr/bin/python3
"""Plots and tables of the DistServe sweeps (papers/distserve/run.sh).

    /usr/bin/python3 papers/distserve/plot.py [--results results/distserve] [--out papers/distserve]

Reads, for each trace (conv, code), through analysis/results.py:
  goodput_{colocated,disagg}/sweep.h5       2 GPUs: the goodput searches at 7 SLO scales
  placement_{colocated,disagg}/sweep.h5     4 GPUs: the same searches for 4 unified vs xPyD
  attainment_{colocated,disagg}/sweep.h5    2 GPUs: SLO attainment and tails over the rate
and writes
  goodput.png      goodput per GPU against the SLO scale, 2 and 4 GPUs, per trace
  attainment.png   SLO attainment and P99 time between tokens against the rate (2 GPUs)
and prints the README's tables (markdown) on stdout. The SLO scale s is TTFT <= 0.4 s x s
and TPOT <= 25 ms x s (experiments/distserve.ini). Figures are drawn through analysis/style.py.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

TRACES = [("conv", "Azure conversation (prompts p50 1,020, outputs p50 129)"),
          ("code", "Azure code (prompts p50 1,469, outputs p50 13)")]
BASE_TTFT_S, BASE_TPOT_S = 0.4, 0.025
COLOCATED = [("whole prompts", "false"), ("chunks of 512", "true")]


def scale_of(table):
    """The SLO scale of each row (slo.ttft_s / 0.4 s), rounded to 3 digits."""
    return np.round(np.asarray(table["slo.ttft_s"], dtype=float) / BASE_TTFT_S, 3)


def disagg_label(row_p, row_d, tp):
    return f"{int(row_p)}P{int(row_d)}D" if tp == 1 else f"{int(row_p)}P(TP{int(tp)}){int(row_d)}D"


def load(path):
    try:
        return results.load_sweep(path)
    except FileNotFoundError:
        return None


def goodputs(folder, trace, budget):
    """{design label: {scale: (goodput req/s, status, gpus)}} from the two searches of one budget."""
    names = ("goodput", "goodput") if budget == 2 else ("placement", "placement")
    out = {}
    col = load(os.path.join(folder, trace, f"{names[0]}_colocated"))
    if col is not None and col.search:
        s = col.search
        n = s["fleet.num_instances"] if "fleet.num_instances" in s else np.full(len(s["status"]), 2.0)
        for label, chunked in COLOCATED:
            m = s["scheduler.chunked_prefill"] == chunked
            for sc, rate, st, gpus in zip(scale_of(s)[m], s["workload.rate"][m], s["status"][m], n[m]):
                out.setdefault(f"{int(gpus)} unified, {label}", {})[sc] = (float(rate), st, int(gpus))
    dis = load(os.path.join(folder, trace, f"{names[1]}_disagg"))
    if dis is not None and dis.search:
        s = dis.search
        k = len(s["status"])
        tp = s.get("pool.prefill.cost_model.tensor_parallel", np.ones(k))
        for i in range(k):
            p, d = s["pool.prefill.size"][i], s["pool.decode.size"][i]
            gpus = int(p * tp[i] + d)
            label = disagg_label(p, d, tp[i])
            out.setdefault(label, {})[scale_of(s)[i]] = (float(s["workload.rate"][i]), s["status"][i], gpus)
    return out


def cell(v):
    if v is None:
        return "—"
    rate, status, _ = v
    if status == "found":
        return f"{rate:.1f}"
    if status == "above_range":
        return f"> {rate:.0f}"
    if status == "below_range":
        return "0"
    return status


def best(curves, scale, prefix):
    """The highest goodput per GPU at `scale` among designs whose label starts with one of `prefix`."""
    vals = [(v[scale][0] / v[scale][2], name) for name, v in curves.items()
            if name.startswith(prefix) and scale in v and v[scale][1] in ("found", "above_range")]
    return max(vals) if vals else (np.nan, "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/distserve")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    curves = {(t, b): goodputs(args.results, t, b) for t, _ in TRACES for b in (2, 4)}
    if not any(curves.values()):
        sys.exit(f"plot.py: no sweep under {args.results}; run papers/distserve/run.sh first")

    # Goodput per GPU against the SLO scale.
    fig, axes = plt.subplots(len(TRACES), 2, figsize=(13.5, 8.5), squeeze=False)
    for r, (trace, title) in enumerate(TRACES):
        for c, budget in enumerate((2, 4)):
            ax = axes[r][c]
            for name, pts in curves[(trace, budget)].items():
                sc = sorted(pts)
                y = [pts[s][0] / pts[s][2] if pts[s][1] != "below_range" else 0.0 for s in sc]
                marker = "s--" if "unified" in name else "o-"
                ax.plot(sc, y, marker, label=name, ms=4)
            ax.set_xscale("log")
            ax.set_xticks([0.4, 0.6, 1, 1.5, 2])
            ax.set_xticklabels(["0.4", "0.6", "1", "1.5", "2"])
            ax.minorticks_off()
            ax.set_xlabel("SLO scale s, log (TTFT ≤ 0.4 s × s, TPOT ≤ 25 ms × s)")
            ax.set_ylabel("goodput per GPU (req/s)")
            ax.set_title(f"{budget} GPUs — {title}")
            ax.legend(title="design", fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Llama-3.1-8B / H100: highest rate with ≥ 90% of requests within both SLOs")
    style.savefig(fig, os.path.join(args.out, "goodput.png"), dpi=100)

    # Goodput tables.
    for budget in (2, 4):
        for trace, _ in TRACES:
            cv = curves[(trace, budget)]
            if not cv:
                continue
            names = [n for n in cv if "unified" in n] + [n for n in cv if "unified" not in n]
            scales = sorted({s for v in cv.values() for s in v})
            print(f"### Goodput (req/s), {budget} GPUs, {trace}; last column: best disaggregated / best "
                  f"colocated, per GPU\n")
            print("| SLO scale (TTFT / TPOT) | " + " | ".join(names) + " | disagg / colocated |")
            print("| --- |" + " ---: |" * (len(names) + 1))
            for sc in scales:
                d, dn = best(cv, sc, tuple(n for n in cv if "unified" not in n))
                u, un = best(cv, sc, tuple(n for n in cv if "unified" in n))
                ratio = f"{d / u:.2f}× ({dn})" if u > 0 and np.isfinite(d) else "—"
                print(f"| {sc:g} ({BASE_TTFT_S * sc:.2f} s / {1e3 * BASE_TPOT_S * sc:.1f} ms) | "
                      + " | ".join(cell(cv[n].get(sc)) for n in names) + f" | {ratio} |")
            print()

    # Attainment and tails against the rate.
    att = {}
    for trace, _ in TRACES:
        col = load(os.path.join(args.results, trace, "attainment_colocated"))
        dis = load(os.path.join(args.results, trace, "attainment_disagg"))
        if col is not None:
            for label, chunked in COLOCATED:
                att[(trace, f"2 unified, {label}")] = col.select(**{"scheduler.chunked_prefill": chunked})
        if dis is not None:
            att[(trace, "1P1D")] = dis.select()
    if att:
        fig, axes = plt.subplots(2, len(TRACES), figsize=(12, 7.5), squeeze=False)
        for c, (trace, title) in enumerate(TRACES):
            for (t, name), rows in att.items():
                if t != trace or not len(rows["workload.rate"]):
                    continue
                o = np.argsort(rows["workload.rate"])
                x = rows["workload.rate"][o]
                axes[0][c].plot(x, 100 * rows["slo_attainment"][o], "o-", ms=3, label=name)
                axes[1][c].plot(x, 1e3 * rows["itl_p99_s"][o], "o-", ms=3, label=name)
            axes[0][c].axhline(90, color=style.COLORS["reference"], ls=":", lw=1, label="90% (the goodput's bar)")
            axes[0][c].set_ylabel("SLO attainment (% of requests)")
            axes[0][c].set_title(f"{title}: TTFT ≤ 0.4 s, TPOT ≤ 25 ms")
            if axes[1][c].lines:
                style.log_axis(axes[1][c], "y")
            axes[1][c].set_ylabel("time between tokens, p99 (ms, log)")
            for r in range(2):
                axes[r][c].set_xlabel("offered rate (req/s), 2 GPUs")
                axes[r][c].legend(title="design", fontsize=7)
        style.savefig(fig, os.path.join(args.out, "attainment.png"), dpi=100)

        order = [f"2 unified, {label}" for label, _ in COLOCATED] + ["1P1D"]
        names = [n for n in order if any(k == n for _, k in att)]
        for trace, _ in TRACES:
            if not any(t == trace for t, _ in att):
                continue
            print(f"### {trace}, 2 GPUs at equal load: SLO attainment / throughput (tok/s) / P99 ITL / "
                  f"P99 TPOT / P90 TTFT\n")
            print("| rate | " + " | ".join(names) + " |")
            print("| ---: |" + " ---: |" * len(names))
            for rate in (8.0, 16.0, 24.0, 32.0):
                cells = []
                for n in names:
                    rows = att.get((trace, n))
                    m = None if rows is None else np.flatnonzero(rows["workload.rate"] == rate)
                    if m is None or not len(m):
                        cells.append("—")
                        continue
                    i = m[0]
                    cells.append(f"{100 * rows['slo_attainment'][i]:.0f}% / {rows['throughput_tok_s'][i]:,.0f} / "
                                 f"{1e3 * rows['itl_p99_s'][i]:.1f} ms / {1e3 * rows['tpot_p99_s'][i]:.1f} ms / "
                                 f"{rows['ttft_p90_s'][i]:.3f} s")
                print(f"| {rate:g} | " + " | ".join(cells) + " |")
            print()


if __name__ == "__main__":
    main()
