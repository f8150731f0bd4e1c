// Paged decode attention (flash-decoding): one query token per sequence.
//
// Grid = (splits, KV heads, sequences). A CTA reads one KV head's keys of one
// split of one sequence ONCE and serves every q head of that GQA group from
// them, which is what makes decode memory-bound rather than read-amplified.
// Per 64-key tile (double-buffered through cp.async, keys past the split
// zero-filled):
//   1. scores: thread t takes key t % 64 and every other q head (t / 64 picks
//      which half); the K row is converted once and reused across its heads;
//   2. online softmax: one warp per head updates (m, l) and turns the scores
//      into probabilities in shared memory;
//   3. O = alpha O + P V: thread t owns one pair of output dims for a quarter or
//      a half of the heads, reading each V row once per tile.
// With one split the CTA writes O / l. Otherwise it writes O / l and the
// log2-sum-exp m + log2(l) to fp32 scratch, and decode_merge_kernel combines
// the splits with weights exp2(lse_k - max_k lse_k).
#include "kernels/attention/attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/attention/kv_access.cuh"
#include "kernels/common/device_utils.cuh"

namespace testbed {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = kDecodeTileKeys;
constexpr int kPad = 8;  // shifts each smem row by 4 banks: conflict-free row-per-lane reads
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kTile == 64, "the softmax phase gives each lane keys lane and lane + 32");

template <int D>
size_t decode_smem_bytes(int group) {
  return 4ull * kTile * (D + kPad) * 2                 // [buffer][K or V][key][dim], 16-bit
         + sizeof(float) * (group * D                  // q, pre-scaled
                            + group * kTile            // scores / probabilities
                            + 3 * group);              // m, l, alpha
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const T* __restrict__ q, T* __restrict__ out, PagedKv<T> kv, int num_q_heads, int group,
                            float scale_log2, int chunk_size, int num_splits, float* __restrict__ partial_o,
                            float* __restrict__ partial_lse) {
  using H = Half16<T>;
  constexpr int S = D + kPad;
  constexpr int kChunksPerRow = D / 8;
  constexpr int kScoreSets = kThreads / kTile;        // head subsets in the score phase
  constexpr int kPairs = D / 2;                       // output dim pairs per head
  constexpr int kOutSets = kThreads / kPairs;         // head subsets in the PV phase
  constexpr int kScoreHeads = kDecodeMaxGroup / kScoreSets;
  constexpr int kOutHeads = kDecodeMaxGroup / kOutSets;
  static_assert(kThreads % kPairs == 0 && kDecodeMaxGroup % kOutSets == 0, "thread mapping");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* kv_s = reinterpret_cast<T*>(smem_raw);  // [2 buffers][K, V][kTile][S]
  float* q_s = reinterpret_cast<float*>(smem_raw + 4ull * kTile * S * sizeof(T));  // [group][D]
  float* s_s = q_s + group * D;  // [group][kTile]
  float* m_s = s_s + group * kTile;
  float* l_s = m_s + group;
  float* a_s = l_s + group;

  const int s = blockIdx.z, g_kv = blockIdx.y, split = blockIdx.x;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int len = kv.kv_len(s);
  const int k_begin = num_splits > 1 ? split * chunk_size : 0;
  if (num_splits > 1 && k_begin >= len) return;  // empty split: the merge kernel skips it
  // The last split runs to the end, so no key is lost whatever the plan assumed.
  const int k_end = (num_splits == 1 || split == num_splits - 1) ? len : min(len, k_begin + chunk_size);
  const int num_tiles = k_end > k_begin ? (k_end - k_begin + kTile - 1) / kTile : 0;
  const int h0 = g_kv * group;  // first q head of the group
  const size_t q_row0 = static_cast<size_t>(s) * num_q_heads + h0;

  for (int i = tid; i < group * D; i += kThreads) q_s[i] = H::to_float(q[q_row0 * D + i]) * scale_log2;
  for (int i = tid; i < group; i += kThreads) {
    m_s[i] = -INFINITY;
    l_s[i] = 0.0f;
  }

  auto load_tile = [&](int tile, int buf) {
    T* kd = kv_s + (2 * buf) * kTile * S;
    T* vd = kd + kTile * S;
    for (int c = tid; c < kTile * kChunksPerRow; c += kThreads) {
      const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const int p = k_begin + tile * kTile + r;
      const bool valid = p < k_end;
      const size_t off = valid ? kv.row_offset(s, p, g_kv) + col : 0;
      cp_async_16(kd + r * S + col, kv.k + off, valid);
      cp_async_16(vd + r * S + col, kv.v + off, valid);
    }
  };
  if (num_tiles > 0) load_tile(0, 0);
  cp_async_commit();
  __syncthreads();  // q_s, m_s, l_s visible (also when there is no tile)

  const int skey = tid % kTile, sset = tid / kTile;  // score phase
  const int pair = tid % kPairs, oset = tid / kPairs;  // PV phase
  float2 acc[kOutHeads];
#pragma unroll
  for (int i = 0; i < kOutHeads; ++i) acc[i] = make_float2(0.0f, 0.0f);

  for (int j = 0; j < num_tiles; ++j) {
    const int buf = j & 1;
    // Tile j landed; every thread finished tile j-1 (its buffer, s_s and a_s are free).
    cp_async_wait_all();
    __syncthreads();
    if (j + 1 < num_tiles) load_tile(j + 1, buf ^ 1);
    cp_async_commit();
    const T* kt = kv_s + (2 * buf) * kTile * S;
    const T* vt = kt + kTile * S;
    const int tile_begin = k_begin + j * kTile;

    {  // 1. scores of key skey for heads sset, sset + kScoreSets, ...
      float dot[kScoreHeads];
#pragma unroll
      for (int i = 0; i < kScoreHeads; ++i) dot[i] = 0.0f;
      const T* krow = kt + skey * S;
#pragma unroll 4
      for (int c = 0; c < D; c += 8) {
        const uint4 raw = *reinterpret_cast<const uint4*>(krow + c);
        const float2 k0 = H::to_float2(raw.x), k1 = H::to_float2(raw.y), k2 = H::to_float2(raw.z),
                     k3 = H::to_float2(raw.w);
#pragma unroll
        for (int i = 0; i < kScoreHeads; ++i) {
          const int h = sset + i * kScoreSets;
          if (h < group) {
            const float4 qa = *reinterpret_cast<const float4*>(q_s + h * D + c);
            const float4 qb = *reinterpret_cast<const float4*>(q_s + h * D + c + 4);
            dot[i] += qa.x * k0.x + qa.y * k0.y + qa.z * k1.x + qa.w * k1.y + qb.x * k2.x + qb.y * k2.y +
                      qb.z * k3.x + qb.w * k3.y;
          }
        }
      }
      const bool valid = tile_begin + skey < k_end;
#pragma unroll
      for (int i = 0; i < kScoreHeads; ++i) {
        const int h = sset + i * kScoreSets;
        if (h < group) s_s[h * kTile + skey] = valid ? dot[i] : -INFINITY;
      }
    }
    __syncthreads();

    // 2. online softmax, one warp per head. m_use = 0 for a row still at -inf
    // keeps exp2(-inf - m_use) = 0 instead of NaN.
    for (int h = warp; h < group; h += kThreads / 32) {
      float* row = s_s + h * kTile;
      const float s0 = row[lane], s1 = row[lane + 32];
      const float m_old = m_s[h], l_old = l_s[h];
      const float m_new = fmaxf(m_old, warp_max(fmaxf(s0, s1)));
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float p0 = exp2f(s0 - m_use), p1 = exp2f(s1 - m_use);
      row[lane] = p0;
      row[lane + 32] = p1;
      const float sum = warp_sum(p0 + p1);
      __syncwarp();  // every lane has read m_s[h] / l_s[h] before lane 0 rewrites them
      if (lane == 0) {
        const float alpha = exp2f(m_old - m_use);
        a_s[h] = alpha;
        l_s[h] = l_old * alpha + sum;
        m_s[h] = m_new;
      }
    }
    __syncthreads();

    {  // 3. O = alpha O + P V for dims 2*pair, 2*pair+1 of heads oset, oset + kOutSets, ...
#pragma unroll
      for (int i = 0; i < kOutHeads; ++i) {
        const int h = oset + i * kOutSets;
        const float alpha = h < group ? a_s[h] : 0.0f;
        acc[i].x *= alpha;
        acc[i].y *= alpha;
      }
      for (int n = 0; n < kTile; n += 4) {
        float2 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) v[u] = H::to_float2(*reinterpret_cast<const uint32_t*>(vt + (n + u) * S + 2 * pair));
#pragma unroll
        for (int i = 0; i < kOutHeads; ++i) {
          const int h = oset + i * kOutSets;
          if (h < group) {
            const float4 p = *reinterpret_cast<const float4*>(s_s + h * kTile + n);
            acc[i].x += p.x * v[0].x + p.y * v[1].x + p.z * v[2].x + p.w * v[3].x;
            acc[i].y += p.x * v[0].y + p.y * v[1].y + p.z * v[2].y + p.w * v[3].y;
          }
        }
      }
    }
  }

  // m_s / l_s were last written before the barrier that ended phase 2.
#pragma unroll
  for (int i = 0; i < kOutHeads; ++i) {
    const int h = oset + i * kOutSets;
    if (h >= group) continue;
    const float l = l_s[h];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const size_t row = q_row0 + h;
    if (num_splits == 1) {
      *reinterpret_cast<uint32_t*>(out + row * D + 2 * pair) = H::pack(acc[i].x * inv, acc[i].y * inv);
    } else {
      *reinterpret_cast<float2*>(partial_o + (row * num_splits + split) * D + 2 * pair) =
          make_float2(acc[i].x * inv, acc[i].y * inv);
    }
  }
  if (num_splits > 1) {
    for (int h = tid; h < group; h += kThreads) {
      const float l = l_s[h];
      partial_lse[(q_row0 + h) * num_splits + split] = l > 0.0f ? m_s[h] + log2f(l) : -INFINITY;
    }
  }
}

// One CTA per (q head, sequence), one thread per dim: weighted sum of the splits.
template <class T, int D>
__global__ void __launch_bounds__(D)
    decode_merge_kernel(const float* __restrict__ partial_o, const float* __restrict__ partial_lse,
                        const int32_t* __restrict__ seq_lens, int chunk_size, int num_splits, int num_q_heads,
                        T* __restrict__ out) {
  const int h = blockIdx.x, s = blockIdx.y, x = threadIdx.x;
  const int len = seq_lens[s];
  // Splits the attention kernel wrote: those that start before len.
  const int num_valid = len <= 0 ? 0 : min(num_splits, (len + chunk_size - 1) / chunk_size);
  const size_t row = static_cast<size_t>(s) * num_q_heads + h;
  const float* lse = partial_lse + row * num_splits;
  float mx = -INFINITY;
  for (int k = 0; k < num_valid; ++k) mx = fmaxf(mx, lse[k]);
  float wsum = 0.0f, acc = 0.0f;
  if (mx != -INFINITY) {
    for (int k = 0; k < num_valid; ++k) {
      const float w = exp2f(lse[k] - mx);
      wsum += w;
      acc += w * partial_o[(row * num_splits + k) * D + x];
    }
  }
  out[row * D + x] = Half16<T>::from_float(wsum > 0.0f ? acc / wsum : 0.0f);
}

template <class T, int D>
int ctas_per_sm_typed(int group) {
  const size_t smem = decode_smem_bytes<D>(group);
  auto kernel = decode_attention_kernel<T, D>;
  int n = 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem) != cudaSuccess) {
    cudaGetLastError();  // the query is advisory: clear its error
    return 1;
  }
  return n > 0 ? n : 1;
}

template <class T, int D>
cudaError_t decode_typed(const PagedDecodeParams& p, cudaStream_t stream) {
  const int group = p.num_q_heads / p.layout.num_kv_heads;
  const int num_seqs = p.table.num_seqs;
  const PagedKv<T> kv{static_cast<const T*>(p.k_cache), static_cast<const T*>(p.v_cache), p.table.indptr,
                      p.table.indices, p.table.seq_lens, p.layout.block_size, D, p.layout.head_stride(),
                      p.layout.block_stride()};
  const int splits = p.plan.num_splits;
  float* partial_o = static_cast<float*>(p.workspace);
  float* partial_lse = splits > 1 ? partial_o + static_cast<size_t>(num_seqs) * p.num_q_heads * splits * D : nullptr;

  const size_t smem = decode_smem_bytes<D>(group);
  auto kernel = decode_attention_kernel<T, D>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(splits, p.layout.num_kv_heads, num_seqs);
  kernel<<<grid, kThreads, smem, stream>>>(static_cast<const T*>(p.q), static_cast<T*>(p.out), kv, p.num_q_heads, group,
                                           p.scale * kLog2e, p.plan.chunk_size, splits, partial_o, partial_lse);
  err = cudaGetLastError();
  if (err != cudaSuccess || splits == 1) return err;
  decode_merge_kernel<T, D><<<dim3(p.num_q_heads, num_seqs), D, 0, stream>>>(
      partial_o, partial_lse, p.table.seq_lens, p.plan.chunk_size, splits, p.num_q_heads, static_cast<T*>(p.out));
  return cudaGetLastError();
}

}  // namespace

int decode_ctas_per_sm(DType dtype, int head_dim, int group) {
  if (group < 1 || group > kDecodeMaxGroup || (head_dim != 64 && head_dim != 128)) return 1;
  if (dtype == DType::kBF16)
    return head_dim == 64 ? ctas_per_sm_typed<__nv_bfloat16, 64>(group) : ctas_per_sm_typed<__nv_bfloat16, 128>(group);
  if (dtype == DType::kFP16)
    return head_dim == 64 ? ctas_per_sm_typed<__half, 64>(group) : ctas_per_sm_typed<__half, 128>(group);
  return 1;
}

cudaError_t launch_paged_decode_attention(const PagedDecodeParams& p, cudaStream_t stream) {
  const int d = p.layout.head_dim, kvh = p.layout.num_kv_heads;
  const bool ok = (p.dtype == DType::kBF16 || p.dtype == DType::kFP16) && (d == 64 || d == 128) && kvh > 0 &&
                  kvh <= 65535 && p.num_q_heads > 0 && p.num_q_heads % kvh == 0 &&
                  p.num_q_heads / kvh <= kDecodeMaxGroup && p.layout.block_size > 0 && p.table.num_seqs <= 65535 &&
                  p.plan.num_splits >= 1 &&
                  (p.plan.num_splits == 1 || (p.plan.chunk_size > 0 && p.workspace != nullptr));
  if (!ok) return cudaErrorInvalidValue;
  if (p.table.num_seqs <= 0) return cudaSuccess;
  if (p.dtype == DType::kBF16)
    return d == 64 ? decode_typed<__nv_bfloat16, 64>(p, stream) : decode_typed<__nv_bfloat16, 128>(p, stream);
  return d == 64 ? decode_typed<__half, 64>(p, stream) : decode_typed<__half, 128>(p, stream);
}

}  // namespace testbed
