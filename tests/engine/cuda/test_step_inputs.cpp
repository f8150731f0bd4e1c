// The CUDA executor's host-side step inputs (engine/cuda/step_inputs.h),
// checked without a GPU: the shared flattening packed into one upload, and a
// decode split plan only when there are one-row items.
#include <catch2/catch.hpp>
#include <memory>
#include <numeric>

#include "engine/cuda/step_inputs.h"

using namespace testbed;

namespace {

// A sequence whose prompt token at position p is 100 id + p, holding `blocks`.
std::unique_ptr<Sequence> make_seq(int64_t id, int prompt_len, std::vector<int32_t> blocks) {
  Request r;
  r.id = id;
  r.prompt.resize(prompt_len);
  std::iota(r.prompt.begin(), r.prompt.end(), static_cast<int32_t>(100 * id));
  auto s = std::make_unique<Sequence>(std::move(r));
  s->block_table = std::move(blocks);
  return s;
}

}  // namespace

TEST_CASE("step inputs pack every index array into one upload", "[cuda_step]") {
  auto decode_seq = make_seq(0, 10, {7, 2, 9});
  decode_seq->append_token(555);
  auto rest_seq = make_seq(2, 12, {8, 6, 10});
  Sequence& decode = *decode_seq;
  Sequence& rest = *rest_seq;
  Batch b;
  b.add(&decode, 10, 1);
  b.add(&rest, 5, 7);
  StepInputs in = make_step_inputs(b, 4, 64, 2, 132);
  CHECK(in.plan.num_splits >= 1);
  const std::vector<int32_t> ints = in.pack();
  CHECK(ints[in.o_tokens + 7] == 555);  // rows 0..6: rest's chunk; row 7: the decode
  CHECK(ints[in.o_positions + 0] == 5);
  CHECK(ints[in.o_q_indptr + 1] == 7);
  CHECK(ints[in.o_kv_indptr + 2] == 6);
  CHECK(ints[in.o_kv_indices + 3] == 7);
  CHECK(ints[in.o_seq_lens + 1] == 11);
  CHECK(ints[in.o_logit_rows + 0] == 7);  // batch item 0 (the decode) samples row 7
  CHECK(ints[in.o_logit_rows + 1] == 6);
  CHECK(ints.size() == in.o_logit_rows + 2);

  Batch prefill_only;
  prefill_only.add(&rest, 5, 7);
  CHECK(make_step_inputs(prefill_only, 4, 64, 2, 132).plan.num_splits == 1);
}
