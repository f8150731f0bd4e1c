// The one definition of the paged KV cache layout, shared by the KvCacheManager
// (which hands out block ids), the executors and the attention kernels.
//
// Per layer, K and V are each an array
//     [num_blocks][num_kv_heads][block_size][head_dim]        ("HND")
// so one (block, head) is a contiguous block_size x head_dim tile: a decode
// kernel reads it with unit stride, and a CPU reference maps it as a matrix.
//
// A batch's block tables travel as a CSR triple (as in FlashInfer):
//     sequence i owns blocks indices[indptr[i] .. indptr[i+1])  (logical order)
//     and holds seq_lens[i] tokens (the last block may be partly filled).
// Token position p of sequence i lives in block indices[indptr[i] + p / block_size],
// slot p % block_size.
#pragma once

#include <cstddef>
#include <cstdint>

namespace testbed {

struct KvLayout {
  int num_blocks = 0;
  int block_size = 16;
  int num_kv_heads = 0;
  int head_dim = 0;

  size_t head_stride() const { return static_cast<size_t>(block_size) * head_dim; }
  size_t block_stride() const { return head_stride() * num_kv_heads; }
  size_t num_elements() const { return block_stride() * num_blocks; }
  // Element offset of (block, head, slot, 0).
  size_t offset(int block, int head, int slot) const {
    return block * block_stride() + head * head_stride() + static_cast<size_t>(slot) * head_dim;
  }
};

struct PagedKvTable {
  const int32_t* indptr = nullptr;    // [num_seqs + 1]
  const int32_t* indices = nullptr;   // [indptr[num_seqs]]  physical block ids
  const int32_t* seq_lens = nullptr;  // [num_seqs]          tokens held (context incl. new)
  int num_seqs = 0;
};

}  // namespace testbed
