// mix: a fleet's traffic as a mix of three request classes, with lengths (and
// optionally arrivals) drawn from a real trace (experiments/fleet_1k.ini).
//
//   shared  (workload.share_shared)  a prompt that opens with one of
//           workload.num_prefixes system prompts (workload.system_prompt_tokens
//           long; the first min(S, length - 1) tokens), the rest its own;
//   chat    (workload.share_chat)    a turn of a conversation of workload.turns
//           turns: turn 1 is like a shared request; turn k+1's prompt is turn
//           k's prompt + turn k's answer (Request.scripted_output, so the next
//           turn shares its blocks) + a new message of workload.user_tokens;
//   unique  (the rest)               a prompt that shares nothing.
//
// Lengths: with workload.profile_trace, every request (and every chat's first
// turn) draws one row of the trace uniformly and takes its input and output
// lengths; a later chat turn takes only the row's output length. Without a
// profile, prompts are system_prompt_tokens + user_tokens long (unique ones
// too, sharing nothing) and outputs workload.output_tokens.
//
// Arrivals: conversations and single requests start as one arrival process at
// workload.rate x (1 - share_chat + share_chat / turns), so requests arrive at
// workload.rate overall (open loop, as multi_turn: a chat's next turn comes an
// exponential think time of mean workload.turn_gap_s after the previous one
// arrived). workload.arrival = trace takes the profile's own gaps, in order and
// cycled, scaled to that rate: the trace's bursts at the fleet's rate.
//
// Exactly workload.num_requests requests; the conversations still open at the
// end are cut short. Seed streams: 1 arrivals, 5 classes, 3 system prompts,
// (4, conversation) each conversation's lengths, contents and think times.
// Lazy: only open conversations are held (their history, as multi_turn).
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/arrivals.h"
#include "traces/generated_workload.h"
#include "traces/random_tokens.h"
#include "traces/prompt_hashes.h"
#include "traces/trace_format.h"
#include "traces/trace_profile.h"
#include "traces/workload.h"

namespace testbed {
namespace {

struct MixParams : ParamsOf<MixParams, WorkloadParams> {
  PromptShape shape;
  int num_prefixes = 1;
  int turns = 5;
  double turn_gap_s = 10.0;
  double share_shared = 0.5;
  double share_chat = 0.3;
  std::string profile_trace;  // lengths (and workload.arrival = trace's gaps) from this trace
  Choice<TraceFormatRegistry> profile_format{"workload.profile_format", "azure", "format of workload.profile_trace"};

  void bind(OptionTable& t) override {
    shape.bind(t);
    t.add("workload.num_prefixes", &num_prefixes, "shared_prefix, mix: distinct system prompts");
    t.add("workload.turns", &turns, "multi_turn, mix: turns per conversation");
    t.add("workload.turn_gap_s", &turn_gap_s, "multi_turn, mix: mean think time between turns (s)");
    t.add("workload.share_shared", &share_shared, "mix: share of requests that open with a system prompt");
    t.add("workload.share_chat", &share_chat, "mix: share of requests that are conversation turns");
    t.add_path("workload.profile_trace", &profile_trace, "mix: trace whose lengths (and gaps) requests draw");
    profile_format.bind(t);
  }
  void validate() const override {
    shape.validate();
    profile_format.validate();
    require(num_prefixes > 0, "workload.num_prefixes", "must be positive");
    require(turns > 0, "workload.turns", "must be positive");
    require(turn_gap_s >= 0, "workload.turn_gap_s", "must be >= 0");
    require(share_shared >= 0 && share_shared <= 1, "workload.share_shared", "must be in [0, 1]");
    require(share_chat >= 0 && share_chat <= 1, "workload.share_chat", "must be in [0, 1]");
    require(share_shared + share_chat <= 1 + 1e-12, "workload.share_chat",
            "workload.share_shared + workload.share_chat must be at most 1 (the rest is unique prompts)");
  }
  int64_t max_sequence_tokens(const WorkloadConfig& c) const override {
    if (!profile_trace.empty()) return 0;  // only the trace tells
    return shape.system_prompt_tokens + shape.user_tokens + c.output_tokens +
           int64_t{turns - 1} * (int64_t{shape.user_tokens} + c.output_tokens);
  }
  int shared_prefix_tokens() const override { return shape.system_prompt_tokens; }
};

struct Conversation {
  double next_arrival_s = 0.0;
  int64_t id = 0;  // in start order, shared by single requests and conversations
  int turn = 0;    // turns already emitted
  std::vector<int32_t> history;  // previous prompt + its answer
  std::vector<uint64_t> history_hashes;  // its full blocks' hashes (when prompts are hashed here)
  Rng rng{0};
};

bool is_before(double t_a, int64_t id_a, double t_b, int64_t id_b) { return t_a != t_b ? t_a < t_b : id_a < id_b; }

class MixWorkload : public RequestSource {
 public:
  MixWorkload(const MixParams& p, const WorkloadConfig& c, const WorkloadContext& ctx)
      : p_(p), c_(c), ctx_(ctx), class_rng_(mix_seed(c.seed, 5)), priorities_(c) {
    if (!p.profile_trace.empty()) profile_ = read_trace_profile(p.profile_trace, p.profile_format.name, "workload.profile_trace");
    // Starts (single requests and conversations) per request.
    const double starts_per_request = 1.0 - p.share_chat + p.share_chat / p.turns;
    const double start_rate = c.rate * starts_per_request;
    if (c.arrival == "trace") {
      require(profile_.has_value(), "workload.arrival", "trace needs workload.profile_trace (the trace whose gaps it replays)");
      starts_ = std::make_unique<ArrivalProcess>(profile_->gaps_s, start_rate, p.profile_trace);
    } else {
      starts_ = std::make_unique<ArrivalProcess>(c.arrival, start_rate, c.burstiness, mix_seed(c.seed, 1));
    }
    // Each start is a conversation with this probability (requests are chat turns at share_chat).
    chat_start_ = (p.share_chat / p.turns) / starts_per_request;
    shared_given_single_ = p.share_chat < 1 ? p.share_shared / (1.0 - p.share_chat) : 0.0;
    Rng prefix_rng(mix_seed(c.seed, 3));
    prefixes_.resize(p.num_prefixes);
    for (auto& prefix : prefixes_) append_random_tokens(prefix, prefix_rng, p.shape.system_prompt_tokens, ctx.vocab_size);
    next_start_s_ = starts_->next();
  }

  std::optional<Request> next() override {
    if (next_id_ >= c_.num_requests) return std::nullopt;
    if (!open_.empty() && is_before(open_.front()->next_arrival_s, open_.front()->id, next_start_s_, next_start_id_)) {
      std::pop_heap(open_.begin(), open_.end(), later_first);
      std::unique_ptr<Conversation> conv = std::move(open_.back());
      open_.pop_back();
      return take_turn(std::move(conv));
    }
    // A new start: a conversation's first turn, or a single request.
    auto conv = std::make_unique<Conversation>();
    conv->id = next_start_id_++;
    conv->next_arrival_s = next_start_s_;
    conv->rng = Rng(mix_seed(mix_seed(c_.seed, 4), static_cast<uint64_t>(conv->id)));
    next_start_s_ = starts_->next();
    const double u = class_rng_.uniform();
    if (u < chat_start_) return take_turn(std::move(conv));
    const bool shared = class_rng_.uniform() < shared_given_single_;
    return single(*conv, shared);
  }

  int64_t size_hint() const override { return c_.num_requests; }

 private:
  static bool later_first(const std::unique_ptr<Conversation>& a, const std::unique_ptr<Conversation>& b) {
    return is_before(b->next_arrival_s, b->id, a->next_arrival_s, a->id);
  }

  // (input, output) lengths: a profile row, or the fixed shape.
  std::pair<int64_t, int> draw_lengths(Rng& rng) const {
    if (!profile_) return {int64_t{p_.shape.system_prompt_tokens} + p_.shape.user_tokens, c_.output_tokens};
    const auto row = static_cast<size_t>(rng.below(static_cast<uint64_t>(profile_->num_rows())));
    return {profile_->input_tokens[row], profile_->output_tokens[row]};
  }

  Request start_request(Conversation& conv, int output_tokens) {
    Request r;
    r.id = next_id_++;
    r.arrival_s = conv.next_arrival_s;
    r.max_output_tokens = output_tokens;
    r.sampling = ctx_.sampling;
    r.priority = priorities_.next();
    return r;
  }

  // The prompt of a shared request or a conversation's first turn: a system
  // prompt's first min(S, length - 1) tokens, then the request's own.
  // With prompts hashed here, the system prompt's blocks come from hashes_.
  void fill_shared(Request& r, Rng& rng, int64_t length) {
    const size_t index = p_.num_prefixes > 1 ? rng.below(static_cast<uint64_t>(p_.num_prefixes)) : 0;
    const auto& prefix = prefixes_[index];
    const int64_t shared = std::min<int64_t>(static_cast<int64_t>(prefix.size()), length - 1);
    r.prompt.assign(prefix.begin(), prefix.begin() + shared);
    append_random_tokens(r.prompt, rng, length - shared, ctx_.vocab_size);
    if (hashes_.enabled()) hashes_.finish(r, hashes_.part(index, prefix), hashes_.blocks_of(shared));
  }

  // A request that is no conversation's turn: with a system prompt (shared) or sharing nothing.
  Request single(Conversation& conv, bool shared) {
    const auto [length, output] = draw_lengths(conv.rng);
    Request r = start_request(conv, output);
    r.prompt.reserve(static_cast<size_t>(length + output));  // the engine appends the output
    if (shared) {
      fill_shared(r, conv.rng, length);
    } else {
      append_random_tokens(r.prompt, conv.rng, length, ctx_.vocab_size);
      hashes_.finish(r, {});
    }
    return r;
  }

  Request take_turn(std::unique_ptr<Conversation> conv) {
    const auto [length, output] = draw_lengths(conv->rng);
    Request r = start_request(*conv, output);
    r.session_id = conv->id;
    if (conv->turn == 0) {
      r.prompt.reserve(static_cast<size_t>(length + output));
      fill_shared(r, conv->rng, length);
    } else {
      r.prompt = std::move(conv->history);
      r.prompt.reserve(r.prompt.size() + static_cast<size_t>(p_.shape.user_tokens + output));
      append_random_tokens(r.prompt, conv->rng, p_.shape.user_tokens, ctx_.vocab_size);
      hashes_.finish(r, std::move(conv->history_hashes));  // the history's blocks hashed at its own turn
    }
    append_random_tokens(r.scripted_output, conv->rng, output, ctx_.vocab_size);
    if (++conv->turn < p_.turns) {
      conv->history = r.prompt;
      conv->history.insert(conv->history.end(), r.scripted_output.begin(), r.scripted_output.end());
      if (hashes_.enabled()) conv->history_hashes = r.prompt_block_hashes;  // the answer is hashed with the next turn
      if (c_.rate > 0 && p_.turn_gap_s > 0) conv->next_arrival_s += conv->rng.exponential(1.0 / p_.turn_gap_s);
      open_.push_back(std::move(conv));
      std::push_heap(open_.begin(), open_.end(), later_first);
    }
    return r;
  }

  MixParams p_;
  WorkloadConfig c_;
  WorkloadContext ctx_;
  std::optional<TraceProfile> profile_;
  std::unique_ptr<ArrivalProcess> starts_;
  Rng class_rng_;
  PriorityDraw priorities_;
  double chat_start_ = 0.0, shared_given_single_ = 0.0;
  std::vector<std::vector<int32_t>> prefixes_;
  PromptHashes hashes_{ctx_.hash_block_size};  // each system prompt's blocks hashed once
  std::vector<std::unique_ptr<Conversation>> open_;  // a heap by later_first
  double next_start_s_ = 0.0;
  int64_t next_start_id_ = 0;
  int64_t next_id_ = 0;
};

TESTBED_REGISTER(WorkloadRegistry, "mix", [](const MixParams& p, const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<MixWorkload>(p, c, ctx);
});

}  // namespace
}  // namespace testbed
