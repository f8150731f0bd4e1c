#!/usr/bin/python3
"""Plots and tables of the Sarathi-Serve sweeps (papers/sarathi-serve/run.sh).

    /usr/bin/python3 papers/sarathi-serve/plot.py [--results results/sarathi-serve] [--out papers/sarathi-serve]

Reads, for each trace (conv, code), the merged tables <trace>/tradeoff/sweep.h5 and the
searches of <trace>/capacity_{strict,relaxed}/sweep.h5 through analysis/results.py, and writes
  tradeoff.png   P99 TTFT against P99 time between tokens (ITL), one line per prefill setting,
                 one marker per offered rate; one panel per trace
  capacity.png   the highest rate within each SLO per prefill setting, per trace
and prints the README's tables (markdown) on stdout. Figures are drawn through
analysis/style.py; the rate labels of tradeoff.png that would overlap are left out.
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
SLOS = [("strict", "strict: P99 ITL ≤ 36 ms"), ("relaxed", "relaxed: P99 ITL ≤ 180 ms")]
BUDGETS = [256.0, 512.0, 1024.0, 2048.0, 4096.0]


def settings(table):
    """(label, mask) per prefill setting of a table with the zipped scheduler keys."""
    out = [("no chunking", table["scheduler.chunked_prefill"] == "false")]
    for b in BUDGETS:
        out.append((f"chunks of {b:g}", (table["scheduler.chunked_prefill"] == "true")
                    & (table["scheduler.max_batch_tokens"] == b)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/sarathi-serve")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    sweeps = {}
    for trace, _ in TRACES:
        try:
            sweeps[trace] = results.load_sweep(os.path.join(args.results, trace, "tradeoff"))
        except FileNotFoundError:
            pass
    if not sweeps:
        sys.exit(f"plot.py: no sweep under {args.results}; run papers/sarathi-serve/run.sh first")

    colours = style.colors(len(BUDGETS))
    fig, axes = plt.subplots(1, len(TRACES), figsize=(12, 4.8), squeeze=False)
    labels_at = []
    for ax, (trace, title) in zip(axes[0], TRACES):
        if trace not in sweeps:
            ax.set_axis_off()
            continue
        rows = sweeps[trace].select()
        for (label, mask), colour in zip(settings(rows), [style.COLORS["bad"]] + list(colours)):
            order = np.argsort(rows["workload.rate"][mask])
            x, y = rows["itl_p99_s"][mask][order], rows["ttft_p99_s"][mask][order]
            ax.plot(1e3 * x, y, "o-", color=colour, label=label)
            labels_at.append((ax, 1e3 * x, y, [f"{r:g}" for r in rows["workload.rate"][mask][order]], colour))
        style.log_axis(ax, "both")
        ax.set_xlabel("time between tokens, p99 (ms, log)")
        ax.set_ylabel("time to first token, p99 (s, log)")
        ax.set_title(title)
    style.figure_legend(fig, title="prefill")
    fig.suptitle("Llama-3.1-8B / H100: prefill settings; each point labelled by its offered rate (req/s)")
    fig.tight_layout()
    for ax, x, y, texts, colour in labels_at:
        style.point_labels(ax, x, y, texts, color=colour)
    style.savefig(fig, os.path.join(args.out, "tradeoff.png"), dpi=100)

    # Capacity under each SLO.
    capacity = {}
    for trace, _ in TRACES:
        for slo, _ in SLOS:
            try:
                s = results.load_sweep(os.path.join(args.results, trace, f"capacity_{slo}")).search
            except FileNotFoundError:
                continue
            for label, mask in settings(s):
                if np.any(mask):
                    capacity[(trace, slo, label)] = (float(s["workload.rate"][mask][0]), s["status"][mask][0])
    labels = [label for label, _ in settings(next(iter(sweeps.values())).select())]
    if capacity:
        fig, axes = plt.subplots(1, len(TRACES), figsize=(12, 4), squeeze=False)
        for ax, (trace, title) in zip(axes[0], TRACES):
            x = np.arange(len(labels))
            for k, (slo, slo_label) in enumerate(SLOS):
                v = [capacity.get((trace, slo, label), (np.nan, ""))[0] for label in labels]
                ax.bar(x + (k - 0.5) * 0.38, v, 0.38, label=slo_label)
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=20, fontsize=8)
            ax.set_xlabel("prefill setting")
            ax.set_ylabel("capacity (req/s), median TTFT ≤ 2 s")
            ax.set_title(title)
            ax.grid(False, axis="x")
        style.figure_legend(fig, where="bottom", title="P99 time-between-tokens SLO")
        style.savefig(fig, os.path.join(args.out, "capacity.png"), dpi=100)

        print("### Capacity (req/s): the highest rate with P99 ITL within the SLO and median TTFT ≤ 2 s\n")
        head = [f"{t}, {s}" for t, _ in TRACES for s, _ in SLOS]
        print("| prefill | " + " | ".join(head) + " |")
        print("| --- |" + " ---: |" * len(head))
        for label in labels:
            cells = []
            for trace, _ in TRACES:
                for slo, _ in SLOS:
                    v = capacity.get((trace, slo, label))
                    base = capacity.get((trace, slo, "no chunking"))
                    if not v:
                        cells.append("—")
                        continue
                    ratio = f" ({v[0] / base[0]:.2f}×)" if base and label != "no chunking" else ""
                    cells.append(f"{v[0]:.1f}{ratio}" + ("" if v[1] == "found" else f" {v[1]}"))
            print(f"| {label} | " + " | ".join(cells) + " |")

    # The trade-off at one rate: what chunking buys in ITL and costs in TTFT.
    rate = 8.0
    print(f"\n### At {rate:g} req/s: P99 TTFT / P99 ITL / median TTFT\n")
    print("| prefill | " + " | ".join(t for t, _ in TRACES) + " |")
    print("| --- |" + " ---: |" * len(TRACES))
    for label in labels:
        cells = []
        for trace, _ in TRACES:
            if trace not in sweeps:
                cells.append("—")
                continue
            rows = sweeps[trace].select(**{"workload.rate": rate})
            m = dict(settings(rows))[label]
            cells.append("—" if not np.any(m) else
                         f"{rows['ttft_p99_s'][m][0]:.3f} s / {1e3 * rows['itl_p99_s'][m][0]:.1f} ms / "
                         f"{rows['ttft_p50_s'][m][0]:.3f} s")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
