// Reading and writing safetensors files (Hugging Face's format: an 8-byte
// little-endian header length, a JSON header of {name: {dtype, shape,
// data_offsets}}, then the raw tensor bytes). F32, F16 and BF16 are read into floats.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/tensor.h"

namespace testbed {

class SafetensorsFile {
 public:
  // Reads and validates the header; throws ConfigError naming the file and what is wrong.
  explicit SafetensorsFile(const std::string& path);

  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  std::vector<std::string> names() const;
  // Reads tensor `name`, converted to float; its shape must equal `expected_shape`.
  Tensor read(const std::string& name, const std::vector<int64_t>& expected_shape) const;

 private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // offsets in the data section
  };
  std::string path_;
  uint64_t data_start_ = 0;
  uint64_t file_size_ = 0;
  std::map<std::string, Entry> entries_;
};

// Writes tensors as `dtype` ("F32", "F16" or "BF16"); used by tests and tools.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       const std::string& dtype);

}  // namespace testbed
