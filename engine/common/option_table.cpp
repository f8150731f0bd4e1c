#include "engine/common/option_table.h"

#include <boost/program_options/parsers.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "engine/common/config_error.h"

namespace po = boost::program_options;

namespace testbed {

std::string format_value(double v) {
  char buf[64];
  for (int precision = 15; precision <= 17; ++precision) {  // shortest form that reads back exactly
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}
std::string format_value(float v) { return format_value(static_cast<double>(v)); }
std::string format_value(bool v) { return v ? "true" : "false"; }
std::string format_value(const std::string& v) { return v; }
std::string format_value(int v) { return std::to_string(v); }
std::string format_value(int64_t v) { return std::to_string(v); }
std::string format_value(uint64_t v) { return std::to_string(v); }

namespace {

bool parse_integer(const std::string& text, long long lo, long long hi, long long& out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end == text.c_str() || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

}  // namespace

bool parse_value(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) return false;
  out = v;
  return true;
}

bool parse_value(const std::string& text, float& out) {
  double v;
  if (!parse_value(text, v) || std::abs(v) > std::numeric_limits<float>::max()) return false;
  out = static_cast<float>(v);
  return true;
}

bool parse_value(const std::string& text, bool& out) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return out = true, true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return out = false, true;
  return false;
}

bool parse_value(const std::string& text, std::string& out) {
  out = text;
  return true;
}

bool parse_value(const std::string& text, int& out) {
  long long v;
  if (!parse_integer(text, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), v)) return false;
  out = static_cast<int>(v);
  return true;
}

bool parse_value(const std::string& text, int64_t& out) {
  long long v;
  if (!parse_integer(text, std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max(), v))
    return false;
  out = v;
  return true;
}

bool parse_value(const std::string& text, uint64_t& out) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0') return false;
  out = v;
  return true;
}

void OptionTable::add_path(const std::string& key, std::string* target, const std::string& help) {
  add_entry(key, make_binding(target), help, Kind::Path);
}

void OptionTable::push_prefix(const std::string& prefix) {
  if (prefix.empty() || prefix.back() != '.') throw std::logic_error("OptionTable: a prefix ends with '.'");
  prefixes_.push_back((prefixes_.empty() ? std::string() : prefixes_.back()) + prefix);
}

void OptionTable::pop_prefix() {
  if (prefixes_.empty()) throw std::logic_error("OptionTable: pop_prefix without push_prefix");
  prefixes_.pop_back();
}

void OptionTable::inherit(const std::string& prefix) {
  inherited_prefixes_.push_back(prefix);
  for (Entry& e : entries_) {
    if (e.set || e.kind == Kind::Flag || e.key.compare(0, prefix.size(), prefix) != 0) continue;
    auto it = index_.find(e.key.substr(prefix.size()));
    if (it == index_.end()) continue;
    const std::string v = entries_[it->second].bindings.front().get();
    for (Binding& b : e.bindings)
      if (!b.assign(v)) throw std::logic_error("OptionTable: cannot inherit '" + e.key + "'");
  }
}

void OptionTable::push_condition(const std::string& key, const std::string& value) {
  conditions_.emplace_back(prefixes_.empty() ? key : prefixes_.back() + key, value);
}

void OptionTable::pop_condition() {
  if (conditions_.empty()) throw std::logic_error("OptionTable: pop_condition without push_condition");
  conditions_.pop_back();
}

void OptionTable::suspend_conditions() {
  suspended_.push_back(std::move(conditions_));
  conditions_.clear();
}

void OptionTable::resume_conditions() {
  if (suspended_.empty()) throw std::logic_error("OptionTable: resume_conditions without suspend_conditions");
  conditions_ = std::move(suspended_.back());
  suspended_.pop_back();
}

void OptionTable::resolve_as(const std::string& key, const std::string& value) { resolved_as_[key] = value; }

bool OptionTable::conditions_hold(const Entry& e) const {
  if (e.always_used) return true;
  for (const std::vector<Condition>& all_of : e.used_when) {
    bool holds = true;
    for (const auto& [key, value] : all_of) {
      auto r = resolved_as_.find(key);
      holds = holds && (r != resolved_as_.end() ? r->second : contains(key) ? this->value(key) : std::string()) == value;
    }
    if (holds) return true;
  }
  return false;
}

std::vector<std::string> OptionTable::unused_keys() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    if (!e.set || e.kind == Kind::Flag || e.bindings.front().get() == e.default_text || conditions_hold(e)) continue;
    bool inherited = false;  // pool.NAME.router.type = weighted makes a top-level router.weight_kv its default
    for (const std::string& prefix : inherited_prefixes_) {
      auto it = index_.find(prefix + e.key);
      inherited = inherited || (it != index_.end() && !entries_[it->second].set && conditions_hold(entries_[it->second]));
    }
    if (inherited) continue;
    // Why: the first unmet condition of each way the key could be used.
    std::string is, applies;
    for (const std::vector<Condition>& all_of : e.used_when)
      for (const auto& [key, value] : all_of) {
        auto r = resolved_as_.find(key);
        const std::string actual = r != resolved_as_.end() ? r->second : contains(key) ? this->value(key) : "";
        if (actual == value) continue;
        if (is.find(key + " is ") == std::string::npos) is += (is.empty() ? "" : ", ") + key + " is " + actual;
        applies += (applies.empty() ? "" : " or ") + key + " = " + value;
        break;
      }
    out.push_back(e.key + ": not used: " + is + " (it applies to " + applies + ")");
  }
  return out;
}

std::vector<std::string> OptionTable::mentioned_keys(const std::vector<std::string>& args,
                                                     const std::string* ini_text) {
  std::vector<std::string> out;  // the file's keys first: its order is the config's
  if (ini_text) {
    std::istringstream in(*ini_text);
    try {
      po::options_description none;
      for (const po::option& o : po::parse_config_file(in, none, true).options) out.push_back(o.string_key);
    } catch (const po::error&) {
      // parse() reports it, with the line.
    }
  }
  for (const std::string& a : args)
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) out.push_back(a.substr(2, a.find('=') - 2));
  return out;
}

void OptionTable::add_entry(const std::string& short_key, Binding binding, const std::string& help, Kind kind) {
  const std::string key = kind == Kind::Flag || prefixes_.empty() ? short_key : prefixes_.back() + short_key;
  auto it = index_.find(key);
  if (it != index_.end()) {
    // Two components sharing a key must agree on what it is.
    Entry& e = entries_[it->second];
    if (e.kind != kind || e.bindings.front().type != binding.type || e.default_text != binding.get())
      throw std::logic_error("OptionTable: '" + key + "' bound twice with a different type or default");
    e.bindings.push_back(std::move(binding));
    if (conditions_.empty())
      e.always_used = true;
    else
      e.used_when.push_back(conditions_);
    return;
  }
  Entry e;
  if (conditions_.empty())
    e.always_used = true;
  else
    e.used_when.push_back(conditions_);
  e.key = key;
  if (kind != Kind::Flag && !prefixes_.empty()) e.section = prefixes_.back().substr(0, prefixes_.back().size() - 1);
  e.help = help;
  e.kind = kind;
  e.default_text = binding.get();
  e.bindings.push_back(std::move(binding));
  index_[key] = entries_.size();
  entries_.push_back(std::move(e));
}

void OptionTable::assign(Entry& e, const std::string& value, const std::string& origin) {
  for (Binding& b : e.bindings)
    if (!b.assign(value))
      throw ConfigError((origin.empty() ? "" : origin + ": ") + e.key + ": '" + value + "' is not " + b.type);
  e.set = true;
}

void OptionTable::set(const std::string& key, const std::string& value, const std::string& origin) {
  auto it = index_.find(key);
  if (it == index_.end()) throw ConfigError((origin.empty() ? "" : origin + ": ") + "unknown key '" + key + "'");
  assign(entries_[it->second], value, origin);
}

bool OptionTable::was_set(const std::string& key) const {
  auto it = index_.find(key);
  return it != index_.end() && entries_[it->second].set;
}

std::string OptionTable::value(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) throw std::logic_error("OptionTable: no key '" + key + "'");
  return entries_[it->second].bindings.front().get();
}

std::string OptionTable::default_value(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) throw std::logic_error("OptionTable: no key '" + key + "'");
  return entries_[it->second].default_text;
}

namespace {

// An INI line without its comment and surrounding blanks ("" for a blank line).
std::string ini_content(std::string line) {
  const size_t hash = line.find('#');
  if (hash != std::string::npos) line.erase(hash);
  const size_t a = line.find_first_not_of(" \t\r"), b = line.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : line.substr(a, b - a + 1);
}

// The line of `key` ("section.name") in INI `text` (0 when not found): for error messages.
int ini_line_of(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line, section;
  for (int n = 1; std::getline(lines, line); ++n) {
    const std::string s = ini_content(line);
    if (s.empty()) continue;
    if (s.front() == '[' && s.back() == ']') {
      section = s.substr(1, s.size() - 2);
      continue;
    }
    const size_t eq = s.find('=');
    if (eq == std::string::npos) continue;
    std::string name = s.substr(0, eq);
    name.erase(name.find_last_not_of(" \t") + 1);
    if ((section.empty() ? name : section + "." + name) == key) return n;
  }
  return 0;
}

std::string at_line(const std::string& origin, const std::string& text, const std::string& key) {
  const int n = ini_line_of(text, key);
  return n > 0 ? origin + ":" + std::to_string(n) : origin;
}

}  // namespace

void OptionTable::parse_ini(const std::string& text, const std::string& origin,
                            std::map<std::string, std::string>& values) {
  std::istringstream in(text);
  po::parsed_options parsed(nullptr);
  try {
    // Nothing is registered with Boost: it only tokenizes ([section], key = value,
    // # comments); this table decides what is known, so Boost never formats an error.
    po::options_description none;
    parsed = po::parse_config_file(in, none, /*allow_unregistered=*/true);
  } catch (const po::error&) {
    // Find the offending line ourselves: the exception's text would substitute
    // the line into a template (see the header comment).
    std::istringstream lines(text);
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      const std::string s = ini_content(line);
      if (s.empty() || (s.front() == '[' && s.back() == ']') || s.find('=') != std::string::npos) continue;
      throw ConfigError(origin + ":" + std::to_string(n) + ": expected 'key = value' or '[section]'");
    }
    throw ConfigError(origin + ": not an INI file");
  }
  for (const po::option& o : parsed.options) {
    const std::string& key = o.string_key;
    auto it = index_.find(key);
    if (it == index_.end() || entries_[it->second].kind == Kind::Flag)
      throw ConfigError(at_line(origin, text, key) + ": unknown key '" + key + "'");
    if (values.count(key)) throw ConfigError(origin + ": " + key + " is set twice");
    values[key] = o.value.empty() ? std::string() : o.value.front();
  }
}

void OptionTable::parse(const std::vector<std::string>& args, const std::string* ini_text,
                        const std::string& ini_origin) {
  // The command line: --key=value or --key value, nothing else.
  std::map<std::string, std::string> from_args;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 3 || a.compare(0, 2, "--") != 0)
      throw ConfigError("command line: unexpected argument '" + a + "' (options are --key=value)");
    const size_t eq = a.find('=');
    const std::string key = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (!index_.count(key)) throw ConfigError("command line: unknown option '--" + key + "'");
    std::string value;
    const Entry& entry = entries_[index_.at(key)];
    const bool switch_flag = entry.kind == Kind::Flag && entry.bindings.front().type == std::string("true or false");
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (switch_flag && (i + 1 >= args.size() || args[i + 1].compare(0, 2, "--") == 0)) {
      value = "true";  // a boolean flag alone (--overwrite)
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw ConfigError("command line: --" + key + " needs a value");
    }
    if (from_args.count(key)) throw ConfigError("command line: --" + key + " is given twice");
    from_args[key] = value;
  }
  std::map<std::string, std::string> from_file;
  if (ini_text) parse_ini(*ini_text, ini_origin, from_file);
  config_dir_ = ini_text ? std::filesystem::path(ini_origin).parent_path().string() : std::string();

  for (const auto& [key, value] : from_file)
    if (!from_args.count(key)) assign(entries_[index_.at(key)], value, ini_origin);
  for (const auto& [key, value] : from_args) assign(entries_[index_.at(key)], value, "command line");

  namespace fs = std::filesystem;
  for (Entry& e : entries_) {
    if (e.kind == Kind::Required && !e.set)
      throw ConfigError((ini_origin.empty() ? std::string("command line") : ini_origin) + ": " + e.key +
                        " is required");
    if (e.kind != Kind::Path || config_dir_.empty()) continue;
    const std::string path = e.bindings.front().get();
    std::error_code ec;  // a path the OS rejects (too long, ...) is reported where it is opened
    if (path.empty() || fs::path(path).is_absolute() || fs::exists(path, ec)) continue;
    const fs::path beside = fs::path(config_dir_) / path;
    if (fs::exists(beside, ec))
      for (Binding& b : e.bindings) b.assign(beside.string());
  }
}

std::vector<std::pair<std::string, std::string>> OptionTable::resolved() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Entry& e : entries_)
    if (e.kind != Kind::Flag) out.emplace_back(e.key, e.bindings.front().get());
  return out;
}

std::string OptionTable::to_ini() const {
  // Sections in the order they first appear, keys in registration order within each.
  std::vector<std::string> sections;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_section;
  for (const Entry& e : entries_) {
    if (e.kind == Kind::Flag) continue;
    const std::string sec = e.section.empty() ? e.key.substr(0, e.key.find('.')) : e.section;
    if (!by_section.count(sec)) sections.push_back(sec);
    by_section[sec].emplace_back(e.key.substr(sec.size() + 1), e.bindings.front().get());
  }
  std::ostringstream out;
  for (size_t i = 0; i < sections.size(); ++i) {
    out << (i ? "\n" : "") << "[" << sections[i] << "]\n";
    for (const auto& [name, value] : by_section[sections[i]]) out << name << " = " << value << "\n";
  }
  return out.str();
}

std::string OptionTable::help() const {
  std::ostringstream out;
  for (const Entry& e : entries_) {
    std::string left = "  --" + e.key;
    if (e.kind == Kind::Required)
      left += " (required)";
    else if (!e.default_text.empty())
      left += " (" + e.default_text + ")";
    if (left.size() < 44) left.resize(44, ' ');
    out << left << " " << e.help << "\n";
  }
  return out.str();
}

}  // namespace testbed
