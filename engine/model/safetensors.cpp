#include "engine/model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/common/config_error.h"
#include "engine/model/float16.h"

namespace testbed {
namespace {

int dtype_size(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "U8" || dtype == "I8" || dtype == "F8_E4M3") return 1;
  return 0;
}

bool float_dtype(const std::string& dtype) { return dtype == "F32" || dtype == "F16" || dtype == "BF16"; }

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::error_code ec;
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
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  data_start_ = 8 + header_len;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(path + ": safetensors header is not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ConfigError(path + ": safetensors header is not a JSON object");
  const uint64_t data_size = file_size_ - data_start_;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = it.value();
    Entry e;
    try {
      e.dtype = v.at("dtype").get<std::string>();
      e.shape = v.at("shape").get<std::vector<int64_t>>();
      auto offsets = v.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2) throw ConfigError("");
      e.begin = offsets[0];
      e.end = offsets[1];
    } catch (const std::exception&) {
      throw ConfigError(path + ": tensor '" + it.key() + "' has a malformed header entry");
    }
    int64_t numel = 1;
    for (int64_t d : e.shape) numel *= d;
    if (e.end < e.begin || (dtype_size(e.dtype) && e.end - e.begin != static_cast<uint64_t>(numel) * dtype_size(e.dtype)))
      throw ConfigError(path + ": tensor '" + it.key() + "' offsets do not match its shape and dtype");
    if (e.end > data_size)
      throw ConfigError(path + ": truncated safetensors file: tensor '" + it.key() + "' needs bytes up to " +
                        std::to_string(e.end) + " of a data section of " + std::to_string(data_size));
    entries_.emplace(it.key(), std::move(e));
  }
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
  for (size_t i = 0; i < t.data.size(); ++i) {
    if (size == 4) {
      std::memcpy(&t.data[i], raw.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      t.data[i] = e.dtype == "BF16" ? bf16_to_float(h) : fp16_to_float(h);
    }
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
  const int size = dtype_size(dtype);
  if (size == 0) throw ConfigError("write_safetensors: unsupported dtype " + dtype);
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
