#!/usr/bin/python3
"""Plots and tables of the speculative-decoding sweeps (papers/speculative-decoding/run.sh).

    /usr/bin/python3 papers/speculative-decoding/plot.py [--results results/speculative-decoding]
                                                         [--out papers/speculative-decoding]

Reads the merged tables (analysis/results.py) of
  tokens_per_step/                       simulated tokens per decode step, acceptance A x k x output length
  cpu/rep*/                              the CPU n-gram runs, each repetition a sweep of its own
  batch_{8b,70b}/, batch_{8b,70b}_plain/ simulated speculation and plain decoding over batch size
and writes, for each that is there,
  tokens_per_step.png   measured tokens per step against (1 - A^(k+1)) / (1 - A), and the deviation
  cpu.png               CPU wall-time speed-up and tokens per step against k, per workload
  batch.png             simulated TPOT and throughput speed-up against batch size, per model / TP
  frontier.png          TPOT against throughput, plain and speculative, one point per batch size
and prints the README's tables (markdown) on stdout, with the draft model's memory cost
(arithmetic from the model and hardware files; nothing is simulated there). Figures are
drawn through analysis/style.py.
"""
import argparse
import configparser
import glob
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
import results  # noqa: E402  (analysis/results.py)
import style  # noqa: E402  (analysis/style.py)
import matplotlib.pyplot as plt  # noqa: E402

# (sweep folder, plain folder, label, tensor_parallel or None when the sweep has no TP column)
BATCH = [("batch_8b", "batch_8b_plain", "Llama-3.1-8B, 1×H100", None, 1),
         ("batch_70b", "batch_70b_plain", "Llama-3.1-70B, TP4 H100", "cost_model.tensor_parallel", 4),
         ("batch_70b", "batch_70b_plain", "Llama-3.1-70B, TP8 H100", "cost_model.tensor_parallel", 8)]
# (acceptance, spec.max_batch_size) -> label
VARIANTS = [(0.5, 0.0, "A = 0.5"), (0.7, 0.0, "A = 0.7"), (0.7, 128.0, "A = 0.7, guard 128")]
LOSS = 0.98  # a TPOT speed-up below this is a loss (the guard's break-even wobbles by ~1%)
CPU_WORKLOADS = [((0.0, 1.0), "1 request, greedy (output loops)"),
                 ((1.0, 1.0), "1 request, temperature 1"),
                 ((0.0, 16.0), "16 requests, greedy")]


def closed_form(a, k):
    """Leviathan et al.'s eq. (1): expected tokens a step appends with k drafts each kept with
    probability a (i.i.d.) until the first rejection."""
    return k + 1.0 if a == 1 else (1 - a ** (k + 1)) / (1 - a)


def capped(a, k, n):
    """The same expectation for a request of n output tokens whose drafts stop at its end, as the
    simulator drafts them (sim/sim_executor.cpp): the prefill samples token 1; a decode step with m
    tokens out verifies d = min(k, n - m - 1) drafts and appends 1 + (drafts kept). Returns
    (n - 1) / E[decode steps], which is what spec_tokens_per_step estimates."""
    steps = [0.0] * (n + 1)
    for m in range(n - 1, 0, -1):
        d = min(k, n - m - 1)
        e = 1.0
        for j in range(d + 1):
            p = a ** j * (1 - a) if j < d else a ** d
            e += p * steps[m + j + 1]
        steps[m] = e
    return (n - 1) / steps[1] if n > 1 else float("nan")


def acceptance_of(text):
    """'fixed:0.7' -> 0.7"""
    return float(str(text).split(":", 1)[1])


def load(path):
    try:
        return results.load_sweep(path)
    except FileNotFoundError:
        return None


def ok_rows(sweep):
    rows = sweep.points
    keep = np.asarray(rows["status"]) == "ok"
    failed = int((~keep).sum())
    if failed:
        print(f"plot.py: {sweep.path}: {failed} failed point(s) left out", file=sys.stderr)
    return {k: np.asarray(v)[keep] for k, v in rows.items()}


def tokens_per_step(sweep, out):
    rows = ok_rows(sweep)
    acc = np.array([acceptance_of(x) for x in rows["spec.acceptance"]])
    k = rows["spec.num_tokens"].astype(float)
    n = rows["workload.output_tokens"].astype(float)
    lengths = sorted(set(n), reverse=True)
    alphas = sorted(set(acc))
    ks = sorted(set(k))
    colours = dict(zip(alphas, style.colors(len(alphas))))
    fig, (ax, dev) = plt.subplots(1, 2, figsize=(12, 4.6))
    kk = np.linspace(min(ks), max(ks), 50)
    for a in alphas:
        ax.plot(kk, [closed_form(a, x) for x in kk], "-", color=colours[a], lw=1, label=f"A = {a:g}: (1-A^(k+1))/(1-A)")
        for li, length in enumerate(lengths):
            m = (acc == a) & (n == length)
            order = np.argsort(k[m])
            ax.plot(k[m][order], rows["spec_tokens_per_step"][m][order], "os"[li % 2], color=colours[a],
                    mfc=colours[a] if li == 0 else "none", ls="none",
                    label=f"measured, {length:,.0f}-token outputs" if a == alphas[-1] else None)
            ratio = rows["spec_tokens_per_step"][m][order] / np.array([closed_form(a, x) for x in k[m][order]])
            dev.plot(k[m][order], 100 * (ratio - 1), "os"[li % 2] + "-", color=colours[a],
                     mfc=colours[a] if li == 0 else "none", lw=0.8,
                     label=f"A = {a:g}, {length:,.0f} tokens")
            if length < 1000:  # the tail cap's own expectation
                cap = [capped(a, int(x), int(length)) / closed_form(a, x) for x in ks]
                dev.plot(ks, 100 * (np.array(cap) - 1), ":", color=colours[a], lw=1)
    ax.set_xlabel("draft tokens per step k (log)")
    ax.set_ylabel("tokens appended per decode step")
    style.log_axis(ax, "x", base=2)
    ax.set_title("simulated (spec.acceptance = fixed:A), Llama-3.1-8B / H100")
    ax.legend(fontsize=7)
    dev.axhline(0, color=style.COLORS["baseline"], lw=0.6)
    style.log_axis(dev, "x", base=2)
    dev.set_xlabel("draft tokens per step k (log)")
    dev.set_ylabel("measured / closed form - 1 (%)")
    dev.set_title("deviation; dotted: expected with drafts stopping at the output's end")
    dev.legend(fontsize=7, ncol=2)
    style.savefig(fig, os.path.join(out, "tokens_per_step.png"), dpi=100)

    print("### Tokens per decode step: measured against the closed form\n")
    head = ["A", "k", "(1-A^(k+1))/(1-A)"]
    for length in lengths:
        head += [f"measured, {length:,.0f} tokens", f"with the cap, {length:,.0f}"]
    head += ["acceptance rate (measured / A(1-A^k)/(k(1-A)))"]
    print("| " + " | ".join(head) + " |")
    print("| ---: | ---: |" + " ---: |" * (len(head) - 2))
    for a in alphas:
        for x in ks:
            cf = closed_form(a, x)
            cells = [f"{a:g}", f"{x:g}", f"{cf:.3f}"]
            rate = None
            for length in lengths:
                m = (acc == a) & (k == x) & (n == length)
                if not np.any(m):
                    cells += ["—", "—"]
                    continue
                v = float(rows["spec_tokens_per_step"][m][0])
                cap = capped(a, int(x), int(length))
                cells += [f"{v:.3f} ({100 * (v / cf - 1):+.1f}%)", f"{cap:.3f} ({100 * (v / cap - 1):+.1f}%)"]
                if rate is None:
                    rate = float(rows["spec_acceptance_rate"][m][0])
            expect = a * (1 - a ** x) / (x * (1 - a)) if a < 1 else 1.0
            cells.append("—" if rate is None else f"{rate:.3f} / {expect:.3f}")
            print("| " + " | ".join(cells) + " |")
    print()


def cpu(reps, out):
    """reps: [Sweep] one per repetition. Speed-up = plain wall time / speculative wall time of the
    same repetition (duration_s: first arrival to last finish)."""
    table = {}  # (workload, k or 0) -> lists over reps
    for sweep in reps:
        rows = ok_rows(sweep)
        for i in range(len(rows["id"])):
            w = (float(rows["sampling.temperature"][i]), float(rows["workload.num_requests"][i]))
            k = 0.0 if rows["spec.method"][i] == "none" else float(rows["spec.num_tokens"][i])
            e = table.setdefault((w, k), {"duration": [], "tps": [], "acc": [], "tpot": []})
            e["duration"].append(float(rows["duration_s"][i]))
            e["tpot"].append(float(rows["tpot_mean_s"][i]))
            if k:
                e["tps"].append(float(rows["spec_tokens_per_step"][i]))
                e["acc"].append(float(rows["spec_acceptance_rate"][i]))
    workloads = [(w, label) for w, label in CPU_WORKLOADS if (w, 0.0) in table]
    ks = sorted({k for (_, k) in table if k})

    def speedups(w, k):
        base, spec = table[(w, 0.0)]["duration"], table.get((w, k), {}).get("duration", [])
        return [b / s for b, s in zip(base, spec)]

    fig, (ax, tx) = plt.subplots(1, 2, figsize=(12, 4.3))
    for j, (w, label) in enumerate(workloads):
        s = [speedups(w, k) for k in ks]
        x = np.array(ks) * (1 + 0.06 * (j - 1))
        mid = [np.mean(v) if v else np.nan for v in s]
        lo = [m - min(v) if v else 0 for m, v in zip(mid, s)]
        hi = [max(v) - m if v else 0 for m, v in zip(mid, s)]
        ax.errorbar(x, mid, yerr=[lo, hi], fmt="o-", capsize=3, label=label)
        tps = [np.mean(table[(w, k)]["tps"]) if (w, k) in table else np.nan for k in ks]
        tx.plot(ks, tps, "o-", label=label)
    ax.axhline(1, color=style.COLORS["baseline"], lw=0.6)
    style.log_axis(ax, "x", base=2)
    ax.set_xlabel("draft tokens per step k (spec.num_tokens, log)")
    ax.set_ylabel("wall-time speed-up over plain decoding")
    ax.set_title(f"tiny model on the CPU, n-gram proposer; bars: range over {len(reps)} runs")
    ax.legend(title="workload")
    style.log_axis(tx, "x", base=2)
    tx.set_xlabel("draft tokens per step k (log)")
    tx.set_ylabel("tokens appended per decode step")
    tx.legend(title="workload")
    style.savefig(fig, os.path.join(out, "cpu.png"), dpi=100)

    def rng(v, fmt):
        return "—" if not v else (fmt.format(min(v)) if len(v) == 1 or fmt.format(min(v)) == fmt.format(max(v))
                                  else fmt.format(min(v)) + "–" + fmt.format(max(v)))
    print(f"### CPU, n-gram proposer: wall time and speed-up over {len(reps)} run(s) (ranges)\n")
    print("| workload | k | tokens / step | acceptance | wall time (s) | TPOT (ms) | speed-up |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for w, label in workloads:
        for k in [0.0] + ks:
            e = table.get((w, k))
            if not e:
                continue
            print(f"| {label} | {'plain' if not k else f'{k:g}'} | {rng(e['tps'], '{:.2f}') if k else '1'} | "
                  f"{rng(e['acc'], '{:.2f}') if k else '—'} | {rng(e['duration'], '{:.2f}')} | "
                  f"{rng([1e3 * t for t in e['tpot']], '{:.1f}')} | "
                  f"{rng(speedups(w, k), '{:.2f}×') if k else '—'} |")
    print()
    cpu_steps(reps, workloads, ks)


def cpu_steps(reps, workloads, ks, tile=32):
    """Decode-only step times of the CPU runs grouped by the positions they compute, in the CPU
    executor's fixed 32-row GEMM tiles (README, "Batch-invariant CPU executor"): from each point's
    own /steps (points without their results.h5 are skipped)."""
    groups = {}  # (workload, k) -> {tiles: [durations]}
    for sweep in reps:
        rows = ok_rows(sweep)
        for i in range(len(rows["id"])):
            w = (float(rows["sampling.temperature"][i]), float(rows["workload.num_requests"][i]))
            k = 0.0 if rows["spec.method"][i] == "none" else float(rows["spec.num_tokens"][i])
            try:
                st = sweep.point(rows["id"][i]).steps
            except FileNotFoundError:
                continue
            if not st or "decode_tokens" not in st:
                continue
            dec = np.asarray(st["prefill_tokens"]) == 0
            tiles = np.ceil(np.asarray(st["decode_tokens"])[dec] / tile).astype(int)
            dur = np.asarray(st["duration_s"])[dec]
            g = groups.setdefault((w, k), {})
            for t in np.unique(tiles):
                g.setdefault(int(t), []).extend(dur[tiles == t].tolist())
    if not groups:
        return
    ntiles = sorted({t for g in groups.values() for t in g})
    print(f"### CPU decode-only steps: mean time (ms) by {tile}-row tiles of positions computed (steps)\n")
    print("| workload | k | " + " | ".join(f"{tile * (t - 1) + 1}–{tile * t} positions" for t in ntiles) + " |")
    print("| --- | ---: |" + " ---: |" * len(ntiles))
    for w, label in workloads:
        for k in [0.0] + ks:
            g = groups.get((w, k))
            if not g:
                continue
            cells = [f"{1e3 * np.mean(g[t]):.1f} ({len(g[t])})" if t in g else "—" for t in ntiles]
            print(f"| {label} | {'plain' if not k else f'{k:g}'} | " + " | ".join(cells) + " |")
    print()


def batch_tables(res):
    """{label: {"plain": {B: row}, variant label: {B: row}}} with row = {metric: value}."""
    out = {}
    for spec_dir, plain_dir, label, tp_key, tp in BATCH:
        spec, plain = load(os.path.join(res, spec_dir)), load(os.path.join(res, plain_dir))
        if spec is None or plain is None:
            continue
        s, p = ok_rows(spec), ok_rows(plain)
        if tp_key:
            s = {k: v[s[tp_key] == tp] for k, v in s.items()}
            p = {k: v[p[tp_key] == tp] for k, v in p.items()}
        if not len(p["id"]):
            continue
        metrics = ["tpot_mean_s", "throughput_tok_s", "batch_size_mean", "spec_tokens_per_step", "preemptions"]
        entry = {"plain": {float(b): {m: float(p[m][i]) for m in metrics if m in p}
                           for i, b in enumerate(p["scheduler.max_num_seqs"])}}
        acc = np.array([acceptance_of(x) for x in s["spec.acceptance"]])
        for a, guard, vlabel in VARIANTS:
            m = (acc == a) & (s["spec.max_batch_size"] == guard)
            entry[vlabel] = {float(b): {k: float(s[k][m][i]) for k in metrics if k in s}
                             for i, b in enumerate(s["scheduler.max_num_seqs"][m])}
        out[label] = entry
    return out


def crossover(bs, speedup):
    """The batch size where the speed-up falls through 1 (log-linear between the two points around
    it), or None when it stays above (or starts below) 1."""
    for i in range(1, len(bs)):
        if speedup[i - 1] >= 1 > speedup[i]:
            x0, x1 = math.log2(bs[i - 1]), math.log2(bs[i])
            t = (speedup[i - 1] - 1) / (speedup[i - 1] - speedup[i])
            return 2 ** (x0 + t * (x1 - x0))
    return None


def batch(tables, out):
    labels = list(tables)
    colours = {"A = 0.5": style.ORANGE, "A = 0.7": style.BLUE, "A = 0.7, guard 128": style.GREEN}
    fig, axes = plt.subplots(2, len(labels), figsize=(4.6 * len(labels), 7.5), squeeze=False)
    fr, faxes = plt.subplots(1, len(labels), figsize=(4.6 * len(labels), 4.2), squeeze=False)
    for j, label in enumerate(labels):
        t = tables[label]
        bs = sorted(t["plain"])
        faxes[0][j].plot([t["plain"][b]["throughput_tok_s"] for b in bs],
                         [1e3 * t["plain"][b]["tpot_mean_s"] for b in bs], "o-", color=style.COLORS["baseline"],
                         label="plain")
        for _, _, v in VARIANTS:
            vb = [b for b in bs if b in t[v]]
            tpot = [t["plain"][b]["tpot_mean_s"] / t[v][b]["tpot_mean_s"] for b in vb]
            thr = [t[v][b]["throughput_tok_s"] / t["plain"][b]["throughput_tok_s"] for b in vb]
            fmt = "s--" if "guard" in v else "o-"
            axes[0][j].plot(vb, tpot, fmt, color=colours[v], label=v)
            axes[1][j].plot(vb, thr, fmt, color=colours[v], label=v)
            faxes[0][j].plot([t[v][b]["throughput_tok_s"] for b in vb], [1e3 * t[v][b]["tpot_mean_s"] for b in vb],
                             fmt, color=colours[v], label=v)
        for row, name in [(0, "TPOT speed-up (plain / speculative)"), (1, "throughput speed-up (speculative / plain)")]:
            ax = axes[row][j]
            ax.axhline(1, color=style.COLORS["baseline"], lw=0.6)
            style.log_axis(ax, "x", base=2)
            ax.set_xlabel("batch size (scheduler.max_num_seqs, log)")
            ax.set_ylabel(name)
            ax.set_title(f"{label}, k = 4")
            ax.legend(title="speculation", fontsize=7)
        fa = faxes[0][j]
        style.log_axis(fa, "both")
        fa.set_xlabel("throughput (output tokens/s, log)")
        fa.set_ylabel("time per output token, mean (ms, log)")
        fa.set_title(f"{label}: batch 1 (left) to 512 (right)")
        fa.legend(fontsize=7)
    style.savefig(fig, os.path.join(out, "batch.png"), dpi=100)
    style.savefig(fr, os.path.join(out, "frontier.png"), dpi=100)

    print("### Simulated speed-up against batch size, k = 4 (TPOT × / throughput ×)\n")
    for label in labels:
        t = tables[label]
        print(f"**{label}**\n")
        print("| batch | plain TPOT | plain tok/s | " + " | ".join(v for _, _, v in VARIANTS) + " |")
        print("| ---: | ---: | ---: |" + " ---: |" * len(VARIANTS))
        for b in sorted(t["plain"]):
            p = t["plain"][b]
            cells = []
            for _, _, v in VARIANTS:
                r = t[v].get(b)
                cells.append("—" if r is None else f"{p['tpot_mean_s'] / r['tpot_mean_s']:.2f}× / "
                             f"{r['throughput_tok_s'] / p['throughput_tok_s']:.2f}×")
            print(f"| {b:g} | {1e3 * p['tpot_mean_s']:.2f} ms | {p['throughput_tok_s']:,.0f} | "
                  + " | ".join(cells) + " |")
        print()
    print("### Where speculation turns into a loss (TPOT speed-up falls through 1)\n")
    print("| model | " + " | ".join(v for _, _, v in VARIANTS) + " |")
    print("| --- |" + " ---: |" * len(VARIANTS))
    for label in labels:
        t = tables[label]
        cells = []
        for _, _, v in VARIANTS:
            bs = sorted(b for b in t["plain"] if b in t[v])
            s = [t["plain"][b]["tpot_mean_s"] / t[v][b]["tpot_mean_s"] for b in bs]
            worst = min(s) if s else float("nan")
            c = crossover(bs, s) if worst < LOSS else None  # within 2% of 1 is break-even, not a loss
            cells.append(f"≈ {c:.0f} (lowest {worst:.2f}×)" if c else f"none to {max(bs):g} (lowest {worst:.2f}×)")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()


# ---- the draft model's memory: arithmetic (no run), the same rule as sim/memory_planner.cpp ----

def model_spec(path):
    with open(path) as f:
        c = json.load(f)
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    return c


def weight_bytes(m, tp):
    h, d = m["hidden_size"], m["head_dim"]
    q, kv = m["num_attention_heads"] / tp, (m["num_key_value_heads"] / tp if m["num_key_value_heads"] >= tp else 1)
    layer = h * (q + 2 * kv) * d + q * d * h + 3 * h * m["intermediate_size"] / tp + 2 * h
    embed = m["vocab_size"] / tp * h * (1 if m.get("tie_word_embeddings") else 2)
    return (m["num_hidden_layers"] * layer + embed + h) * 2  # bf16


def kv_bytes(m, tp):
    kv = m["num_key_value_heads"] / tp if m["num_key_value_heads"] >= tp else 1
    return 2 * m["num_hidden_layers"] * kv * m["head_dim"] * 2


def memory(hardware, target, tp, draft, draft_tp, block=16, fraction=0.9, tokens_per_seq=None):
    hw = configparser.ConfigParser(inline_comment_prefixes=("#",))
    hw.read(hardware)
    gib = 1024.0 ** 3
    budget = hw.getfloat("memory", "capacity_gib") * gib * fraction - hw.getfloat("memory", "reserve_gib") * gib
    t, d = model_spec(target), model_spec(draft)
    wt, wd = weight_bytes(t, tp), weight_bytes(d, draft_tp)
    bt, bd = block * kv_bytes(t, tp), block * kv_bytes(d, draft_tp)
    alone = math.floor((budget - wt) / bt)
    weights_only = math.floor((budget - wt - wd) / bt)
    # vLLM v0 (spec_decode_worker.py, split_num_cache_blocks_evenly): target and draft get the same
    # number of blocks, so each block of the target costs bt + bd.
    both = math.floor((budget - wt - wd) / (bt + bd))
    return {"weights_target_gib": wt / gib, "weights_draft_gib": wd / gib, "weights_draft_gb": wd / 1e9,
            "kv_target_kib": bt / block / 1024, "kv_draft_kib": bd / block / 1024,
            "alone": alone, "weights_only": weights_only, "both": both,
            "params_draft": wd / 2 * draft_tp}


def draft_memory():
    hw = os.path.join(ROOT, "experiments", "hardware", "h100-sxm.ini")
    draft = os.path.join(ROOT, "experiments", "models", "llama-3.2-1b.json")
    cases = [("Llama-3.1-8B, 1×H100", os.path.join(ROOT, "experiments", "models", "llama-3.1-8b.json"), 1, 1),
             ("Llama-3.1-70B, TP4 (draft sharded TP4)", os.path.join(ROOT, "experiments", "models",
                                                                      "llama-3.1-70b.json"), 4, 4),
             ("Llama-3.1-70B, TP4 (draft whole on each GPU)", os.path.join(ROOT, "experiments", "models",
                                                                           "llama-3.1-70b.json"), 4, 1)]
    per_seq = 256 + 64 + 512  # the batch sweeps' longest sequence
    print("### A Llama-3.2-1B draft model's memory, per GPU (arithmetic, H100 80 GB, "
          "gpu_memory_fraction 0.9, 16-token blocks)\n")
    print("| target | draft weights | KV / token (target + draft) | blocks, target alone | "
          "blocks after the draft's weights | blocks after weights and the draft's KV | "
          f"sequences of {per_seq} tokens (alone → with draft) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, target, tp, dtp in cases:
        r = memory(hw, target, tp, draft, dtp)
        blocks_per_seq = math.ceil(per_seq / 16)
        print(f"| {label} | {r['weights_draft_gib']:.2f} GiB ({r['weights_draft_gb']:.2f} GB) | "
              f"{r['kv_target_kib']:.0f} + {r['kv_draft_kib']:.0f} KiB | {r['alone']:,} | "
              f"{r['weights_only']:,} (−{r['alone'] - r['weights_only']:,}, "
              f"{100 * (r['alone'] - r['weights_only']) / r['alone']:.1f}%) | "
              f"{r['both']:,} (−{100 * (r['alone'] - r['both']) / r['alone']:.1f}%) | "
              f"{r['alone'] // blocks_per_seq:,} → {r['both'] // blocks_per_seq:,} |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results/speculative-decoding")
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()

    tps = load(os.path.join(args.results, "tokens_per_step"))
    reps = [s for s in (load(p) for p in sorted(glob.glob(os.path.join(args.results, "cpu", "rep*")))) if s]
    tables = batch_tables(args.results)
    if tps is None and not reps and not tables:
        sys.exit(f"plot.py: no sweep under {args.results}; run papers/speculative-decoding/run.sh first")
    os.makedirs(args.out, exist_ok=True)
    if tps is not None:
        tokens_per_step(tps, args.out)
    if reps:
        cpu(reps, args.out)
    if tables:
        batch(tables, args.out)
    draft_memory()


if __name__ == "__main__":
    main()
