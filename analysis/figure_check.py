"""What a reader could not read in a matplotlib figure: the check analysis/style.py runs
on every figure before it is written (style.savefig), kept apart from the style itself.

    problems(fig, raw_names)   # ["axes 0: the x axis has no label", ...]; [] when readable

It reports an axis with tick labels but no label, a raw column name as a label or a legend
entry, two or more data series without a legend (on the axis or the figure), texts that
overlap each other or a legend or cross the edge of their axes, and tick labels that overlap.
"""
import itertools

import matplotlib
import matplotlib.collections
import matplotlib.container
import numpy as np


def _is_reference(line):
    """axhline / axvline (one coordinate in axes units) and lines of fewer than two points."""
    if np.asarray(line.get_xdata(), dtype=object).size < 2:
        return True
    return line.axes is not None and tuple(line.get_transform().contains_branch_seperately(line.axes.transData)) != (True, True)


def _series(ax):
    """The data series of an axis: lines of two or more points, bar groups, scatters."""
    out = [ln for ln in ax.lines if ln.get_visible() and not _is_reference(ln)]
    out += [c for c in ax.containers if isinstance(c, matplotlib.container.BarContainer)]
    out += [c for c in ax.collections if c.get_visible() and isinstance(c, matplotlib.collections.PathCollection)]
    return out


def _has_data(ax):
    return bool(ax.lines or ax.patches or ax.collections or ax.images or ax.containers)


def _visible_ticks(axis, renderer):
    return [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]


def overlaps(a, b, pad=0.5):
    """Whether two window extents overlap by more than `pad` pixels."""
    return a.x0 + pad < b.x1 and b.x0 + pad < a.x1 and a.y0 + pad < b.y1 and b.y0 + pad < a.y1


def _legend_of(ax):
    leg = ax.get_legend()
    if leg is not None and leg.get_visible():
        return leg
    return None


def problems(fig, raw_names=frozenset()):
    """What a reader could not read in `fig`, as a list of sentences (empty when nothing).
    `raw_names`: column names that must not stand as an axis label or a legend entry."""
    out = []
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    fig_legends = [leg for leg in fig.legends if leg.get_visible()]
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison and _has_data(ax)]
    for n, ax in enumerate(axes):
        name = f"axes {n}" + (f" ({ax.get_title()!r})" if ax.get_title() else "")
        for which, axis, text in [("x", ax.xaxis, ax.get_xlabel()), ("y", ax.yaxis, ax.get_ylabel())]:
            if axis.get_visible() and _visible_ticks(axis, renderer) and not text.strip():
                out.append(f"{name}: the {which} axis has no label")
            if text.strip() in raw_names:
                out.append(f"{name}: the {which} label is the column name {text!r}")
        series = _series(ax)
        legend = _legend_of(ax)
        if len(series) >= 2 and legend is None and not fig_legends:
            out.append(f"{name}: {len(series)} series and no legend")
        texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        if legend is not None:
            for t in legend.get_texts():
                if t.get_text().strip() in raw_names:
                    out.append(f"{name}: the legend entry {t.get_text()!r} is a column name")
        boxes = [(t, t.get_window_extent(renderer)) for t in texts]
        for (t1, b1), (t2, b2) in itertools.combinations(boxes, 2):
            if overlaps(b1, b2):
                out.append(f"{name}: the texts {t1.get_text()!r} and {t2.get_text()!r} overlap")
        frame = ax.get_window_extent(renderer)
        for t, b in boxes:
            inside = b.x0 >= frame.x0 - 1 and b.x1 <= frame.x1 + 1 and b.y0 >= frame.y0 - 1 and b.y1 <= frame.y1 + 1
            outside = b.x1 <= frame.x0 or b.x0 >= frame.x1 or b.y1 <= frame.y0 or b.y0 >= frame.y1
            if not inside and not outside:
                out.append(f"{name}: the text {t.get_text()!r} crosses the edge of the axes")
            if legend is not None and overlaps(b, legend.get_window_extent(renderer)):
                out.append(f"{name}: the text {t.get_text()!r} lies under the legend")
        for which, axis in [("x", ax.xaxis), ("y", ax.yaxis)]:
            if _ticks_overlap(_visible_ticks(axis, renderer), which, renderer):
                out.append(f"{name}: {which} tick labels overlap")
    return out


def _ticks_overlap(ticks, which, renderer):
    """Whether neighbouring tick labels overlap. Rotated labels are parallel strips: they clear
    each other when the ticks' distance across the strips exceeds a label's unrotated height."""
    for t1, t2 in zip(ticks, ticks[1:]):
        angle = t1.get_rotation() % 180
        if angle in (0.0,) or (which == "y" and angle == 90.0):
            if overlaps(t1.get_window_extent(renderer), t2.get_window_extent(renderer), pad=0.0):
                return True
            continue
        p1 = t1.get_transform().transform(t1.get_position())
        p2 = t2.get_transform().transform(t2.get_position())
        gap = abs(p2[0] - p1[0]) if which == "x" else abs(p2[1] - p1[1])
        across = gap * abs(np.sin(np.radians(angle))) if which == "x" else gap * abs(np.cos(np.radians(angle)))
        t1.set_rotation(0)
        height = max(t1.get_window_extent(renderer).height, 1.0)
        t1.set_rotation(angle)
        if across < height * 0.95:
            return True
    return False
