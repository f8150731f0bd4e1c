#!/usr/bin/python3
"""Tests of analysis/results.py and of the plot scripts that read results through it.

    /usr/bin/python3 tests/analysis/test_results.py [-v]

Writes small synthetic results files with h5py in the layout `testbed run` writes
(engine/metrics/results_file.cpp: double / int64 / int32 column datasets, double
attributes, fixed-length string attributes) and synthetic sweep tables in the layout
`testbed sweep` writes (experiments/sweep/sweep_table.h: DIR/sweep.h5 /points with text
columns as fixed-length byte strings and numbers as float64, DIR/points/<id>/results.h5),
checks that the loaders (results.load, results.load_sweep, Sweep.select) return exactly
those values. The plot scripts' tests (which use these writers) are in
tests/analysis/test_plot_scripts.py. Exits non-zero on failure.
"""
import hashlib
import os
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
    "busy_gpu_seconds_per_request", "requests_per_day", "batch_size_mean", "kv_waste_mean", "itl_p99_s",
]
NORMALIZED_LATENCY_KEYS = [f"normalized_latency_{q}_s" for q in ["mean", "p50", "p90", "p95", "p99"]]


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


def point_id(values):
    """12 hex digits from a point's values (the C++ hashes its own way; any stable id will do)."""
    text = "".join(f"{k}={v}\n" for k, v in sorted(values.items()))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def write_sweep(folder, keys, points, seed=0, metrics=None, runs=False, steps=False, trace="traces/samples/x.jsonl"):
    """A sweep's merged table as `testbed sweep` writes it: folder/sweep.h5 with /points (id,
    status, the swept `keys` in order, then every metric) and /sweep attributes. `points` is a
    list of {key: value} (numbers or str) with an optional "status" ("ok" unless "failed");
    `metrics(i, point)` -> {metric: value} overrides random metric values. A key column is
    float64 when every value is a number, else fixed-length bytes; a failed point's metrics are
    NaN. With runs=True each ok point also gets its own results file (synthetic_run) in
    folder/points/<id>/. Returns the columns written {column: list}."""
    rng = np.random.default_rng(seed)
    names = SUMMARY_KEYS + NORMALIZED_LATENCY_KEYS
    columns = {"id": [], "status": []}
    columns.update({k: [] for k in keys})
    columns.update({m: [] for m in names})
    for i, p in enumerate(points):
        values = {k: p[k] for k in keys}
        pid = point_id(values)
        ok = p.get("status", "ok") == "ok"
        columns["id"].append(pid)
        columns["status"].append("ok" if ok else "failed")
        for k in keys:
            columns[k].append(p[k])
        m = {n: float(rng.uniform(0.1, 0.9)) for n in names}
        m.update(num_steps=float(rng.integers(50, 100)), output_tokens=float(rng.integers(500, 1000)))
        if metrics:
            m.update(metrics(i, p))
        for n in names:
            columns[n].append(m[n] if ok else float("nan"))
        if runs and ok:
            synthetic_run(os.path.join(folder, "points", pid, "results.h5"), seed=seed + i, steps=steps, trace=trace)
    os.makedirs(folder, exist_ok=True)
    with h5py.File(os.path.join(folder, "sweep.h5"), "w") as f:
        g = f.create_group("points")
        for name, values in columns.items():
            if all(isinstance(v, (int, float)) for v in values):
                g.create_dataset(name, data=np.asarray(values, dtype=np.float64))
            else:
                g.create_dataset(name, data=np.array([str(v).encode() for v in values], dtype="S"))
        attrs = {"sweep_file": "x.ini", "base": "experiments/x.ini", "backend": "local", "seeds": "shared"}
        for k, v in attrs.items():
            f.require_group("sweep").attrs[k] = np.bytes_(v.encode())
        f["sweep"].attrs["num_points"] = np.float64(len(points))
        f["sweep"].attrs["num_failed"] = np.float64(columns["status"].count("failed"))
    return columns


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

    def test_units_of_columns_and_summary_keys(self):
        # As ResultsFile writes them: a "unit" attribute per column (fixed-length
        # bytes; "" stored as one space), and /summary_units beside /summary.
        os.makedirs(self.dir)
        with h5py.File(self.path, "w") as f:
            g = f.create_group("requests")
            g.create_dataset("ttft_s", data=np.array([0.1, 0.2])).attrs["unit"] = np.bytes_(b"s")
            g.create_dataset("prompt_tokens", data=np.array([5, 6], dtype=np.int32)).attrs["unit"] = np.bytes_(b"tokens")
            g.create_dataset("legacy", data=np.array([1.0, 2.0]))  # a file from before units
            f.create_group("summary").attrs["ttft_p50_s"] = 0.15
            f.create_group("summary_units").attrs["ttft_p50_s"] = np.bytes_(b"s")
        r = results.load(self.path)
        self.assertEqual(r.unit("requests", "ttft_s"), "s")
        self.assertEqual(r.unit("requests", "prompt_tokens"), "tokens")
        self.assertEqual(r.unit("requests", "legacy"), "")
        self.assertEqual(r.unit("steps", "start_s"), "")
        self.assertEqual(r.summary_units, {"ttft_p50_s": "s"})
        self.assertEqual(r.summary, {"ttft_p50_s": 0.15})

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


class SweepLoaderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "sweep")
        self.points = [{"scheduler.policy": p, "workload.rate": r} for p in ["static", "fcfs"] for r in [0.5, 1.0, 2.0]]
        self.points[4]["status"] = "failed"  # fcfs at 1.0
        self.columns = write_sweep(self.dir, ["scheduler.policy", "workload.rate"], self.points, runs=True)

    def tearDown(self):
        self.tmp.cleanup()

    def test_returns_exactly_what_was_written(self):
        for path in [self.dir, os.path.join(self.dir, "sweep.h5")]:
            sw = results.load_sweep(path)
            self.assertEqual(sw.path, os.path.join(self.dir, "sweep.h5"))
            self.assertEqual(sw.dir, os.path.abspath(self.dir))
            self.assertEqual(len(sw), len(self.points))
            self.assertEqual(set(sw.points), set(self.columns))  # (h5py lists columns by name)
            for name, values in self.columns.items():
                got = sw.points[name]
                self.assertIsInstance(got, np.ndarray, name)
                if isinstance(values[0], str):  # text columns come back as str
                    self.assertEqual(got.dtype, object, name)
                    self.assertEqual(got.tolist(), values, name)
                    self.assertTrue(all(type(v) is str for v in got), name)
                else:
                    self.assertEqual(got.dtype, np.float64, name)
                    np.testing.assert_array_equal(got, values, err_msg=name)
            self.assertTrue(np.isnan(sw.points["ttft_p50_s"][4]))  # the failed point's metrics
            self.assertEqual(sw.search, {})
            self.assertEqual(sw.attrs["sweep"]["seeds"], "shared")
            self.assertEqual(sw.attrs["sweep"]["num_points"], 6.0)
            self.assertEqual(sw.attrs["sweep"]["num_failed"], 1.0)

    def test_select(self):
        sw = results.load_sweep(self.dir)
        fcfs = sw.select(**{"scheduler.policy": "fcfs"})  # the failed fcfs point is left out
        self.assertEqual(set(fcfs), set(self.columns))
        self.assertEqual(fcfs["id"].tolist(), [self.columns["id"][i] for i in (3, 5)])
        np.testing.assert_array_equal(fcfs["workload.rate"], [0.5, 2.0])
        np.testing.assert_array_equal(fcfs["e2e_p90_s"], [self.columns["e2e_p90_s"][i] for i in (3, 5)])
        one = sw.select(**{"scheduler.policy": "static", "workload.rate": 1.0})
        self.assertEqual(one["id"].tolist(), [self.columns["id"][1]])
        self.assertEqual(one["ttft_p90_s"].tolist(), [self.columns["ttft_p90_s"][1]])
        self.assertEqual(len(sw.select()["id"]), 5)
        self.assertEqual(sw.select(ok_only=False, **{"workload.rate": 1.0})["status"].tolist(), ["ok", "failed"])
        self.assertEqual(sw.select(**{"scheduler.policy": "sjf"})["id"].size, 0)
        with self.assertRaises(KeyError) as e:
            sw.select(**{"scheduler.max_num_seqs": 64})
        self.assertIn("scheduler.max_num_seqs", str(e.exception))
        self.assertEqual(sw.values("scheduler.policy"), ["fcfs", "static"])
        self.assertEqual(sw.values("workload.rate"), [0.5, 1.0, 2.0])

    def test_point(self):
        sw = results.load_sweep(self.dir)
        pid = self.columns["id"][2]
        r = sw.point(pid)
        self.assertEqual(r.path, os.path.join(os.path.abspath(self.dir), "points", pid, "results.h5"))
        self.assertEqual(r.get_config("trace.path"), "traces/samples/x.jsonl")
        self.assertEqual(r.requests["id"].size, 40)  # synthetic_run's requests
        self.assertEqual(r.steps, {})  # write_sweep(steps=False)

    def test_missing_sweep_names_it(self):
        missing = os.path.join(self.tmp.name, "nope")
        with self.assertRaises(FileNotFoundError) as e:
            results.load_sweep(missing)
        self.assertIn(os.path.join(missing, "sweep.h5"), str(e.exception))


if __name__ == "__main__":
    unittest.main()
