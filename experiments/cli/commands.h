// The testbed CLI's subcommands. Each takes the arguments after its name and
// returns the process exit status (0 ok, 2 bad input, 1 failure).
#pragma once

#include <string>
#include <vector>

namespace testbed {

int run_command(const std::vector<std::string>& args);
int cli_main(int argc, char** argv);

}  // namespace testbed
