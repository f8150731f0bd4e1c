"""The one style of every figure under analysis/ and papers/.

    import style                                  # sets the Agg backend and the rcParams
    ax.set_xlabel(style.label("ttft_p90_s"))      # 'time to first token, p90 (s)'
    ax.plot(x, style.scaled("tpot_p90_s", y))     # the values in the label's unit (ms here)
    style.cdf(ax, r.requests["ttft_s"], "time to first token")    # log-x CDF, p50 / p99 marked
    style.tail(ax, r.requests["ttft_s"], "time to first token")   # 1 - CDF, log-log: the tail
    style.log_axis(ax, "y")                       # log scale with readable ticks at any span
    style.savefig(fig, "out.png")                 # lay out, check, write, close; returns the path

What it holds:
  - rcParams (font sizes, grid, no top/right spines, a colour-blind-safe cycle);
  - PALETTE (Okabe and Ito's colours) and COLORS, the colours of named things
    (prefill, decode, reference lines, ...);
  - the words and units of the known columns: the per-request and per-step columns of a
    results file, the /summary metrics (ttft_p90_s, throughput_tok_s, ...), the autoscaler's
    signals and the common config keys; label(), words(), unit() and scaled();
  - cdf() and tail(), latency distributions drawn where their tails can be read;
  - problems(fig): what a reader could not read in a figure (an axis without a label, several
    series without a legend, a raw column name as a label, overlapping or clipped texts);
    savefig() runs it on every figure, prints what it finds on stderr, and fails (SystemExit)
    when the environment has ANALYSIS_STRICT_FIGURES=1 (the tests set it).
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402
import numpy as np  # noqa: E402
from cycler import cycler  # noqa: E402

import figure_check  # noqa: E402  (analysis/figure_check.py)

STRICT_ENV = "ANALYSIS_STRICT_FIGURES"

# Okabe & Ito (2008), colour-blind safe; yellow darkened to read on white.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#B59B00", "#000000", "#999999"]
BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY, YELLOW, BLACK, GREY = PALETTE
COLORS = {
    "prefill": VERMILLION, "decode": BLUE, "sequences": GREEN, "kv": PURPLE, "waiting": ORANGE,
    "reference": GREY, "baseline": BLACK, "bad": VERMILLION, "good": BLUE,
}
MARKERS = "osD^v<>ph*"
LINESTYLES = ["-", "--", "-.", ":"]

RC = {
    "figure.dpi": 100,
    "savefig.dpi": 120,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.08,
    "font.size": 9,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9,
    "figure.titlesize": 10.5,
    "legend.fontsize": 7.5,
    "legend.title_fontsize": 7.5,
    "legend.framealpha": 0.9,
    "legend.borderaxespad": 0.4,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.grid": True,
    "axes.grid.which": "major",
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": cycler(color=PALETTE),
    "lines.linewidth": 1.5,
    "lines.markersize": 4.5,
    "image.cmap": "viridis",
}


def apply():
    """Sets the rcParams (done on import)."""
    matplotlib.rcParams.update(RC)


apply()


def color(i):
    """The i-th palette colour (cycling)."""
    return PALETTE[i % len(PALETTE)]


def colors(n, cmap="viridis", stop=0.8):
    """n colours in order (an ordered quantity: chunk sizes, acceptance rates)."""
    return [plt.get_cmap(cmap)(x) for x in np.linspace(0.0, stop, max(n, 1))]


# ---- words and units of the known columns --------------------------------------------------

# name -> (words, unit, scale: the factor from the stored value to the unit)
_LATENCIES = {
    "ttft": ("time to first token", "s", 1.0),
    "tpot": ("time per output token", "ms", 1e3),
    "itl": ("time between tokens", "ms", 1e3),
    "e2e": ("end-to-end latency", "s", 1.0),
    "normalized_latency": ("normalized latency (end-to-end / output tokens)", "ms/token", 1e3),
    "transfer": ("KV transfer time", "ms", 1e3),
    "handoff_wait": ("wait for decode room", "ms", 1e3),
    "ingress_lookup": ("ingress lookup time", "ms", 1e3),
}
_STATS = {"mean": "mean", "p50": "median", "p90": "p90", "p95": "p95", "p99": "p99"}

COLUMNS = {
    # /requests
    "arrival_s": ("arrival time", "s", 1.0),
    "first_token_s": ("first token time", "s", 1.0),
    "finish_s": ("finish time", "s", 1.0),
    "prompt_tokens": ("prompt tokens", "tokens", 1.0),
    "cached_tokens": ("prompt tokens from the prefix cache", "tokens", 1.0),
    "output_tokens": ("output tokens", "tokens", 1.0),
    "preemptions": ("preemptions", "", 1.0),
    # /steps
    "start_s": ("time", "s", 1.0),
    "duration_s": ("duration", "s", 1.0),
    "prefill_tokens": ("prefill tokens per step", "tokens", 1.0),
    "decode_tokens": ("decode tokens per step", "tokens", 1.0),
    "num_seqs": ("sequences in the batch", "", 1.0),
    "num_running": ("running sequences", "", 1.0),
    "num_waiting": ("waiting requests", "", 1.0),
    "num_preempted": ("preempted sequences", "", 1.0),
    "kv_blocks_used": ("KV blocks in use", "blocks", 1.0),
    # /summary
    "num_requests": ("requests", "", 1.0),
    "num_finished": ("finished requests", "", 1.0),
    "num_steps": ("steps", "", 1.0),
    "num_instances": ("instances", "", 1.0),
    "throughput_tok_s": ("output throughput", "tokens/s", 1.0),
    "request_throughput_rps": ("request throughput", "req/s", 1.0),
    "goodput_rps": ("goodput (requests within the SLO)", "req/s", 1.0),
    "prefix_hit_rate": ("prefix-cache hit rate", "% of prompt tokens", 100.0),
    "request_hit_share": ("requests with a prefix-cache hit", "%", 100.0),
    "slo_attainment": ("SLO attainment", "% of requests", 100.0),
    "batch_size_mean": ("mean batch size", "sequences", 1.0),
    "kv_waste_mean": ("KV slots allocated but unused", "%", 100.0),
    "busy_gpu_seconds": ("busy GPU time", "GPU-s", 1.0),
    "gpu_seconds": ("paid GPU time", "GPU-s", 1.0),
    "busy_gpu_seconds_per_request": ("busy GPU time per request", "GPU-s", 1.0),
    "gpu_hours_saved_per_day": ("GPU-hours saved per day by the prefix cache", "GPU-h", 1.0),
    "load_imbalance_requests": ("load imbalance (max / mean requests per instance)", "", 1.0),
    "cost_usd": ("cost", "$", 1.0),
    "usd_per_request": ("cost per request", "$", 1.0),
    "usd_per_million_output_tokens": ("cost per million output tokens", "$", 1.0),
    "energy_kwh": ("energy at TDP", "kWh", 1.0),
    "replicas_mean": ("mean replicas", "", 1.0),
    "spec_acceptance_rate": ("draft acceptance rate", "", 1.0),
    "spec_tokens_per_step": ("tokens appended per decode step", "tokens", 1.0),
    "quality_failure_rate": ("quality failures", "% of requests", 100.0),
    "ingress_exact_hit_rate": ("ingress exact hits", "% of requests", 100.0),
    "ingress_semantic_hit_rate": ("ingress semantic hits", "% of requests", 100.0),
    # the autoscaler's signals (sim/autoscaler.h), per active replica over the window
    "queue_depth": ("queue depth", "waiting requests per replica", 1.0),
    "active_seqs": ("active sequences", "per replica", 1.0),
    "kv_usage": ("KV-cache usage", "share of blocks", 1.0),
    "gpu_util": ("GPU utilisation", "share of time in steps", 1.0),
    "cpu_util": ("CPU-like utilisation", "share of time holding a request", 1.0),
    "request_rate": ("request rate", "req/s per replica", 1.0),
    # config keys
    "workload.rate": ("offered load", "req/s", 1.0),
    "workload.num_requests": ("requests", "", 1.0),
    "workload.num_prefixes": ("distinct system prompts", "", 1.0),
    "workload.output_tokens": ("output tokens per request", "tokens", 1.0),
    "scheduler.chunk_size": ("prefill chunk size", "tokens", 1.0),
    "scheduler.max_batch_tokens": ("token budget per step", "tokens", 1.0),
    "scheduler.max_num_seqs": ("max sequences per batch", "", 1.0),
    "scheduler.policy": ("scheduling policy", "", 1.0),
    "scheduler.chunked_prefill": ("chunked prefill", "", 1.0),
    "fleet.num_instances": ("instances", "", 1.0),
    "router.type": ("router", "", 1.0),
    "cache.num_blocks": ("KV cache blocks", "blocks", 1.0),
    "spec.num_tokens": ("draft tokens per step k", "", 1.0),
    "slo.ttft_s": ("TTFT SLO", "s", 1.0),
    "slo.tpot_s": ("TPOT SLO", "ms", 1e3),
    "trace.time_scale": ("trace time scale", "", 1.0),
}
for _name, (_words, _unit, _scale) in _LATENCIES.items():
    COLUMNS[f"{_name}_s"] = (_words, _unit, _scale)
    for _stat, _stat_words in _STATS.items():
        COLUMNS[f"{_name}_{_stat}_s"] = (f"{_words}, {_stat_words}", _unit, _scale)
COLUMNS["ttft_p95_s"] = ("time to first token, p95", "s", 1.0)
COLUMNS["ttft_p95"] = COLUMNS["ttft_p95_s"]  # the autoscaler's signal name


def _spec(name):
    if name in COLUMNS:
        return COLUMNS[name]
    if name.endswith("_s"):
        return (name[:-2].replace("_", " "), "s", 1.0)
    return (name.split(".")[-1].replace("_", " "), "", 1.0)


def words(name):
    """What a column is, in words, without its unit: 'time to first token, p90'."""
    return _spec(name)[0]


def unit(name):
    """The unit label() shows a column in ('' for counts and names)."""
    return _spec(name)[1]


def label(name, log=False):
    """An axis label for a column: 'time to first token, p90 (s)'; log=True adds ', log'."""
    w, u, _ = _spec(name)
    inside = ", ".join(x for x in (u, "log" if log else "") if x)
    return f"{w} ({inside})" if inside else w


def scaled(name, values):
    """The values of a column in the unit label() names (ms for TPOT, % for hit rates)."""
    return np.asarray(values, dtype=float) * _spec(name)[2]


def number(v, digits=3):
    """A value as a reader writes it: `digits` significant digits below 1,000, whole numbers
    with thousands separated above, no exponent ('4,977', '0.19', '0.0031')."""
    v = float(v)
    if not np.isfinite(v):
        return str(v)
    if abs(v) >= max(1000, 10 ** digits):
        return f"{v:,.0f}"
    return np.format_float_positional(v, precision=digits, unique=True, fractional=False, trim="-")


# ---- axes ----------------------------------------------------------------------------------

def compact(v):
    """A tick-sized number: 0.05, 300, 2k, 50k, 1.5M."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return number(v / div) + suffix
    return number(v)


def _readable(v, _pos=None):
    return compact(v) if v > 0 else ""


_SUBS = [(1.0, 1.5, 2.0, 3.0, 5.0, 7.0), (1.0, 2.0, 5.0), (1.0, 3.0), (1.0,)]


def _crowded(axis, which, renderer, gap):
    """Whether neighbouring tick labels of `axis` come closer than `gap` pixels."""
    boxes = [t.get_window_extent(renderer) for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
    boxes.sort(key=lambda b: b.x0 if which == "x" else b.y0)
    for b1, b2 in zip(boxes, boxes[1:]):
        if (b2.x0 - b1.x1 if which == "x" else b2.y0 - b1.y1) < gap:
            return True
    return False


def log_axis(ax, which="x", base=10):
    """Log scale on `which` ('x', 'y' or 'both') with ticks a reader can read at any span:
    plain numbers (0.05, 2k, not 5×10⁻²), as many of 1-1.5-2-3-5-7, 1-2-5, 1-3 or 1 per decade
    as fit without crowding the labels, and a light minor grid. Call it after plotting (it looks
    at the data limits and the axis' length)."""
    for w in ("x", "y") if which == "both" else (which,):
        axis = ax.xaxis if w == "x" else ax.yaxis
        (ax.set_xscale if w == "x" else ax.set_yscale)("log", base=base)
        axis.set_minor_locator(mticker.LogLocator(base=base, subs="auto"))
        axis.set_minor_formatter(mticker.NullFormatter())
        ax.grid(True, which="minor", axis=w, alpha=0.12)
        if base != 10:  # powers of 2 written out: 512, 1,024, 16,384
            axis.set_major_locator(mticker.LogLocator(base=base))
            axis.set_major_formatter(mticker.FuncFormatter(lambda v, _pos: number(v) if v > 0 else ""))
            continue
        axis.set_major_formatter(mticker.FuncFormatter(_readable))
        lo, hi = (ax.get_xlim() if w == "x" else ax.get_ylim())
        decades = np.log10(hi / lo) if lo > 0 and hi > lo else 10
        first = 0 if decades <= 1.5 else (1 if decades <= 2.5 else (2 if decades <= 4.5 else 3))
        fig = ax.figure
        renderer = fig.canvas.get_renderer()
        gap = 0.8 * matplotlib.rcParams["xtick.labelsize" if w == "x" else "ytick.labelsize"] * fig.dpi / 72
        for subs in _SUBS[first:]:
            axis.set_major_locator(mticker.LogLocator(base=10, subs=subs))
            axis.get_tightbbox(renderer)  # places the tick labels (cheaper than drawing the figure)
            if not _crowded(axis, w, renderer, gap):
                break


def plain(ax, which="y"):
    """Tick labels on a linear axis as plain numbers with thousands separated (120,000)."""
    for w in ("x", "y") if which == "both" else (which,):
        axis = ax.xaxis if w == "x" else ax.yaxis
        axis.set_major_formatter(mticker.FuncFormatter(lambda v, _pos: number(v, digits=4) if v else "0"))


def _finite(values):
    v = np.asarray(values, dtype=float).ravel()
    return v[np.isfinite(v)]


def cdf(ax, values, label, log=True, column=None, percentiles=(50, 99), color=None, **kw):
    """The empirical CDF of `values` (NaN left out) as a step line labelled `label`; `column`
    (e.g. 'ttft_s') scales the values to its unit. With log=True the x axis is logarithmic and
    values <= 0 are not drawn (the curve starts at their share). Each of `percentiles` is a
    dotted vertical line in the same colour, labelled 'p99 = 0.12 s'. Returns the line or None."""
    v = _finite(values)
    if column:
        v = scaled(column, v)
    if v.size == 0:
        return None
    v = np.sort(v)
    y = np.arange(1, v.size + 1) / v.size
    keep = v > 0 if log else np.ones(v.size, dtype=bool)
    (line,) = ax.step(v[keep], y[keep], where="post", label=label, color=color, **kw)
    u = unit(column) if column else ""
    for p, ls in zip(percentiles, [":", "--", "-."]):
        q = float(np.percentile(v, p))
        if log and q <= 0:
            continue
        ax.axvline(q, color=line.get_color(), ls=ls, lw=0.9, alpha=0.8, label=f"p{p} = {number(q)}{' ' + u if u else ''}")
    if log:
        log_axis(ax, "x")
    ax.set_ylim(0, 1.02)
    return line


def tail(ax, values, label, column=None, color=None, **kw):
    """The tail of `values`: the share of them above x (1 - CDF) on log-log axes, so p99 and
    p99.9 are as far apart as p50 and p90. Returns the line or None."""
    v = _finite(values)
    if column:
        v = scaled(column, v)
    v = np.sort(v[v > 0])
    if v.size == 0:
        return None
    above = 1.0 - np.arange(v.size) / v.size  # share >= each value
    (line,) = ax.step(v, above, where="post", label=label, color=color, **kw)
    log_axis(ax, "both")
    ax._style_tail_lo = min(getattr(ax, "_style_tail_lo", 1.0), 0.5 / v.size, 0.01)  # the smallest over the lines
    ax.set_ylim(ax._style_tail_lo, 1.3)
    return line


def bar_labels(ax, xs, heights, fmt=number, log=False, inside_above=None, fontsize=7, **kw):
    """Value labels on bars that stay inside the axes: above each bar, with headroom added to the
    axis for the tallest; a bar taller than `inside_above` (a fraction of the axis) carries its
    label inside, in white. Short numbers (number()): neighbours stay apart (problems() checks).
    Returns the texts."""
    heights = np.asarray(heights, dtype=float)
    finite = heights[np.isfinite(heights) & (heights > 0)] if log else heights[np.isfinite(heights)]
    if finite.size == 0:
        return []
    top = float(finite.max())
    lo, hi = ax.get_ylim()
    if log:
        hi = max(hi, top * (4.0 if inside_above is None else 1.6))
    else:
        hi = max(hi, top * (1.15 if inside_above is None else 1.05))
    ax.set_ylim(lo, hi)
    texts = []
    for x, h in zip(xs, heights):
        if not np.isfinite(h) or (log and h <= 0):
            continue
        share = (np.log(h / lo) / np.log(hi / lo)) if log else (h - lo) / (hi - lo)
        if inside_above is not None and share > inside_above:
            texts.append(ax.annotate(fmt(h), (x, h), xytext=(0, -3), textcoords="offset points", ha="center",
                                     va="top", fontsize=fontsize, color="white", **kw))
        else:
            texts.append(ax.annotate(fmt(h), (x, h), xytext=(0, 2), textcoords="offset points", ha="center",
                                     va="bottom", fontsize=fontsize, **kw))
    return texts


def point_labels(ax, xs, ys, texts, fontsize=6.5, offsets=((3, 3), (3, -9), (-4, 5), (-4, -11), (6, -3)), **kw):
    """Labels at data points that never overlap: each takes the first of `offsets` (points, from
    its point) where it overlaps no label already placed nor the legend (make that first) and
    stays inside the axes; a label with no such place is left out (say where the full values
    are). Lay the figure out first (fig.tight_layout()): the placement is in pixels. Returns the
    labels placed."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    placed = [t.get_window_extent(renderer) for t in ax.texts if t.get_visible()]
    if ax.get_legend() is not None:
        placed.append(ax.get_legend().get_window_extent(renderer))
    out = []
    for x, y, text in zip(xs, ys, texts):
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        for dx, dy in offsets:
            t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize,
                            ha="left" if dx >= 0 else "right", **kw)
            b = t.get_window_extent(renderer)
            inside = b.x0 >= frame.x0 and b.x1 <= frame.x1 and b.y0 >= frame.y0 and b.y1 <= frame.y1
            if inside and not any(figure_check.overlaps(b, p, pad=-1.0) for p in placed):
                placed.append(b)
                out.append(t)
                break
            t.remove()
    return out


def figure_legend(fig, ax=None, where="right", **kw):
    """One legend for every panel of `fig` (the panels share their series), from the handles of
    `ax` (default: the axes with the most), outside the panels: where = 'right' or 'bottom'."""
    axes = [ax] if ax is not None else sorted(fig.axes, key=lambda a: -len(a.get_legend_handles_labels()[0]))
    handles, labels = axes[0].get_legend_handles_labels()
    seen = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    if where == "bottom":
        kw.setdefault("ncol", min(len(seen), 4))
        return fig.legend(list(seen.values()), list(seen), loc="upper center", bbox_to_anchor=(0.5, 0.0), **kw)
    return fig.legend(list(seen.values()), list(seen), loc="center left", bbox_to_anchor=(1.0, 0.5), **kw)


# ---- checks (analysis/figure_check.py) ------------------------------------------------------

_RAW = set(COLUMNS) - {k for k in COLUMNS if "." in k}


def problems(fig):
    """What a reader could not read in `fig`, as a list of sentences (empty when nothing)."""
    return figure_check.problems(fig, _RAW)


def check(fig, path=""):
    """Prints problems(fig) on stderr; exits when ANALYSIS_STRICT_FIGURES=1. Returns them."""
    found = problems(fig)
    for p in found:
        print(f"style: {path or 'figure'}: {p}", file=sys.stderr)
    if found and os.environ.get(STRICT_ENV, "") not in ("", "0"):
        raise SystemExit(f"style: {path or 'figure'}: {len(found)} readability problem(s) ({STRICT_ENV} is set)")
    return found


def savefig(fig, path, dpi=None, layout=True):
    """Lays the figure out (tight_layout, unless it uses constrained layout), checks it
    (check()), writes it to `path` and closes it. Returns `path`."""
    if layout and not fig.get_constrained_layout():
        fig.tight_layout()
    check(fig, path)
    fig.savefig(path, dpi=dpi or RC["savefig.dpi"])
    plt.close(fig)
    return path
