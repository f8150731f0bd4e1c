// Helpers for the trace and workload tests: a scratch directory, small files,
// and draining a RequestSource.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/workload.h"
#include "support/config_error_of.h"

namespace testbed::test {

// A fresh directory under the system temp dir, removed when the test ends.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / ("testbed_traces_" + std::to_string(::getpid()) + "_" + name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // Writes `content` to a file in the directory and returns its path.
  std::string write(const std::string& file, const std::string& content) const {
    const auto p = path_ / file;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

inline WorkloadConfig trace_config(const std::string& format, const std::string& path,
                                   const std::vector<std::pair<std::string, std::string>>& more = {}) {
  WorkloadConfig c;
  set_options(c, {{"workload.kind", "trace"}, {"trace.format", format}, {"trace.path", path}});
  set_options(c, more);
  return c;
}

// hash_block_size: WorkloadContext's (generators may hand out prompt hashes).
inline std::vector<Request> drain(const WorkloadConfig& c, int vocab_size = 32000, int hash_block_size = 0) {
  WorkloadContext ctx;
  ctx.vocab_size = vocab_size;
  ctx.hash_block_size = hash_block_size;
  auto source = make_workload(c, ctx);
  std::vector<Request> out;
  while (auto r = source->next()) out.push_back(std::move(*r));
  return out;
}

using testbed_test::config_error_of;  // the message of the ConfigError a callable throws

// The shared public traces (../shared/traces from the repo root), or "" when absent.
inline std::string shared_trace(const std::string& file) {
  for (const char* dir : {"../shared/traces/", "/work/shared/traces/"}) {
    const std::string p = std::string(dir) + file;
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

}  // namespace testbed::test
