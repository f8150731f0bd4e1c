#include "experiments/cli/option_table.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace testbed {

std::string format_value(double v) {
  char buf[64];
  for (int precision = 15; precision <= 17; ++precision) {  // shortest form that reads back exactly
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string format_value(bool v) { return v ? "true" : "false"; }
std::string format_value(const std::string& v) { return v; }

std::vector<std::pair<std::string, std::string>> OptionTable::resolved() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, get] : keys_) out.emplace_back(key, get());
  return out;
}

std::string OptionTable::to_ini() const {
  std::ostringstream out;
  std::string section;
  for (const auto& [key, value] : resolved()) {
    const size_t dot = key.find('.');
    const std::string sec = key.substr(0, dot);
    if (sec != section) {
      out << (section.empty() ? "" : "\n") << "[" << sec << "]\n";
      section = sec;
    }
    out << key.substr(dot + 1) << " = " << value << "\n";
  }
  return out.str();
}

}  // namespace testbed
