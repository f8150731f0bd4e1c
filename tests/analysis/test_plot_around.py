#!/usr/bin/python3
"""Tests of analysis/plot_autoscale.py and papers/latency-budget/plot.py on
synthetic results in the layouts `testbed run` and `testbed sweep` write:
the figures appear, the chosen sizes and the printed tables hold the known
values, and missing results are refused.

    /usr/bin/python3 tests/analysis/test_plot_around.py [-v]
"""
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def run_script(*args):
    """Runs a plot script; every figure it saves is checked for readability (analysis/style.py:
    labels, legends, no overlapping text), and a problem fails the script."""
    env = dict(os.environ, ANALYSIS_STRICT_FIGURES="1")
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=env)


def write_run(path, summary, requests=None, autoscale=None, config=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        g = f.create_group("summary")
        for k, v in summary.items():
            g.attrs[k] = np.float64(v)
        r = f.create_group("requests")
        for k, v in (requests or {"id": np.arange(3), "arrival_s": np.array([0.0, 5.0, 12.0])}).items():
            r.create_dataset(k, data=np.asarray(v))
        if autoscale:
            a = f.create_group("autoscale")
            for k, v in autoscale.items():
                a.create_dataset(k, data=np.asarray(v))
        c = f.create_group("config")
        for k, v in (config or {}).items():
            c.attrs[k] = np.bytes_(v.encode())


def summary(ttft_p95, tpot_p95=0.02, usd=1e-3, busy=90.0, paid=100.0, **more):
    s = {"ttft_p95_s": ttft_p95, "tpot_p95_s": tpot_p95, "usd_per_request": usd, "busy_gpu_seconds": busy,
         "gpu_seconds": paid, "prefix_hit_rate": 0.3, "ingress_exact_hit_rate": 0.1,
         "ingress_semantic_hit_rate": 0.15, "quality_failure_rate": 0.02, "replicas_mean": 3.0}
    s.update(more)
    return s


def write_sweep(folder, key, rows, point_requests=None):
    """folder/sweep.h5 with /points (id, status, key, summary metrics); point_requests(value) ->
    /requests of that point's own results file."""
    os.makedirs(folder, exist_ok=True)
    with h5py.File(os.path.join(folder, "sweep.h5"), "w") as f:
        g = f.create_group("points")
        ids = [f"p{i:011d}" for i in range(len(rows))]
        g.create_dataset("id", data=np.array([i.encode() for i in ids], dtype="S"))
        g.create_dataset("status", data=np.array([b"ok"] * len(rows), dtype="S"))
        g.create_dataset(key, data=np.array([float(v) for v, _ in rows]))
        for m in rows[0][1]:
            g.create_dataset(m, data=np.array([s[m] for _, s in rows], dtype=np.float64))
        f.create_group("sweep").attrs["num_points"] = np.float64(len(rows))
    if point_requests:
        for pid, (value, s) in zip(ids, rows):
            write_run(os.path.join(folder, "points", pid, "results.h5"), s, point_requests(value))


class PlotAroundTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_plot_autoscale(self):
        runs = []
        for k, signal in enumerate(["queue_depth", "active_seqs"]):
            t = np.arange(0.0, 60.0, 10.0)
            auto = {"t": t, "pool": np.zeros(6, np.int32), "active": np.array([1, 1, 2, 3, 3, 2]) + k,
                    "starting": np.array([0, 1, 1, 0, 0, 0]), "draining": np.array([0, 0, 0, 0, 0, 1]),
                    "desired": np.ones(6), "signal": np.linspace(0, 1, 6)}
            for s in ["queue_depth", "active_seqs", "kv_usage", "gpu_util", "cpu_util", "request_rate", "ttft_p95_s"]:
                auto[s] = np.linspace(0, 2, 6)
            path = os.path.join(self.tmp.name, signal, "results.h5")
            write_run(path, summary(0.5, replicas_mean=2.5 + k, gpu_seconds=7200.0 * (k + 1)), autoscale=auto,
                      config={"autoscale.signal": signal, "autoscale.policy": "target", "autoscale.target": "4"})
            runs.append(os.path.dirname(path))
        out = os.path.join(self.tmp.name, "a.png")
        p = run_script("analysis/plot_autoscale.py", *runs, "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.getsize(out) > 0)
        self.assertIn("| queue_depth (target 4) | 2.50 | 2.000 |", p.stdout)
        self.assertIn("| active_seqs (target 4) | 3.50 | 4.000 |", p.stdout)
        write_run(os.path.join(self.tmp.name, "plain", "results.h5"), summary(0.5))
        p = run_script("analysis/plot_autoscale.py", os.path.join(self.tmp.name, "plain"), "--out", out)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no /autoscale table", p.stderr)

    def test_latency_budget_plot(self):
        res = os.path.join(self.tmp.name, "lb")
        # Baseline: no size meets the SLO; its fixed fleet (16) is the reference cost.
        write_sweep(os.path.join(res, "step0_baseline"), "fleet.num_instances",
                    [(n, summary(5.0 + 100 / n, usd=n * 1e-4)) for n in (8, 16, 24)])
        # Steps 1-4: the cheapest meeting size is 9, 6, 5, 4.
        for step, need in [("step1_continuous", 9), ("step2_prefix", 6), ("step3_semantic", 5), ("step4_fp8", 4)]:
            write_sweep(os.path.join(res, step), "fleet.num_instances",
                        [(n, summary(0.5 if n >= need else 3.0, usd=n * 1e-4)) for n in range(2, 17)])
        # Step 5: per pool, its own requests meet the SLO from 1, 2 and 3 replicas.
        for k, (pool, need) in enumerate([("small", 1), ("medium", 2), ("large", 3)]):
            def reqs(size, k=k, need=need):
                n = 40
                ttft = np.full(n, 0.2 if size >= need else 2.0)
                ttft[::2] = 0.1  # the other pools' requests are always fast
                return {"id": np.arange(n), "routed_class": np.where(np.arange(n) % 2 == 0, (k + 1) % 3, k),
                        "answered_by": np.zeros(n), "ttft_s": ttft, "tpot_s": np.full(n, 0.02)}
            write_sweep(os.path.join(res, f"step5_{pool}"), f"pool.{pool}.size",
                        [(s, summary(0.4)) for s in range(1, 4)], point_requests=reqs)
        p = run_script("papers/latency-budget/plot.py", "--pool-sizes", res)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["--pool.small.size=1", "--pool.medium.size=2", "--pool.large.size=3"])
        p = run_script("papers/latency-budget/plot.py", "--fleet-size", res)
        self.assertEqual(p.stdout.strip(), "4")
        write_run(os.path.join(res, "step5_routing", "results.h5"), summary(0.1, usd=2e-4))
        write_run(os.path.join(res, "step6_autoscale", "results.h5"), summary(0.1, usd=1.6e-4, replicas_mean=4.5))
        write_run(os.path.join(res, "step6b_autoscale_one_model", "results.h5"), summary(0.2, usd=3.2e-4))
        out = os.path.join(self.tmp.name, "lb.png")
        p = run_script("papers/latency-budget/plot.py", "--results", res, "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.getsize(out) > 0)
        # Costs against the baseline's 16 replicas (1.6e-3 per generation = 1.600 per 1k).
        self.assertIn("| 16 x 70B (fixed) | 11250 (SLO not met) | 0.900 | 1.600 | +0% |", p.stdout)
        self.assertIn("| + continuous batching | 9 x 70B | 500 | 0.900 | 0.900 | -44% |", p.stdout)
        self.assertIn("| + FP8 | 4 x 70B | 500 | 0.900 | 0.400 | -75% |", p.stdout)
        self.assertIn("| + model routing | 1 x 1B + 2 x 8B + 3 x 70B | 100 | 0.900 | 0.200 | -88% |", p.stdout)
        self.assertIn("| + autoscaling | up to 1 x 1B + 2 x 8B + 3 x 70B, mean 4.50 replicas | 100 | 0.900 | 0.160 | -90% |",
                      p.stdout)
        p = run_script("papers/latency-budget/plot.py", "--results", os.path.join(self.tmp.name, "none"), "--out", out)
        self.assertNotEqual(p.returncode, 0)

    def test_compare(self):
        runs = []
        for k, seqs in enumerate(["256", "2"]):
            path = os.path.join(self.tmp.name, f"run{k}", "results.h5")
            req = {"id": np.arange(5), "ttft_s": np.linspace(0.1, 0.5, 5) * (k + 1),
                   "tpot_s": np.full(5, 0.01), "e2e_s": np.linspace(1, 2, 5)}
            write_run(path, summary(0.5), req, config={"scheduler.max_num_seqs": seqs, "workload.rate": "2"})
            runs.append(os.path.dirname(path))
        out = os.path.join(self.tmp.name, "cmp.png")
        p = run_script("analysis/compare.py", *runs, "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.getsize(out) > 0)
        self.assertIn("[1] max_num_seqs=256:", p.stdout)
        self.assertIn("[2] max_num_seqs=2:", p.stdout)
        self.assertNotIn("rate=", p.stdout)
        p = run_script("analysis/compare.py", runs[0], "--out", out)
        self.assertNotEqual(p.returncode, 0)


if __name__ == "__main__":
    unittest.main()
