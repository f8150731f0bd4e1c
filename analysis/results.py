"""The one reader of the HDF5 results file that `testbed run` writes.

Every script under analysis/ and papers/ reads results through this module, so it
is the only Python code that knows the layout (README.md, "Results file";
engine/metrics/results_file.h):

  - a table is a group of equal-length 1-D column datasets:
    /requests, /steps, /instances, /instance_samples, /tokens (ragged: request_id,
    offsets, ids), /profile;
  - scalars are attributes of a group: /summary (float metrics), /config (the
    resolved config, key -> string), /run (wall_s, simulated_s, executor, mode,
    config_path, ...), /sim_summary (fidelity runs);
  - units: every column's "unit" attribute, and /summary_units (key -> unit),
    both from engine/metrics/units.cpp (README, "Results file").

    import results
    r = results.load("results/quickstart")          # a run directory or its results.h5
    r.summary["ttft_p50_s"], r.config["router.type"], r.get_config("fleet.num_instances", int)
    r.requests["ttft_s"]                             # numpy array; r.table("steps") == {} if absent
    r.unit("requests", "ttft_s"), r.summary_units["ttft_p50_s"]   # "s", "s"
    runs = results.load_all("results/orca/b*/*/rate-*")   # {results.h5 path: Results}

It also reads the merged table of a sweep (`testbed sweep`, README "Sweeps"):

    sw = results.load_sweep("results/orca-load")     # DIR or DIR/sweep.h5
    sw.points["workload.rate"], sw.points["ttft_p90_s"], sw.points["status"]   # one row per point
    rows = sw.select(**{"scheduler.policy": "fcfs"})  # the rows where a column has a value
    sw.search                                        # {} unless the sweep searched
    sw.point("1a2b3c4d5e6f")                         # that point's own Results

Everything is read eagerly into numpy arrays / Python values and the file is
closed before load() returns. Attribute values become float (numbers) or str
(strings; HDF5 fixed-length strings arrive from h5py as bytes).
"""
import dataclasses
import glob
import os

import h5py
import numpy as np

FILE_NAME = "results.h5"
_MISSING = object()


@dataclasses.dataclass
class Results:
    """One run's results file, fully in memory."""

    path: str  # the results.h5 that was read
    attrs: dict  # group name -> {attribute -> float | str}, for every group in the file
    tables: dict  # group name -> {column -> numpy array}, for groups holding datasets
    units: dict = dataclasses.field(default_factory=dict)  # group name -> {column -> unit}

    @property
    def summary(self):
        return self.attrs.get("summary", {})

    @property
    def config(self):
        return self.attrs.get("config", {})

    @property
    def run(self):
        return self.attrs.get("run", {})

    @property
    def summary_units(self):
        """{summary key -> unit} (files written before units were recorded: {})."""
        return self.attrs.get("summary_units", {})

    def unit(self, table, column):
        """The unit of `column` of `table` ("" when the file does not say)."""
        return self.units.get(table, {}).get(column, "")

    def table(self, name):
        """{column -> numpy array} of table `name`; {} when the file has no such table."""
        return self.tables.get(name, {})

    @property
    def requests(self):
        return self.table("requests")

    @property
    def steps(self):
        return self.table("steps")

    @property
    def instances(self):
        return self.table("instances")

    @property
    def samples(self):
        return self.table("instance_samples")

    def get_config(self, key, type=str, default=_MISSING):
        """Config value `key` converted to `type` (str, int, float or bool: "true"/"false").
        Without a default, a missing key raises KeyError naming the key and the file."""
        if key not in self.config:
            if default is _MISSING:
                raise KeyError(f"{self.path}: no config key {key!r}")
            return default
        value = self.config[key]
        if type is bool:
            if value.lower() not in ("true", "false", "1", "0", "on", "off", "yes", "no"):
                raise ValueError(f"{self.path}: config {key} = {value!r} is not a boolean")
            return value.lower() in ("true", "1", "on", "yes")
        return type(value)


def results_path(path):
    """`path` itself if it is a file, else `path`/results.h5."""
    return path if os.path.isfile(path) else os.path.join(path, FILE_NAME)


def _column(ds):
    """A dataset as a numpy array; fixed-length strings (text columns) become str."""
    v = ds[()]
    if v.dtype.kind == "S":
        return np.array([x.decode() for x in v], dtype=object)
    return v


def _value(v):
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode()
    if isinstance(v, str):
        return v
    if np.ndim(v) == 0:
        return float(v)
    return np.asarray(v)


def load(path, missing_ok=False):
    """Reads a results file, given as its path or as the run directory holding results.h5.

    A missing file raises FileNotFoundError naming it (or returns None with
    missing_ok=True); a file HDF5 cannot read raises OSError naming it."""
    f5 = results_path(path)
    if not os.path.isfile(f5):
        if missing_ok:
            return None
        raise FileNotFoundError(f"{f5}: no such results file")
    try:
        f = h5py.File(f5, "r")
    except OSError as e:
        raise OSError(f"{f5}: cannot read results file: {e}") from e
    attrs, tables, units = {}, {}, {}
    with f:
        for name, group in f.items():
            if not isinstance(group, h5py.Group):
                continue
            attrs[name] = {k: _value(v) for k, v in group.attrs.items()}
            datasets = {k: ds for k, ds in group.items() if isinstance(ds, h5py.Dataset)}
            if datasets:
                tables[name] = {k: _column(ds) for k, ds in datasets.items()}
                units[name] = {k: _value(ds.attrs["unit"]).strip() for k, ds in datasets.items() if "unit" in ds.attrs}
    return Results(path=f5, attrs=attrs, tables=tables, units=units)


def find(pattern):
    """Sorted results-file paths matching the glob `pattern`: a matching directory gives
    its results.h5 (if it has one), a matching file gives itself if it ends in .h5."""
    paths = set()
    for p in glob.glob(pattern):
        if os.path.isdir(p) and os.path.isfile(os.path.join(p, FILE_NAME)):
            paths.add(os.path.join(p, FILE_NAME))
        elif os.path.isfile(p) and p.endswith(".h5"):
            paths.add(p)
    return sorted(paths)


def load_all(pattern):
    """{results.h5 path: Results} for every run matching the glob `pattern` (see find)."""
    return {p: load(p) for p in find(pattern)}


SWEEP_FILE_NAME = "sweep.h5"


@dataclasses.dataclass
class Sweep:
    """The merged table of a sweep (sweep.h5), fully in memory."""

    path: str  # the sweep.h5 that was read
    dir: str  # the sweep's output directory (holding points/)
    points: dict  # column -> numpy array: id, status, the swept keys, every /summary metric
    search: dict  # column -> numpy array (searches only): the grid keys, status, the found value, ...
    attrs: dict  # group name -> {attribute -> float | str}

    def __len__(self):
        return len(self.points.get("id", []))

    def select(self, ok_only=True, **where):
        """{column -> array} of the rows whose columns equal the given values (keyword names
        are column names: pass dotted keys as **{"workload.rate": 2}); only rows with
        status ok unless ok_only=False. An unknown column raises KeyError naming it."""
        mask = np.ones(len(self), dtype=bool)
        if ok_only:
            mask &= self.points["status"] == "ok"
        for key, value in where.items():
            if key not in self.points:
                raise KeyError(f"{self.path}: no column {key!r} (columns: {', '.join(self.points)})")
            mask &= self.points[key] == value
        return {k: v[mask] for k, v in self.points.items()}

    def values(self, key):
        """The distinct values of a column, sorted."""
        return sorted(set(self.points[key].tolist()))

    def point(self, point_id):
        """The Results of one point (DIR/points/<id>/results.h5)."""
        return load(os.path.join(self.dir, "points", point_id))


def load_sweep(path):
    """Reads a sweep's merged table, given as DIR or DIR/sweep.h5; a missing file raises
    FileNotFoundError naming it."""
    f5 = path if os.path.isfile(path) else os.path.join(path, SWEEP_FILE_NAME)
    if not os.path.isfile(f5):
        raise FileNotFoundError(f"{f5}: no sweep table (run `testbed sweep` first)")
    r = load(f5)
    return Sweep(path=f5, dir=os.path.dirname(os.path.abspath(f5)), points=r.table("points"),
                 search=r.table("search"), attrs=r.attrs)
