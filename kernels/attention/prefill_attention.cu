// Prefill attention (FlashAttention-2 style): exact causal softmax attention in
// tiles, never materialising the scores. Paged (keys through the block table)
// and contiguous varlen (cu_seqlens) share one kernel templated on a K/V accessor.
//
// One CTA = 4 warps = 64 query rows of one q head of one sequence; each warp owns
// 16 rows, one m16n8k16 row block. Per 64-key tile:
//   1. cp.async has staged K and V (zero-filled past the visible keys) in shared
//      memory; the next tile is prefetched into the other buffer meanwhile;
//   2. S = Q K^T on tensor cores (Q fragments stay in registers), scaled into the
//      exp2 domain and causally masked;
//   3. online softmax in registers: the row max and rescale factor are shared by
//      the 4 lanes of a quad (shuffles), O and l are rescaled, P = exp2(S - m);
//   4. O += P V, with P's accumulator registers reused directly as the A operand.
// Finally O / l is written. Rows with no visible key (l = 0) are written as 0.
#include "kernels/attention/attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/attention/kv_access.cuh"
#include "kernels/common/device_utils.cuh"

namespace testbed {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockM = 16 * kWarps;  // query rows per CTA
constexpr int kBlockN = 64;           // keys per tile
// Row padding (elements): a padded row is 4 banks further on, so the 8 rows an
// ldmatrix phase or a fragment load touches fall in distinct banks.
constexpr int kPad = 8;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
constexpr size_t prefill_smem_bytes() {  // Q tile + double-buffered K and V tiles, 16-bit
  return static_cast<size_t>(kBlockM + 4 * kBlockN) * (D + kPad) * 2;
}

template <class T, int D, class Kv>
__global__ void __launch_bounds__(kThreads)
    prefill_attention_kernel(const T* __restrict__ q, T* __restrict__ out, const int32_t* __restrict__ q_indptr, Kv kv,
                             int num_q_heads, int group, float scale_log2, bool causal) {
  using H = Half16<T>;
  constexpr int S = D + kPad;
  constexpr int kChunksPerRow = D / 8;  // 16-byte chunks
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);  // [kBlockM][S]
  T* k_s = q_s + kBlockM * S;               // [2][kBlockN][S]
  T* v_s = k_s + 2 * kBlockN * S;           // [2][kBlockN][S]

  const int s = blockIdx.z, h = blockIdx.y;
  const int q_begin = q_indptr[s];
  const int q_len = q_indptr[s + 1] - q_begin;
  // The heaviest (last, under the causal mask) row tiles are scheduled first.
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kBlockM;
  if (m0 >= q_len) return;  // uniform per CTA, before any barrier

  const int kv_len = kv.kv_len(s);
  const int g_kv = h / group;
  const int q_offset = kv_len - q_len;  // position of query row 0
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gq = lane >> 2, tq = lane & 3;  // fragment row group / column pair
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: matrix index / row this lane addresses

  // Keys this CTA needs: up to its last row's position (causal) or all of them.
  const int last_row = min(m0 + kBlockM, q_len) - 1;
  const int num_keys = causal ? min(kv_len, q_offset + last_row + 1) : kv_len;
  const int num_tiles = num_keys > 0 ? (num_keys + kBlockN - 1) / kBlockN : 0;

  const size_t row_stride = static_cast<size_t>(num_q_heads) * D;
  const T* q_base = q + (static_cast<size_t>(q_begin) * num_q_heads + h) * D;
  T* out_base = out + (static_cast<size_t>(q_begin) * num_q_heads + h) * D;

  if (num_tiles == 0) {  // no visible key for any row: the l = 0 convention, zeros
    for (int i = tid; i < kBlockM * D; i += kThreads) {
      const int r = i / D;
      if (m0 + r < q_len) out_base[static_cast<size_t>(m0 + r) * row_stride + i % D] = H::from_float(0.0f);
    }
    return;
  }

  // Q tile (rows past q_len zero-filled) and the first K/V tile: one cp.async group.
  for (int c = tid; c < kBlockM * kChunksPerRow; c += kThreads) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const bool valid = m0 + r < q_len;
    cp_async_16(q_s + r * S + col, valid ? q_base + static_cast<size_t>(m0 + r) * row_stride + col : q, valid);
  }
  auto load_kv_tile = [&](int tile, int buf) {
    T* kd = k_s + buf * kBlockN * S;
    T* vd = v_s + buf * kBlockN * S;
    for (int c = tid; c < kBlockN * kChunksPerRow; c += kThreads) {
      const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const int p = tile * kBlockN + r;
      const bool valid = p < num_keys;
      const size_t off = valid ? kv.row_offset(s, p, g_kv) + col : 0;
      cp_async_16(kd + r * S + col, kv.k + off, valid);
      cp_async_16(vd + r * S + col, kv.v + off, valid);
    }
  };
  load_kv_tile(0, 0);
  cp_async_commit();

  // This thread holds rows row0 and row0 + 8 (within the sequence's queries).
  const int row0 = m0 + warp * 16 + gq;
  int key_limit[2];  // last key each row may see; rows past q_len only see real keys
#pragma unroll
  for (int r = 0; r < 2; ++r)
    key_limit[r] = causal ? min(q_offset + row0 + 8 * r, num_keys - 1) : num_keys - 1;
  // key_limit grows with the row, so the warp's first row bounds the whole warp.
  const int warp_min_limit = causal ? min(q_offset + m0 + warp * 16, num_keys - 1) : num_keys - 1;

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[nd][i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.0f, 0.0f};  // this lane's share of the row sums; the quad is summed at the end

  // Q and tile 0 have landed: this warp's Q rows go to registers (A fragments) once.
  cp_async_wait_all();
  __syncthreads();
  {
    const T* qw = q_s + warp * 16 * S;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const T* p = qw + kk * 16 + 2 * tq;
      qf[kk][0] = *reinterpret_cast<const uint32_t*>(p + gq * S);
      qf[kk][1] = *reinterpret_cast<const uint32_t*>(p + (gq + 8) * S);
      qf[kk][2] = *reinterpret_cast<const uint32_t*>(p + gq * S + 8);
      qf[kk][3] = *reinterpret_cast<const uint32_t*>(p + (gq + 8) * S + 8);
    }
  }

  for (int j = 0; j < num_tiles; ++j) {
    const int buf = j & 1;
    if (j > 0) {
      // Tile j has landed for every thread, and every warp is done with tile
      // j-1, whose buffer the prefetch below overwrites.
      cp_async_wait_all();
      __syncthreads();
    }
    if (j + 1 < num_tiles) load_kv_tile(j + 1, buf ^ 1);
    cp_async_commit();
    const T* kt = k_s + buf * kBlockN * S;
    const T* vt = v_s + buf * kBlockN * S;

    // S = Q K^T. B[k][n] = K[n][k]: ldmatrix (no transpose) of K rows gives the
    // B fragments of two 8-key blocks at once (matrices: keys +0/+8, dims +0/+8).
    float sc[kBlockN / 8][4];
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb)
#pragma unroll
      for (int i = 0; i < 4; ++i) sc[nb][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; nb += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, kt + (nb * 8 + (mi >> 1) * 8 + mr) * S + kk * 16 + (mi & 1) * 8);
        const uint32_t b_lo[2] = {b[0], b[1]}, b_hi[2] = {b[2], b[3]};
        mma_m16n8k16<T>(sc[nb], qf[kk], b_lo);
        mma_m16n8k16<T>(sc[nb + 1], qf[kk], b_hi);
      }
    }

    // Scale into the exp2 domain; mask keys past each row's limit.
    const int n0 = j * kBlockN;
    const bool need_mask = n0 + kBlockN - 1 > warp_min_limit;
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float v = sc[nb][i] * scale_log2;
        if (need_mask && n0 + nb * 8 + 2 * tq + (i & 1) > key_limit[i >> 1]) v = -INFINITY;
        sc[nb][i] = v;
      }

    // Online softmax. A fully masked row keeps m = -inf; m_use = 0 then keeps
    // exp2(-inf - m_use) = 0 instead of NaN.
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; ++nb) mx = fmaxf(mx, fmaxf(sc[nb][2 * r], sc[nb][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run[r], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      alpha[r] = exp2f(m_run[r] - m_use);
      m_run[r] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; ++nb)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float p = exp2f(sc[nb][2 * r + c] - m_use);
          sc[nb][2 * r + c] = p;
          sum += p;
        }
      l_run[r] = l_run[r] * alpha[r] + sum;
    }
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      o[nd][0] *= alpha[0];
      o[nd][1] *= alpha[0];
      o[nd][2] *= alpha[1];
      o[nd][3] *= alpha[1];
    }

    // O += P V. The C fragments of key blocks 2k2 and 2k2+1 are exactly the A
    // fragment of the 16-key block k2 (rows g/g+8, key pairs 2t and 2t+8).
    // B[k][n] = V[k][n]: ldmatrix.trans of V rows (matrices: keys +0/+8, dims +0/+8).
#pragma unroll
    for (int k2 = 0; k2 < kBlockN / 16; ++k2) {
      const uint32_t pa[4] = {H::pack(sc[2 * k2][0], sc[2 * k2][1]), H::pack(sc[2 * k2][2], sc[2 * k2][3]),
                              H::pack(sc[2 * k2 + 1][0], sc[2 * k2 + 1][1]),
                              H::pack(sc[2 * k2 + 1][2], sc[2 * k2 + 1][3])};
#pragma unroll
      for (int nd = 0; nd < D / 8; nd += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vt + (k2 * 16 + (mi & 1) * 8 + mr) * S + nd * 8 + (mi >> 1) * 8);
        const uint32_t b_lo[2] = {b[0], b[1]}, b_hi[2] = {b[2], b[3]};
        mma_m16n8k16<T>(o[nd], pa, b_lo);
        mma_m16n8k16<T>(o[nd + 1], pa, b_hi);
      }
    }
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv[r] = l > 0.0f ? 1.0f / l : 0.0f;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    if (row >= q_len) continue;
    T* dst = out_base + static_cast<size_t>(row) * row_stride + 2 * tq;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
      *reinterpret_cast<uint32_t*>(dst + nd * 8) = H::pack(o[nd][2 * r] * inv[r], o[nd][2 * r + 1] * inv[r]);
  }
}

template <class T, int D, class Kv>
cudaError_t launch_prefill(const void* q, void* out, const int32_t* q_indptr, int num_seqs, int max_q_len, const Kv& kv,
                           int num_q_heads, int group, float scale, bool causal, cudaStream_t stream) {
  const size_t smem = prefill_smem_bytes<D>();
  auto kernel = prefill_attention_kernel<T, D, Kv>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid((max_q_len + kBlockM - 1) / kBlockM, num_q_heads, num_seqs);
  kernel<<<grid, kThreads, smem, stream>>>(static_cast<const T*>(q), static_cast<T*>(out), q_indptr, kv, num_q_heads,
                                           group, scale * kLog2e, causal);
  return cudaGetLastError();
}

bool shapes_ok(DType dtype, int head_dim, int num_q_heads, int num_kv_heads, int num_seqs) {
  return (dtype == DType::kBF16 || dtype == DType::kFP16) && (head_dim == 64 || head_dim == 128) &&
         num_kv_heads > 0 && num_q_heads > 0 && num_q_heads % num_kv_heads == 0 && num_q_heads <= 65535 &&
         num_seqs <= 65535;
}

template <class T, int D>
cudaError_t paged_typed(const PagedPrefillParams& p, cudaStream_t stream) {
  const PagedKv<T> kv{static_cast<const T*>(p.k_cache), static_cast<const T*>(p.v_cache), p.table.indptr,
                      p.table.indices, p.table.seq_lens, p.layout.block_size, D, p.layout.head_stride(),
                      p.layout.block_stride()};
  return launch_prefill<T, D>(p.q, p.out, p.q_indptr, p.table.num_seqs, p.max_q_len, kv, p.num_q_heads,
                              p.num_q_heads / p.layout.num_kv_heads, p.scale, true, stream);
}

template <class T, int D>
cudaError_t varlen_typed(const VarlenPrefillParams& p, cudaStream_t stream) {
  const ContiguousKv<T> kv{static_cast<const T*>(p.k), static_cast<const T*>(p.v), p.cu_seqlens_k, p.num_kv_heads, D};
  return launch_prefill<T, D>(p.q, p.out, p.cu_seqlens_q, p.num_seqs, p.max_q_len, kv, p.num_q_heads,
                              p.num_q_heads / p.num_kv_heads, p.scale, p.causal, stream);
}

}  // namespace

cudaError_t launch_paged_prefill_attention(const PagedPrefillParams& p, cudaStream_t stream) {
  const int d = p.layout.head_dim;
  if (!shapes_ok(p.dtype, d, p.num_q_heads, p.layout.num_kv_heads, p.table.num_seqs) || p.layout.block_size <= 0)
    return cudaErrorInvalidValue;
  if (p.table.num_seqs <= 0 || p.max_q_len <= 0) return cudaSuccess;
  if (p.dtype == DType::kBF16)
    return d == 64 ? paged_typed<__nv_bfloat16, 64>(p, stream) : paged_typed<__nv_bfloat16, 128>(p, stream);
  return d == 64 ? paged_typed<__half, 64>(p, stream) : paged_typed<__half, 128>(p, stream);
}

cudaError_t launch_varlen_prefill_attention(const VarlenPrefillParams& p, cudaStream_t stream) {
  if (!shapes_ok(p.dtype, p.head_dim, p.num_q_heads, p.num_kv_heads, p.num_seqs)) return cudaErrorInvalidValue;
  if (p.num_seqs <= 0 || p.max_q_len <= 0) return cudaSuccess;
  if (p.dtype == DType::kBF16)
    return p.head_dim == 64 ? varlen_typed<__nv_bfloat16, 64>(p, stream) : varlen_typed<__nv_bfloat16, 128>(p, stream);
  return p.head_dim == 64 ? varlen_typed<__half, 64>(p, stream) : varlen_typed<__half, 128>(p, stream);
}

}  // namespace testbed
