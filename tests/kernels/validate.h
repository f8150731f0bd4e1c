// The one validation helper of every kernel test: compares an output with its
// reference under a tolerance that follows from the output dtype, fails on any
// NaN or Inf (outputs are poisoned with NaN before a launch, so an element the
// kernel never wrote fails too), and reports the first mismatches with their
// multi-dimensional indices. Pure C++: unit-tested in test_validate.cpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/float16.h"
#include "kernels/common/dtype.h"

namespace testbed::test {

struct Tolerance {
  double rel_l2 = 0.0;  // ||out - ref|| / ||ref||
  double atol = 0.0;    // per element: |out - ref| <= atol + rtol * |ref|
  double rtol = 0.0;

  // Output stored in `dtype` from fp32 accumulation. bf16 keeps 8 significant
  // bits (rounding error up to 2^-8 = 3.9e-3 relative), fp16 11 (4.9e-4);
  // attention also rounds P to the input type before P V, so the bounds leave a
  // few ulps of headroom.
  static Tolerance for_dtype(DType dtype) {
    switch (dtype) {
      case DType::kBF16: return {1e-2, 2e-2, 2e-2};
      case DType::kFP16: return {2e-3, 4e-3, 4e-3};
      case DType::kFP32: return {1e-5, 1e-5, 1e-5};
    }
    return {};
  }
};

struct ValidationResult {
  bool ok = true;
  size_t num_bad_values = 0;  // NaN or Inf in the output (unwritten elements stay NaN)
  size_t num_mismatches = 0;  // outside atol + rtol * |ref|
  size_t num_bad_rows = 0;    // rows (the last dim of `shape`) whose own rel L2 exceeds 2 * tol.rel_l2
  double rel_l2 = 0.0;
  double max_abs_err = 0.0;
  std::string report;  // empty when ok
};

// Row-major multi-index of flat index i in `shape` ("[a, b, c]"); "[i]" without a shape.
inline std::string format_index(size_t i, const std::vector<int64_t>& shape) {
  if (shape.empty()) return "[" + std::to_string(i) + "]";
  std::vector<int64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = static_cast<int64_t>(i % static_cast<size_t>(shape[k]));
    i /= static_cast<size_t>(shape[k]);
  }
  std::string s = "[";
  for (size_t k = 0; k < idx.size(); ++k) s += (k ? ", " : "") + std::to_string(idx[k]);
  return s + "]";
}

inline ValidationResult validate(const std::string& what, const float* out, const float* ref, size_t n,
                                 const Tolerance& tol, const std::vector<int64_t>& shape = {}, int max_print = 8) {
  ValidationResult r;
  std::ostringstream msg;
  double err2 = 0.0, ref2 = 0.0;
  int printed = 0;
  for (size_t i = 0; i < n; ++i) {
    const double o = out[i], e = ref[i];
    if (!std::isfinite(o)) {
      ++r.num_bad_values;
      if (printed < max_print) {
        msg << "  " << format_index(i, shape) << ": out " << o << " (unwritten or NaN), ref " << e << "\n";
        ++printed;
      }
      continue;
    }
    const double diff = std::abs(o - e);
    err2 += diff * diff;
    ref2 += e * e;
    if (diff > r.max_abs_err) r.max_abs_err = diff;
    if (!(diff <= tol.atol + tol.rtol * std::abs(e))) {
      ++r.num_mismatches;
      if (printed < max_print) {
        msg << "  " << format_index(i, shape) << ": out " << o << ", ref " << e << ", |diff| " << diff << "\n";
        ++printed;
      }
    }
  }
  r.rel_l2 = ref2 > 0.0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  // Per row: a row of small values (an attention output over many keys, say)
  // can pass atol element by element and vanish in the global norm while
  // being wrong as a whole.
  const size_t row = shape.size() >= 2 ? static_cast<size_t>(shape.back()) : 0;
  if (row > 0 && n % row == 0) {
    for (size_t start = 0; start < n; start += row) {
      double e2 = 0.0, r2 = 0.0;
      for (size_t i = start; i < start + row; ++i) {
        if (!std::isfinite(out[i])) continue;  // counted above
        e2 += (out[i] - ref[i]) * double(out[i] - ref[i]);
        r2 += double(ref[i]) * ref[i];
      }
      const double rel = r2 > 0.0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
      if (rel > 2 * tol.rel_l2 && std::sqrt(e2) > 1e-6) {
        if (r.num_bad_rows++ == 0 && printed < max_print)
          msg << "  row " << format_index(start, shape) << ": rel L2 " << rel << " (max " << 2 * tol.rel_l2 << ")\n";
      }
    }
  }
  r.ok = r.num_bad_values == 0 && r.num_mismatches == 0 && r.num_bad_rows == 0 && r.rel_l2 <= tol.rel_l2;
  if (!r.ok) {
    std::ostringstream head;
    head << what << ": " << n << " values, " << r.num_bad_values << " NaN/Inf, " << r.num_mismatches
         << " mismatches (atol " << tol.atol << ", rtol " << tol.rtol << "), " << r.num_bad_rows
         << " rows off, rel L2 " << r.rel_l2 << " (max "
         << tol.rel_l2 << "), max |diff| " << r.max_abs_err << "\n";
    r.report = head.str() + msg.str();
  }
  return r;
}

inline ValidationResult validate(const std::string& what, const std::vector<float>& out, const std::vector<float>& ref,
                                 const Tolerance& tol, const std::vector<int64_t>& shape = {}) {
  if (out.size() != ref.size()) {
    ValidationResult r;
    r.ok = false;
    r.report = what + ": size " + std::to_string(out.size()) + " != reference size " + std::to_string(ref.size());
    return r;
  }
  return validate(what, out.data(), ref.data(), out.size(), tol, shape);
}

// 16-bit storage of a float vector, and back: what the kernels see and return.
inline std::vector<uint16_t> to_half_bits(const std::vector<float>& v, DType dtype) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = dtype == DType::kBF16 ? float_to_bf16(v[i]) : float_to_fp16(v[i]);
  return h;
}
inline std::vector<float> from_half_bits(const std::vector<uint16_t>& h, DType dtype) {
  std::vector<float> v(h.size());
  for (size_t i = 0; i < h.size(); ++i) v[i] = dtype == DType::kBF16 ? bf16_to_float(h[i]) : fp16_to_float(h[i]);
  return v;
}
// Rounds every value to the nearest `dtype` value: references are computed on
// the inputs exactly as the kernel receives them.
inline std::vector<float> round_to(const std::vector<float>& v, DType dtype) {
  return dtype == DType::kFP32 ? v : from_half_bits(to_half_bits(v, dtype), dtype);
}

}  // namespace testbed::test
