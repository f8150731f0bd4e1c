#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fuzz_target.h"
#include "support/scratch.h"

namespace testbed_fuzz {

std::string write_input(const uint8_t* data, size_t size, const std::string& suffix) {
  namespace fs = std::filesystem;
  static const fs::path dir = testbed_test::scratch_root("testbed_fuzz");
  const fs::path path = dir / ("input" + suffix);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  return path.string();
}

}  // namespace testbed_fuzz
