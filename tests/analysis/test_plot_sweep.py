#!/usr/bin/python3
"""Tests of analysis/plot_sweep.py on a synthetic sweep table in the layout
`testbed sweep` writes (experiments/sweep/sweep_table.h: /points with text
columns as fixed-length strings, numbers as float64).

    /usr/bin/python3 tests/analysis/test_plot_sweep.py [-v]
"""
import contextlib
import io
import os
import sys
import tempfile
import unittest

import h5py
import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
os.environ["ANALYSIS_STRICT_FIGURES"] = "1"  # every figure saved is checked (analysis/style.py); a problem fails
import plot_sweep  # noqa: E402
import results  # noqa: E402


def write_sweep(path, columns):
    with h5py.File(path, "w") as f:
        g = f.create_group("points")
        for name, values in columns.items():
            if isinstance(values[0], str):
                g.create_dataset(name, data=np.array([v.encode() for v in values], dtype="S"))
            else:
                g.create_dataset(name, data=np.asarray(values, dtype=np.float64))
        f.create_group("sweep").attrs["num_points"] = float(len(columns["id"]))


class PlotSweepTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name
        policies = ["fcfs", "fcfs", "fcfs", "sjf", "sjf", "sjf"]
        rates = [1.0, 2.0, 4.0, 1.0, 2.0, 4.0]
        self.ttft = [0.1, 0.2, 0.4, 0.15, 0.25, 0.35]
        write_sweep(os.path.join(self.dir, "sweep.h5"), {
            "id": [f"{i:012x}" for i in range(6)],
            "status": ["ok", "ok", "ok", "ok", "failed", "ok"],
            "scheduler.policy": policies,
            "workload.rate": rates,
            "ttft_p90_s": [t if s != 4 else np.nan for s, t in enumerate(self.ttft)],
        })

    def run_plot(self, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            plot_sweep.main([self.dir, *args])
        return out.getvalue()

    def test_one_line_per_hue_value_from_the_ok_rows(self):
        png = os.path.join(self.dir, "p.png")
        table = self.run_plot("--x", "workload.rate", "--y", "ttft_p90_s", "--hue", "scheduler.policy", "--out", png)
        self.assertTrue(os.path.getsize(png) > 0)
        rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
        self.assertEqual(len(rows), 5)  # the failed point is left out
        self.assertIn("| fcfs | 4 | 0.4 |", table)
        self.assertIn("| sjf | 4 | 0.35 |", table)
        self.assertNotIn("| sjf | 2 |", table)

    def test_an_unfixed_key_is_an_error_naming_it_and_where_fixes_it(self):
        with self.assertRaises(SystemExit) as e:
            self.run_plot("--x", "workload.rate", "--y", "ttft_p90_s")
        self.assertIn("scheduler.policy takes 2 values", str(e.exception))
        table = self.run_plot("--x", "workload.rate", "--y", "ttft_p90_s", "--where", "scheduler.policy=sjf")
        self.assertIn("| 1 | 0.15 |", table)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "ttft_p90_s_vs_workload.rate.png")))

    def test_unknown_columns_are_errors(self):
        for args, word in [(["--x", "workload.speed", "--y", "ttft_p90_s"], "workload.speed"),
                           (["--x", "workload.rate", "--y", "nope"], "nope"),
                           (["--x", "workload.rate", "--y", "ttft_p90_s", "--where", "a.b=1"], "a.b")]:
            with self.assertRaises(SystemExit) as e:
                self.run_plot(*args)
            self.assertIn(word, str(e.exception))

    def test_loader_reads_text_and_numbers(self):
        sw = results.load_sweep(self.dir)
        self.assertEqual(len(sw), 6)
        self.assertEqual(list(sw.points["scheduler.policy"][:2]), ["fcfs", "fcfs"])
        self.assertEqual(sw.values("workload.rate"), [1.0, 2.0, 4.0])
        self.assertEqual(list(sw.select(**{"workload.rate": 2.0})["id"]), ["000000000001"])


if __name__ == "__main__":
    unittest.main()
