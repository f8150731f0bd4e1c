// The CUDA executor's host-side step inputs (engine/cuda/step_inputs.h),
// checked without a GPU: the shared flattening packed into one upload, and a
// decode split plan only when there are one-row items.
#include <catch2/catch.hpp>
#include <memory>
#include <numeric>

#include "engine/cuda/step_inputs.h"

using namespace testbed;

TEST_CASE("step inputs pack every index array into one upload", "[cuda_step]") {
  Request r0;
  r0.id = 0;
  r0.prompt.resize(10);
  std::iota(r0.prompt.begin(), r0.prompt.end(), 0);
  Sequence decode(r0);
  decode.block_table = {7, 2, 9};
  decode.append_token(555);
  Request r2;
  r2.id = 2;
  r2.prompt.resize(12);
  std::iota(r2.prompt.begin(), r2.prompt.end(), 200);
  Sequence rest(r2);
  rest.block_table = {8, 6, 10};
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
