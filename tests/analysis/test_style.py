#!/usr/bin/python3
"""Tests of analysis/style.py, the one style of every figure under analysis/ and papers/:
the words and units of the known columns, the number format, the log-scale CDF and tail
helpers, the value and point labels that must not collide, the readability check that
savefig() runs on every figure (and that the plot tests make strict), and that every plot
script draws through the module.

    /usr/bin/python3 tests/analysis/test_style.py [-v]
"""
import contextlib
import glob
import io
import os
import re
import sys
import tempfile
import unittest

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
import style  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402


def labelled(ax, x="x (s)", y="y (s)"):
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    return ax


class WordsTest(unittest.TestCase):
    def test_known_columns_have_words_and_units(self):
        self.assertEqual(style.label("ttft_s"), "time to first token (s)")
        self.assertEqual(style.label("ttft_s", log=True), "time to first token (s, log)")
        self.assertEqual(style.label("tpot_p90_s"), "time per output token, p90 (ms)")
        self.assertEqual(style.label("e2e_p50_s"), "end-to-end latency, median (s)")
        self.assertEqual(style.label("prefix_hit_rate"), "prefix-cache hit rate (% of prompt tokens)")
        self.assertEqual(style.label("workload.rate"), "offered load (req/s)")
        self.assertEqual(style.label("router.type"), "router")  # a name: no unit
        self.assertEqual(style.words("queue_depth"), "queue depth")
        self.assertEqual(style.unit("itl_p99_s"), "ms")

    def test_values_come_in_the_labels_unit(self):
        np.testing.assert_allclose(style.scaled("tpot_s", [0.0125]), [12.5])
        np.testing.assert_allclose(style.scaled("prefix_hit_rate", [0.25]), [25.0])
        np.testing.assert_allclose(style.scaled("ttft_s", [0.3]), [0.3])

    def test_unknown_columns_read_as_words(self):
        self.assertEqual(style.label("warmup_time_s"), "warmup time (s)")
        self.assertEqual(style.label("pool.decode.size"), "size")
        np.testing.assert_allclose(style.scaled("anything", [2.0]), [2.0])

    def test_numbers(self):
        self.assertEqual(style.number(4977.3), "4,977")
        self.assertEqual(style.number(6638.0), "6,638")
        self.assertEqual(style.number(0.19349), "0.193")
        self.assertEqual(style.number(0.0031), "0.0031")
        self.assertEqual(style.number(12.0), "12")
        self.assertEqual(style.compact(300000.0), "300k")
        self.assertEqual(style.compact(3e6), "3M")
        self.assertEqual(style.compact(0.05), "0.05")


class HelpersTest(unittest.TestCase):
    def tearDown(self):
        plt.close("all")

    def test_cdf_on_a_log_axis(self):
        fig, ax = plt.subplots()
        v = np.array([0.0, 0.01, 0.02, 0.04, np.nan, 0.08])
        line = style.cdf(ax, v, "time to first token", column="ttft_s")
        self.assertEqual(ax.get_xscale(), "log")
        x, y = line.get_data()
        np.testing.assert_allclose(x, [0.01, 0.02, 0.04, 0.08])  # the zero is not drawable on a log axis
        np.testing.assert_allclose(y, [0.4, 0.6, 0.8, 1.0])  # ... but counts: the curve starts at its share
        labels = ax.get_legend_handles_labels()[1]
        self.assertIn("time to first token", labels)
        self.assertIn("p99 = 0.0784 s", labels)  # numpy's linear percentile of the five
        self.assertIsNone(style.cdf(ax, [np.nan], "nothing"))

    def test_cdf_in_milliseconds(self):
        fig, ax = plt.subplots()
        line = style.cdf(ax, [0.01, 0.02], "time per output token", column="tpot_s", percentiles=(50,))
        np.testing.assert_allclose(line.get_data()[0], [10.0, 20.0])
        self.assertIn("p50 = 15 ms", ax.get_legend_handles_labels()[1])

    def test_tail_is_the_share_above(self):
        fig, ax = plt.subplots()
        line = style.tail(ax, np.arange(1, 101) / 100.0, "e2e")
        x, y = line.get_data()
        self.assertAlmostEqual(y[0], 1.0)
        self.assertAlmostEqual(y[-1], 0.01)  # the slowest request: 1 in 100
        self.assertEqual((ax.get_xscale(), ax.get_yscale()), ("log", "log"))
        self.assertLessEqual(ax.get_ylim()[0], 0.005)

    def test_bar_labels_stay_inside_and_apart(self):
        # papers/prefix-routing's routers.png: TTFT p90 from 1 s to 5,000 s on a log axis, labels above.
        fig, ax = plt.subplots(figsize=(4.6, 3))
        values = [1.13, 1.42, 1.21, 4977.0, 1.11, 0.99, 3.31]
        x = np.arange(len(values))
        ax.bar(x, values)
        style.log_axis(ax, "y")
        texts = style.bar_labels(ax, x, values, log=True)
        ax.set_xticks(x, ["round_robin", "random", "least_loaded", "prefix_approx", "prefix_precise", "weighted",
                          "cache_aware"], rotation=40, ha="right", fontsize=8)
        labelled(ax, "router", "time to first token, p90 (s, log)")
        fig.tight_layout()
        self.assertEqual([t.get_text() for t in texts][3], "4,977")
        self.assertEqual(style.problems(fig), [])

    def test_point_labels_never_overlap(self):
        fig, ax = plt.subplots(figsize=(4, 3))
        rng = np.random.default_rng(1)
        xs, ys = 10 + rng.normal(0, 0.1, 30), 10 + rng.normal(0, 0.1, 30)  # a crowd of points
        ax.plot([0, 20], [0, 20], "s", label="far apart")  # the axes span 20 units
        ax.plot(xs, ys, "o", label="points")
        ax.legend(loc="upper left")
        labelled(ax)
        fig.tight_layout()
        placed = style.point_labels(ax, xs, ys, [f"{i}" for i in range(30)])
        self.assertLess(len(placed), 30)  # some had no room and were left out
        self.assertGreater(len(placed), 0)
        self.assertEqual(style.problems(fig), [])

    def test_log_axis_ticks_at_small_spans(self):
        fig, ax = plt.subplots()
        ax.plot([0.022, 0.12], [0, 1])
        labelled(ax)
        style.log_axis(ax, "x")
        fig.canvas.draw()
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        self.assertGreaterEqual(len(ticks), 3)  # less than a decade still gets readable ticks
        self.assertTrue(all(re.fullmatch(r"[0-9.,]+", t) for t in ticks), ticks)  # 0.05, not 5×10⁻²


class ProblemsTest(unittest.TestCase):
    def tearDown(self):
        plt.close("all")

    def test_a_readable_figure_has_none(self):
        fig, (a, b) = plt.subplots(2, 1, sharex=True)
        a.plot([1, 2], [1, 2], label="prefill tokens")
        a.plot([1, 2], [2, 1], label="decode tokens")
        a.legend()
        a.set_ylabel("tokens per step")
        b.plot([1, 2], [3, 4])
        b.axhline(3.5, color="grey")  # a reference line is not a series
        labelled(b, "time (s)", "sequences")
        fig.tight_layout()
        self.assertEqual(style.problems(fig), [])  # the upper x axis has no tick labels: needs no label

    def test_unlabelled_axes(self):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [1, 2])
        found = style.problems(fig)
        self.assertIn("axes 0: the x axis has no label", found)
        self.assertIn("axes 0: the y axis has no label", found)

    def test_several_series_need_a_legend(self):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [1, 2], label="a")
        ax.plot([1, 2], [2, 1], label="b")
        labelled(ax)
        self.assertEqual(style.problems(fig), ["axes 0: 2 series and no legend"])
        style.figure_legend(fig)
        self.assertEqual(style.problems(fig), [])  # one legend for the figure will do

    def test_column_names_are_not_labels(self):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [1, 2], label="ttft_s")
        ax.plot([1, 2], [2, 1], label="time per output token")
        ax.legend()
        labelled(ax, "ttft_s", "share of requests")
        found = style.problems(fig)
        self.assertIn("axes 0: the x label is the column name 'ttft_s'", found)
        self.assertIn("axes 0: the legend entry 'ttft_s' is a column name", found)

    def test_overlapping_and_clipped_texts(self):
        fig, ax = plt.subplots()
        ax.bar([0, 1], [1.0, 1.0])
        labelled(ax)
        ax.set_ylim(0, 1.0)
        ax.text(0, 0.5, "0.85", ha="center")
        ax.text(0.02, 0.5, "0.81", ha="center")
        ax.text(1, 1.0, "1.4", ha="center", va="center")  # on the top edge, as routers.png's labels were
        found = style.problems(fig)
        self.assertIn("axes 0: the texts '0.85' and '0.81' overlap", found)
        self.assertIn("axes 0: the text '1.4' crosses the edge of the axes", found)

    def test_crowded_rotated_tick_labels(self):
        names = [f"a rather long router name {i}" for i in range(12)]
        fig, ax = plt.subplots(figsize=(3, 3))
        ax.bar(range(12), np.ones(12))
        ax.set_xticks(range(12), names, rotation=20, ha="right")
        labelled(ax)
        self.assertIn("axes 0: x tick labels overlap", style.problems(fig))
        fig, ax = plt.subplots(figsize=(12, 3))
        ax.bar(range(4), np.ones(4))
        ax.set_xticks(range(4), names[:4], rotation=40, ha="right")
        labelled(ax)
        fig.tight_layout()
        self.assertEqual(style.problems(fig), [])

    def test_savefig_warns_or_fails_when_strict(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.png")
            old = os.environ.pop(style.STRICT_ENV, None)
            try:
                fig, ax = plt.subplots()
                ax.plot([1, 2], [1, 2])
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    self.assertEqual(style.savefig(fig, path), path)
                self.assertTrue(os.path.getsize(path) > 0)
                self.assertIn("bad.png: axes 0: the x axis has no label", err.getvalue())
                os.environ[style.STRICT_ENV] = "1"
                fig, ax = plt.subplots()
                ax.plot([1, 2], [1, 2])
                with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                    style.savefig(fig, os.path.join(tmp, "strict.png"))
                self.assertFalse(os.path.exists(os.path.join(tmp, "strict.png")))
            finally:
                os.environ.pop(style.STRICT_ENV, None)
                if old is not None:
                    os.environ[style.STRICT_ENV] = old


class EveryScriptTest(unittest.TestCase):
    def test_every_plot_script_draws_through_the_style(self):
        scripts = [p for p in sorted(glob.glob(os.path.join(ROOT, "analysis", "*.py"))
                                     + glob.glob(os.path.join(ROOT, "papers", "*", "plot.py")))
                   if os.path.basename(p) not in ("style.py", "figure_check.py", "results.py")]  # the modules, not scripts
        self.assertGreaterEqual(len(scripts), 17)
        for path in scripts:
            with open(path) as f:
                text = f.read()
            name = os.path.relpath(path, ROOT)
            self.assertRegex(text, r"(?m)^import style\b", name)
            self.assertIn("style.savefig(", text, name)
            self.assertNotRegex(text, r"\b(fig|fr|plt)\.savefig\(", f"{name}: save through style.savefig")
            self.assertNotRegex(text, r"matplotlib\.use\(", f"{name}: style sets the backend")
            self.assertNotIn('"tab:', text, f"{name}: colours from style's palette")


if __name__ == "__main__":
    unittest.main()
