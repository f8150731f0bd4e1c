// The testbed CLI. `testbed --help` for the commands.
#include "experiments/cli/commands.h"

int main(int argc, char** argv) { return testbed::cli_main(argc, argv); }
