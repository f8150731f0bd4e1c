#include "sim/sim_executor.h"

#include "engine/common/config_error.h"
#include "engine/common/rng.h"

#include <algorithm>
#include <cmath>

namespace testbed {

int32_t synthetic_token(const Request& request, int index, int vocab_size) {
  if (index < static_cast<int>(request.scripted_output.size())) return request.scripted_output[index];
  const uint64_t x = mix_seed(static_cast<uint64_t>(request.id), static_cast<uint64_t>(index));
  return static_cast<int32_t>((static_cast<unsigned __int128>(x) * static_cast<uint64_t>(vocab_size)) >> 64);
}

int32_t next_synthetic_token(const Sequence& seq, int vocab_size) {
  const int index = seq.num_output_tokens();
  if (seq.has_scripted_output()) return synthetic_token(seq.request(), index, vocab_size);
  // Multiply-high instead of %: a 64-bit division per token is measurable here.
  const uint64_t x = mix_seed(static_cast<uint64_t>(seq.id()), static_cast<uint64_t>(index));
  return static_cast<int32_t>((static_cast<unsigned __int128>(x) * static_cast<uint64_t>(vocab_size)) >> 64);
}

void synthetic_tokens(const Batch& batch, int vocab_size, StepResult& result) {
  // Written through raw pointers into vectors sized once: push_back's
  // capacity checks and stored ends (this function 199M -> 174M instructions
  // on the Azure trace, cachegrind).
  const size_t n = batch.items.size();
  result.token_offsets.resize(n + 1);
  result.tokens.resize(n);
  result.prob_offsets.clear();
  result.probs.clear();
  result.draft_offsets.clear();
  result.drafts.clear();
  const ScheduledSeq* items = batch.items.data();
  int32_t* offsets = result.token_offsets.data();
  int32_t* tokens = result.tokens.data();
  int32_t count = 0;
  offsets[0] = 0;
  for (size_t k = 0; k < n; ++k) {
    if (items[k].samples()) tokens[count++] = next_synthetic_token(*items[k].seq, vocab_size);
    offsets[k + 1] = count;
  }
  result.tokens.resize(static_cast<size_t>(count));
}

StepResult SimExecutor::execute(const Batch& batch) {
  StepResult r;
  execute(batch, r);
  return r;
}

const SpecRequestModel& SimExecutor::request_model(int64_t id) const {
  const auto it = spec_.per_request->find(id);
  if (it == spec_.per_request->end())
    throw ConfigError("spec.acceptance: the acceptance trace has no request " + std::to_string(id) +
                      " (record it from a real run of the same workload)");
  return it->second;
}

void SimExecutor::speculate(const Batch& batch, StepResult& out) const {
  // Verify: an item's drafts are its next synthetic tokens; keep a prefix of them.
  out.token_offsets.assign(1, 0);
  out.tokens.clear();
  out.prob_offsets.clear();
  out.probs.clear();
  for (const ScheduledSeq& item : batch.items) {
    if (!item.samples()) {
      out.add_none();
      continue;
    }
    const Sequence& seq = *item.seq;
    int kept = 0;
    double acceptance = spec_.acceptance;
    if (spec_.per_request && item.num_draft > 0) acceptance = request_model(seq.id()).acceptance;
    const int first_draft = item.num_computed + item.num_new - item.num_draft;  // position of the first draft
    while (kept < item.num_draft) {
      Rng u(mix_seed(mix_seed(spec_.seed ^ static_cast<uint64_t>(seq.id()), static_cast<uint64_t>(first_draft + kept)), 1));
      if (u.uniform() >= acceptance) break;
      ++kept;
    }
    const int base = seq.num_output_tokens();
    for (int j = 0; j <= kept; ++j) out.tokens.push_back(synthetic_token(seq.request(), base + j, vocab_size_));
    out.token_offsets.push_back(static_cast<int32_t>(out.tokens.size()));
  }
  // Propose: the next k tokens after what this step appends, within the output length.
  out.draft_offsets.assign(1, 0);
  out.drafts.clear();
  const bool propose = spec_.max_batch_size == 0 || batch.num_seqs() <= spec_.max_batch_size;
  for (int i = 0; i < batch.num_seqs(); ++i) {
    const int n = out.num_tokens(i);
    const Sequence& seq = *batch.items[i].seq;
    const int next = seq.num_output_tokens() + n;
    const int room = seq.max_output_tokens() - next - 1;
    int drafts = spec_.num_tokens;
    if (spec_.per_request && propose && n > 0) {
      // As the real proposer did for this request: draft at this share of its steps, this many tokens on average.
      const SpecRequestModel& m = request_model(seq.id());
      Rng u(mix_seed(mix_seed(spec_.seed ^ static_cast<uint64_t>(seq.id()), static_cast<uint64_t>(next)), 2));
      const double whole = std::floor(m.drafts_per_step);
      drafts = u.uniform() < m.propose_share ? static_cast<int>(whole) + (u.uniform() < m.drafts_per_step - whole) : 0;
      drafts = std::min(drafts, spec_.num_tokens);
    }
    if (propose && n > 0)
      for (int j = 0; j < std::min(drafts, room); ++j)
        out.drafts.push_back(synthetic_token(seq.request(), next + j, vocab_size_));
    out.draft_offsets.push_back(static_cast<int32_t>(out.drafts.size()));
  }
}

double SimExecutor::draft_seconds(const Batch& batch, const StepResult& out) const {
  // The draft catches up on each drafting sequence's new tokens in one step, then decodes the rest.
  StepShape catch_up, decode;
  int rounds = 0;
  for (int i = 0; i < batch.num_seqs(); ++i) {
    const int drafts = out.num_drafts(i);
    if (drafts == 0) continue;
    const ScheduledSeq& item = batch.items[i];
    const int context = item.num_computed + item.num_new - item.num_draft;  // tokens the target had before this step
    catch_up.push_back(SeqShape{context, out.num_tokens(i), true, true, 0});
    decode.push_back(SeqShape{context + out.num_tokens(i), 1, true, true, 0});
    rounds = std::max(rounds, drafts - 1);
  }
  if (catch_up.empty()) return 0.0;
  return spec_.draft_cost_model->predict(catch_up) + rounds * spec_.draft_cost_model->predict(decode);
}

void SimExecutor::execute(const Batch& batch, StepResult& out) {
  if (spec_.num_tokens > 0)
    speculate(batch, out);  // builds the tokens itself (accepted drafts, then one)
  else
    synthetic_tokens(batch, vocab_size_, out);
  // One scratch shape per thread, not per instance: it stays in the cache
  // while a fleet steps its other instances (each executor's own was cold).
  thread_local StepShape shape;
  shape_of(batch, shape);
  out.duration_s = cost_model_->predict(shape);
  if (spec_.draft_cost_model) out.duration_s += draft_seconds(batch, out);
}

TESTBED_REGISTER(ExecutorRegistry, "sim", [](const ExecutorSetup& s) {
  require(s.cost_model != nullptr, "cost_model.kind", "the simulated executor needs a cost model");
  SimSpeculation spec;
  if (s.spec_acceptance >= 0) {
    spec.num_tokens = s.spec_num_tokens;
    spec.max_batch_size = s.spec_max_batch_size;
    spec.acceptance = s.spec_acceptance;
    spec.seed = s.spec_seed;
    spec.per_request = s.spec_per_request;
    spec.draft_cost_model = s.spec_draft_cost_model;
  }
  return std::make_unique<SimExecutor>(s.cost_model, s.model.vocab_size, spec);
});

}  // namespace testbed
