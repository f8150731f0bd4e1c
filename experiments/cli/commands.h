// The CLI entry point: dispatches to the registered subcommands (command.h).
#pragma once

namespace testbed {

int cli_main(int argc, char** argv);

}  // namespace testbed
