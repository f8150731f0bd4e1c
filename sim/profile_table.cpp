#include "sim/profile_table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/common/config_error.h"
#include "engine/metrics/h5_c.h"
#include "engine/metrics/results_file.h"

namespace testbed {

namespace {

// Position of x on an ascending axis: the cell's lower index and the fraction
// into it (outside the axis: the first or last cell, fraction < 0 or > 1).
void locate(const std::vector<double>& axis, double x, size_t& lo, double& frac) {
  if (axis.size() == 1) {
    lo = 0;
    frac = 0.0;
    return;
  }
  size_t hi = static_cast<size_t>(std::upper_bound(axis.begin(), axis.end(), x) - axis.begin());
  hi = std::clamp<size_t>(hi, 1, axis.size() - 1);
  lo = hi - 1;
  frac = (x - axis[lo]) / (axis[hi] - axis[lo]);
}

}  // namespace

double ProfileTable::predict(const StepShape& shape) const {
  double prefill = 0, decodes = 0, cached = 0;
  for (const SeqShape& s : shape) {
    cached += s.num_computed;
    if (s.is_decode)
      decodes += 1;
    else
      prefill += s.num_new;
  }
  return interpolate(prefill, decodes, shape.empty() ? 0.0 : cached / static_cast<double>(shape.size()));
}

double ProfileTable::interpolate(double prefill, double decodes, double mean_context) const {
  size_t p, d, c;
  double fp, fd, fc;
  locate(prefill_tokens, prefill, p, fp);
  locate(decode_seqs, decodes, d, fd);
  locate(context, mean_context, c, fc);
  const size_t np = prefill_tokens.size() > 1, nd = decode_seqs.size() > 1, nc = context.size() > 1;
  double value = 0.0;
  for (size_t i = 0; i <= np; ++i)
    for (size_t j = 0; j <= nd; ++j)
      for (size_t k = 0; k <= nc; ++k) {
        const double w = (i ? fp : 1 - fp) * (j ? fd : 1 - fd) * (k ? fc : 1 - fc);
        value += w * step_s[index(p + i, d + j, c + k)];
      }
  return std::max(value, *std::min_element(step_s.begin(), step_s.end()));
}

void ProfileTable::validate(const std::string& origin) const {
  auto check_axis = [&](const std::vector<double>& a, const char* name) {
    if (a.empty()) throw ConfigError(origin + ": profile axis '" + name + "' is empty");
    for (double v : a)
      if (!std::isfinite(v) || v < 0)
        throw ConfigError(origin + ": profile/" + name + " holds " + std::to_string(v) + " (axes must be finite and >= 0)");
    for (size_t i = 1; i < a.size(); ++i)
      if (!(a[i] > a[i - 1])) throw ConfigError(origin + ": profile axis '" + name + "' is not strictly ascending");
  };
  check_axis(prefill_tokens, "prefill_tokens");
  check_axis(decode_seqs, "decode_seqs");
  check_axis(context, "context");
  if (step_s.size() != prefill_tokens.size() * decode_seqs.size() * context.size())
    throw ConfigError(origin + ": profile step_s has " + std::to_string(step_s.size()) + " values, the axes need " +
                      std::to_string(prefill_tokens.size() * decode_seqs.size() * context.size()));
  for (size_t i = 0; i < step_s.size(); ++i)
    if (!(std::isfinite(step_s[i]) && step_s[i] > 0))
      throw ConfigError(origin + ": profile/step_s holds " + std::to_string(step_s[i]) + " at index " +
                        std::to_string(i) + " (durations must be finite and positive)");
}

void ProfileTable::save(const std::string& path) const {
  validate(path);
  ResultsFile file(path);
  file.add_column("profile", "prefill_tokens", prefill_tokens);
  file.add_column("profile", "decode_seqs", decode_seqs);
  file.add_column("profile", "context", context);
  file.add_column("profile", "step_s", step_s);
  file.set_attr("profile", "executor", executor);
  file.set_attr("profile", "model", model);
  file.commit();
}

ProfileTable ProfileTable::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw ConfigError("cost_model.profile: file not found: " + path);
  if (!std::filesystem::is_regular_file(path, ec)) throw ConfigError(path + ": not a profile table (not a regular file)");
  ProfileTable t;
  // Every H5 call stays inside this try: a file HDF5 cannot read is a ConfigError naming it.
  h5::quiet();
  try {
    const h5::H5Id f = h5::open_file(path, H5F_ACC_RDONLY);
    if (!h5::exists(f, "profile")) throw h5::Error("no group /profile");
    const h5::H5Id g = h5::open_group(f, "profile");
    // Every profile dataset is a 1-D column of at most `max_size` numbers: the
    // rank and the extent are checked before anything is allocated or read, so a
    // 2-D, 3-D or scalar dataset, or a huge one, is an error, not an overflow.
    auto read = [&](const char* name, hsize_t max_size) {
      if (!h5::exists(g, name)) throw h5::Error(std::string("no dataset profile/") + name);
      const h5::H5Id ds = h5::open_dataset(g, name);
      const h5::H5Id space(H5Dget_space(ds), H5Sclose, "H5Dget_space");
      const int rank = h5::check(H5Sget_simple_extent_ndims(space), "H5Sget_simple_extent_ndims");
      if (H5Sget_simple_extent_type(space) != H5S_SIMPLE || rank != 1)
        throw ConfigError(path + ": profile/" + name + " must be a 1-D dataset (it has rank " + std::to_string(rank) +
                          ")");
      const h5::H5Id type(H5Dget_type(ds), H5Tclose, "H5Dget_type");
      const H5T_class_t cls = H5Tget_class(type);
      if (cls != H5T_FLOAT && cls != H5T_INTEGER) throw ConfigError(path + ": profile/" + name + " must hold numbers");
      hsize_t dims[1] = {0};
      h5::check(H5Sget_simple_extent_dims(space, dims, nullptr), "H5Sget_simple_extent_dims");
      if (dims[0] > max_size)
        throw ConfigError(path + ": profile/" + name + " has " + std::to_string(dims[0]) + " values, more than " +
                          std::to_string(max_size));
      std::vector<double> v(static_cast<size_t>(dims[0]));
      if (!v.empty()) h5::check(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dread");
      return v;
    };
    // Measured grids are thousands of points; these bounds keep a tiny file that
    // declares a huge (unallocated, fill-value) dataset from allocating gigabytes.
    constexpr hsize_t kMaxAxis = hsize_t{1} << 16, kMaxValues = hsize_t{1} << 24;
    t.prefill_tokens = read("prefill_tokens", kMaxAxis);
    t.decode_seqs = read("decode_seqs", kMaxAxis);
    t.context = read("context", kMaxAxis);
    const hsize_t cells = hsize_t{t.prefill_tokens.size()} * t.decode_seqs.size() * t.context.size();
    t.step_s = read("step_s", std::min(cells, kMaxValues));
    // Where it was measured (string attributes; absent in hand-made tables).
    for (auto [name, out] : {std::pair<const char*, std::string*>{"executor", &t.executor}, {"model", &t.model}}) {
      if (h5::check(H5Aexists(g, name), "H5Aexists") <= 0) continue;
      const h5::H5Id a(H5Aopen(g, name, H5P_DEFAULT), H5Aclose, "H5Aopen");
      if (!h5::is_one_string(a)) throw ConfigError(path + ": profile attribute " + name + " must be one string");
      *out = h5::read_string_attr(a);  // fixed-length or variable-length
    }
  } catch (const h5::Error& e) {
    throw ConfigError(path + ": not a profile table (" + e.what() + ")");
  }
  t.validate(path);
  return t;
}

}  // namespace testbed
