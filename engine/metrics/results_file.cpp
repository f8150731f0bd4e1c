#include "engine/metrics/results_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <type_traits>

#include "engine/common/config_error.h"
#include "engine/metrics/h5_c.h"
#include "engine/metrics/units.h"

namespace testbed {
namespace {

// A scalar attribute `name` of `at` holding `v` as a fixed-length string
// ("" stored as one space: HDF5 has no empty fixed-length strings).
void write_string_attr(hid_t at, const std::string& name, const std::string& v) {
  const std::string text = v.empty() ? std::string(" ") : v;
  const h5::H5Id type = h5::string_type(text.size(), H5T_STR_NULLTERM);
  const h5::H5Id space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  const h5::H5Id a(H5Acreate2(at, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, "H5Acreate");
  h5::check(H5Awrite(a, type, text.data()), "H5Awrite");
}

// Removes attribute `name` of `at` if it has one (set_attr overwrites).
void remove_attr(hid_t at, const std::string& name) {
  if (h5::check(H5Aexists(at, name.c_str()), "H5Aexists") > 0) h5::check(H5Adelete(at, name.c_str()), "H5Adelete");
}

// The "unit" attribute of a column (engine/metrics/units.h).
void set_unit(hid_t ds, const std::string& unit) { write_string_attr(ds, "unit", unit); }

}  // namespace

bool compressed_column(bool integral, size_t rows) {
  // Deflate saves a fifth to a quarter of a column of doubles (times, seconds)
  // at seven times the cost of writing it raw: on the Azure trace's single
  // instance that was 30 ms of a 0.45 s run, for 0.2 MB. Doubles are
  // compressed only where the file's size matters (a million rows and more);
  // integer columns (ids, counts) always: they shrink 7x and cost little.
  if (rows == 0) return false;
  return integral || rows >= kCompressedFloatRows;
}

namespace {

template <class T>
void write_dataset(hid_t file, const std::string& path, const std::vector<T>& v, hid_t type, const std::string& unit) {
  const hsize_t dims[1] = {v.size()};
  const h5::H5Id space(H5Screate_simple(1, dims, nullptr), H5Sclose, "H5Screate_simple");
  const h5::H5Id props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate");
  if (compressed_column(std::is_integral<T>::value, v.size())) {  // chunked + compressed: per-step tables of long simulations get large
    const hsize_t chunk[1] = {std::min<hsize_t>(v.size(), 65536)};
    h5::check(H5Pset_chunk(props, 1, chunk), "H5Pset_chunk");
    h5::check(H5Pset_shuffle(props), "H5Pset_shuffle");  // bytes grouped by significance: integers shrink 7x instead of 4.7x, and deflate runs faster
    h5::check(H5Pset_deflate(props, 1), "H5Pset_deflate");  // level 1: most of the saving, a fraction of level 4's time on million-row tables
  }
  const h5::H5Id ds(H5Dcreate2(file, path.c_str(), type, space, H5P_DEFAULT, props, H5P_DEFAULT), H5Dclose,
                    "H5Dcreate");
  if (!v.empty()) h5::check(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dwrite");
  set_unit(ds, unit);
}

}  // namespace

ResultsFile::ResultsFile(const std::string& path)
    : path_(path), tmp_path_(path + ".tmp"), pending_(std::make_unique<PendingFile>(tmp_path_)) {
  h5::quiet();
  const hid_t f = H5Fcreate(tmp_path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) throw ConfigError(path + ": cannot create results file (" + h5::error_text() + ")");
  file_ = std::make_unique<h5::H5Id>(f, H5Fclose, "H5Fcreate");
}

ResultsFile::~ResultsFile() {
  if (!committed_) {
    file_.reset();
    std::remove(tmp_path_.c_str());
  }
}

void ResultsFile::ensure_group(const std::string& group) {
  if (h5::exists(*file_, group)) return;
  // Columns and attributes keep the order they were written in (h5py lists them so).
  const hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  H5Pset_attr_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  const hid_t g = H5Gcreate2(*file_, group.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT);
  H5Pclose(gcpl);
  if (g < 0) throw ConfigError(path_ + ": cannot create group /" + group);
  H5Gclose(g);
}

void ResultsFile::add_column(const std::string& group, const std::string& name, const std::vector<double>& v) {
  add_column(group, name, column_unit(group, name), v);
}

void ResultsFile::add_column(const std::string& group, const std::string& name, const std::string& unit,
                             const std::vector<double>& v) {
  ensure_group(group);
  write_dataset(*file_, group + "/" + name, v, H5T_NATIVE_DOUBLE, unit);
}

void ResultsFile::add_column(const std::string& group, const std::string& name, const std::vector<int64_t>& v) {
  add_column(group, name, column_unit(group, name), v);
}

void ResultsFile::add_column(const std::string& group, const std::string& name, const std::string& unit,
                             const std::vector<int64_t>& v) {
  ensure_group(group);
  write_dataset(*file_, group + "/" + name, v, H5T_NATIVE_INT64, unit);
}

void ResultsFile::add_column(const std::string& group, const std::string& name, const std::vector<int32_t>& v) {
  add_column(group, name, column_unit(group, name), v);
}

void ResultsFile::add_column(const std::string& group, const std::string& name, const std::string& unit,
                             const std::vector<int32_t>& v) {
  ensure_group(group);
  write_dataset(*file_, group + "/" + name, v, H5T_NATIVE_INT32, unit);
}

void ResultsFile::add_column(const std::string& group, const std::string& name, const std::vector<std::string>& v) {
  add_column(group, name, column_unit(group, name), v);
}

void ResultsFile::add_column(const std::string& group, const std::string& name, const std::string& unit,
                             const std::vector<std::string>& v) {
  ensure_group(group);
  size_t width = 1;
  for (const std::string& x : v) width = std::max(width, x.size());
  std::string flat(width * v.size(), '\0');
  for (size_t i = 0; i < v.size(); ++i) flat.replace(i * width, v[i].size(), v[i]);
  const h5::H5Id type = h5::string_type(width, H5T_STR_NULLPAD);
  const hsize_t dims[1] = {v.size()};
  const h5::H5Id space(H5Screate_simple(1, dims, nullptr), H5Sclose, "H5Screate_simple");
  const std::string path = group + "/" + name;
  const h5::H5Id ds(H5Dcreate2(*file_, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
                    "H5Dcreate");
  if (!v.empty()) h5::check(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, flat.data()), "H5Dwrite");
  set_unit(ds, unit);
}

std::vector<std::vector<ResultsAttr>> read_results_attrs(const std::string& path,
                                                         const std::vector<std::string>& groups) {
  h5::quiet();
  std::vector<std::vector<ResultsAttr>> out;
  try {
    const h5::H5Id file = h5::open_file(path, H5F_ACC_RDONLY);
    for (const std::string& group : groups) {
      if (!h5::exists(file, group)) throw ConfigError(path + ": no group /" + group);
      const h5::H5Id g = h5::open_group(file, group);
      std::vector<ResultsAttr>& attrs = out.emplace_back();
      // In the order they were written (the testbed's groups track it: ensure_group), as h5py lists them.
      std::vector<std::string> names;
      h5::check(H5Aiterate2(
                    g, h5::attr_order(g), H5_ITER_INC, nullptr,
                    [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
                      static_cast<std::vector<std::string>*>(out)->emplace_back(name);
                      return 0;
                    },
                    &names),
                "H5Aiterate");
      for (const std::string& name : names) {
        const h5::H5Id a(H5Aopen(g, name.c_str(), H5P_DEFAULT), H5Aclose, "H5Aopen");
        ResultsAttr r;
        r.name = name;
        const h5::H5Id type(H5Aget_type(a), H5Tclose, "H5Aget_type");
        if (H5Tget_class(type) == H5T_STRING) {
          r.is_text = true;
          r.text = h5::read_string_attr(a);   // fixed-length strings' padding NULs dropped
          if (r.text == " ") r.text.clear();  // set_attr stores "" as one space (HDF5 has no empty fixed strings)
        } else {
          h5::check(H5Aread(a, H5T_NATIVE_DOUBLE, &r.number), "H5Aread");
        }
        attrs.push_back(std::move(r));
      }
    }
  } catch (const h5::Error& e) {
    throw ConfigError(path + ": cannot read results file (" + e.what() + ")");
  }
  return out;
}

std::vector<std::vector<double>> read_results_columns(const std::string& path, const std::string& group,
                                                      const std::vector<std::string>& names) {
  h5::quiet();
  std::vector<std::vector<double>> out;
  try {
    const h5::H5Id file = h5::open_file(path, H5F_ACC_RDONLY);
    if (!h5::exists(file, group)) throw ConfigError(path + ": no table /" + group);
    for (const std::string& name : names) {
      if (!h5::exists(file, group + "/" + name)) throw ConfigError(path + ": /" + group + " has no column " + name);
      const h5::H5Id ds = h5::open_dataset(file, group + "/" + name);
      const h5::H5Id type(H5Dget_type(ds), H5Tclose, "H5Dget_type");
      const H5T_class_t cls = H5Tget_class(type);
      if (cls != H5T_INTEGER && cls != H5T_FLOAT)
        throw ConfigError(path + ": /" + group + "/" + name + " is not numeric");
      const h5::H5Id space(H5Dget_space(ds), H5Sclose, "H5Dget_space");
      if (h5::check(H5Sget_simple_extent_ndims(space), "H5Sget_simple_extent_ndims") != 1)
        throw ConfigError(path + ": /" + group + "/" + name + " is not a column (1-D)");
      hsize_t dims[1] = {0};
      h5::check(H5Sget_simple_extent_dims(space, dims, nullptr), "H5Sget_simple_extent_dims");
      std::vector<double>& v = out.emplace_back(dims[0]);
      if (dims[0]) h5::check(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dread");
    }
  } catch (const h5::Error& e) {
    throw ConfigError(path + ": cannot read results file (" + e.what() + ")");
  }
  return out;
}

std::vector<ResultsAttr> read_results_attrs(const std::string& path, const std::string& group) {
  return read_results_attrs(path, std::vector<std::string>{group}).front();
}

void ResultsFile::set_attr(const std::string& group, const std::string& name, double v) {
  if (group == "summary") set_attr("summary_units", name, summary_unit(name));  // a summary value never lacks its unit
  ensure_group(group);
  const h5::H5Id g = h5::open_group(*file_, group);
  remove_attr(g, name);
  const h5::H5Id space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  const h5::H5Id a(H5Acreate2(g, name.c_str(), H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                   "H5Acreate");
  h5::check(H5Awrite(a, H5T_NATIVE_DOUBLE, &v), "H5Awrite");
}

void ResultsFile::set_attr(const std::string& group, const std::string& name, const std::string& v) {
  ensure_group(group);
  const h5::H5Id g = h5::open_group(*file_, group);
  remove_attr(g, name);
  write_string_attr(g, name, v);
}

namespace {

// One column of a table of records: field(x) for every row, as type T.
template <class T, class Row, class Field>
std::vector<T> column(const std::vector<Row>& rows, Field field) {
  std::vector<T> v;
  v.reserve(rows.size());
  for (const Row& x : rows) v.push_back(static_cast<T>(field(x)));
  return v;
}

// The same for the rows in the order `order` gives (indices into rows).
template <class T, class Row, class Field>
std::vector<T> column(const std::vector<Row>& rows, const std::vector<uint32_t>& order, Field field) {
  std::vector<T> v;
  v.reserve(order.size());
  for (uint32_t k : order) v.push_back(static_cast<T>(field(rows[k])));
  return v;
}

}  // namespace

void ResultsFile::write_requests(const std::vector<RequestRecord>& r) {
  // Rows by id: a permutation is sorted, not a copy of the records (4 bytes a
  // request, not 128: at 10M requests the copy was 1.4 GB at the run's peak).
  if (r.size() > std::numeric_limits<uint32_t>::max()) throw std::length_error("results: more than 2^32 requests");
  std::vector<uint32_t> order(r.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<uint32_t>(k);
  std::sort(order.begin(), order.end(), [&r](uint32_t a, uint32_t b) { return r[a].id < r[b].id || (r[a].id == r[b].id && a < b); });
  using R = RequestRecord;
  add_column("requests", "id", column<int64_t>(r, order, [](const R& x) { return x.id; }));
  add_column("requests", "instance", column<int32_t>(r, order, [](const R& x) { return x.instance; }));
  add_column("requests", "arrival_s", column<double>(r, order, [](const R& x) { return x.arrival_s; }));
  add_column("requests", "first_token_s", column<double>(r, order, [](const R& x) { return x.first_token_s; }));
  add_column("requests", "finish_s", column<double>(r, order, [](const R& x) { return x.finish_s; }));
  add_column("requests", "ttft_s", column<double>(r, order, [](const R& x) { return x.ttft_s(); }));
  add_column("requests", "tpot_s", column<double>(r, order, [](const R& x) { return x.tpot_s(); }));
  add_column("requests", "e2e_s", column<double>(r, order, [](const R& x) { return x.e2e_s(); }));
  add_column("requests", "prompt_tokens", column<int32_t>(r, order, [](const R& x) { return x.prompt_tokens; }));
  add_column("requests", "cached_tokens", column<int32_t>(r, order, [](const R& x) { return x.cached_tokens; }));
  add_column("requests", "output_tokens", column<int32_t>(r, order, [](const R& x) { return x.output_tokens; }));
  add_column("requests", "preemptions", column<int32_t>(r, order, [](const R& x) { return x.preemptions; }));
  // Runs with an ingress cache only.
  if (std::any_of(r.begin(), r.end(), [](const R& x) { return x.answered_by > 0; })) {
    add_column("requests", "answered_by", column<int32_t>(r, order, [](const R& x) { return x.answered_by; }));
    add_column("requests", "false_hit", column<int32_t>(r, order, [](const R& x) { return x.false_hit ? 1 : 0; }));
  }
  // Wall-clock runs with an ingress cache only (-1: a request it did not look up).
  if (std::any_of(r.begin(), r.end(), [](const R& x) { return x.ingress_s >= 0; }))
    add_column("requests", "ingress_s", column<double>(r, order, [](const R& x) { return x.ingress_s; }));
  // Model-routed runs only.
  if (std::any_of(r.begin(), r.end(), [](const R& x) { return x.routed_class >= 0; })) {
    add_column("requests", "request_class", column<int32_t>(r, order, [](const R& x) { return x.request_class; }));
    add_column("requests", "routed_class", column<int32_t>(r, order, [](const R& x) { return x.routed_class; }));
    add_column("requests", "quality_failure", column<int32_t>(r, order, [](const R& x) { return x.quality_failure ? 1 : 0; }));
  }
  // Runs with failures only.
  if (std::any_of(r.begin(), r.end(), [](const R& x) { return x.restarts > 0; }))
    add_column("requests", "restarts", column<int32_t>(r, order, [](const R& x) { return x.restarts; }));
  // Speculative runs only.
  if (std::any_of(r.begin(), r.end(), [](const R& x) { return x.spec_drafted > 0; })) {
    add_column("requests", "spec_drafted", column<int32_t>(r, order, [](const R& x) { return x.spec_drafted; }));
    add_column("requests", "spec_accepted", column<int32_t>(r, order, [](const R& x) { return x.spec_accepted; }));
    add_column("requests", "spec_steps", column<int32_t>(r, order, [](const R& x) { return x.spec_steps; }));
  }
  // Disaggregated runs only (a unified run's file is unchanged).
  if (std::none_of(r.begin(), r.end(), [](const R& x) { return x.prefill_instance >= 0; })) return;
  add_column("requests", "prefill_instance", column<int32_t>(r, order, [](const R& x) { return x.prefill_instance; }));
  add_column("requests", "handoff_wait_s", column<double>(r, order, [](const R& x) { return x.handoff_wait_s; }));
  add_column("requests", "transfer_s", column<double>(r, order, [](const R& x) { return x.transfer_s; }));
  add_column("requests", "transfer_bytes", column<int64_t>(r, order, [](const R& x) { return x.transfer_bytes; }));
  add_column("requests", "transfer_blocks", column<int32_t>(r, order, [](const R& x) { return x.transfer_blocks; }));
  add_column("requests", "reused_blocks", column<int32_t>(r, order, [](const R& x) { return x.reused_blocks; }));
}

void ResultsFile::write_itl(const LogHistogram& itl) {
  std::vector<double> value;
  std::vector<int64_t> count;
  itl.for_each_bin([&](double v, int64_t n) {
    value.push_back(v);
    count.push_back(n);
  });
  add_column("itl", "itl_s", value);
  add_column("itl", "count", count);
}

void ResultsFile::write_autoscale(const std::vector<ScaleSample>& s) {
  if (s.empty()) return;
  using S = ScaleSample;
  add_column("autoscale", "t", column<double>(s, [](const S& x) { return x.t; }));
  add_column("autoscale", "pool", column<int32_t>(s, [](const S& x) { return x.pool; }));
  add_column("autoscale", "active", column<int32_t>(s, [](const S& x) { return x.active; }));
  add_column("autoscale", "starting", column<int32_t>(s, [](const S& x) { return x.starting; }));
  add_column("autoscale", "draining", column<int32_t>(s, [](const S& x) { return x.draining; }));
  add_column("autoscale", "desired", column<int32_t>(s, [](const S& x) { return x.desired; }));
  add_column("autoscale", "signal", column<double>(s, [](const S& x) { return x.signal; }));
  add_column("autoscale", "queue_depth", column<double>(s, [](const S& x) { return x.queue_depth; }));
  add_column("autoscale", "active_seqs", column<double>(s, [](const S& x) { return x.active_seqs; }));
  add_column("autoscale", "kv_usage", column<double>(s, [](const S& x) { return x.kv_usage; }));
  add_column("autoscale", "gpu_util", column<double>(s, [](const S& x) { return x.gpu_util; }));
  add_column("autoscale", "cpu_util", column<double>(s, [](const S& x) { return x.cpu_util; }));
  add_column("autoscale", "request_rate", column<double>(s, [](const S& x) { return x.request_rate; }));
  add_column("autoscale", "ttft_p95_s", column<double>(s, [](const S& x) { return x.ttft_p95; }));
}

void ResultsFile::write_cancelled(const std::vector<CancelRecord>& unsorted) {
  if (unsorted.empty()) return;
  std::vector<CancelRecord> r = unsorted;
  std::sort(r.begin(), r.end(), [](const CancelRecord& a, const CancelRecord& b) { return a.id < b.id; });
  using C = CancelRecord;
  add_column("cancelled", "id", column<int64_t>(r, [](const C& x) { return x.id; }));
  add_column("cancelled", "instance", column<int32_t>(r, [](const C& x) { return x.instance; }));
  add_column("cancelled", "arrival_s", column<double>(r, [](const C& x) { return x.arrival_s; }));
  add_column("cancelled", "cancel_s", column<double>(r, [](const C& x) { return x.cancel_s; }));
  add_column("cancelled", "first_token_s", column<double>(r, [](const C& x) { return x.first_token_s; }));
  add_column("cancelled", "prompt_tokens", column<int32_t>(r, [](const C& x) { return x.prompt_tokens; }));
  add_column("cancelled", "output_tokens", column<int32_t>(r, [](const C& x) { return x.output_tokens; }));
  add_column("cancelled", "reason", column<int32_t>(r, [](const C& x) { return static_cast<int32_t>(x.reason); }));
}

void ResultsFile::write_events(const std::vector<RequestEvent>& e) {
  using E = RequestEvent;
  add_column("events", "t", column<double>(e, [](const E& x) { return x.t; }));
  std::vector<std::string> names;
  names.reserve(e.size());
  for (const E& x : e) names.emplace_back(request_event_name(x.kind));
  add_column("events", "event", names);
  add_column("events", "request", column<int64_t>(e, [](const E& x) { return x.request; }));
  add_column("events", "instance", column<int32_t>(e, [](const E& x) { return x.instance; }));
  add_column("events", "bytes", column<int64_t>(e, [](const E& x) { return x.bytes; }));
}

void ResultsFile::write_steps(const std::vector<StepRecord>& s) {
  using S = StepRecord;
  add_column("steps", "instance", column<int32_t>(s, [](const S& x) { return x.instance; }));
  add_column("steps", "start_s", column<double>(s, [](const S& x) { return x.start_s; }));
  add_column("steps", "duration_s", column<double>(s, [](const S& x) { return x.duration_s; }));
  add_column("steps", "num_seqs", column<int32_t>(s, [](const S& x) { return x.num_seqs; }));
  add_column("steps", "prefill_tokens", column<int32_t>(s, [](const S& x) { return x.prefill_tokens; }));
  add_column("steps", "decode_tokens", column<int32_t>(s, [](const S& x) { return x.decode_tokens; }));
  add_column("steps", "kv_blocks_used", column<int32_t>(s, [](const S& x) { return x.kv_blocks_used; }));
  add_column("steps", "kv_tokens", column<int64_t>(s, [](const S& x) { return x.kv_tokens; }));
  add_column("steps", "num_preempted", column<int32_t>(s, [](const S& x) { return x.num_preempted; }));
  add_column("steps", "num_waiting", column<int32_t>(s, [](const S& x) { return x.num_waiting; }));
  add_column("steps", "num_running", column<int32_t>(s, [](const S& x) { return x.num_running; }));
}

void ResultsFile::write_summary(const Summary& summary) {
  ensure_group("summary");
  for (const auto& [name, value] : summary.values()) set_attr("summary", name, value);
}

void ResultsFile::write_config(const std::vector<std::pair<std::string, std::string>>& config) {
  ensure_group("config");
  for (const auto& [key, value] : config) set_attr("config", key, value);
}

void ResultsFile::write_tokens(const std::vector<int64_t>& request_ids, const std::vector<std::vector<int32_t>>& tokens) {
  std::vector<size_t> order(request_ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return request_ids[a] < request_ids[b]; });
  std::vector<int64_t> ids, offsets{0};
  std::vector<int32_t> flat;
  for (size_t i : order) {
    ids.push_back(request_ids[i]);
    flat.insert(flat.end(), tokens[i].begin(), tokens[i].end());
    offsets.push_back(static_cast<int64_t>(flat.size()));
  }
  add_column("tokens", "request_id", ids);
  add_column("tokens", "offsets", offsets);
  add_column("tokens", "ids", flat);
}

void ResultsFile::commit() {
  file_->close("H5Fclose");  // the file's last writes: a failure is an error
  file_.reset();
  std::filesystem::rename(tmp_path_, path_);
  committed_ = true;
  pending_->done();
}

}  // namespace testbed
