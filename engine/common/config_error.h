// Errors in user input (config keys and values, traces, model files). The CLI
// prints the message and exits with status 2; the message names the key or file.
#pragma once

#include <stdexcept>
#include <string>

namespace testbed {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws ConfigError("<key>: <what>") unless `ok`.
inline void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw ConfigError(key + ": " + what);
}

}  // namespace testbed
