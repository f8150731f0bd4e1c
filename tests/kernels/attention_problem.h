// Random attention problems for the kernel tests, and their CPU references.
// Pure C++ (the GPU tests upload them; test_attention_problem.cpp checks them
// without a GPU).
//
// A paged problem shuffles physical blocks, and fills every cache slot no
// sequence owns (spare blocks, the tail of each last block) with NaN: a kernel
// that reads one key or value it should not see turns its output into NaN,
// which the validation helper rejects.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "engine/kv_layout.h"
#include "engine/common/rng.h"
#include "kernels/attention/attention_ref.h"
#include "kernels/common/dtype.h"
#include "validate.h"

namespace testbed::test {

inline std::vector<float> random_normal(Rng& rng, size_t n, DType dtype) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return round_to(v, dtype);
}

struct PagedProblem {
  DType dtype = DType::kBF16;
  int num_q_heads = 0;
  KvLayout layout;
  std::vector<int> ctx_lens, q_lens;                        // per sequence
  std::vector<int32_t> indptr{0}, indices, seq_lens;        // CSR block table
  std::vector<int32_t> q_indptr{0}, token_seq, token_pos;  // query rows
  std::vector<float> q, k_cache, v_cache;                   // values exactly representable in dtype (NaN = not owned)
  float scale = 0.0f;

  int num_seqs() const { return static_cast<int>(q_lens.size()); }
  int num_tokens() const { return q_indptr.back(); }
  int max_q_len() const { return q_lens.empty() ? 0 : *std::max_element(q_lens.begin(), q_lens.end()); }
  int max_seq_len() const { return seq_lens.empty() ? 0 : *std::max_element(seq_lens.begin(), seq_lens.end()); }
  std::vector<int64_t> out_shape() const { return {num_tokens(), num_q_heads, layout.head_dim}; }

  // fp32 reference (paged_attention_ref) on the rounded inputs.
  std::vector<float> reference() const {
    std::vector<float> out(q.size());
    const PagedKvTable table{indptr.data(), indices.data(), seq_lens.data(), num_seqs()};
    paged_attention_ref(q.data(), out.data(), num_tokens(), num_q_heads, token_seq.data(), token_pos.data(),
                        k_cache.data(), v_cache.data(), layout, table, scale);
    return out;
  }
};

// Sequence s holds ctx_lens[s] cached tokens plus q_lens[s] new query tokens.
inline PagedProblem make_paged_problem(Rng& rng, DType dtype, int num_q_heads, int num_kv_heads, int head_dim,
                                       int block_size, const std::vector<int>& ctx_lens, const std::vector<int>& q_lens) {
  PagedProblem p;
  p.dtype = dtype;
  p.num_q_heads = num_q_heads;
  p.ctx_lens = ctx_lens;
  p.q_lens = q_lens;
  p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  int used_blocks = 0;
  for (size_t s = 0; s < q_lens.size(); ++s) used_blocks += (ctx_lens[s] + q_lens[s] + block_size - 1) / block_size;
  p.layout = KvLayout{used_blocks + 3, block_size, num_kv_heads, head_dim};  // 3 spare blocks stay NaN
  std::vector<int32_t> perm(p.layout.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  p.k_cache.assign(p.layout.num_elements(), nan);
  p.v_cache.assign(p.layout.num_elements(), nan);
  for (size_t s = 0, next = 0; s < q_lens.size(); ++s) {
    const int len = ctx_lens[s] + q_lens[s];
    const int first = static_cast<int>(p.indices.size());
    for (int b = 0; b < (len + block_size - 1) / block_size; ++b) p.indices.push_back(perm[next++]);
    p.indptr.push_back(static_cast<int32_t>(p.indices.size()));
    p.seq_lens.push_back(len);
    for (int pos = 0; pos < len; ++pos)
      for (int g = 0; g < num_kv_heads; ++g) {
        const size_t off = p.layout.offset(p.indices[first + pos / block_size], g, pos % block_size);
        for (int x = 0; x < head_dim; ++x) {
          p.k_cache[off + x] = static_cast<float>(rng.normal());
          p.v_cache[off + x] = static_cast<float>(rng.normal());
        }
      }
    for (int i = 0; i < q_lens[s]; ++i) {
      p.token_seq.push_back(static_cast<int32_t>(s));
      p.token_pos.push_back(ctx_lens[s] + i);
    }
    p.q_indptr.push_back(p.q_indptr.back() + q_lens[s]);
  }
  p.k_cache = round_to(p.k_cache, dtype);  // NaN stays NaN
  p.v_cache = round_to(p.v_cache, dtype);
  p.q = random_normal(rng, static_cast<size_t>(p.num_tokens()) * num_q_heads * head_dim, dtype);
  return p;
}

// Contiguous varlen problem: q [total_q, Hq, d], k/v [total_k, Hkv, d].
struct VarlenProblem {
  DType dtype = DType::kBF16;
  int num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool causal = true;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  std::vector<float> q, k, v;
  float scale = 0.0f;

  int num_seqs() const { return static_cast<int>(cu_q.size()) - 1; }
  int max_q_len() const {
    int m = 0;
    for (int s = 0; s < num_seqs(); ++s) m = std::max(m, cu_q[s + 1] - cu_q[s]);
    return m;
  }
  std::vector<int64_t> out_shape() const { return {cu_q.back(), num_q_heads, head_dim}; }

  // Double-precision dense reference, one sequence at a time.
  std::vector<float> reference() const {
    std::vector<float> out(q.size());
    const size_t qrow = static_cast<size_t>(num_q_heads) * head_dim, krow = static_cast<size_t>(num_kv_heads) * head_dim;
    for (int s = 0; s < num_seqs(); ++s)
      dense_attention_ref(q.data() + cu_q[s] * qrow, k.data() + cu_k[s] * krow, v.data() + cu_k[s] * krow,
                          out.data() + cu_q[s] * qrow, cu_q[s + 1] - cu_q[s], cu_k[s + 1] - cu_k[s], num_q_heads,
                          num_kv_heads, head_dim, scale, causal);
    return out;
  }
};

inline VarlenProblem make_varlen_problem(Rng& rng, DType dtype, int num_q_heads, int num_kv_heads, int head_dim,
                                         bool causal, const std::vector<int>& q_lens, const std::vector<int>& k_lens) {
  VarlenProblem p;
  p.dtype = dtype;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.causal = causal;
  p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (size_t s = 0; s < q_lens.size(); ++s) {
    p.cu_q.push_back(p.cu_q.back() + q_lens[s]);
    p.cu_k.push_back(p.cu_k.back() + k_lens[s]);
  }
  p.q = random_normal(rng, static_cast<size_t>(p.cu_q.back()) * num_q_heads * head_dim, dtype);
  p.k = random_normal(rng, static_cast<size_t>(p.cu_k.back()) * num_kv_heads * head_dim, dtype);
  p.v = random_normal(rng, static_cast<size_t>(p.cu_k.back()) * num_kv_heads * head_dim, dtype);
  return p;
}

// A problem whose every query is zero, so each visible key scores 0 and gets
// weight exactly 1 before normalisation, and whose value at position j, dim x
// is (j + x) mod 8 (exact in bf16/fp16): the output is the mean of the
// visible positions' values, a small rational the kernel must reproduce to
// the output's rounding. A key dropped or counted twice moves some dim by at
// least 0.5 / n of its value range (n <= 64 here), several times that bound.
inline PagedProblem structured(const PagedProblem& random) {
  PagedProblem p = random;
  std::fill(p.q.begin(), p.q.end(), 0.0f);
  for (int s = 0; s < p.num_seqs(); ++s)
    for (int pos = 0; pos < p.seq_lens[s]; ++pos)
      for (int g = 0; g < p.layout.num_kv_heads; ++g) {
        const size_t off = p.layout.offset(p.indices[p.indptr[s] + pos / p.layout.block_size], g, pos % p.layout.block_size);
        for (int x = 0; x < p.layout.head_dim; ++x) p.v_cache[off + x] = static_cast<float>((pos + x) % 8);
      }
  return p;
}

// Elements outside |out - ref| <= 2^-7 |ref| + 1e-3 (twice bf16's rounding),
// NaN included: tight enough that one key too many or too few shows
// (test_attention_ref.cpp checks that it does). *first gets the first one.
inline size_t tight_mismatches(const std::vector<float>& out, const std::vector<float>& ref, size_t* first = nullptr) {
  size_t bad = 0;
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    const bool ok = std::isfinite(out[i]) && std::abs(out[i] - ref[i]) <= 0.0078125 * std::abs(ref[i]) + 1e-3;
    if (!ok && bad++ == 0 && first) *first = i;
  }
  return bad + (out.size() > ref.size() ? out.size() - ref.size() : ref.size() - out.size());
}


}  // namespace testbed::test
