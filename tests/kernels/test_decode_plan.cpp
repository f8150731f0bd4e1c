// The host-side split plan of paged decode attention: it must cover every key
// with non-empty splits of whole tiles, split only when it pays (an idle GPU
// or a ragged last wave of CTAs), and size the merge scratch to match.
#include <catch2/catch.hpp>

#include "kernels/attention/decode_plan.h"

using namespace testbed;

namespace {

// The plan's own cost model: waves of CTAs times the keys one CTA walks.
double modelled_cost(const DecodePlan& p, int seqs, int kv_heads, int len, int slots) {
  const long ctas = static_cast<long>(seqs) * kv_heads * p.num_splits;
  const int chunk = p.num_splits == 1 ? len : p.chunk_size;
  return static_cast<double>((ctas + slots - 1) / slots) * (chunk + kDecodeTileKeys);
}

}  // namespace

TEST_CASE("decode plan covers every key with whole tiles and never loses to no split", "[decode_plan]") {
  for (int num_seqs : {1, 2, 7, 64, 512})
    for (int kv_heads : {1, 8})
      for (int max_len : {1, 63, 64, 255, 1000, 4096, 32768, 131072})
        for (int sms : {1, 132})
          for (int per_sm : {1, 3}) {
            const DecodePlan p = plan_decode(num_seqs, kv_heads, max_len, sms, per_sm);
            INFO("seqs " << num_seqs << " kv " << kv_heads << " len " << max_len << " sms " << sms << "x" << per_sm);
            REQUIRE(p.num_splits >= 1);
            CHECK(modelled_cost(p, num_seqs, kv_heads, max_len, sms * per_sm) <=
                  modelled_cost(DecodePlan{}, num_seqs, kv_heads, max_len, sms * per_sm));
            if (p.num_splits == 1) {
              CHECK(p.chunk_size == 0);
              continue;
            }
            CHECK(p.chunk_size % kDecodeTileKeys == 0);
            CHECK(p.chunk_size >= kDecodeMinChunk);
            CHECK(static_cast<long>(p.num_splits) * p.chunk_size >= max_len);     // every key has a split
            CHECK(static_cast<long>(p.num_splits - 1) * p.chunk_size < max_len);  // no split is empty
          }
}

TEST_CASE("decode plan fills an idle GPU and evens out a ragged last wave", "[decode_plan]") {
  // One long sequence: split until the 8 KV heads' CTAs fill the SMs (one wave).
  const DecodePlan one = plan_decode(1, 8, 32768, 132, 2);
  CHECK(one.num_splits > 16);
  CHECK(8L * one.num_splits <= 264);
  CHECK(plan_decode(1, 8, 200, 132).num_splits == 1);  // too short to be worth a merge
  // 256 x 8 = 2048 CTAs fill 264 slots in 7.8 waves: splitting cannot do better.
  CHECK(plan_decode(256, 8, 32768, 132, 2).num_splits == 1);
  // 64 x 8 = 512 CTAs on 396 slots leave the second wave 30% full; splitting evens it.
  const DecodePlan ragged = plan_decode(64, 8, 32768, 132, 3);
  CHECK(ragged.num_splits > 1);
  const long ctas = 512L * ragged.num_splits;
  CHECK(static_cast<double>(ctas) / (((ctas + 395) / 396) * 396) > 0.85);  // waves at least 85% full
}

TEST_CASE("decode workspace holds partial outputs and log-sum-exps", "[decode_plan]") {
  CHECK(decode_workspace_bytes(DecodePlan{}, 8, 32, 128) == 0);
  const DecodePlan p{5, 256};
  CHECK(decode_workspace_bytes(p, 3, 32, 128) == 3u * 32 * 5 * (128 + 1) * sizeof(float));
}
