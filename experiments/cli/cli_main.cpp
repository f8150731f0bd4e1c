#include <iostream>
#include <new>

#include "engine/common/config_error.h"
#include "engine/common/pending_files.h"
#include "experiments/cli/command.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/provenance.h"

namespace testbed {

int cli_main(int argc, char** argv) {
  set_command_line(argc, argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  const CommandRegistry& commands = CommandRegistry::instance();
  std::string usage = "usage: testbed <command> [args]\n\ncommands:\n";
  for (const std::string& name : commands.names()) {
    const auto cmd = commands.create("command", name);
    usage += "  testbed " + cmd->usage() + "\n      " + cmd->summary() + "\n";
  }
  usage += "\n`testbed <command> --help` says more; `testbed run --help` lists every config key.\n";
  if (args.empty()) {
    std::cerr << usage;
    return 2;
  }
  const std::string name = args[0];
  args.erase(args.begin());
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << usage;
    return 0;
  }
  if (!commands.contains(name)) {
    std::cerr << "testbed: unknown command '" << name << "'\n" << usage;
    return 2;
  }
  // The last resort: whatever escapes a command is reported, and whatever it
  // had begun to write is removed (the destructors of its files have run by now;
  // this catches any left registered).
  remove_pending_files_on_signals();
  try {
    return commands.create("command", name)->run(args);
  } catch (const ConfigError& e) {
    std::cerr << "testbed: error: " << e.what() << "\n";
    remove_pending_files();
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "testbed: failed: out of memory (std::bad_alloc): a size in the config or its inputs needs more "
                 "memory than this machine has\n";
    remove_pending_files();
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "testbed: failed: " << e.what() << "\n";
    remove_pending_files();
    return 1;
  } catch (...) {
    std::cerr << "testbed: failed: an unknown exception\n";
    remove_pending_files();
    return 1;
  }
}

}  // namespace testbed
