#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fuzz_target.h"

namespace testbed_fuzz {

std::string write_input(const uint8_t* data, size_t size, const std::string& suffix) {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("testbed_fuzz_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  const fs::path path = dir / ("input" + suffix);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  return path.string();
}

}  // namespace testbed_fuzz
