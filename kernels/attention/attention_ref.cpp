#include "kernels/attention/attention_ref.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace testbed {
namespace {
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;
using Map = Eigen::Map<RowMat>;
}  // namespace

void paged_attention_ref(const float* q, float* out, int num_tokens, int num_q_heads, const int32_t* token_seq,
                         const int32_t* token_pos, const float* k_cache, const float* v_cache,
                         const KvLayout& layout, const PagedKvTable& table, float scale) {
  const int d = layout.head_dim, bs = layout.block_size;
  const int group = num_q_heads / layout.num_kv_heads;
  RowMat scores;
  for (int t = 0; t < num_tokens; ++t) {
    const int s = token_seq[t];
    const int ctx = token_pos[t] + 1;
    const int32_t* blocks = table.indices + table.indptr[s];
    const int num_blocks = (ctx + bs - 1) / bs;
    scores.resize(group, ctx);
    for (int g = 0; g < layout.num_kv_heads; ++g) {
      ConstMap qg(q + (static_cast<size_t>(t) * num_q_heads + g * group) * d, group, d);
      for (int b = 0; b < num_blocks; ++b) {
        const int len = std::min(bs, ctx - b * bs);
        ConstMap kb(k_cache + layout.offset(blocks[b], g, 0), len, d);
        scores.middleCols(b * bs, len).noalias() = qg * kb.transpose();
      }
      Map og(out + (static_cast<size_t>(t) * num_q_heads + g * group) * d, group, d);
      og.setZero();
      for (int r = 0; r < group; ++r) {
        float* row = scores.row(r).data();
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < ctx; ++j) mx = std::max(mx, row[j] * scale);
        float sum = 0.0f;
        for (int j = 0; j < ctx; ++j) {
          row[j] = std::exp(row[j] * scale - mx);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < ctx; ++j) row[j] *= inv;
      }
      for (int b = 0; b < num_blocks; ++b) {
        const int len = std::min(bs, ctx - b * bs);
        ConstMap vb(v_cache + layout.offset(blocks[b], g, 0), len, d);
        og.noalias() += scores.middleCols(b * bs, len) * vb;
      }
    }
  }
}

void dense_attention_ref(const float* q, const float* k, const float* v, float* out, int num_q, int num_k,
                         int num_q_heads, int num_kv_heads, int head_dim, float scale, bool causal) {
  const int group = num_q_heads / num_kv_heads;
  std::vector<double> p(num_k);
  for (int i = 0; i < num_q; ++i) {
    const int last = causal ? num_k - num_q + i : num_k - 1;
    for (int h = 0; h < num_q_heads; ++h) {
      const int g = h / group;
      const float* qi = q + (static_cast<size_t>(i) * num_q_heads + h) * head_dim;
      double mx = -std::numeric_limits<double>::infinity();
      for (int j = 0; j <= last; ++j) {
        const float* kj = k + (static_cast<size_t>(j) * num_kv_heads + g) * head_dim;
        double dot = 0;
        for (int x = 0; x < head_dim; ++x) dot += static_cast<double>(qi[x]) * kj[x];
        p[j] = dot * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int j = 0; j <= last; ++j) sum += (p[j] = std::exp(p[j] - mx));
      float* o = out + (static_cast<size_t>(i) * num_q_heads + h) * head_dim;
      for (int x = 0; x < head_dim; ++x) {
        double acc = 0;
        for (int j = 0; j <= last; ++j) acc += p[j] * v[(static_cast<size_t>(j) * num_kv_heads + g) * head_dim + x];
        o[x] = static_cast<float>(acc / sum);
      }
    }
  }
}

}  // namespace testbed
