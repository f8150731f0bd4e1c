#include "experiments/sweep/sweep_table.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "engine/common/option_table.h"
#include "engine/common/pending_files.h"
#include "engine/metrics/results_file.h"
#include "engine/metrics/units.h"

namespace testbed {
namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string value_of(const PointValues& values, const std::string& key) {
  for (const auto& [k, v] : values)
    if (k == key) return v;
  return "";
}

bool all_numbers(const std::vector<std::string>& v) {
  for (const std::string& s : v) {
    double x = 0;
    if (!parse_value(s, x)) return false;
  }
  return true;
}

std::vector<double> numbers(const std::vector<std::string>& v) {
  std::vector<double> out;
  for (const std::string& s : v) {
    double x = kNaN;
    parse_value(s, x);
    out.push_back(x);
  }
  return out;
}

// A CSV field: quoted when it holds a comma, a quote or a newline.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_number(double v) { return std::isnan(v) ? "" : format_value(v); }

// A table of named columns, each text or numbers with its unit, written to HDF5 and CSV alike.
struct Table {
  std::vector<std::string> names, units;
  std::vector<std::vector<std::string>> text;  // per column; empty when numeric
  std::vector<std::vector<double>> num;
  void add_text(const std::string& name, const std::string& unit, std::vector<std::string> v) {
    names.push_back(name);
    units.push_back(unit);
    text.push_back(std::move(v));
    num.emplace_back();
  }
  void add_numbers(const std::string& name, const std::string& unit, std::vector<double> v) {
    names.push_back(name);
    units.push_back(unit);
    text.emplace_back();
    num.push_back(std::move(v));
  }
  // A config key's values ("config": in the key's own unit, testbed run --help):
  // numeric when every value is a number, else text.
  void add_config_values(const std::string& name, std::vector<std::string> v) {
    if (all_numbers(v))
      add_numbers(name, "config", numbers(v));
    else
      add_text(name, "config", std::move(v));
  }
  size_t rows() const { return names.empty() ? 0 : (num[0].empty() ? text[0].size() : num[0].size()); }
  void write_h5(ResultsFile& f, const std::string& group) const {
    for (size_t c = 0; c < names.size(); ++c) {
      if (num[c].empty() && !text[c].empty())
        f.add_column(group, names[c], units[c], text[c]);
      else
        f.add_column(group, names[c], units[c], num[c]);
    }
  }
  void write_csv(const fs::path& path) const {
    const fs::path tmp = path.string() + ".tmp";
    PendingFile pending(tmp.string());
    {
      std::ofstream out(tmp);
      for (size_t c = 0; c < names.size(); ++c) out << (c ? "," : "") << csv_field(names[c]);
      out << "\n";
      for (size_t r = 0; r < rows(); ++r) {
        for (size_t c = 0; c < names.size(); ++c)
          out << (c ? "," : "") << (num[c].empty() ? csv_field(text[c][r]) : csv_number(num[c][r]));
        out << "\n";
      }
      if (!out) throw std::runtime_error(path.string() + ": cannot write");
    }
    fs::rename(tmp, path);
    pending.done();
  }
};

}  // namespace

void write_sweep_table(const std::string& dir, const SweepTableInfo& info, const std::vector<PointRow>& rows,
                       const std::vector<SearchRow>& search) {
  // Every ok point's summary; metric columns in order of first appearance.
  std::vector<std::string> metric_names;
  std::map<std::string, size_t> metric_index;
  std::vector<std::map<std::string, double>> summaries(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].ok) continue;
    for (const ResultsAttr& a : rows[i].summary) {
      if (a.is_text) continue;
      if (!metric_index.count(a.name)) {
        metric_index[a.name] = metric_names.size();
        metric_names.push_back(a.name);
      }
      summaries[i][a.name] = a.number;
    }
  }
  Table points;
  std::vector<std::string> ids, status;
  for (const PointRow& r : rows) {
    ids.push_back(r.point->id);
    status.push_back(r.ok ? "ok" : "failed");
  }
  points.add_text("id", "id", ids);
  points.add_text("status", "text", status);
  for (const std::string& key : info.columns) {
    std::vector<std::string> v;
    for (const PointRow& r : rows) v.push_back(value_of(r.point->values, key));
    points.add_config_values(key, v);
  }
  for (const std::string& m : metric_names) {
    std::vector<double> v;
    for (const auto& s : summaries) {
      const auto it = s.find(m);
      v.push_back(it == s.end() ? kNaN : it->second);
    }
    // A point run by another version may carry a key this one does not document.
    points.add_numbers(m, is_documented_summary_key(m) ? summary_unit(m) : "unknown", v);
  }

  Table found;
  if (!info.search_key.empty()) {
    std::vector<std::string> sid, sstatus;
    std::vector<double> best, first_fail, probes;
    for (const SearchRow& s : search) {
      sid.push_back(s.id);
      sstatus.push_back(s.status);
      best.push_back(s.highest_holding);
      first_fail.push_back(s.first_failing);
      probes.push_back(s.num_probes);
    }
    found.add_text("id", "id", sid);
    for (const std::string& key : info.columns) {
      if (key == info.search_key) continue;
      std::vector<std::string> v;
      for (const SearchRow& s : search) v.push_back(value_of(s.values, key));
      found.add_config_values(key, v);
    }
    found.add_text("status", "text", sstatus);
    found.add_numbers(info.search_key, "config", best);       // the highest value that held
    found.add_numbers("first_failing", "config", first_fail);  // the lowest probed that did not
    found.add_numbers("num_probes", "count", probes);
  }

  int num_failed = 0;
  for (const PointRow& r : rows) num_failed += r.ok ? 0 : 1;
  ResultsFile f((fs::path(dir) / "sweep.h5").string());
  points.write_h5(f, "points");
  if (!info.search_key.empty()) {
    found.write_h5(f, "search");
    f.set_attr("search", "key", info.search_key);
    for (const auto& [k, v] : info.search_attrs) f.set_attr("search", k, v);
  }
  f.set_attr("sweep", "sweep_file", info.sweep_file);
  f.set_attr("sweep", "base", info.base);
  f.set_attr("sweep", "backend", info.backend);
  f.set_attr("sweep", "seeds", info.seeds);
  f.set_attr("sweep", "overrides", info.overrides);
  f.set_attr("sweep", "num_points", static_cast<double>(rows.size()));
  f.set_attr("sweep", "num_failed", static_cast<double>(num_failed));
  f.commit();
  points.write_csv(fs::path(dir) / "sweep.csv");
  if (!info.search_key.empty()) found.write_csv(fs::path(dir) / "search.csv");
}

}  // namespace testbed
