// The host-side split plan of paged decode attention: it must cover every key,
// use whole tiles, split only when the GPU would otherwise idle, and size the
// merge scratch to match.
#include <catch2/catch.hpp>

#include "kernels/attention/decode_plan.h"

using namespace testbed;

TEST_CASE("decode plan covers every key with whole tiles", "[decode_plan]") {
  for (int num_seqs : {1, 2, 7, 64, 512})
    for (int kv_heads : {1, 8})
      for (int max_len : {1, 63, 64, 255, 1000, 4096, 32768, 131072})
        for (int sms : {1, 132}) {
          const DecodePlan p = plan_decode(num_seqs, kv_heads, max_len, sms);
          INFO("seqs " << num_seqs << " kv " << kv_heads << " len " << max_len << " sms " << sms);
          REQUIRE(p.num_splits >= 1);
          if (p.num_splits == 1) {
            CHECK(p.chunk_size == 0);
            continue;
          }
          CHECK(p.chunk_size % kDecodeTileKeys == 0);
          CHECK(p.chunk_size >= kDecodeMinChunk);
          CHECK(static_cast<long>(p.num_splits) * p.chunk_size >= max_len);           // every key has a split
          CHECK(static_cast<long>(p.num_splits - 1) * p.chunk_size < max_len);        // no split is empty
          CHECK(static_cast<long>(num_seqs) * kv_heads * p.num_splits <= 4L * sms + num_seqs * kv_heads);
        }
}

TEST_CASE("decode plan splits long contexts of small batches and leaves big batches alone", "[decode_plan]") {
  CHECK(plan_decode(1, 8, 32768, 132).num_splits > 1);
  CHECK(plan_decode(1, 8, 200, 132).num_splits == 1);    // too short to be worth a merge
  CHECK(plan_decode(256, 8, 32768, 132).num_splits == 1);  // 2048 CTAs already fill the GPU
  const DecodePlan p = plan_decode(4, 8, 16384, 132);
  CHECK(4 * 8 * p.num_splits >= 2 * 132 - 4 * 8);  // about two CTAs per SM
}

TEST_CASE("decode workspace holds partial outputs and log-sum-exps", "[decode_plan]") {
  CHECK(decode_workspace_bytes(DecodePlan{}, 8, 32, 128) == 0);
  const DecodePlan p{5, 256};
  CHECK(decode_workspace_bytes(p, 3, 32, 128) == 3u * 32 * 5 * (128 + 1) * sizeof(float));
}
