// The speculative-verification kernel (kernels/spec/verify.cu) against the CPU
// references on random batches of variable-k sequences: greedy and rejection
// sampling, vocabularies up to 128k, accepted counts and emitted tokens equal.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "engine/common/rng.h"
#include "gpu_test_util.h"
#include "kernels/spec/verify.h"

using namespace testbed;
using namespace testbed::test;

namespace {

struct HostBatch {
  int vocab = 0;
  std::vector<int32_t> offsets{0}, drafts, positions;
  std::vector<float> p, q;
  std::vector<uint64_t> seeds;
  std::vector<int64_t> requests;
};

void fill_dist(Rng& rng, float* row, int vocab, bool peaked) {
  double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += row[v] = static_cast<float>(rng.exponential(1.0));
  if (peaked) row[rng.below(vocab)] += static_cast<float>(sum);  // a clear argmax, and drafts often right
  sum = 0;
  for (int v = 0; v < vocab; ++v) sum += row[v];
  for (int v = 0; v < vocab; ++v) row[v] = static_cast<float>(row[v] / sum);
}

HostBatch random_batch(Rng& rng, int num_seqs, int vocab, int max_k) {
  HostBatch h;
  h.vocab = vocab;
  for (int i = 0; i < num_seqs; ++i) {
    const int k = static_cast<int>(rng.below(max_k + 1));
    h.offsets.push_back(h.offsets.back() + k);
    h.seeds.push_back(rng.next_u64());
    h.requests.push_back(i);
    h.positions.push_back(static_cast<int32_t>(rng.below(10000)));
  }
  const int total = h.offsets.back();
  h.p.resize(static_cast<size_t>(total + num_seqs) * vocab);
  h.q.resize(static_cast<size_t>(total) * vocab);
  for (int r = 0; r < total + num_seqs; ++r) fill_dist(rng, &h.p[static_cast<size_t>(r) * vocab], vocab, r % 2 == 0);
  for (int r = 0; r < total; ++r) fill_dist(rng, &h.q[static_cast<size_t>(r) * vocab], vocab, r % 3 == 0);
  h.drafts.resize(total);
  for (int i = 0; i < num_seqs; ++i)
    for (int t = h.offsets[i]; t < h.offsets[i + 1]; ++t) {
      // Half the drafts are the target row's argmax (so greedy accepts some), half drawn from q.
      const float* p = &h.p[static_cast<size_t>(t + i) * vocab];
      h.drafts[t] = rng.below(2) ? static_cast<int32_t>(std::max_element(p, p + vocab) - p)
                                 : sample_from_probs_ref(&h.q[static_cast<size_t>(t) * vocab], vocab, rng.uniform());
    }
  return h;
}

VerifyBatch view(const HostBatch& h, const int32_t* offsets, const int32_t* drafts, const float* p, const float* q,
                 const uint64_t* seeds, const int64_t* requests, const int32_t* positions) {
  VerifyBatch b;
  b.num_seqs = static_cast<int>(h.offsets.size()) - 1;
  b.vocab = h.vocab;
  b.draft_offsets = offsets;
  b.draft_tokens = drafts;
  b.target_probs = p;
  b.draft_probs = q;
  b.seeds = seeds;
  b.request_ids = requests;
  b.positions = positions;
  return b;
}

}  // namespace

TEST_CASE("the verify kernel matches the CPU references", "[gpu][spec]") {
  Rng rng(21);
  for (const int vocab : {8, 1000, 32000, 128256}) {
    for (const bool rejection : {false, true}) {
      INFO("vocab " << vocab << (rejection ? ", rejection sampling" : ", greedy"));
      const int n = vocab > 100000 ? 24 : 96;
      const HostBatch h = random_batch(rng, n, vocab, 8);
      const int total = h.offsets.back();
      std::vector<int32_t> ref_acc(n), ref_tok(total + n, -1);
      const VerifyBatch hb = view(h, h.offsets.data(), h.drafts.data(), h.p.data(), h.q.data(), h.seeds.data(),
                                  h.requests.data(), h.positions.data());
      if (rejection)
        verify_rejection_ref(hb, VerifyOutput{ref_acc.data(), ref_tok.data()});
      else
        verify_greedy_ref(hb, VerifyOutput{ref_acc.data(), ref_tok.data()});

      DeviceBuffer offsets = upload_ints(h.offsets), drafts = upload_ints(h.drafts), positions = upload_ints(h.positions);
      DeviceBuffer p, q, seeds, requests;
      p.upload(h.p);
      q.upload(h.q);
      seeds.upload(h.seeds);
      requests.upload(h.requests);
      DeviceBuffer acc = poisoned(n, DType::kFP32), tok(static_cast<size_t>(total + n) * sizeof(int32_t));
      cuda_check(cudaMemset(tok.get(), 0xFF, static_cast<size_t>(total + n) * sizeof(int32_t)), "poison");
      const VerifyBatch db = view(h, offsets.as<int32_t>(), drafts.as<int32_t>(), p.as<float>(), q.as<float>(),
                                  seeds.as<uint64_t>(), requests.as<int64_t>(), positions.as<int32_t>());
      REQUIRE_LAUNCH(launch_verify(db, VerifyOutput{acc.as<int32_t>(), tok.as<int32_t>()}, rejection, nullptr));
      const std::vector<int32_t> got_acc = acc.download<int32_t>(n);
      const std::vector<int32_t> got_tok = tok.download<int32_t>(total + n);
      CHECK(got_acc == ref_acc);
      for (int i = 0; i < n; ++i) {
        const int first = h.offsets[i] + i;
        for (int j = 0; j <= ref_acc[i]; ++j) {
          INFO("sequence " << i << " slot " << j);
          CHECK(got_tok[first + j] == ref_tok[first + j]);
        }
      }
    }
  }
}
