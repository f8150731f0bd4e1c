// Element types the CUDA kernels take at run time. Launchers turn a DType into
// a template argument (the only place runtime-to-template dispatch happens).
#pragma once

namespace testbed {

enum class DType { kBF16, kFP16, kFP32 };

inline int dtype_bytes(DType t) { return t == DType::kFP32 ? 4 : 2; }

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBF16: return "bf16";
    case DType::kFP16: return "fp16";
    case DType::kFP32: return "fp32";
  }
  return "?";
}

}  // namespace testbed
