// How the attention kernels find one key/value row: through the paged block
// table (kv_layout.h) or in a contiguous varlen tensor. The prefill kernel is
// templated on one of these, so the tiling and softmax code exists once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace testbed {

// K/V of one layer in the paged cache, [num_blocks][num_kv_heads][block_size][head_dim].
template <class T>
struct PagedKv {
  const T* k;
  const T* v;
  const int32_t* indptr;    // [num_seqs + 1]
  const int32_t* indices;   // physical block ids, logical order per sequence
  const int32_t* seq_lens;  // [num_seqs]
  int block_size;
  int head_dim;
  size_t head_stride;   // block_size * head_dim
  size_t block_stride;  // num_kv_heads * head_stride

  __device__ __forceinline__ int kv_len(int s) const { return seq_lens[s]; }
  // Element offset of (sequence s, position p, KV head g, dim 0); p < kv_len(s).
  __device__ __forceinline__ size_t row_offset(int s, int p, int g) const {
    const int block = indices[indptr[s] + p / block_size];
    return static_cast<size_t>(block) * block_stride + static_cast<size_t>(g) * head_stride +
           static_cast<size_t>(p % block_size) * head_dim;
  }
};

// K/V as [total_k][num_kv_heads][head_dim] with sequence s at rows cu_k[s] .. cu_k[s+1]-1.
template <class T>
struct ContiguousKv {
  const T* k;
  const T* v;
  const int32_t* cu_k;  // [num_seqs + 1]
  int num_kv_heads;
  int head_dim;

  __device__ __forceinline__ int kv_len(int s) const { return cu_k[s + 1] - cu_k[s]; }
  __device__ __forceinline__ size_t row_offset(int s, int p, int g) const {
    return (static_cast<size_t>(cu_k[s] + p) * num_kv_heads + g) * head_dim;
  }
};

}  // namespace testbed
