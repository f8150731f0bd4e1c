#!/usr/bin/python3
"""Plots and tables of the PagedAttention sweeps (papers/pagedattention/run.sh).

    /usr/bin/python3 papers/pagedattention/plot.py [--results results/pagedattention] [--out papers/pagedattention]

Reads the merged tables results/pagedattention/load/sweep.h5 (allocator x KV capacity x
rate) and results/pagedattention/capacity/search.csv's table (/search of capacity/sweep.h5)
through analysis/results.py, and writes
  load.png       median normalized latency, mean batch size and KV waste against the rate,
                 one column per KV capacity, one line per allocator
and prints the README's tables (markdown) on stdout: KV waste and batch size per
allocator, and the highest rate each sustains at a median normalized latency of 0.1 s.
Figures are drawn through analysis/style.py.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

# (kv_reservation, admission_watermark, label, colour), as in load.ini's zip
ALLOCATORS = [
    ("paged", 0.0, "paged (vLLM), no watermark", style.SKY),
    ("paged", 0.01, "paged (vLLM), 1% watermark", style.BLUE),
    ("oracle", 0.0, "reserve prompt + output (Orca Oracle)", style.GREEN),
    ("pow2", 0.0, "reserve next power of 2 (Orca Pow2)", style.ORANGE),
    ("max_length", 0.0, "reserve max_model_len (Orca Max)", style.VERMILLION),
]
CAPACITIES = [(0.0, "KV of an 80 GB A100 (28,181 blocks)"), (2048.0, "tight KV (2,048 blocks)")]


def rows_of(sw, reservation, watermark, blocks):
    rows = sw.select(**{"scheduler.kv_reservation": reservation, "scheduler.admission_watermark": watermark,
                        "cache.num_blocks": blocks})
    order = np.argsort(rows["workload.rate"])
    return {k: v[order] for k, v in rows.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/pagedattention")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    try:
        sw = results.load_sweep(os.path.join(args.results, "load"))
    except FileNotFoundError as e:
        sys.exit(f"plot.py: {e}; run papers/pagedattention/run.sh first")
    failed = int(np.sum(sw.points["status"] != "ok"))
    if failed:
        print(f"plot.py: {failed} failed point(s) left out", file=sys.stderr)

    fig, axes = plt.subplots(3, len(CAPACITIES), figsize=(11, 10), sharex=True, squeeze=False)
    for c, (blocks, title) in enumerate(CAPACITIES):
        for reservation, watermark, label, colour in ALLOCATORS:
            r = rows_of(sw, reservation, watermark, blocks)
            if len(r["id"]) == 0:
                continue
            x = r["workload.rate"]
            axes[0][c].plot(x, r["normalized_latency_p50_s"], "o-", color=colour, label=label)
            axes[1][c].plot(x, r["batch_size_mean"], "o-", color=colour, label=label)
            axes[2][c].plot(x, 100 * r["kv_waste_mean"], "o-", color=colour, label=label)
        axes[0][c].set_title(title)
        style.log_axis(axes[0][c], "y")
        axes[0][c].set_ylabel("median normalized latency\n(s / output token, log)")
        axes[1][c].set_ylabel("sequences per step (time mean)")
        axes[2][c].set_ylabel("KV slots allocated, unused (%)")
        axes[2][c].set_xlabel("offered rate (req/s)")
    style.figure_legend(fig, axes[0][0], where="bottom", title="KV allocator", ncol=3)
    fig.suptitle("Llama-3.1-8B / A100 80 GB, Azure conversation trace (5,000 requests)")
    os.makedirs(args.out, exist_ok=True)
    style.savefig(fig, os.path.join(args.out, "load.png"), dpi=100)

    # KV waste and batch size at a rate every allocator sustains on the full cache.
    rate = 4.0
    print(f"### KV waste and batch size at {rate:g} req/s\n")
    print("| allocator | " + " | ".join(f"waste, {t.split(' (')[0]} | batch, {t.split(' (')[0]}" for _, t in CAPACITIES)
          + " |")
    print("| --- |" + " ---: | ---: |" * len(CAPACITIES))
    for reservation, watermark, label, _ in ALLOCATORS:
        cells = []
        for blocks, _ in CAPACITIES:
            r = rows_of(sw, reservation, watermark, blocks)
            at = r["workload.rate"] == rate
            if not np.any(at):
                cells += ["—", "—"]
                continue
            cells += [f"{100 * r['kv_waste_mean'][at][0]:.1f}%", f"{r['batch_size_mean'][at][0]:.1f}"]
        print(f"| {label} | " + " | ".join(cells) + " |")

    try:
        cap = results.load_sweep(os.path.join(args.results, "capacity"))
    except FileNotFoundError:
        return
    s = cap.search
    print("\n### Highest rate at a median normalized latency of at most 0.1 s/token\n")
    print("| allocator | " + " | ".join(t for _, t in CAPACITIES) + " |")
    print("| --- |" + " ---: |" * len(CAPACITIES))
    best = {}
    for reservation, watermark, label, _ in ALLOCATORS:
        cells = []
        for blocks, _ in CAPACITIES:
            m = ((s["scheduler.kv_reservation"] == reservation) & (s["scheduler.admission_watermark"] == watermark)
                 & (s["cache.num_blocks"] == blocks))
            if not np.any(m):
                cells.append("—")
                continue
            v, status = float(s["workload.rate"][m][0]), s["status"][m][0]
            best[(reservation, watermark, blocks)] = v
            cells.append(f"{v:.2f} req/s" + ("" if status == "found" else f" ({status})"))
        print(f"| {label} | " + " | ".join(cells) + " |")
    ref = {b: best.get(("paged", 0.01, b)) for b, _ in CAPACITIES}
    print("\n| paged with watermark against | " + " | ".join(t for _, t in CAPACITIES) + " |")
    print("| --- |" + " ---: |" * len(CAPACITIES))
    for reservation, watermark, label, _ in ALLOCATORS[2:] + ALLOCATORS[:1]:
        cells = [f"{ref[b] / best[(reservation, watermark, b)]:.2f}×" if ref[b] and best.get((reservation, watermark, b))
                 else "—" for b, _ in CAPACITIES]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
