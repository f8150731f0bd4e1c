#include "experiments/sweep/sweep_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/common/rng.h"

namespace testbed {
namespace {

namespace fs = std::filesystem;

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

// Splits on commas outside double quotes; strips the quotes.
std::vector<std::string> split_list(const std::string& text, const std::string& origin) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, was_quoted = false;
  for (char c : text) {
    if (c == '"') {
      quoted = !quoted;
      was_quoted = true;
    } else if (c == ',' && !quoted) {
      out.push_back(was_quoted ? cur : trim(cur));
      cur.clear();
      was_quoted = false;
    } else {
      cur += c;
    }
  }
  if (quoted) throw ConfigError(origin + ": unbalanced double quote in '" + text + "'");
  out.push_back(was_quoted ? cur : trim(cur));
  return out;
}

bool is_integer_text(const std::string& s) {
  int64_t v = 0;
  return parse_value(s, v);
}

double number(const std::string& text, const std::string& what, const std::string& origin) {
  double v = 0;
  if (!parse_value(trim(text), v)) throw ConfigError(origin + ": " + what + " '" + trim(text) + "' is not a number");
  return v;
}

// `v` rounded to 12 significant digits, so 0.1 + 2 x 0.1 prints as 0.3.
std::string format_step_value(double v, bool integer) {
  char buf[64];
  if (integer) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.12g", v);
  double rounded = 0;
  parse_value(buf, rounded);
  return format_value(rounded);
}

std::vector<std::string> expand_function(const std::string& name, const std::string& args, const std::string& origin) {
  const std::vector<std::string> a = split_list(args, origin);
  if (a.size() != 3)
    throw ConfigError(origin + ": " + name + "(START, STOP, " + (name == "range" ? "STEP" : "FACTOR") +
                      ") takes 3 numbers, got " + std::to_string(a.size()));
  const double start = number(a[0], "START", origin), stop = number(a[1], "STOP", origin);
  const double by = number(a[2], name == "range" ? "STEP" : "FACTOR", origin);
  const bool integer = is_integer_text(trim(a[0])) && is_integer_text(trim(a[2]));
  if (stop < start) throw ConfigError(origin + ": " + name + ": STOP is below START");
  std::vector<std::string> out;
  constexpr size_t kMaxValues = 100000;
  if (name == "range") {
    if (!(by > 0)) throw ConfigError(origin + ": range: STEP must be > 0");
    const double n = std::floor((stop - start) / by + 1e-9);
    if (n + 1 > kMaxValues) throw ConfigError(origin + ": range gives more than 100000 values");
    for (int64_t i = 0; i <= static_cast<int64_t>(n); ++i) out.push_back(format_step_value(start + i * by, integer));
  } else {
    if (!(by > 1)) throw ConfigError(origin + ": geometric: FACTOR must be > 1");
    if (!(start > 0)) throw ConfigError(origin + ": geometric: START must be > 0");
    for (double v = start; v <= stop * (1 + 1e-9); v *= by) {
      out.push_back(format_step_value(v, integer));
      if (out.size() > kMaxValues) throw ConfigError(origin + ": geometric gives more than 100000 values");
    }
  }
  return out;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

const std::set<std::string> kSweepWords = {"base", "zip", "seeds"};

}  // namespace

void SearchParams::bind(OptionTable& t) {
  t.add("search.key", &key, "the config key searched (e.g. workload.rate)");
  t.add("search.low", &low, "low end of the bracket (the condition should hold there)");
  t.add("search.high", &high, "high end of the bracket (the condition should fail there)");
  t.add("search.metric", &metric, "/summary metrics of the run, comma-separated (e.g. slo_attainment)");
  t.add("search.target", &target, "the values the metrics are compared with, comma-separated");
  t.add("search.direction", &direction,
        "at_least (metric >= target holds) | at_most (metric <= target); one, or one per metric");
  t.add("search.tolerance", &tolerance, "stop when high - low is this narrow (0: (high - low) / 32)");
  t.add("search.integer", &integer, "probe whole numbers only (for integer keys)");
}

std::vector<SearchCondition> SearchParams::conditions() const {
  const std::vector<std::string> metrics = split_list(metric, "search.metric");
  const std::vector<std::string> targets = split_list(target, "search.target");
  const std::vector<std::string> directions = split_list(direction, "search.direction");
  require(!metrics.empty() && !metrics.front().empty(), "search.metric", "must name a /summary metric");
  require(!target.empty(), "search.target", "must be given (a number per metric)");
  require(targets.size() == metrics.size(), "search.target",
          std::to_string(targets.size()) + " target(s) for " + std::to_string(metrics.size()) + " metric(s)");
  require(directions.size() == 1 || directions.size() == metrics.size(), "search.direction",
          "give one direction, or one per metric (" + std::to_string(metrics.size()) + ")");
  std::vector<SearchCondition> out;
  for (size_t i = 0; i < metrics.size(); ++i) {
    SearchCondition c;
    c.metric = metrics[i];
    require(!c.metric.empty(), "search.metric", "empty metric name in '" + metric + "'");
    require(parse_value(targets[i], c.target), "search.target", "'" + targets[i] + "' is not a number");
    const std::string& d = directions.size() == 1 ? directions[0] : directions[i];
    require(d == "at_least" || d == "at_most", "search.direction", "must be at_least or at_most, got '" + d + "'");
    c.at_least = d == "at_least";
    out.push_back(c);
  }
  return out;
}

void SearchParams::validate() const {
  require(!key.empty(), "search.key", "must name the config key to search");
  require(key.find('.') != std::string::npos, "search.key", "'" + key + "' is not a config key (section.key)");
  require(high > low, "search.high", "must be above search.low");
  conditions();
  require(tolerance >= 0, "search.tolerance", "must be >= 0");
  require(!integer || (low == std::floor(low) && high == std::floor(high)), "search.low",
          "search.integer needs whole-number low and high");
}

bool SearchCondition::holds(double v) const {
  if (std::isnan(v)) return false;
  return at_least ? v >= target : v <= target;
}

std::string SearchCondition::describe() const {
  return metric + (at_least ? " >= " : " <= ") + format_value(target);
}

std::vector<std::string> expand_values(const std::string& text, const std::string& origin) {
  const std::string t = trim(text);
  for (const char* fn : {"range", "geometric"}) {
    const std::string name = fn;
    if (t.rfind(name + "(", 0) == 0) {
      if (t.back() != ')') throw ConfigError(origin + ": " + name + "(...) is missing its closing parenthesis");
      return expand_function(name, t.substr(name.size() + 1, t.size() - name.size() - 2), origin);
    }
  }
  std::vector<std::string> values = split_list(t, origin);
  for (const std::string& v : values)
    if (v.empty()) throw ConfigError(origin + ": empty value in the list '" + t + "'");
  return values;
}

SweepFile read_sweep_file(const std::string& path) {
  if (!fs::is_regular_file(path)) throw ConfigError(path + ": cannot open sweep file");
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open sweep file");
  SweepFile sweep;
  sweep.path = path;
  std::string section, line, base_origin;
  std::set<std::string> keys_seen;
  std::vector<std::pair<std::vector<std::string>, std::string>> zip_lines;
  bool sweep_section_seen = false;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    const std::string origin = path + ":" + std::to_string(lineno);
    // Comments: a line starting with # or ;, or " #" to the end of a line.
    const size_t hash = line.find(" #");
    std::string text = trim(hash == std::string::npos ? line : line.substr(0, hash));
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text[0] == '[') {
      if (text.back() != ']') throw ConfigError(origin + ": malformed section header '" + text + "'");
      section = trim(text.substr(1, text.size() - 2));
      if (section.empty()) throw ConfigError(origin + ": empty section name");
      if (section == "sweep") sweep_section_seen = true;
      if (section == "search") sweep.has_search = true;
      continue;
    }
    const size_t eq = text.find('=');
    if (eq == std::string::npos) throw ConfigError(origin + ": expected 'key = value', got '" + text + "'");
    const std::string key = trim(text.substr(0, eq)), value = trim(text.substr(eq + 1));
    if (key.empty()) throw ConfigError(origin + ": missing key before '='");
    if (section.empty()) throw ConfigError(origin + ": '" + key + "' comes before any [section]");
    if (section != "sweep") {
      const std::string full = section + "." + key;
      if (!keys_seen.insert(full).second) throw ConfigError(origin + ": " + full + " is set twice");
      SweepEntry e{full, value, origin};
      (section == "search" ? sweep.search_entries : sweep.backend_entries).push_back(e);
      continue;
    }
    if (key == "base") {
      if (!sweep.base.empty()) throw ConfigError(origin + ": base is set twice");
      if (value.empty()) throw ConfigError(origin + ": base: no path given");
      fs::path p(value);
      if (p.is_relative()) p = fs::path(path).parent_path() / p;
      sweep.base = p.lexically_normal().string();
      base_origin = origin;
    } else if (key == "seeds") {
      if (value != "derived" && value != "shared")
        throw ConfigError(origin + ": seeds must be 'derived' (from the base seed and the point's values) or 'shared' "
                                   "(every point runs the base config's seeds), got '" + value + "'");
      sweep.seeds = value;
    } else if (key == "zip") {
      std::vector<std::string> group = split_list(value, origin);
      if (group.size() < 2) throw ConfigError(origin + ": zip needs two or more swept keys");
      zip_lines.emplace_back(group, origin);
    } else if (key.find('.') == std::string::npos) {
      throw ConfigError(origin + ": '" + key + "' is neither a sweep setting (base, zip, seeds) nor a config key "
                                  "(section.key)");
    } else {
      if (!keys_seen.insert(key).second) throw ConfigError(origin + ": " + key + " is swept twice");
      sweep.axes.push_back({key, expand_values(value, origin), origin});
    }
  }
  if (!sweep_section_seen) throw ConfigError(path + ": no [sweep] section");
  if (sweep.base.empty()) throw ConfigError(path + ": [sweep] base = CONFIG.ini is missing");
  if (!fs::is_regular_file(sweep.base)) throw ConfigError(base_origin + ": base config not found: " + sweep.base);
  std::set<std::string> zipped;
  for (const auto& [group, origin] : zip_lines) {
    size_t len = 0;
    for (const std::string& k : group) {
      const auto it = std::find_if(sweep.axes.begin(), sweep.axes.end(), [&](const SweepAxis& a) { return a.key == k; });
      if (it == sweep.axes.end()) throw ConfigError(origin + ": zip: " + k + " is not a swept key of this file");
      if (!zipped.insert(k).second) throw ConfigError(origin + ": zip: " + k + " is in two zip groups");
      if (len != 0 && it->values.size() != len)
        throw ConfigError(origin + ": zip: " + k + " has " + std::to_string(it->values.size()) + " values, " +
                          group.front() + " has " + std::to_string(len));
      len = it->values.size();
    }
    sweep.zips.push_back(group);
  }
  // The same point twice: a value listed twice, or (zipped) the same tuple twice.
  for (const SweepAxis& a : sweep.axes) {
    if (zipped.count(a.key)) continue;
    std::set<std::string> seen;
    for (const std::string& v : a.values)
      if (!seen.insert(v).second) throw ConfigError(a.origin + ": value '" + v + "' is listed twice");
  }
  for (size_t z = 0; z < sweep.zips.size(); ++z) {
    std::set<std::vector<std::string>> seen;
    const auto& group = sweep.zips[z];
    const SweepAxis* first = nullptr;
    for (const SweepAxis& a : sweep.axes)
      if (a.key == group.front()) first = &a;
    for (size_t i = 0; i < first->values.size(); ++i) {
      std::vector<std::string> tuple;
      for (const std::string& k : group)
        for (const SweepAxis& a : sweep.axes)
          if (a.key == k) tuple.push_back(a.values[i]);
      if (!seen.insert(tuple).second)
        throw ConfigError(zip_lines[z].second + ": zip: entry " + std::to_string(i + 1) + " repeats an earlier one");
    }
  }
  return sweep;
}

std::vector<PointValues> expand_grid(const SweepFile& sweep) {
  // Each dimension of the product: one axis, or a zip group (entered at its first key).
  std::vector<std::vector<const SweepAxis*>> dims;
  std::set<std::string> placed;
  for (const SweepAxis& a : sweep.axes) {
    if (placed.count(a.key)) continue;
    std::vector<const SweepAxis*> dim{&a};
    for (const auto& group : sweep.zips)
      if (std::find(group.begin(), group.end(), a.key) != group.end()) {
        dim.clear();
        for (const std::string& k : group)
          for (const SweepAxis& b : sweep.axes)
            if (b.key == k) dim.push_back(&b);
      }
    for (const SweepAxis* d : dim) placed.insert(d->key);
    dims.push_back(dim);
  }
  std::vector<PointValues> points{{}};
  for (const auto& dim : dims) {
    std::vector<PointValues> next;
    for (const PointValues& p : points)
      for (size_t i = 0; i < dim.front()->values.size(); ++i) {
        PointValues q = p;
        for (const SweepAxis* a : dim) q.emplace_back(a->key, a->values[i]);
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  // Values in the file's axis order, whatever the dimension order.
  for (PointValues& p : points) {
    PointValues ordered;
    for (const SweepAxis& a : sweep.axes)
      for (const auto& kv : p)
        if (kv.first == a.key) ordered.push_back(kv);
    p = std::move(ordered);
  }
  return points;
}

std::string canonical_values(const PointValues& values) {
  std::map<std::string, std::string> sorted(values.begin(), values.end());
  std::string out;
  for (const auto& [k, v] : sorted) out += k + "=" + v + "\n";
  return out;
}

std::string point_id(const PointValues& values) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%012llx",
                static_cast<unsigned long long>(fnv1a(canonical_values(values)) & 0xffffffffffffULL));
  return buf;
}

uint64_t derive_seed(uint64_t base_seed, const std::string& seed_key, const PointValues& values) {
  return mix_seed(base_seed, fnv1a(seed_key + "\n" + canonical_values(values))) & 0x7fffffffULL;
}

std::string describe(const PointValues& values) {
  std::string out;
  for (const auto& [k, v] : values) out += (out.empty() ? "" : ", ") + k + "=" + v;
  return out.empty() ? "(the base config)" : out;
}

}  // namespace testbed
