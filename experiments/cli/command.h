// CLI subcommands register by name through the one Registry (one file per
// command, one TESTBED_COMMAND line); `testbed --help` lists them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/registry.h"

namespace testbed {

class Command {
 public:
  virtual ~Command() = default;
  virtual std::string usage() const = 0;    // "run CONFIG.ini [--output DIR] [--section.key=value ...]"
  virtual std::string summary() const = 0;  // one line
  // Takes the arguments after the command's name; returns the exit status
  // (0 ok, 2 bad input: throw ConfigError for that, 1 failure).
  virtual int run(const std::vector<std::string>& args) = 0;
};

using CommandRegistry = Registry<Command>;

// A command made of a usage line, a summary and a function.
class FunctionCommand : public Command {
 public:
  using Fn = std::function<int(const std::vector<std::string>&)>;
  FunctionCommand(std::string usage, std::string summary, Fn fn)
      : usage_(std::move(usage)), summary_(std::move(summary)), fn_(std::move(fn)) {}
  std::string usage() const override { return usage_; }
  std::string summary() const override { return summary_; }
  int run(const std::vector<std::string>& args) override { return fn_(args); }

 private:
  std::string usage_, summary_;
  Fn fn_;
};

#define TESTBED_COMMAND(name, usage, summary, fn) \
  TESTBED_REGISTER(::testbed::CommandRegistry, name, [] { return std::make_unique<::testbed::FunctionCommand>(usage, summary, fn); })

}  // namespace testbed
