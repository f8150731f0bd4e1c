// Reading and writing safetensors files (Hugging Face's format: an 8-byte
// little-endian header length, a JSON header of {name: {dtype, shape,
// data_offsets}}, then the raw tensor bytes). F32, F16 and BF16 are read into
// floats; I32, U8, I8 and F8_E4M3 (quantized checkpoints) as raw bytes.
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
  // Reads and validates the header; throws ConfigError naming the file (and the
  // tensor) and what is wrong: a header longer than the file or not JSON, an
  // unknown dtype, a shape that is not non-negative integers, offsets that do
  // not match dtype x shape (counted with checked multiplication), reach past
  // the file or overlap another tensor's. Fuzz entry point: only ConfigError.
  explicit SafetensorsFile(const std::string& path);

  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  std::vector<std::string> names() const;
  // Reads tensor `name`, converted to float; its shape must equal `expected_shape`
  // and every value must be finite (a NaN or Inf weight is a ConfigError naming it).
  Tensor read(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  // The raw bytes of tensor `name` (integer and 8-bit tensors: I32, U8, I8,
  // F8_E4M3), which must have one of `dtypes` and `expected_shape`.
  std::vector<uint8_t> read_raw(const std::string& name, const std::vector<std::string>& dtypes,
                                const std::vector<int64_t>& expected_shape) const;
  std::string dtype_of(const std::string& name) const;
  std::vector<int64_t> shape_of(const std::string& name) const;

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

// A tensor as bytes in its own dtype (any of F32 F16 BF16 I32 U8 I8 F8_E4M3), for writing quantized checkpoints.
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors_raw(const std::string& path, const std::vector<RawTensor>& tensors);

}  // namespace testbed
