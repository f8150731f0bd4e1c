#!/usr/bin/python3
"""Figure and tables of papers/gptq-awq/run.sh.

    /usr/bin/python3 papers/gptq-awq/plot.py [--results results/gptq-awq] [--out papers/gptq-awq]

Reads {plain,outliers}/quant_eval.csv (testbed quant-eval: method, group,
kl_mean, kl_p90, top1_agreement, positions) and roofline_8b_{auto,fp8,w4a16}.txt
(testbed roofline), writes kl.png (KL divergence per method and group size,
both settings) and prints the README's tables (markdown). The figure is drawn through
analysis/style.py.
"""
import argparse
import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402
SETTINGS = [("plain", "dummy weights"), ("outliers", "4 outlier channels ×20")]
METHODS = ["rtn", "gptq", "awq"]


def read_eval(path):
    with open(path, newline="") as f:
        return [{"method": r["method"], "group": int(r["group"]), "kl": float(r["kl_mean"]),
                 "kl_p90": float(r["kl_p90"]), "top1": float(r["top1_agreement"])} for r in csv.DictReader(f)]


def roofline_rows(path):
    """(weights GiB, {batch: step ms}) of a `testbed roofline` printout."""
    text = open(path).read()
    weights = float(re.search(r"weights ([0-9.]+) GiB", text).group(1))
    steps = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^\s+(\d+)\s+([0-9.]+)\s", text, re.M)}
    return weights, steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "results", "gptq-awq"))
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()
    found = {}
    for key, _ in SETTINGS:
        p = os.path.join(a.results, key, "quant_eval.csv")
        if os.path.isfile(p):
            found[key] = read_eval(p)
    if not found:
        sys.exit(f"error: no quant_eval.csv under {a.results}; run papers/gptq-awq/run.sh first")
    fig, axes = plt.subplots(1, len(found), figsize=(5.5 * len(found), 4), squeeze=False)
    for ax, (key, label) in zip(axes[0], [s for s in SETTINGS if s[0] in found]):
        rows = found[key]
        groups = sorted({r["group"] for r in rows if r["method"] in METHODS})
        for i, m in enumerate(METHODS):
            ys = [next((r["kl"] for r in rows if r["method"] == m and r["group"] == g), float("nan")) for g in groups]
            ax.bar([j + 0.25 * (i - 1) for j in range(len(groups))], ys, width=0.25, color=style.color(i),
                   label=f"w4a16 {m}")
        fp8 = [r["kl"] for r in rows if r["method"] == "fp8"]
        if fp8:
            ax.axhline(fp8[0], color=style.COLORS["baseline"], linestyle="--", label="fp8 (W8A8)")
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{g}" for g in groups])
        ax.set_xlabel("quantization group size (weights sharing a scale)")
        ax.set_ylabel("mean KL(unquantized ‖ quantized) (nats)")
        ax.set_title(f"tiny model, {label}")
        ax.grid(False, axis="x")
        ax.legend(title="method")
    os.makedirs(a.out, exist_ok=True)
    style.savefig(fig, os.path.join(a.out, "kl.png"), dpi=120)
    for key, label in SETTINGS:
        if key not in found:
            continue
        print(f"\n**{label}** (KL mean / p90, top-1 agreement)\n")
        print("| method | group | KL mean | KL p90 | top-1 |")
        print("| --- | --- | --- | --- | --- |")
        for r in found[key]:
            g = str(r["group"]) if r["group"] else "-"
            print(f"| {r['method']} | {g} | {r['kl']:.2e} | {r['kl_p90']:.2e} | {100 * r['top1']:.1f}% |")
    rl = {p: os.path.join(a.results, f"roofline_8b_{p}.txt") for p in ("auto", "fp8", "w4a16")}
    if all(os.path.isfile(v) for v in rl.values()):
        print("\n**Llama-3.1-8B on one H100, roofline (not measured)**\n")
        print("| precision | weights | step at batch 1 | batch 16 | batch 64 | batch 256 |")
        print("| --- | --- | --- | --- | --- | --- |")
        for p, path in rl.items():
            w, steps = roofline_rows(path)
            cells = " | ".join(f"{steps[b]:.2f} ms" if b in steps else "-" for b in (1, 16, 64, 256))
            print(f"| {p} | {w:.2f} GiB | {cells} |")


if __name__ == "__main__":
    main()
