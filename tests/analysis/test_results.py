#!/usr/bin/python3
"""Tests of analysis/results.py and of the plot scripts that read results through it.

    /usr/bin/python3 tests/analysis/test_results.py [-v]

Writes small synthetic results files with h5py in the layout `testbed run` writes
(engine/metrics/results_file.cpp: double / int64 / int32 column datasets, double
attributes, fixed-length string attributes) and checks that the loader returns
exactly those values, then runs analysis/plot_run.py, papers/orca/plot.py and
papers/prefix-routing/plot.py on synthetic runs and checks their outputs appear.
Exits non-zero on failure.
"""
import contextlib
import importlib.util
import io
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
import results  # noqa: E402

SUMMARY_KEYS = [
    "num_requests", "num_finished", "num_steps", "num_instances", "prompt_tokens", "cached_tokens", "output_tokens",
    "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
    "e2e_mean_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s", "throughput_tok_s", "request_throughput_rps",
    "prefix_hit_rate", "preemptions", "gpu_hours_saved_per_day", "load_imbalance_requests",
    "busy_gpu_seconds_per_request", "requests_per_day",
]


def write_h5(path, tables=None, attrs=None):
    """A results file as the C++ ResultsFile writes it: tables {group: {column: array}},
    attrs {group: {name: float | str}} (str as fixed-length strings, numbers as doubles)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        for group, columns in (tables or {}).items():
            g = f.require_group(group)
            for name, values in columns.items():
                g.create_dataset(name, data=values)
        for group, values in (attrs or {}).items():
            g = f.require_group(group)
            for name, v in values.items():
                g.attrs[name] = np.bytes_(v.encode() or b"\0") if isinstance(v, str) else np.float64(v)


def synthetic_run(path, seed=0, n=40, steps=True, instances=2, trace="traces/samples/x.jsonl"):
    """A plausible run: every summary key the plot scripts use, /requests, /instances, /steps."""
    rng = np.random.default_rng(seed)
    out_tok = rng.integers(1, 50, n).astype(np.int64)
    ttft = rng.uniform(0.01, 0.5, n)
    tpot = rng.uniform(0.005, 0.05, n)
    e2e = ttft + (out_tok - 1) * tpot
    arrival = np.sort(rng.uniform(0, 10, n))
    cached = np.where(rng.random(n) < 0.5, 16 * rng.integers(1, 5, n), 0).astype(np.int64)
    tables = {"requests": {
        "id": np.arange(n, dtype=np.int64), "instance": (np.arange(n) % instances).astype(np.int32),
        "arrival_s": arrival, "first_token_s": arrival + ttft, "finish_s": arrival + e2e, "ttft_s": ttft,
        "tpot_s": np.where(out_tok > 1, tpot, np.nan), "e2e_s": e2e, "prompt_tokens": cached + 100,
        "cached_tokens": cached, "output_tokens": out_tok, "preemptions": np.zeros(n, np.int64)}}
    tables["instances"] = {
        "instance": np.arange(instances, dtype=np.int32), "requests": np.full(instances, n // instances, np.int64),
        "utilization": rng.uniform(0.2, 0.9, instances), "busy_s": rng.uniform(1, 5, instances)}
    if steps:
        m = 3 * n
        tables["steps"] = {
            "instance": (np.arange(m) % instances).astype(np.int32), "start_s": np.linspace(0, 10, m),
            "duration_s": rng.uniform(0.01, 0.03, m), "num_seqs": rng.integers(1, 8, m).astype(np.int32),
            "prefill_tokens": np.where(np.arange(m) % 3 == 0, 100, 0).astype(np.int32),
            "decode_tokens": rng.integers(1, 8, m).astype(np.int32),
            "kv_blocks_used": rng.integers(10, 90, m).astype(np.int32)}
    summary = {k: float(rng.uniform(0.1, 0.9)) for k in SUMMARY_KEYS}
    summary.update(num_requests=n, num_finished=n, output_tokens=float(out_tok.sum()), num_steps=3 * n)
    config = {"trace.path": trace, "fleet.num_instances": str(instances), "cache.prefix_cache": "true",
              "workload.rate": "2.5", "output.tokens": "false"}
    run = {"wall_s": 1.25, "simulated_s": 10.0, "executor": "sim", "mode": "simulated", "config_path": "x.ini"}
    write_h5(path, tables, {"summary": summary, "config": config, "run": run})
    return tables, summary, config, run


class LoaderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "run")
        self.path = os.path.join(self.dir, "results.h5")

    def tearDown(self):
        self.tmp.cleanup()

    def test_returns_exactly_what_was_written(self):
        tables, summary, config, run = synthetic_run(self.path)
        r = results.load(self.path)
        self.assertEqual(r.path, self.path)
        self.assertEqual(r.summary, summary)
        self.assertTrue(all(type(v) is float for v in r.summary.values()))
        self.assertEqual(r.config, config)
        self.assertTrue(all(type(v) is str for v in r.config.values()))
        self.assertEqual(r.run, run)
        for name, table in [("requests", r.requests), ("steps", r.steps), ("instances", r.instances)]:
            self.assertEqual(set(table), set(tables[name]), name)
            for col, values in tables[name].items():
                self.assertIsInstance(table[col], np.ndarray)
                self.assertEqual(table[col].dtype, values.dtype, f"{name}/{col}")
                np.testing.assert_array_equal(table[col], values, err_msg=f"{name}/{col}")
            self.assertIs(r.table(name), table)

    def test_missing_groups_are_empty(self):
        write_h5(self.path, {"requests": {"id": np.arange(3, dtype=np.int64)}}, {"summary": {"num_requests": 3}})
        r = results.load(self.path)
        self.assertEqual(r.steps, {})
        self.assertEqual(r.samples, {})
        self.assertEqual(r.table("tokens"), {})
        self.assertEqual(r.config, {})
        self.assertEqual(r.run, {})
        self.assertEqual(r.summary, {"num_requests": 3.0})
        np.testing.assert_array_equal(r.requests["id"], [0, 1, 2])

    def test_empty_table_columns(self):
        write_h5(self.path, {"steps": {"start_s": np.zeros(0), "instance": np.zeros(0, np.int32)}})
        st = results.load(self.path).steps
        self.assertEqual(sorted(st), ["instance", "start_s"])
        self.assertEqual(st["start_s"].size, 0)

    def test_directory_path(self):
        _, summary, _, _ = synthetic_run(self.path)
        r = results.load(self.dir)
        self.assertEqual(r.path, self.path)
        self.assertEqual(r.summary, summary)

    def test_missing_file_names_it(self):
        missing = os.path.join(self.tmp.name, "nope", "results.h5")
        with self.assertRaises(FileNotFoundError) as e:
            results.load(missing)
        self.assertIn(missing, str(e.exception))
        with self.assertRaises(FileNotFoundError) as e:
            results.load(os.path.join(self.tmp.name, "nope"))
        self.assertIn(missing, str(e.exception))
        self.assertIsNone(results.load(missing, missing_ok=True))

    def test_unreadable_file_names_it(self):
        os.makedirs(self.dir)
        with open(self.path, "w") as f:
            f.write("not hdf5")
        with self.assertRaises(OSError) as e:
            results.load(self.path)
        self.assertIn(self.path, str(e.exception))

    def test_get_config(self):
        synthetic_run(self.path, instances=3)
        r = results.load(self.path)
        self.assertEqual(r.get_config("fleet.num_instances", int), 3)
        self.assertEqual(r.get_config("workload.rate", float), 2.5)
        self.assertIs(r.get_config("cache.prefix_cache", bool), True)
        self.assertIs(r.get_config("output.tokens", bool), False)
        self.assertEqual(r.get_config("trace.path"), "traces/samples/x.jsonl")
        self.assertEqual(r.get_config("no.such", int, default=7), 7)
        with self.assertRaises(KeyError):
            r.get_config("no.such")
        with self.assertRaises(ValueError):
            r.get_config("trace.path", bool)

    def test_find_and_load_all(self):
        for rate in ["1", "2.5"]:
            synthetic_run(os.path.join(self.tmp.name, "sweep", f"rate-{rate}", "results.h5"))
        os.makedirs(os.path.join(self.tmp.name, "sweep", "rate-9"))  # a run that wrote nothing
        with open(os.path.join(self.tmp.name, "sweep", "rate-notes.txt"), "w"):
            pass
        expected = [os.path.join(self.tmp.name, "sweep", f"rate-{r}", "results.h5") for r in ["1", "2.5"]]
        self.assertEqual(results.find(os.path.join(self.tmp.name, "sweep", "rate-*")), expected)
        self.assertEqual(results.find(os.path.join(self.tmp.name, "sweep", "*", "results.h5")), expected)
        runs = results.load_all(os.path.join(self.tmp.name, "sweep", "rate-*"))
        self.assertEqual(list(runs), expected)
        self.assertTrue(all(isinstance(r, results.Results) for r in runs.values()))


def run_script(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True)


class PlotScriptsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def assertFiles(self, folder, names):
        for name in names:
            p = os.path.join(folder, name)
            self.assertTrue(os.path.isfile(p) and os.path.getsize(p) > 0, p)

    def test_plot_run(self):
        run_dir = os.path.join(self.tmp.name, "run")
        synthetic_run(os.path.join(run_dir, "results.h5"))
        p = run_script("analysis/plot_run.py", os.path.join(run_dir, "results.h5"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFiles(run_dir, ["latency_cdf.png", "batch_composition.png"])
        out = os.path.join(self.tmp.name, "out")  # a run directory, no /steps
        synthetic_run(os.path.join(self.tmp.name, "run2", "results.h5"), steps=False)
        p = run_script("analysis/plot_run.py", os.path.join(self.tmp.name, "run2"), "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFiles(out, ["latency_cdf.png"])
        self.assertFalse(os.path.exists(os.path.join(out, "batch_composition.png")))
        missing = os.path.join(self.tmp.name, "missing.h5")
        p = run_script("analysis/plot_run.py", missing)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(missing, p.stderr)

    def test_orca_plot(self):
        res, out = os.path.join(self.tmp.name, "orca"), os.path.join(self.tmp.name, "png")
        for i, (b, policy, rate) in enumerate((b, p, r) for b in [16, 64] for p in ["static", "fcfs"]
                                              for r in ["0.5", "1", "2"]):
            synthetic_run(os.path.join(res, f"b{b}", policy, f"rate-{rate}", "results.h5"), seed=i)
        for policy in ["static", "fcfs"]:
            synthetic_run(os.path.join(res, "steps", "b64", policy, "results.h5"), seed=99)
        p = run_script("papers/orca/plot.py", "--results", res, "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFiles(out, ["load_sweep_b64.png", "latency_vs_throughput.png"])
        self.assertIn("| 64 | fcfs |", p.stdout)
        self.assertIn("steps that carry a prompt", p.stdout)

    def test_prefix_routing_plot(self):
        # The script reads results/prefix-routing/ and writes beside itself: run it in
        # process with both folders pointed at the temp dir, so the repo is untouched.
        res = os.path.join(self.tmp.name, "prefix-routing")
        for i, r in enumerate(["round_robin", "prefix_precise", "weighted"]):
            synthetic_run(os.path.join(res, "shared", r, "results.h5"), seed=i)
            synthetic_run(os.path.join(res, "shared_load", "rate12", r, "results.h5"), seed=10 + i)
        for nb in [10000, 28020]:
            synthetic_run(os.path.join(res, "mooncake_capacity", f"blocks{nb}", "results.h5"), seed=nb)
        spec = importlib.util.spec_from_file_location("prefix_routing_plot",
                                                      os.path.join(ROOT, "papers", "prefix-routing", "plot.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.RES, mod.HERE = res, self.tmp.name
        with contextlib.redirect_stdout(io.StringIO()) as stdout:
            mod.main()
        self.assertFiles(self.tmp.name, ["routers.png", "mooncake_capacity.png", "shared_load.png"])
        self.assertFiles(res, ["tables.md"])
        self.assertIn("| prefix_precise |", stdout.getvalue())
        self.assertIn("(traces/samples/x.jsonl)", stdout.getvalue())


if __name__ == "__main__":
    unittest.main()
