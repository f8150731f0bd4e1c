// CUDA attention kernels against the CPU references, on fresh random inputs
// over a grid: dtypes bf16/fp16, head dims 64/128, GQA groups 1/4/8(/16),
// block sizes that do not divide the lengths, lengths that are not multiples of
// the tiles, empty and long contexts, forced and planned decode splits; and
// structured inputs (zero queries, values encoding the position) checked
// tightly, where a key dropped or read twice shows; a 2k x 2k causal prefill;
// blocks of 64 and 128 tokens. Outputs are poisoned with NaN before each launch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "attention_problem.h"
#include "gpu_test_util.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/naive_attention.h"

using namespace testbed;
using namespace testbed::test;

namespace {

const char* name(DType t) { return dtype_name(t); }

struct DevicePaged {
  DeviceBuffer q, k, v, indptr, indices, lens, q_indptr;
  explicit DevicePaged(const PagedProblem& p)
      : q(upload_as(p.q, p.dtype)),
        k(upload_as(p.k_cache, p.dtype)),
        v(upload_as(p.v_cache, p.dtype)),
        indptr(upload_ints(p.indptr)),
        indices(upload_ints(p.indices)),
        lens(upload_ints(p.seq_lens)),
        q_indptr(upload_ints(p.q_indptr)) {}
  PagedKvTable table(int num_seqs) const {
    return {indptr.as<int32_t>(), indices.as<int32_t>(), lens.as<int32_t>(), num_seqs};
  }
};

std::vector<float> run_paged_prefill(const PagedProblem& p) {
  DevicePaged dev(p);
  DeviceBuffer out = poisoned(p.q.size(), p.dtype);
  PagedPrefillParams prm;
  prm.dtype = p.dtype;
  prm.q = dev.q.get();
  prm.out = out.get();
  prm.q_indptr = dev.q_indptr.as<int32_t>();
  prm.num_q_heads = p.num_q_heads;
  prm.max_q_len = p.max_q_len();
  prm.k_cache = dev.k.get();
  prm.v_cache = dev.v.get();
  prm.layout = p.layout;
  prm.table = dev.table(p.num_seqs());
  prm.scale = p.scale;
  REQUIRE_LAUNCH(launch_paged_prefill_attention(prm, nullptr));
  return download_as(out, p.q.size(), p.dtype);
}

std::vector<float> run_paged_decode(const PagedProblem& p, const DecodePlan& plan) {
  DevicePaged dev(p);
  DeviceBuffer out = poisoned(p.q.size(), p.dtype);
  DeviceBuffer ws(std::max<size_t>(1, decode_workspace_bytes(plan, p.num_seqs(), p.num_q_heads, p.layout.head_dim)));
  cuda_check(cudaMemset(ws.get(), 0xFF, ws.bytes()), "poison workspace");  // stale partials would show
  PagedDecodeParams prm;
  prm.dtype = p.dtype;
  prm.q = dev.q.get();
  prm.out = out.get();
  prm.num_q_heads = p.num_q_heads;
  prm.k_cache = dev.k.get();
  prm.v_cache = dev.v.get();
  prm.layout = p.layout;
  prm.table = dev.table(p.num_seqs());
  prm.scale = p.scale;
  prm.plan = plan;
  prm.workspace = ws.get();
  REQUIRE_LAUNCH(launch_paged_decode_attention(prm, nullptr));
  return download_as(out, p.q.size(), p.dtype);
}

}  // namespace

namespace {

void check_tight(const std::vector<float>& out, const std::vector<float>& ref, const char* what) {
  size_t first = 0;
  const size_t bad = tight_mismatches(out, ref, &first);
  INFO(what << ": " << bad << " of " << out.size() << " elements off"
            << (bad && first < out.size() && first < ref.size()
                    ? ", first at " + std::to_string(first) + ": " + std::to_string(out[first]) + " vs " +
                          std::to_string(ref[first])
                    : std::string()));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("attention over structured inputs counts every visible key exactly once", "[gpu][prefill][decode]") {
  Rng rng(2024);
  for (DType dtype : {DType::kBF16, DType::kFP16})
    for (int d : {64, 128})
      for (int block_size : {16, 7, 64}) {
        INFO(name(dtype) << " d " << d << " block " << block_size);
        // Prefill: chunks after cached context, causal (query i sees ctx + i + 1 keys).
        const PagedProblem pre = structured(
            make_paged_problem(rng, dtype, 8, 2, d, block_size, {0, 5, 31}, {33, 27, 17}));
        check_tight(run_paged_prefill(pre), pre.reference(), "paged prefill");
        // Decode: one query over 1 .. 64 keys, with the planned and with forced splits.
        const PagedProblem dec =
            structured(make_paged_problem(rng, dtype, 16, 2, d, block_size, {0, 1, 15, 16, 47, 63}, {1, 1, 1, 1, 1, 1}));
        const std::vector<float> ref = dec.reference();
        for (const DecodePlan& plan : {DecodePlan{}, DecodePlan{4, 16}, plan_decode(dec.num_seqs(), 2, 64, 132)})
          check_tight(run_paged_decode(dec, plan), ref, "paged decode");
      }
}

TEST_CASE("long causal prefill and large blocks match the reference", "[gpu][prefill]") {
  Rng rng(4096);
  // 2,304 x 2,304 causal (many query and key tiles), then a chunk over a long
  // cached context, with blocks of 64 and 128 tokens.
  for (int block_size : {64, 128}) {
    INFO("block " << block_size);
    const PagedProblem p = make_paged_problem(rng, DType::kBF16, 8, 2, 128, block_size, {0, 1800}, {2304, 300});
    CHECK_VALID(validate("long paged prefill", run_paged_prefill(p), p.reference(),
                         Tolerance::for_dtype(DType::kBF16), p.out_shape()));
  }
}

TEST_CASE("paged prefill matches the reference over context + new tokens", "[gpu][prefill]") {
  Rng rng(1234);
  int cases = 0;
  for (DType dtype : {DType::kBF16, DType::kFP16})
    for (int d : {64, 128})
      for (int group : {1, 4, 8})
        for (int block_size : {16, 7}) {
          const int kv_heads = group == 8 ? 1 : 2;
          std::vector<int> ctx, qlen;
          const int num_seqs = 1 + cases % 3;
          for (int s = 0; s < num_seqs; ++s) {
            ctx.push_back(s == 0 ? 0 : static_cast<int>(rng.below(200)));  // 0: plain prefill; else cached context
            qlen.push_back(1 + static_cast<int>(rng.below(150)));
          }
          if (cases % 4 == 0) {  // a long chunk: several query tiles, ragged last key tile
            ctx.push_back(67);
            qlen.push_back(257);
          }
          const PagedProblem p = make_paged_problem(rng, dtype, kv_heads * group, kv_heads, d, block_size, ctx, qlen);
          INFO(name(dtype) << " d " << d << " group " << group << " block " << block_size << " seqs " << p.num_seqs());
          CHECK_VALID(validate("paged prefill", run_paged_prefill(p), p.reference(), Tolerance::for_dtype(dtype),
                               p.out_shape()));
          ++cases;
        }
  CHECK(cases == 24);
}

TEST_CASE("varlen prefill matches dense attention, causal and not", "[gpu][prefill]") {
  Rng rng(99);
  for (DType dtype : {DType::kBF16, DType::kFP16})
    for (int d : {64, 128})
      for (int group : {1, 4})
        for (bool causal : {true, false}) {
          std::vector<int> ql = {1, 65, 130, 17}, kl = {1, 65, 200, 64};  // kl >= ql for causal
          if (!causal) kl = {9, 3, 129, 64};
          const VarlenProblem p = make_varlen_problem(rng, dtype, 2 * group, 2, d, causal, ql, kl);
          DeviceBuffer q = upload_as(p.q, dtype), k = upload_as(p.k, dtype), v = upload_as(p.v, dtype);
          DeviceBuffer cq = upload_ints(p.cu_q), ck = upload_ints(p.cu_k);
          DeviceBuffer out = poisoned(p.q.size(), dtype);
          VarlenPrefillParams prm;
          prm.dtype = dtype;
          prm.q = q.get();
          prm.out = out.get();
          prm.k = k.get();
          prm.v = v.get();
          prm.cu_seqlens_q = cq.as<int32_t>();
          prm.cu_seqlens_k = ck.as<int32_t>();
          prm.num_seqs = p.num_seqs();
          prm.max_q_len = p.max_q_len();
          prm.num_q_heads = p.num_q_heads;
          prm.num_kv_heads = p.num_kv_heads;
          prm.head_dim = d;
          prm.causal = causal;
          prm.scale = p.scale;
          REQUIRE_LAUNCH(launch_varlen_prefill_attention(prm, nullptr));
          INFO(name(dtype) << " d " << d << " group " << group << " causal " << causal);
          CHECK_VALID(validate("varlen prefill", download_as(out, p.q.size(), dtype), p.reference(),
                               Tolerance::for_dtype(dtype), p.out_shape()));
        }
}

TEST_CASE("paged decode matches the reference with and without split-K", "[gpu][decode]") {
  Rng rng(77);
  for (DType dtype : {DType::kBF16, DType::kFP16})
    for (int d : {64, 128})
      for (int group : {1, 4, 8, 16})
        for (int block_size : {16, 3}) {
          const int kv_heads = group >= 8 ? 1 : 2;
          std::vector<int> lens = {1, 64, 65, 1 + static_cast<int>(rng.below(1500)),
                                   1 + static_cast<int>(rng.below(300))};
          std::vector<int> ctx, qlen;
          for (int len : lens) {
            ctx.push_back(len - 1);
            qlen.push_back(1);
          }
          const PagedProblem p = make_paged_problem(rng, dtype, kv_heads * group, kv_heads, d, block_size, ctx, qlen);
          const std::vector<float> ref = p.reference();
          const int max_len = p.max_seq_len();
          const DecodePlan forced{(max_len + kDecodeTileKeys - 1) / kDecodeTileKeys, kDecodeTileKeys};
          for (const DecodePlan& plan : {DecodePlan{}, forced, plan_decode(p.num_seqs(), kv_heads, max_len, 132)}) {
            INFO(name(dtype) << " d " << d << " group " << group << " block " << block_size << " splits "
                             << plan.num_splits << " chunk " << plan.chunk_size);
            CHECK_VALID(validate("paged decode", run_paged_decode(p, plan), ref, Tolerance::for_dtype(dtype),
                                 p.out_shape()));
          }
        }
}

TEST_CASE("decode and prefill agree on single-token queries", "[gpu][decode]") {
  Rng rng(5);
  const PagedProblem p = make_paged_problem(rng, DType::kBF16, 32, 8, 128, 16, {999, 0, 4096}, {1, 1, 1});
  const std::vector<float> a = run_paged_prefill(p);
  const std::vector<float> b = run_paged_decode(p, plan_decode(p.num_seqs(), 8, p.max_seq_len(), 132));
  CHECK_VALID(validate("decode vs prefill", b, a, Tolerance::for_dtype(DType::kBF16), p.out_shape()));
}

TEST_CASE("launchers reject unsupported shapes without launching", "[gpu][prefill][decode]") {
  PagedDecodeParams d;
  d.layout = KvLayout{4, 16, 1, 96};  // head_dim 96 is not instantiated
  d.num_q_heads = 1;
  d.table.num_seqs = 1;
  CHECK(launch_paged_decode_attention(d, nullptr) == cudaErrorInvalidValue);
  d.layout.head_dim = 128;
  d.num_q_heads = 17;  // group above kDecodeMaxGroup
  CHECK(launch_paged_decode_attention(d, nullptr) == cudaErrorInvalidValue);
  PagedPrefillParams p;
  p.layout = KvLayout{4, 16, 2, 64};
  p.num_q_heads = 3;  // not a multiple of the KV heads
  CHECK(launch_paged_prefill_attention(p, nullptr) == cudaErrorInvalidValue);
  p.dtype = DType::kFP32;
  p.num_q_heads = 4;
  CHECK(launch_paged_prefill_attention(p, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("naive attention (materialised scores) matches dense attention", "[gpu][naive]") {
  Rng rng(11);
  cublasHandle_t handle = nullptr;
  REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  for (DType dtype : {DType::kBF16, DType::kFP16})
    for (int d : {64, 128})
      for (bool causal : {true, false}) {
        const int batch = 2, q_len = 33, kv_len = 70, hkv = 2, hq = 8;
        const VarlenProblem p = make_varlen_problem(rng, dtype, hq, hkv, d, causal, {q_len, q_len}, {kv_len, kv_len});
        DeviceBuffer q = upload_as(p.q, dtype), k = upload_as(p.k, dtype), v = upload_as(p.v, dtype);
        DeviceBuffer out = poisoned(p.q.size(), dtype);
        DeviceBuffer ws(naive_attention_workspace_bytes(q_len, kv_len, hq, dtype));
        NaiveAttentionParams prm;
        prm.dtype = dtype;
        prm.q = q.get();
        prm.k = k.get();
        prm.v = v.get();
        prm.out = out.get();
        prm.batch = batch;
        prm.q_len = q_len;
        prm.kv_len = kv_len;
        prm.num_q_heads = hq;
        prm.num_kv_heads = hkv;
        prm.head_dim = d;
        prm.causal = causal;
        prm.scale = p.scale;
        prm.workspace = ws.get();
        REQUIRE_LAUNCH(launch_naive_attention(prm, handle, nullptr));
        INFO(name(dtype) << " d " << d << " causal " << causal);
        CHECK_VALID(validate("naive attention", download_as(out, p.q.size(), dtype), p.reference(),
                             Tolerance::for_dtype(dtype), p.out_shape()));
      }
  cublasDestroy(handle);
}
