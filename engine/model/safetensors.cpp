#include "engine/model/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/common/config_error.h"
#include "engine/model/float16.h"

namespace testbed {
namespace {

// Bytes per element of every safetensors dtype (0: not a safetensors dtype).
int dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "U8" || dtype == "I8" || dtype == "F8_E4M3" || dtype == "F8_E5M2" || dtype == "BOOL") return 1;
  return 0;
}

// The reference (Rust) implementation's MAX_HEADER_SIZE: a header is metadata, not data.
constexpr uint64_t kMaxHeaderBytes = 100000000;

bool float_dtype(const std::string& dtype) { return dtype == "F32" || dtype == "F16" || dtype == "BF16"; }

// A header number that must be a non-negative JSON integer (no float, no sign).
bool as_count(const nlohmann::json& v, uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<uint64_t>();
  return true;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ConfigError(path + ": cannot open safetensors file (" +
                      (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file") + ")");
  file_size_ = std::filesystem::file_size(path, ec);
  if (ec) throw ConfigError(path + ": cannot open safetensors file (" + ec.message() + ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open safetensors file");
  if (file_size_ < 8) throw ConfigError(path + ": truncated safetensors file (no header length)");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size_ - 8)
    throw ConfigError(path + ": truncated safetensors file (header of " + std::to_string(header_len) +
                      " bytes, file of " + std::to_string(file_size_) + ")");
  if (header_len > kMaxHeaderBytes)
    throw ConfigError(path + ": safetensors header of " + std::to_string(header_len) +
                      " bytes is over the format's limit of 100,000,000");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) throw ConfigError(path + ": could not read the safetensors header");
  data_start_ = 8 + header_len;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range.406 (a number beyond double)
    throw ConfigError(path + ": safetensors header is not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ConfigError(path + ": safetensors header is not a JSON object");
  const uint64_t data_size = file_size_ - data_start_;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string where = path + ": tensor '" + it.key() + "': ";
    const auto& v = it.value();
    if (!v.is_object()) throw ConfigError(where + "header entry is not an object");
    const auto dtype = v.find("dtype"), shape = v.find("shape"), offsets = v.find("data_offsets");
    if (dtype == v.end() || !dtype->is_string()) throw ConfigError(where + "dtype must be a string");
    if (shape == v.end() || !shape->is_array()) throw ConfigError(where + "shape must be a list of sizes");
    if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2)
      throw ConfigError(where + "data_offsets must be [begin, end]");
    Entry e;
    e.dtype = dtype->get<std::string>();
    const uint64_t size = static_cast<uint64_t>(dtype_size(e.dtype));
    if (size == 0) throw ConfigError(where + "unknown dtype '" + e.dtype + "'");
    // Element count and bytes with checked multiplication: a shape can claim 2^64 elements.
    uint64_t bytes = size;
    for (const auto& d : *shape) {
      uint64_t n = 0;
      if (!as_count(d, n) || n > static_cast<uint64_t>(INT64_MAX))
        throw ConfigError(where + "shape " + (d.is_primitive() ? d.dump() : std::string("entry")) +
                          " is not a non-negative integer");
      if (__builtin_mul_overflow(bytes, n, &bytes) || bytes > static_cast<uint64_t>(INT64_MAX))
        throw ConfigError(where + "shape holds more bytes than a file can");
      e.shape.push_back(static_cast<int64_t>(n));
    }
    if (!as_count((*offsets)[0], e.begin) || !as_count((*offsets)[1], e.end))
      throw ConfigError(where + "data_offsets must be non-negative integers");
    if (e.end < e.begin || e.end - e.begin != bytes)
      throw ConfigError(where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                        ") do not match its shape " + shape_string(e.shape) + " and dtype " + e.dtype + " (" +
                        std::to_string(bytes) + " bytes)");
    if (e.end > data_size)
      throw ConfigError(path + ": truncated safetensors file: tensor '" + it.key() + "' needs bytes up to " +
                        std::to_string(e.end) + " of a data section of " + std::to_string(data_size));
    entries_.emplace(it.key(), std::move(e));
  }
  // No two tensors may share bytes.
  std::vector<std::pair<const std::string*, const Entry*>> by_offset;
  for (const auto& kv : entries_)
    if (kv.second.end > kv.second.begin) by_offset.emplace_back(&kv.first, &kv.second);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i].second->begin < by_offset[i - 1].second->end)
      throw ConfigError(path + ": tensors '" + *by_offset[i - 1].first + "' and '" + *by_offset[i].first +
                        "' overlap in the data section");
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}

Tensor SafetensorsFile::read(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(path_ + ": missing tensor '" + name + "'");
  const Entry& e = it->second;
  if (e.shape != expected_shape)
    throw ConfigError(path_ + ": tensor '" + name + "' has shape " + shape_string(e.shape) + ", the model config needs " +
                      shape_string(expected_shape));
  const int size = dtype_size(e.dtype);
  if (!float_dtype(e.dtype))
    throw ConfigError(path_ + ": tensor '" + name + "' has unsupported dtype " + e.dtype + " (F32, F16, BF16)");
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  std::vector<char> raw(e.end - e.begin);
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (!in) throw ConfigError(path_ + ": could not read tensor '" + name + "' (file changed or truncated)");
  Tensor t;
  t.shape = e.shape;
  t.data.resize(raw.size() / size);
  // A NaN or infinite weight would only show as NaN logits later: it is an error
  // here. The test (exponent bits all ones) rides along the conversion loop, at
  // no measurable cost; the element is looked up only when there is one.
  uint32_t non_finite = 0;
  if (size == 4) {
    for (size_t i = 0; i < t.data.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, raw.data() + 4 * i, 4);
      non_finite |= (bits & 0x7f800000u) == 0x7f800000u;
      std::memcpy(&t.data[i], &bits, 4);
    }
  } else {
    const bool bf16 = e.dtype == "BF16";
    const uint16_t exponent = bf16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < t.data.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      non_finite |= (h & exponent) == exponent;
      t.data[i] = bf16 ? bf16_to_float(h) : fp16_to_float(h);
    }
  }
  if (non_finite) {
    const auto bad = std::find_if_not(t.data.begin(), t.data.end(), [](float v) { return std::isfinite(v); });
    throw ConfigError(path_ + ": tensor '" + name + "' holds " + std::to_string(*bad) + " at element " +
                      std::to_string(bad - t.data.begin()) + " (weights must be finite)");
  }
  return t;
}

std::string SafetensorsFile::dtype_of(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(path_ + ": missing tensor '" + name + "'");
  return it->second.dtype;
}

std::vector<int64_t> SafetensorsFile::shape_of(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(path_ + ": missing tensor '" + name + "'");
  return it->second.shape;
}

std::vector<uint8_t> SafetensorsFile::read_raw(const std::string& name, const std::vector<std::string>& dtypes,
                                               const std::vector<int64_t>& expected_shape) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(path_ + ": missing tensor '" + name + "'");
  const Entry& e = it->second;
  if (std::find(dtypes.begin(), dtypes.end(), e.dtype) == dtypes.end() || dtype_size(e.dtype) == 0) {
    std::string want;
    for (const auto& d : dtypes) want += (want.empty() ? "" : ", ") + d;
    throw ConfigError(path_ + ": tensor '" + name + "' has dtype " + e.dtype + " (expected " + want + ")");
  }
  if (e.shape != expected_shape)
    throw ConfigError(path_ + ": tensor '" + name + "' has shape " + shape_string(e.shape) + ", expected " +
                      shape_string(expected_shape));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  std::vector<uint8_t> raw(e.end - e.begin);
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (!in) throw ConfigError(path_ + ": could not read tensor '" + name + "' (file changed or truncated)");
  return raw;
}

void write_safetensors_raw(const std::string& path, const std::vector<RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    if (dtype_size(t.dtype) == 0 || t.bytes.size() != static_cast<uint64_t>(numel) * dtype_size(t.dtype))
      throw ConfigError("write_safetensors_raw: tensor '" + t.name + "' bytes do not match its dtype and shape");
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw ConfigError(path + ": cannot write");
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const RawTensor& t : tensors) out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!out) throw ConfigError(path + ": write failed");
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       const std::string& dtype) {
  if (!float_dtype(dtype)) throw ConfigError("write_safetensors: unsupported dtype " + dtype);
  const int size = dtype_size(dtype);
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t->numel()) * size;
    header[name] = {{"dtype", dtype}, {"shape", t->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';  // the format pads the header to 8 bytes
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw ConfigError(path + ": cannot write");
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : tensors) {
    for (float f : t->data) {
      if (size == 4) {
        out.write(reinterpret_cast<const char*>(&f), 4);
      } else {
        const uint16_t h = dtype == "BF16" ? float_to_bf16(f) : float_to_fp16(f);
        out.write(reinterpret_cast<const char*>(&h), 2);
      }
    }
  }
  if (!out) throw ConfigError(path + ": write failed");
}

}  // namespace testbed
