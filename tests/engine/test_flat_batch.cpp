// The CUDA executor's host-side flattening (engine/cuda/step_inputs.h), checked
// without a GPU: the rows, positions, KV slots, CSR table and sampling rows
// must be what CpuExecutor computes, reordered prefill-first.
#include <catch2/catch.hpp>
#include <memory>
#include <numeric>

#include "engine/cuda/step_inputs.h"

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

TEST_CASE("flatten_batch orders prefill chunks before decodes and mirrors the CPU flattening", "[cuda_step]") {
  const int bs = 4;
  auto decode = make_seq(0, 10, {7, 2, 9});        // 10 prompt tokens computed, one output token to compute
  decode->append_token(555);
  auto chunk = make_seq(1, 30, {0, 1, 3, 4, 5});   // first chunk of 20 of a 30-token prompt: no sample
  auto rest = make_seq(2, 12, {8, 6, 10});         // 5 cached, 7 new: finishes the prompt, samples
  Batch b;
  b.items.push_back({decode.get(), 10, 1});
  b.items.push_back({chunk.get(), 0, 20});
  b.items.push_back({rest.get(), 5, 7});
  StepInputs in = flatten_batch(b, bs, 64, 2, 132);

  CHECK(in.num_prefill == 2);
  CHECK(in.num_decode == 1);
  CHECK(in.num_tokens() == 28);
  CHECK(in.num_prefill_rows == 27);
  CHECK(in.max_q_len == 20);
  CHECK(in.max_decode_len == 11);
  CHECK(in.q_indptr == std::vector<int32_t>{0, 20, 27});
  // Items 1, 2, 0 in that order: whole block tables, lengths = computed + new.
  CHECK(in.kv_indptr == std::vector<int32_t>{0, 5, 8, 11});
  CHECK(in.kv_indices == std::vector<int32_t>{0, 1, 3, 4, 5, 8, 6, 10, 7, 2, 9});
  CHECK(in.seq_lens == std::vector<int32_t>{20, 12, 11});
  // Row 20 is item 2's position 5: token 205, block table[1] = 6, slot 1 -> 6 * 4 + 1.
  CHECK(in.token_ids[20] == 205);
  CHECK(in.positions[20] == 5);
  CHECK(in.slot_mapping[20] == 25);
  // Row 19 is item 1's position 19: block table[4] = 5, slot 3.
  CHECK(in.slot_mapping[19] == 23);
  // The decode row: position 10 of item 0, the appended token, block table[2] = 9, slot 2.
  CHECK(in.token_ids[27] == 555);
  CHECK(in.positions[27] == 10);
  CHECK(in.slot_mapping[27] == 38);
  // Samples: item 2 from its last row (26), item 0 from row 27; item 1 does not sample.
  CHECK(in.sample_rows == std::vector<int32_t>{26, 27});
  CHECK(in.sample_items == std::vector<int>{2, 0});
  CHECK(in.plan.num_splits >= 1);

  const std::vector<int32_t> ints = in.pack();
  CHECK(ints[in.o_tokens + 27] == 555);
  CHECK(ints[in.o_positions + 20] == 5);
  CHECK(ints[in.o_q_indptr + 2] == 27);
  CHECK(ints[in.o_kv_indptr + 3] == 11);
  CHECK(ints[in.o_kv_indices + 8] == 7);
  CHECK(ints[in.o_seq_lens + 2] == 11);
  CHECK(ints[in.o_sample_rows + 1] == 27);
  CHECK(ints.size() == in.o_sample_rows + 2);
}

TEST_CASE("flatten_batch handles decode-only and prefill-only batches", "[cuda_step]") {
  auto a = make_seq(0, 3, {4});
  auto c = make_seq(1, 40, {0, 1, 2, 3, 5, 6, 7, 8, 9, 10});
  Batch decodes;
  a->append_token(9);
  decodes.items.push_back({a.get(), 3, 1});
  StepInputs d = flatten_batch(decodes, 4, 64, 8, 132);
  CHECK(d.num_prefill == 0);
  CHECK(d.num_prefill_rows == 0);
  CHECK(d.q_indptr == std::vector<int32_t>{0});
  CHECK(d.sample_rows == std::vector<int32_t>{0});
  Batch prefill;
  prefill.items.push_back({c.get(), 0, 40});
  StepInputs p = flatten_batch(prefill, 4, 64, 8, 132);
  CHECK(p.num_decode == 0);
  CHECK(p.plan.num_splits == 1);
  CHECK(p.num_prefill_rows == 40);
  CHECK(p.sample_rows == std::vector<int32_t>{39});
}

TEST_CASE("flatten_batch rejects positions past max_model_len and short block tables", "[cuda_step]") {
  auto s = make_seq(0, 20, {0, 1});  // 2 blocks of 4 hold 8 tokens, not 20
  Batch b;
  b.items.push_back({s.get(), 0, 20});
  CHECK_THROWS_AS(flatten_batch(b, 4, 64, 1, 1), std::runtime_error);
  s->block_table = {0, 1, 2, 3, 4};
  CHECK_NOTHROW(flatten_batch(b, 4, 64, 1, 1));
  CHECK_THROWS_AS(flatten_batch(b, 4, 16, 1, 1), std::runtime_error);
}
