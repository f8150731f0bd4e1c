// OptionTable: binds "section.key" names to fields of the component config
// structs, for Boost.Program_options (INI files and --section.key=value flags),
// and writes the resolved values back out as INI.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace testbed {

std::string format_value(double v);
std::string format_value(bool v);
std::string format_value(const std::string& v);
template <class T>
std::string format_value(T v) {
  return std::to_string(v);
}

class OptionTable {
 public:
  OptionTable() : description_("Config keys ([section] key = value in the INI file, or --section.key=value)") {}

  template <class T>
  void add(const std::string& key, T* target, const std::string& help) {
    description_.add_options()(key.c_str(),
                               boost::program_options::value<T>(target)->default_value(*target, format_value(*target)),
                               help.c_str());
    keys_.emplace_back(key, [target] { return format_value(*target); });
  }

  const boost::program_options::options_description& description() const { return description_; }
  // Every key with its current value, in registration order.
  std::vector<std::pair<std::string, std::string>> resolved() const;
  // The same, as an INI file grouped by section.
  std::string to_ini() const;

 private:
  boost::program_options::options_description description_;
  std::vector<std::pair<std::string, std::function<std::string()>>> keys_;
};

}  // namespace testbed
