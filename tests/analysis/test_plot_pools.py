#!/usr/bin/python3
"""Tests of analysis/plot_pools.py on a synthetic results file in the layout
`testbed run` writes for a run with pools (engine/metrics/fleet_metrics.h:
/pools and the pool column of /instances as fixed-length strings).

    /usr/bin/python3 tests/analysis/test_plot_pools.py [-v]
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
import plot_pools  # noqa: E402
import results  # noqa: E402


def write_run(path, samples=True, handoffs=True):
    with h5py.File(path, "w") as f:
        p = f.create_group("pools")
        p.create_dataset("name", data=np.array([b"pre", b"dec"], dtype="S"))
        p.create_dataset("role", data=np.array([b"prefill", b"decode"], dtype="S"))
        p.create_dataset("size", data=np.array([1, 2], dtype=np.int32))
        p.create_dataset("gpus_per_instance", data=np.array([1, 2], dtype=np.int32))
        p.create_dataset("utilization", data=np.array([0.25, 0.75]))
        p.create_dataset("kv_usage_mean", data=np.array([0.1, 0.4]))
        p.create_dataset("batch_size_mean", data=np.array([1.5, 40.0]))
        i = f.create_group("instances")
        i.create_dataset("instance", data=np.array([0, 1, 2], dtype=np.int32))
        i.create_dataset("pool", data=np.array([b"pre", b"dec", b"dec"], dtype="S"))
        if samples:
            s = f.create_group("instance_samples")
            s.create_dataset("t", data=np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]))
            s.create_dataset("instance", data=np.array([0, 1, 2, 0, 1, 2], dtype=np.int32))
            s.create_dataset("kv_usage", data=np.array([0.1, 0.2, 0.4, 0.0, 0.5, 0.7]))
        r = f.create_group("requests")
        r.create_dataset("id", data=np.arange(4))
        if handoffs:
            r.create_dataset("transfer_s", data=np.array([0.001, 0.002, 0.003, 0.004]))
            r.create_dataset("handoff_wait_s", data=np.array([0.0, 0.0, 0.01, 0.02]))
        f.create_group("summary").attrs["num_finished"] = 4.0


class PlotPoolsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name

    def run_plot(self, **kw):
        path = os.path.join(self.dir, "results.h5")
        write_run(path, **kw)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            plot_pools.main([self.dir])
        return out.getvalue()

    def test_kv_over_time_is_the_mean_over_each_pools_instances(self):
        kv = plot_pools.kv_over_time(results.load(self._written()))
        self.assertEqual(list(kv), ["pre", "dec"])
        np.testing.assert_allclose(kv["dec"][0], [0.0, 1.0])
        np.testing.assert_allclose(kv["dec"][1], [0.3, 0.6])
        np.testing.assert_allclose(kv["pre"][1], [0.1, 0.0])

    def test_writes_the_figure_and_a_row_per_pool(self):
        text = self.run_plot()
        self.assertTrue(os.path.getsize(os.path.join(self.dir, "pools.png")) > 10000)
        self.assertIn("| pre | prefill | 1 | 1 | 0.250 | 0.100 | 1.5 |", text)
        self.assertIn("| dec | decode | 2 | 2 | 0.750 | 0.400 | 40.0 |", text)

    def test_without_samples_or_handoffs_it_still_plots(self):
        self.run_plot(samples=False, handoffs=False)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "pools.png")))

    def test_a_run_without_pools_is_a_clear_error(self):
        path = os.path.join(self.dir, "results.h5")
        with h5py.File(path, "w") as f:
            f.create_group("summary").attrs["num_finished"] = 1.0
        with self.assertRaises(SystemExit) as e:
            plot_pools.main([path])
        self.assertIn("no /pools table", str(e.exception))

    def _written(self):
        path = os.path.join(self.dir, "results.h5")
        write_run(path)
        return path


if __name__ == "__main__":
    unittest.main()
