// The paged attention reference equals dense attention over the same K/V,
// whatever the block table's order, GQA ratio and length.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/common/rng.h"
#include "attention_problem.h"
#include "kernels/attention/attention_ref.h"

using namespace testbed;

TEST_CASE("paged attention over a block table equals dense attention", "[attention_ref]") {
  Rng rng(42);
  int cases = 0;
  for (int head_dim : {16, 64}) {
    for (int group : {1, 4, 8}) {
      for (int block_size : {1, 5, 16}) {
        const int kv_heads = 1 + static_cast<int>(rng.below(2));
        const int q_heads = kv_heads * group;
        const int num_seqs = 1 + static_cast<int>(rng.below(3));
        // Each sequence: a context already cached plus new query tokens.
        std::vector<int> ctx(num_seqs), new_tokens(num_seqs);
        int total_blocks = 0;
        for (int s = 0; s < num_seqs; ++s) {
          ctx[s] = static_cast<int>(rng.below(40));
          new_tokens[s] = 1 + static_cast<int>(rng.below(20));
          total_blocks += (ctx[s] + new_tokens[s] + block_size - 1) / block_size;
        }
        KvLayout layout{total_blocks + 3, block_size, kv_heads, head_dim};
        std::vector<float> kc(layout.num_elements()), vc(layout.num_elements());
        for (float& v : kc) v = static_cast<float>(rng.normal());
        for (float& v : vc) v = static_cast<float>(rng.normal());
        std::vector<int32_t> perm(layout.num_blocks);  // shuffled physical blocks
        std::iota(perm.begin(), perm.end(), 0);
        for (size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
        std::vector<int32_t> indptr{0}, indices, lens, token_seq, token_pos;
        for (int s = 0, next = 0; s < num_seqs; ++s) {
          const int len = ctx[s] + new_tokens[s];
          for (int b = 0; b < (len + block_size - 1) / block_size; ++b) indices.push_back(perm[next++]);
          indptr.push_back(static_cast<int32_t>(indices.size()));
          lens.push_back(len);
          for (int p = ctx[s]; p < len; ++p) {
            token_seq.push_back(s);
            token_pos.push_back(p);
          }
        }
        const int T = static_cast<int>(token_seq.size());
        std::vector<float> q(static_cast<size_t>(T) * q_heads * head_dim), out(q.size(), NAN);
        for (float& v : q) v = static_cast<float>(rng.normal());
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        PagedKvTable table{indptr.data(), indices.data(), lens.data(), num_seqs};
        paged_attention_ref(q.data(), out.data(), T, q_heads, token_seq.data(), token_pos.data(), kc.data(), vc.data(),
                            layout, table, scale);
        // Dense: gather each sequence's K/V in logical order.
        for (int s = 0, t0 = 0; s < num_seqs; ++s) {
          const int len = lens[s];
          std::vector<float> k(static_cast<size_t>(len) * kv_heads * head_dim), v(k.size());
          for (int p = 0; p < len; ++p)
            for (int g = 0; g < kv_heads; ++g) {
              const size_t off = layout.offset(indices[indptr[s] + p / block_size], g, p % block_size);
              std::copy_n(&kc[off], head_dim, &k[(static_cast<size_t>(p) * kv_heads + g) * head_dim]);
              std::copy_n(&vc[off], head_dim, &v[(static_cast<size_t>(p) * kv_heads + g) * head_dim]);
            }
          std::vector<float> ref(static_cast<size_t>(new_tokens[s]) * q_heads * head_dim);
          dense_attention_ref(&q[static_cast<size_t>(t0) * q_heads * head_dim], k.data(), v.data(), ref.data(),
                              new_tokens[s], len, q_heads, kv_heads, head_dim, scale, true);
          double err = 0;
          for (size_t i = 0; i < ref.size(); ++i) {
            const float o = out[static_cast<size_t>(t0) * q_heads * head_dim + i];
            REQUIRE(!std::isnan(o));
            err = std::max(err, static_cast<double>(std::abs(o - ref[i])));
          }
          INFO("d " << head_dim << " group " << group << " block " << block_size << " len " << len);
          CHECK(err < 2e-5);
          t0 += new_tokens[s];
          ++cases;
        }
      }
    }
  }
  CHECK(cases >= 18);
}

TEST_CASE("the structured attention check sees one key too many or too few", "[attention]") {
  using namespace testbed::test;
  // The GPU tests' structured problems (attention_problem.h): zero queries,
  // values (j + x) mod 8. The reference gives each visible position's mean;
  // a kernel that drops the first key, or reads one key twice, must fail the
  // tight check for every context length 2 .. 64.
  Rng rng(8);
  for (int n = 2; n <= 64; ++n) {
    INFO("n = " << n);
    const PagedProblem p = structured(make_paged_problem(rng, DType::kBF16, 2, 1, 64, 16, {n - 1}, {1}));
    const std::vector<float> ref = p.reference();
    std::vector<float> dropped(64), doubled(64);
    for (int x = 0; x < 64; ++x) {
      double all = 0;
      for (int j = 0; j < n; ++j) all += (j + x) % 8;
      CHECK(ref[x] == Approx(all / n).margin(1e-5));                 // the mean, exactly
      dropped[x] = static_cast<float>((all - x % 8) / (n - 1));        // key 0 left out
      doubled[x] = static_cast<float>((all + (n - 1 + x) % 8) / (n + 1));  // the last key twice
    }
    const std::vector<float> head0(ref.begin(), ref.begin() + 64);
    CHECK(tight_mismatches(head0, head0) == 0);
    CHECK(tight_mismatches(dropped, head0) > 0);
    CHECK(tight_mismatches(doubled, head0) > 0);
  }
}
