// CLI subcommands register themselves by name (one file per command, one
// TESTBED_COMMAND line); `testbed --help` lists them.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace testbed {

struct Command {
  std::string usage;    // "run CONFIG.ini [--output DIR] [--section.key=value ...]"
  std::string summary;  // one line
  // Takes the arguments after the command's name; returns the exit status
  // (0 ok, 2 bad input: throw ConfigError for that, 1 failure).
  std::function<int(const std::vector<std::string>&)> run;
};

class CommandTable {
 public:
  static CommandTable& instance() {
    static CommandTable table;
    return table;
  }
  bool add(const std::string& name, Command command) {
    commands_[name] = std::move(command);
    return true;
  }
  const std::map<std::string, Command>& commands() const { return commands_; }

 private:
  std::map<std::string, Command> commands_;
};

#define TESTBED_COMMAND_CONCAT_INNER(a, b) a##b
#define TESTBED_COMMAND_CONCAT(a, b) TESTBED_COMMAND_CONCAT_INNER(a, b)
#define TESTBED_COMMAND(name, usage, summary, fn)                                                  \
  static const bool TESTBED_COMMAND_CONCAT(testbed_command_, __LINE__) = ::testbed::CommandTable:: \
      instance().add(name, ::testbed::Command{usage, summary, fn})

}  // namespace testbed
