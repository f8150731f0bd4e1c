// Speculative verification on the GPU (kernels/spec/verify.h for the rules).
// One block per sequence walks its k drafts in order. Per row: greedy takes a
// block-wide argmax (ties to the lowest id); rejection sampling makes the
// accept test on one thread and, at a rejection or for the bonus token,
// draws by inverse CDF: each thread sums a contiguous chunk of the weights in
// double, thread 0 finds the chunk holding u * total, and that chunk is
// scanned in order. The draws are spec_uniform's (spec_rng.h), as on the CPU.
#include <cuda_runtime_api.h>

#include <cfloat>

#include "kernels/spec/spec_rng.h"
#include "kernels/spec/verify.h"

namespace testbed {
namespace {

constexpr int kThreads = 256;

struct Shared {
  double chunk[kThreads];
  float best_value[kThreads];
  int best_index[kThreads];
  int token;
  int accept;
};

// The first maximum of p[0 .. vocab) (NaN-free input).
__device__ int block_argmax(const float* p, int vocab, Shared& s) {
  float best = -FLT_MAX;
  int index = vocab;  // "none yet" sorts after every id
  for (int v = threadIdx.x; v < vocab; v += blockDim.x)
    if (p[v] > best) best = p[v], index = v;
  s.best_value[threadIdx.x] = best;
  s.best_index[threadIdx.x] = index;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float ov = s.best_value[threadIdx.x + stride];
      const int oi = s.best_index[threadIdx.x + stride];
      if (ov > s.best_value[threadIdx.x] || (ov == s.best_value[threadIdx.x] && oi < s.best_index[threadIdx.x])) {
        s.best_value[threadIdx.x] = ov;
        s.best_index[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  const int result = s.best_index[0];
  __syncthreads();
  return result;
}

__device__ __forceinline__ float weight(const float* p, const float* q, int v) {
  return q ? fmaxf(0.0f, p[v] - q[v]) : p[v];
}

// A draw from the weights max(0, p - q) (or p when q is null) at uniform u;
// -1 when they are all zero. The same rule as sample_from_probs_ref.
__device__ int block_sample(const float* p, const float* q, int vocab, double u, Shared& s) {
  const int chunk = (vocab + blockDim.x - 1) / blockDim.x;
  const int begin = min(vocab, static_cast<int>(threadIdx.x) * chunk), end = min(vocab, begin + chunk);
  double sum = 0;
  for (int v = begin; v < end; ++v) sum += weight(p, q, v);
  s.chunk[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int t = 0; t < blockDim.x; ++t) total += s.chunk[t];
    int token = -1;
    if (total > 0) {
      const double target = u * total;
      double before = 0;
      int c = 0;
      for (; c < blockDim.x && before + s.chunk[c] <= target; ++c) before += s.chunk[c];
      if (c < blockDim.x) {
        const int b = min(vocab, c * chunk), e = min(vocab, b + chunk);
        double running = before;
        for (int v = b; v < e && token < 0; ++v) {
          const float w = weight(p, q, v);
          if (w <= 0) continue;
          running += w;
          if (running > target) token = v;
        }
      }
      for (int v = vocab - 1; token < 0 && v >= 0; --v)  // rounding left u * total at the total
        if (weight(p, q, v) > 0) token = v;
    }
    s.token = token;
  }
  __syncthreads();
  const int token = s.token;
  __syncthreads();
  return token;
}

__global__ void verify_kernel(VerifyBatch b, VerifyOutput out, bool rejection) {
  __shared__ Shared s;
  const int i = blockIdx.x;
  const int first = b.draft_offsets[i], k = b.draft_offsets[i + 1] - first;
  const float* p_rows = b.target_probs + static_cast<size_t>(first + i) * b.vocab;
  int32_t* emit = out.out_tokens + first + i;
  int j = 0;
  int token = -1;
  for (; j < k; ++j) {
    const float* p = p_rows + static_cast<size_t>(j) * b.vocab;
    const int32_t x = b.draft_tokens[first + j];
    const bool valid = x >= 0 && x < b.vocab;
    if (!rejection) {
      const int best = block_argmax(p, b.vocab, s);
      if (valid && best == x) {
        if (threadIdx.x == 0) emit[j] = x;
        continue;
      }
      token = best;
      break;
    }
    const float* q = b.draft_probs + static_cast<size_t>(first + j) * b.vocab;
    if (threadIdx.x == 0)
      s.accept = valid && spec_uniform(b.seeds[i], b.request_ids[i], b.positions[i] + j, kSpecAccept) * q[x] < p[x];
    __syncthreads();
    const bool accept = s.accept;
    __syncthreads();
    if (accept) {
      if (threadIdx.x == 0) emit[j] = x;
      continue;
    }
    const double u = spec_uniform(b.seeds[i], b.request_ids[i], b.positions[i] + j, kSpecSample);
    token = block_sample(p, q, b.vocab, u, s);
    if (token < 0) token = block_sample(p, nullptr, b.vocab, u, s);  // p = q up to rounding
    if (token < 0) token = 0;                                         // an all-zero row, as the reference
    break;
  }
  if (j == k) {
    const float* p = p_rows + static_cast<size_t>(k) * b.vocab;
    token = rejection ? block_sample(p, nullptr, b.vocab,
                                     spec_uniform(b.seeds[i], b.request_ids[i], b.positions[i] + k, kSpecSample), s)
                      : block_argmax(p, b.vocab, s);
    if (token < 0) token = 0;  // an all-zero row: nothing to draw from
  }
  if (threadIdx.x == 0) {
    emit[j] = token;
    out.num_accepted[i] = j;
  }
}

}  // namespace

cudaError_t launch_verify(const VerifyBatch& batch, const VerifyOutput& out, bool rejection, cudaStream_t stream) {
  if (batch.num_seqs < 0 || batch.vocab <= 0) return cudaErrorInvalidValue;
  if (batch.num_seqs == 0) return cudaSuccess;
  if (!batch.draft_offsets || !batch.target_probs || !out.num_accepted || !out.out_tokens) return cudaErrorInvalidValue;
  if (rejection && (!batch.seeds || !batch.request_ids || !batch.positions)) return cudaErrorInvalidValue;
  verify_kernel<<<batch.num_seqs, kThreads, 0, stream>>>(batch, out, rejection);
  return cudaGetLastError();
}

}  // namespace testbed
