// The flattener the CPU and CUDA executors share (engine/flat_batch.h):
// rows, positions, KV slots, the CSR table and the verified rows, with the
// multi-row items first; proposed tokens are rows too.
#include <catch2/catch.hpp>
#include <memory>
#include <numeric>

#include "engine/flat_batch.h"

using namespace testbed;

namespace {

std::unique_ptr<Sequence> make_seq(int64_t id, int prompt_len, std::vector<int32_t> blocks) {
  Request r;
  r.id = id;
  r.prompt.resize(prompt_len);
  std::iota(r.prompt.begin(), r.prompt.end(), static_cast<int32_t>(100 * id));  // token = 100 id + position
  auto s = std::make_unique<Sequence>(std::move(r));
  s->block_table = std::move(blocks);
  return s;
}

}  // namespace

TEST_CASE("flatten_batch orders prompt chunks before decodes", "[flat_batch]") {
  const int bs = 4;
  auto decode = make_seq(0, 10, {7, 2, 9});        // 10 prompt tokens computed, one output token to compute
  decode->append_token(555);
  auto chunk = make_seq(1, 30, {0, 1, 3, 4, 5});   // first chunk of 20 of a 30-token prompt: no sample
  auto rest = make_seq(2, 12, {8, 6, 10});         // 5 cached, 7 new: finishes the prompt, samples
  Batch b;
  b.add(decode.get(), 10, 1);
  b.add(chunk.get(), 0, 20);
  b.add(rest.get(), 5, 7);
  const FlatBatch f = flatten_batch(b, bs, 64);

  CHECK(f.num_multi == 2);
  CHECK(f.num_single == 1);
  CHECK(f.num_tokens() == 28);
  CHECK(f.num_multi_rows == 27);
  CHECK(f.max_q_len == 20);
  CHECK(f.max_single_len == 11);
  CHECK(f.order == std::vector<int32_t>{1, 2, 0});
  CHECK(f.q_indptr == std::vector<int32_t>{0, 20, 27});
  // Items 1, 2, 0 in that order: whole block tables, lengths = computed + new.
  CHECK(f.kv_indptr == std::vector<int32_t>{0, 5, 8, 11});
  CHECK(f.kv_indices == std::vector<int32_t>{0, 1, 3, 4, 5, 8, 6, 10, 7, 2, 9});
  CHECK(f.seq_lens == std::vector<int32_t>{20, 12, 11});
  // Row 20 is item 2's position 5: token 205, block table[1] = 6, slot 1 -> 6 * 4 + 1.
  CHECK(f.token_ids[20] == 205);
  CHECK(f.positions[20] == 5);
  CHECK(f.slot_mapping[20] == 25);
  CHECK(f.row_item[20] == 1);
  // Row 19 is item 1's position 19: block table[4] = 5, slot 3.
  CHECK(f.slot_mapping[19] == 23);
  // The decode row: position 10 of item 0, the appended token, block table[2] = 9, slot 2.
  CHECK(f.token_ids[27] == 555);
  CHECK(f.positions[27] == 10);
  CHECK(f.slot_mapping[27] == 38);
  // Verified rows per batch item: item 0 samples row 27, item 1 nothing, item 2 its last row (26).
  CHECK(f.logit_indptr == std::vector<int32_t>{0, 1, 1, 2});
  CHECK(f.logit_rows == std::vector<int32_t>{27, 26});
}

TEST_CASE("a decode that verifies proposed tokens is a multi-row item over its drafts", "[flat_batch]") {
  auto s = make_seq(3, 6, {0, 1, 2});
  s->append_token(42);           // 7 tokens known, 6 computed
  const int32_t drafts[] = {50, 51, 52};
  s->set_draft_tokens(drafts, 3);
  Batch b;
  b.add(s.get(), 6, 4, 3);        // the last known token and three drafts
  REQUIRE(b.items[0].samples());
  REQUIRE(b.items[0].is_decode());
  CHECK(b.num_decode_tokens == 4);
  const FlatBatch f = flatten_batch(b, 4, 64);
  CHECK(f.num_multi == 1);
  CHECK(f.token_ids == std::vector<int32_t>{42, 50, 51, 52});
  CHECK(f.positions == std::vector<int32_t>{6, 7, 8, 9});
  CHECK(f.slot_mapping == std::vector<int32_t>{1 * 4 + 2, 1 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1});
  CHECK(f.logit_rows == std::vector<int32_t>{0, 1, 2, 3});  // every position is verified
  CHECK(f.seq_lens == std::vector<int32_t>{10});
}

TEST_CASE("flatten_batch handles decode-only and prefill-only batches", "[flat_batch]") {
  auto a = make_seq(0, 3, {4});
  auto c = make_seq(1, 40, {0, 1, 2, 3, 5, 6, 7, 8, 9, 10});
  Batch decodes;
  a->append_token(9);
  decodes.add(a.get(), 3, 1);
  const FlatBatch d = flatten_batch(decodes, 4, 64);
  CHECK(d.num_multi == 0);
  CHECK(d.num_multi_rows == 0);
  CHECK(d.q_indptr == std::vector<int32_t>{0});
  CHECK(d.logit_rows == std::vector<int32_t>{0});
  Batch prefill;
  prefill.add(c.get(), 0, 40);
  const FlatBatch p = flatten_batch(prefill, 4, 64);
  CHECK(p.num_single == 0);
  CHECK(p.num_multi_rows == 40);
  CHECK(p.logit_rows == std::vector<int32_t>{39});
}

TEST_CASE("flatten_batch rejects positions past max_model_len and short block tables", "[flat_batch]") {
  auto s = make_seq(0, 20, {0, 1});  // 2 blocks of 4 hold 8 tokens, not 20
  Batch b;
  b.add(s.get(), 0, 20);
  CHECK_THROWS_AS(flatten_batch(b, 4, 64), std::logic_error);
  s->block_table = {0, 1, 2, 3, 4};
  CHECK_NOTHROW(flatten_batch(b, 4, 64));
  CHECK_THROWS_AS(flatten_batch(b, 4, 16), std::logic_error);
}
