// multi_turn: chat sessions. Turn 1's prompt is the shared system prompt plus a
// user message; turn k+1's prompt is turn k's prompt + turn k's answer + a new
// user message. The workload writes each answer into Request.scripted_output, so
// a simulated engine emits exactly those tokens and the next turn's prompt
// shares their KV blocks, as a real conversation's history would.
//
// Open loop: every arrival time is fixed in advance. Sessions start as the
// workload.arrival process at workload.rate / workload.turns, so the overall
// request rate is workload.rate; a session's next turn arrives an exponential
// think time (mean workload.turn_gap_s) after the previous turn *arrived*, not
// after it finished. Choose turn_gap_s above the expected latency, or a turn may
// arrive before its predecessor's answer exists (it still shares the prompt).
// With workload.rate = 0 every turn arrives at t = 0.
//
// ceil(num_requests / turns) sessions are generated, so every session but the
// last has all its turns. Lazy: only the active sessions (about rate x session
// length / turns of them) are held, in a heap ordered by next arrival.
#include <algorithm>
#include <memory>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/arrivals.h"
#include "traces/generated_workload.h"
#include "traces/prompt_hashes.h"
#include "traces/random_tokens.h"
#include "traces/workload.h"

namespace testbed {
namespace {

struct MultiTurnParams : ParamsOf<MultiTurnParams, WorkloadParams> {
  PromptShape shape;
  int turns = 5;             // turns per session
  double turn_gap_s = 10.0;  // mean think time between a session's turns (exponential)
  void bind(OptionTable& t) override {
    shape.bind(t);
    t.add("workload.turns", &turns, "multi_turn: turns per session");
    t.add("workload.turn_gap_s", &turn_gap_s, "multi_turn: mean think time between turns (s)");
  }
  void validate() const override {
    shape.validate();
    require(turns > 0, "workload.turns", "must be positive");
    require(turn_gap_s >= 0, "workload.turn_gap_s", "must be >= 0");
  }
  int64_t max_sequence_tokens(const WorkloadConfig& c) const override {
    return shape.system_prompt_tokens + int64_t{turns} * (int64_t{shape.user_tokens} + c.output_tokens);
  }
  int shared_prefix_tokens() const override { return shape.system_prompt_tokens; }
};

struct Session {
  double next_arrival_s = 0.0;
  int64_t id = 0;
  int turn = 0;                  // turns already emitted
  std::vector<int32_t> history;  // previous prompt + its answer (the next prompt's prefix)
  std::vector<uint64_t> history_hashes;  // its full blocks' hashes (when prompts are hashed here)
  Rng rng{0};                    // this session's contents and think times: independent of interleaving
};

// Whether (time a, id a) comes before (time b, id b): ties go to the older session.
bool is_before(double t_a, int64_t id_a, double t_b, int64_t id_b) { return t_a != t_b ? t_a < t_b : id_a < id_b; }

class MultiTurnWorkload : public RequestSource {
 public:
  MultiTurnWorkload(const MultiTurnParams& p, const WorkloadConfig& c, const WorkloadContext& ctx)
      : p_(p),
        c_(c),
        ctx_(ctx),
        session_starts_(c.arrival, c.rate / p.turns, c.burstiness, mix_seed(c.seed, 1)),
        num_sessions_((c.num_requests + p.turns - 1) / p.turns),
        priorities_(c) {
    append_span_tokens(system_prompt_, mix_seed(c.seed, 3), 0, p.shape.system_prompt_tokens, ctx.vocab_size);
    next_start_s_ = session_starts_.next();
  }

  std::optional<Request> next() override {
    if (next_id_ >= c_.num_requests) return std::nullopt;
    std::unique_ptr<Session> s;
    const bool can_start = next_session_ < num_sessions_;
    if (!active_.empty() &&
        (!can_start || is_before(active_.front()->next_arrival_s, active_.front()->id, next_start_s_, next_session_))) {
      std::pop_heap(active_.begin(), active_.end(), later_first);
      s = std::move(active_.back());
      active_.pop_back();
    } else {
      s = start_session();
    }
    Request r = take_turn(*s);
    if (s->turn < p_.turns) {
      if (c_.rate > 0 && p_.turn_gap_s > 0) s->next_arrival_s += s->rng.exponential(1.0 / p_.turn_gap_s);
      active_.push_back(std::move(s));
      std::push_heap(active_.begin(), active_.end(), later_first);
    }
    return r;
  }

  int64_t size_hint() const override { return c_.num_requests; }

 private:
  // Heap order: std heaps keep the largest on top, so "larger" means later.
  static bool later_first(const std::unique_ptr<Session>& a, const std::unique_ptr<Session>& b) {
    return is_before(b->next_arrival_s, b->id, a->next_arrival_s, a->id);
  }

  std::unique_ptr<Session> start_session() {
    auto s = std::make_unique<Session>();
    s->id = next_session_++;
    s->next_arrival_s = next_start_s_;
    s->rng = Rng(mix_seed(mix_seed(c_.seed, 4), static_cast<uint64_t>(s->id)));
    s->history = system_prompt_;
    if (hashes_.enabled()) s->history_hashes = hashes_.part(0, system_prompt_);
    next_start_s_ = session_starts_.next();
    return s;
  }

  Request take_turn(Session& s) {
    Request r;
    r.id = next_id_++;
    r.arrival_s = s.next_arrival_s;
    r.session_id = s.id;
    r.prompt = std::move(s.history);
    r.prompt.reserve(r.prompt.size() + p_.shape.user_tokens + c_.output_tokens);  // the engine appends the output
    append_random_tokens(r.prompt, s.rng, p_.shape.user_tokens, ctx_.vocab_size);
    hashes_.finish(r, std::move(s.history_hashes));  // the history's blocks hashed at the turn before
    append_random_tokens(r.scripted_output, s.rng, c_.output_tokens, ctx_.vocab_size);
    r.max_output_tokens = c_.output_tokens;
    r.sampling = ctx_.sampling;
    r.priority = priorities_.next();
    ++s.turn;
    if (s.turn < p_.turns) {
      s.history.reserve(r.prompt.size() + 2 * c_.output_tokens + p_.shape.user_tokens);  // room for the next turn
      s.history = r.prompt;
      s.history.insert(s.history.end(), r.scripted_output.begin(), r.scripted_output.end());
      if (hashes_.enabled()) s.history_hashes = r.prompt_block_hashes;  // the answer is hashed with the next turn
    }
    return r;
  }

  MultiTurnParams p_;
  WorkloadConfig c_;
  WorkloadContext ctx_;
  ArrivalProcess session_starts_;
  int64_t num_sessions_;
  PriorityDraw priorities_;
  int64_t next_session_ = 0;
  double next_start_s_ = 0.0;
  std::vector<int32_t> system_prompt_;
  PromptHashes hashes_{ctx_.hash_block_size};  // the system prompt's blocks hashed once
  std::vector<std::unique_ptr<Session>> active_;  // a heap by later_first
  int64_t next_id_ = 0;
};

TESTBED_REGISTER(WorkloadRegistry, "multi_turn",
                 [](const MultiTurnParams& p, const WorkloadConfig& c, const WorkloadContext& ctx) {
                   return std::make_unique<MultiTurnWorkload>(p, c, ctx);
                 });

}  // namespace
}  // namespace testbed
