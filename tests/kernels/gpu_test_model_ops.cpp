// The forward-pass kernels (kernels/common/model_ops.h) against the CPU
// executor's own building blocks (engine/model/cpu_ops.h), on random inputs.
#include <catch2/catch.hpp>
#include <cmath>

#include "engine/model/cpu_ops.h"
#include "engine/common/rng.h"
#include "gpu_test_util.h"
#include "kernels/common/model_ops.h"

using namespace testbed;
using namespace testbed::test;

namespace {

std::vector<float> normal(Rng& rng, size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = scale * static_cast<float>(rng.normal());
  return v;
}

const Tolerance kF32{1e-5, 1e-5, 1e-5};

ModelConfig rope_model(int head_dim, bool llama3) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rope_theta = 500000.0;
  if (llama3) {
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = 8.0;
    c.rope_scaling.original_max_position_embeddings = 64;  // small, so the test positions cross every band
  }
  return c;
}

}  // namespace

TEST_CASE("embedding gather reads bf16 rows into fp32", "[gpu][ops]") {
  Rng rng(1);
  const int vocab = 300, hidden = 96;
  const std::vector<float> table = round_to(normal(rng, static_cast<size_t>(vocab) * hidden), DType::kBF16);
  const std::vector<int32_t> ids = {0, 299, 17, 17, 5};
  DeviceBuffer t = upload_as(table, DType::kBF16), d_ids = upload_ints(ids);
  DeviceBuffer out = poisoned(ids.size() * hidden, DType::kFP32);
  REQUIRE_LAUNCH(launch_embedding_gather(t.get(), d_ids.as<int32_t>(), 5, hidden, out.as<float>(), nullptr));
  std::vector<float> ref;
  for (int32_t id : ids) ref.insert(ref.end(), table.begin() + id * hidden, table.begin() + (id + 1) * hidden);
  CHECK_VALID(validate("embedding", out.download<float>(ref.size()), ref, Tolerance{0, 0, 0}));
}

TEST_CASE("rms norm matches the CPU op, whole rows and per head", "[gpu][ops]") {
  Rng rng(2);
  for (int dim : {64, 128, 1000, 4096}) {
    const int rows = 7;
    const std::vector<float> x = normal(rng, static_cast<size_t>(rows) * dim, 3.0f), w = normal(rng, dim);
    std::vector<float> ref(x.size());
    rms_norm(x.data(), w.data(), rows, dim, 1e-6f, ref.data());
    DeviceBuffer dx = upload_as(x, DType::kFP32), dw = upload_as(w, DType::kFP32);
    for (DType out_t : {DType::kFP32, DType::kBF16}) {
      DeviceBuffer out = poisoned(x.size(), out_t);
      REQUIRE_LAUNCH(launch_rms_norm(dx.as<float>(), dim, dw.as<float>(), rows, 1, dim, 1e-6f, out_t, out.get(), dim,
                                     nullptr));
      INFO("dim " << dim << " out " << dtype_name(out_t));
      CHECK_VALID(validate("rms_norm", download_as(out, x.size(), out_t), ref,
                           out_t == DType::kFP32 ? kF32 : Tolerance::for_dtype(DType::kBF16), {rows, dim}));
    }
  }
  // Qwen3 qk-norm: the k heads of fused [q | k | v] rows, normalised in place.
  const int T = 5, hq = 4, hkv = 2, d = 64, ld = (hq + 2 * hkv) * d;
  std::vector<float> qkv = normal(rng, static_cast<size_t>(T) * ld), w = normal(rng, d);
  std::vector<float> ref = qkv;
  for (int t = 0; t < T; ++t) rms_norm(&ref[t * ld + hq * d], w.data(), hkv, d, 1e-6f, &ref[t * ld + hq * d]);
  DeviceBuffer dq = upload_as(qkv, DType::kFP32), dw = upload_as(w, DType::kFP32);
  REQUIRE_LAUNCH(launch_rms_norm(dq.as<float>() + hq * d, ld, dw.as<float>(), T, hkv, d, 1e-6f, DType::kFP32,
                                 dq.as<float>() + hq * d, ld, nullptr));
  CHECK_VALID(validate("qk_norm in place", dq.download<float>(qkv.size()), ref, kF32, {T, ld}));
}

TEST_CASE("rope matches the CPU rotary table (plain and llama3-scaled)", "[gpu][ops]") {
  Rng rng(3);
  for (int d : {64, 128})
    for (bool llama3 : {false, true}) {
      const ModelConfig cfg = rope_model(d, llama3);
      const int max_pos = 600, T = 6, hq = 4, hkv = 2, ld = (hq + 2 * hkv) * d;
      const std::vector<int32_t> pos = {0, 1, 63, 64, 300, 599};
      std::vector<float> qkv = normal(rng, static_cast<size_t>(T) * ld), ref = qkv;
      const RopeTable table(cfg, max_pos);
      for (int t = 0; t < T; ++t) table.apply(&ref[t * ld], hq + hkv, pos[t]);  // v stays untouched
      const std::vector<double> inv = rope_inverse_frequencies(cfg);
      std::vector<float> c(static_cast<size_t>(max_pos) * d / 2), s(c.size());
      for (int p = 0; p < max_pos; ++p)
        for (int i = 0; i < d / 2; ++i) {
          c[p * d / 2 + i] = static_cast<float>(std::cos(p * inv[i]));
          s[p * d / 2 + i] = static_cast<float>(std::sin(p * inv[i]));
        }
      DeviceBuffer dx = upload_as(qkv, DType::kFP32), dp = upload_ints(pos);
      DeviceBuffer dc = upload_as(c, DType::kFP32), ds = upload_as(s, DType::kFP32);
      REQUIRE_LAUNCH(launch_rope(dx.as<float>(), ld, T, hq + hkv, d, dp.as<int32_t>(), dc.as<float>(), ds.as<float>(),
                                 nullptr));
      INFO("d " << d << " llama3 " << llama3);
      CHECK_VALID(validate("rope", dx.download<float>(qkv.size()), ref, kF32, {T, ld}));
    }
}

TEST_CASE("store_kv_cache writes bf16 K and V into their paged slots only", "[gpu][ops]") {
  Rng rng(4);
  const KvLayout layout{6, 5, 2, 64};
  const int T = 7, ld = 3 * layout.num_kv_heads * layout.head_dim, kv = layout.num_kv_heads * layout.head_dim;
  const std::vector<int32_t> slots = {0, 4, 5, 13, 29, 17, -1};  // -1: a padding token writes nothing
  const std::vector<float> rows = normal(rng, static_cast<size_t>(T) * ld);
  std::vector<float> k_ref(layout.num_elements(), 0.0f), v_ref = k_ref;
  for (int t = 0; t < T; ++t) {
    if (slots[t] < 0) continue;
    for (int g = 0; g < layout.num_kv_heads; ++g)
      for (int x = 0; x < layout.head_dim; ++x) {
        const size_t dst = layout.offset(slots[t] / layout.block_size, g, slots[t] % layout.block_size) + x;
        k_ref[dst] = rows[t * ld + kv + g * layout.head_dim + x];
        v_ref[dst] = rows[t * ld + 2 * kv + g * layout.head_dim + x];
      }
  }
  DeviceBuffer src = upload_as(rows, DType::kFP32), ds = upload_ints(slots);
  DeviceBuffer kc(layout.num_elements() * 2), vc(layout.num_elements() * 2);
  cuda_check(cudaMemset(kc.get(), 0, kc.bytes()), "zero");
  cuda_check(cudaMemset(vc.get(), 0, vc.bytes()), "zero");
  REQUIRE_LAUNCH(launch_store_kv_cache(src.as<float>() + kv, src.as<float>() + 2 * kv, ld, T, ds.as<int32_t>(), layout,
                                       kc.get(), vc.get(), nullptr));
  const std::vector<int64_t> shape = {layout.num_blocks, layout.num_kv_heads, layout.block_size, layout.head_dim};
  CHECK_VALID(validate("k cache", download_as(kc, k_ref.size(), DType::kBF16), k_ref, Tolerance::for_dtype(DType::kBF16),
                       shape));
  CHECK_VALID(validate("v cache", download_as(vc, v_ref.size(), DType::kBF16), v_ref, Tolerance::for_dtype(DType::kBF16),
                       shape));
}

TEST_CASE("silu_mul, bf16 row conversion and row gather", "[gpu][ops]") {
  Rng rng(5);
  const int T = 9, inter = 300;
  const std::vector<float> gu = normal(rng, static_cast<size_t>(T) * 2 * inter, 2.0f);
  std::vector<float> ref(static_cast<size_t>(T) * inter);
  for (int t = 0; t < T; ++t) silu_mul(&gu[t * 2 * inter], &gu[t * 2 * inter + inter], inter, &ref[t * inter]);
  DeviceBuffer dg = upload_as(gu, DType::kFP32), out = poisoned(ref.size(), DType::kBF16);
  REQUIRE_LAUNCH(launch_silu_mul(dg.as<float>(), T, inter, out.get(), nullptr));
  CHECK_VALID(validate("silu_mul", download_as(out, ref.size(), DType::kBF16), ref, Tolerance::for_dtype(DType::kBF16),
                       {T, inter}));

  // The first 100 columns of rows 2*inter wide, to a packed bf16 matrix.
  DeviceBuffer packed = poisoned(static_cast<size_t>(T) * 100, DType::kBF16);
  REQUIRE_LAUNCH(launch_f32_to_bf16_rows(dg.as<float>(), 2 * inter, T, 100, packed.get(), 100, nullptr));
  std::vector<float> cols;
  for (int t = 0; t < T; ++t) cols.insert(cols.end(), gu.begin() + t * 2 * inter, gu.begin() + t * 2 * inter + 100);
  CHECK_VALID(validate("f32_to_bf16_rows", download_as(packed, cols.size(), DType::kBF16), cols,
                       Tolerance::for_dtype(DType::kBF16), {T, 100}));

  const std::vector<int32_t> pick = {8, 0, 3};
  DeviceBuffer dp = upload_ints(pick), rows = poisoned(3 * 2 * inter, DType::kFP32);
  REQUIRE_LAUNCH(launch_gather_rows(dg.as<float>(), dp.as<int32_t>(), 3, 2 * inter, rows.as<float>(), nullptr));
  std::vector<float> picked;
  for (int r : pick) picked.insert(picked.end(), gu.begin() + r * 2 * inter, gu.begin() + (r + 1) * 2 * inter);
  CHECK_VALID(validate("gather_rows", rows.download<float>(picked.size()), picked, Tolerance{0, 0, 0}));
}

TEST_CASE("argmax is exact, ties go to the lowest id, NaN never wins", "[gpu][ops]") {
  Rng rng(6);
  const int vocab = 50000, rows = 4;
  std::vector<float> logits = normal(rng, static_cast<size_t>(rows) * vocab);
  logits[1 * vocab + 777] = 9.0f;  // row 1: a tie between 777 and 40000
  logits[1 * vocab + 40000] = 9.0f;
  for (int i = 0; i < vocab; ++i) logits[2 * vocab + i] = -1.0f;  // row 2: all equal -> id 0
  logits[3 * vocab + 5] = std::nanf("");                            // row 3: NaN ignored
  logits[3 * vocab + 6] = 20.0f;
  std::vector<int32_t> ref(rows);
  for (int r = 0; r < rows; ++r) {
    int best = 0;
    for (int i = 1; i < vocab; ++i)
      if (logits[r * vocab + i] > logits[r * vocab + best]) best = i;  // NaN compares false
    ref[r] = best;
  }
  CHECK(ref[1] == 777);
  CHECK(ref[2] == 0);
  CHECK(ref[3] == 6);
  DeviceBuffer dl = upload_as(logits, DType::kFP32), out(rows * sizeof(int32_t));
  REQUIRE_LAUNCH(launch_argmax(dl.as<float>(), rows, vocab, out.as<int32_t>(), nullptr));
  CHECK(out.download<int32_t>(rows) == ref);
}
