// Where a results file came from: the commit the binary was built from (and
// whether that tree had uncommitted changes), the testbed version, the full
// command line and the machine. Written into /run of every results file.
#pragma once

#include <string>

namespace testbed {

class ResultsFile;

// Called once by main() with its arguments.
void set_command_line(int argc, char** argv);
std::string command_line();
std::string build_commit();  // e.g. "a86dc9b0f3c2", "+dirty" appended when the tree was modified; "unknown" outside git

// /run: commit, dirty, version, command_line, host, cpu.
void write_provenance(ResultsFile& file);

}  // namespace testbed
