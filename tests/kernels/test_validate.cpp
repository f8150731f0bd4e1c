// The kernel tests' validation helper and problem generators, checked on the
// CPU: they decide whether a GPU kernel passes, so they get tests of their own.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <set>

#include "attention_problem.h"
#include "validate.h"

using namespace testbed;
using namespace testbed::test;

TEST_CASE("validate accepts outputs within the dtype tolerance", "[validate]") {
  std::vector<float> ref = {1.0f, -2.0f, 0.5f, 3.0f};
  std::vector<float> out = ref;
  out[1] += 0.004f;  // about one bf16 ulp at 2
  const ValidationResult r = validate("close", out, ref, Tolerance::for_dtype(DType::kBF16));
  CHECK(r.ok);
  CHECK(r.report.empty());
  CHECK(r.max_abs_err == Approx(0.004).margin(1e-6));
}

TEST_CASE("validate fails on NaN and Inf, i.e. on unwritten (poisoned) elements", "[validate]") {
  std::vector<float> ref(6, 1.0f), out(6, 1.0f);
  out[4] = std::numeric_limits<float>::quiet_NaN();
  ValidationResult r = validate("nan", out, ref, Tolerance::for_dtype(DType::kBF16), {2, 3});
  CHECK_FALSE(r.ok);
  CHECK(r.num_bad_values == 1);
  CHECK(r.report.find("[1, 1]") != std::string::npos);  // flat 4 in a 2x3 tensor
  out[4] = std::numeric_limits<float>::infinity();
  r = validate("inf", out, ref, Tolerance::for_dtype(DType::kFP16));
  CHECK_FALSE(r.ok);
  CHECK(r.num_bad_values == 1);
}

TEST_CASE("validate reports the first mismatches with their indices", "[validate]") {
  std::vector<float> ref(24, 1.0f), out(24, 1.0f);
  out[5] = 1.5f;
  out[23] = 0.0f;
  const ValidationResult r = validate("bad", out, ref, Tolerance::for_dtype(DType::kFP16), {2, 3, 4});
  CHECK_FALSE(r.ok);
  CHECK(r.num_mismatches == 2);
  CHECK(r.report.find("[0, 1, 1]") != std::string::npos);
  CHECK(r.report.find("[1, 2, 3]") != std::string::npos);
}

TEST_CASE("validate fails on a small bias everywhere through the relative L2 bound", "[validate]") {
  std::vector<float> ref(1000), out(1000);
  for (size_t i = 0; i < ref.size(); ++i) {
    ref[i] = static_cast<float>(std::sin(0.1 * i));
    out[i] = ref[i] * 1.015f;  // within atol + rtol per element, 1.5% in L2
  }
  const ValidationResult r = validate("bias", out, ref, Tolerance::for_dtype(DType::kBF16));
  CHECK(r.num_mismatches == 0);
  CHECK(r.rel_l2 == Approx(0.015).epsilon(1e-3));
  CHECK_FALSE(r.ok);
  CHECK(validate("sizes", std::vector<float>(3), std::vector<float>(4), Tolerance{}).ok == false);
}

TEST_CASE("fp16 tolerances are tighter than bf16 ones, and rounding matches them", "[validate]") {
  const Tolerance bf = Tolerance::for_dtype(DType::kBF16), fp = Tolerance::for_dtype(DType::kFP16);
  CHECK(fp.rel_l2 < bf.rel_l2);
  CHECK(fp.atol < bf.atol);
  Rng rng(1);
  std::vector<float> v(4096);
  for (float& x : v) x = static_cast<float>(rng.normal());
  for (DType t : {DType::kBF16, DType::kFP16}) {
    const std::vector<float> r = round_to(v, t);
    // Round to nearest: relative error at most half an ulp, 2^-8 for bf16 (8
    // significant bits) and 2^-11 for fp16 (11), for normal numbers.
    const double half_ulp = t == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    for (size_t i = 0; i < v.size(); ++i)
      if (std::abs(v[i]) > 1e-3f) REQUIRE(std::abs(r[i] - v[i]) <= half_ulp * std::abs(v[i]) * 1.0001);
    CHECK(round_to(r, t) == r);  // idempotent: representable values stay put
    // A rounded input keeps its reference well inside the tolerance of its own dtype.
    CHECK(validate("rounding", r, v, Tolerance::for_dtype(t)).ok);
  }
}

TEST_CASE("paged problems poison every slot no sequence owns, and their reference stays finite", "[validate]") {
  Rng rng(7);
  const std::vector<int> ctx = {0, 13, 40}, qlen = {5, 1, 17};
  const PagedProblem p = make_paged_problem(rng, DType::kBF16, 8, 2, 64, 16, ctx, qlen);
  CHECK(p.num_tokens() == 23);
  CHECK(p.max_q_len() == 17);
  CHECK(p.max_seq_len() == 57);
  std::set<int32_t> ids(p.indices.begin(), p.indices.end());
  CHECK(ids.size() == p.indices.size());  // every physical block owned once
  size_t owned = 0, nan = 0;
  for (float x : p.k_cache) (std::isnan(x) ? nan : owned) += 1;
  size_t tokens = 0;
  for (int32_t len : p.seq_lens) tokens += static_cast<size_t>(len);
  CHECK(owned == tokens * 2 * 64);
  CHECK(nan == p.k_cache.size() - owned);
  CHECK(nan >= static_cast<size_t>(3 * p.layout.block_stride()));  // the spare blocks
  const std::vector<float> ref = p.reference();
  for (float x : ref) REQUIRE(std::isfinite(x));
  CHECK(p.token_pos[5] == 13);  // sequence 1's only query sits after its 13 cached tokens
}

TEST_CASE("varlen problems agree with the paged reference on the same keys", "[validate]") {
  Rng rng(3);
  const VarlenProblem v = make_varlen_problem(rng, DType::kFP16, 4, 1, 64, true, {3, 9}, {10, 9});
  const std::vector<float> ref = v.reference();
  REQUIRE(ref.size() == v.q.size());
  for (float x : ref) REQUIRE(std::isfinite(x));
  CHECK(v.max_q_len() == 9);
  CHECK(v.out_shape() == std::vector<int64_t>{12, 4, 64});
}

TEST_CASE("validate fails a row that is wrong as a whole though each element is within atol", "[validate]") {
  // 16 rows of 64: fifteen of magnitude 1, one of magnitude 1e-3 returned doubled.
  std::vector<float> ref(16 * 64), out;
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = (i / 64 == 5 ? 1e-3f : 1.0f) * ((i % 7) - 3.0f) / 3.0f;
  out = ref;
  for (size_t i = 5 * 64; i < 6 * 64; ++i) out[i] *= 2;
  const Tolerance tol = Tolerance::for_dtype(DType::kBF16);
  const ValidationResult flat = validate("flat", out, ref, tol);  // no shape: no rows to judge
  CHECK(flat.ok);
  const ValidationResult rows = validate("rows", out, ref, tol, {16, 64});
  CHECK_FALSE(rows.ok);
  CHECK(rows.num_bad_rows == 1);
  CHECK(rows.num_mismatches == 0);
  CHECK_THAT(rows.report, Catch::Contains("[5, 0]"));
}
