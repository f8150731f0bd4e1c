// A fleet's loop on several threads (FleetOptions::threads), with the results
// of one thread, bit for bit.
//
// Between two events of anything but an instance (an arrival, a routing
// decision landing, a sample, a failure), the instances' step events touch
// only their own engines: the loop takes them out as a window, and workers run
// each instance's events of the window in order, a step's end scheduling the
// next step as one thread would, until the next falls past the window. What a
// step reports beyond its instance (to the sink, to the router's index, to the
// events log, to the fleet's counts) is kept with marks per event. Then one
// thread replays the window: a merge of the instances' event lists in (time,
// rank, sequence number) order, the numbers taken from the loop as each event
// is replayed, which is the order and numbering one thread's loop gives them.
// Each event's reports are delivered at its turn, so the sink, the router and
// the log hear the same calls in the same order. An error a step raised is
// rethrown at its turn. The routers' KV events are the replay's largest part
// in a big fleet (each one a cold slot of the prefix index): a worker applies
// them, in the replay's order, while the replay goes on with the rest; the
// next routing decision comes after the last is applied. (An error a router
// raises on them is rethrown at the replay's end: the run fails either way.)
//
// What a step may do beyond its instance that a worker cannot (hand a
// sequence off, feed an autoscaler's signals or the ingress cache) is refused
// at construction (fleet.threads).
#include <algorithm>
#include <atomic>
#include <memory>
#include <queue>
#include <stdexcept>
#include <thread>

#include <sched.h>

#include "engine/block_hash.h"
#include "sim/fleet_state.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TESTBED_SPIN_PAUSE() _mm_pause()
#else
#define TESTBED_SPIN_PAUSE() std::this_thread::yield()
#endif

namespace testbed {
namespace {

// The CPUs this process may run on (its affinity mask: a container's or
// taskset's share, not every CPU of the machine).
int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

}  // namespace

// Workers that wait, spinning, for a task: a window, whose instances each
// takes in turn until none is left, or a replay's KV events, which one
// applies as they come. Windows come every few microseconds, faster than a
// sleeping thread wakes; a worker that has waited long generates requests
// ahead (workload.read_ahead: RequestSource::work_ahead) or yields its core.
class Fleet::WindowTeam {
 public:
  WindowTeam(Fleet& fleet, int workers) : spins_before_yield_(spins_before_yield(workers + 1)), fleet_(fleet) {
    try {
      for (int k = 0; k < workers; ++k) threads_.emplace_back([this] { work(); });
    } catch (...) {  // a thread could not start: the others stop before the error leaves
      stop();
      throw;
    }
  }
  ~WindowTeam() { stop(); }
  WindowTeam(const WindowTeam&) = delete;
  WindowTeam& operator=(const WindowTeam&) = delete;

  // Runs step_window for every instance of `work`; the calling thread works too.
  // `apply_stepped` (the routers commute KV events: Router::kv_events_commute):
  // the workers also hand each stepped instance's KV events to its router
  // (Fleet::apply_window_kv), one worker at a time, in the order the
  // instances finish, between the instances they step and after; run()
  // returns once every instance is stepped, and finish_apply() once every
  // instance's events are applied. The caller's replay goes on meanwhile.
  void run(const std::vector<int>& work, bool apply_stepped) {
    work_ = &work;
    next_.store(0, std::memory_order_relaxed);
    apply_stepped_ = apply_stepped;
    const size_t n = work.size();
    if (apply_stepped) {
      if (stepped_capacity_ < n) {
        stepped_.reset(new std::atomic<int32_t>[n]);
        stepped_capacity_ = n;
      }
      for (size_t k = 0; k < n; ++k) stepped_[k].store(-1, std::memory_order_relaxed);
      num_stepped_.store(0, std::memory_order_relaxed);
      num_applied_.store(0, std::memory_order_relaxed);
    }
    open(kStepKind);
    take(work, /*worker=*/false);
    joined_ = close();
    if (apply_stepped) {
      for (int spins = 0; num_stepped_.load(std::memory_order_acquire) < n && !failed_.load(std::memory_order_acquire);
           ++spins)
        wait(spins);
      if (!failed_.load(std::memory_order_acquire)) return;
    }
    wait_joined(joined_);
    apply_stepped_ = false;
    if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(error_);  // the run ends: no reset
  }
  // After run(work, true): returns once every stepped instance's KV events
  // are applied (here, for the ones no worker took) and the workers are out.
  void finish_apply() {
    if (!apply_stepped_) return;
    apply_rest(*work_, /*worker=*/false);
    wait_joined(joined_);
    apply_stepped_ = false;  // once the workers, which read it, are out
    if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
  }

  // The replay's KV events for the routers, applied by one worker while the
  // caller goes on with the rest of the replay (the sink, the log, the
  // loop), in the order they are published: the routers see the calls one
  // thread makes, in its order. Nothing else touches a router meanwhile (a
  // routing decision comes after end_apply). `capacity`: the most publish()
  // calls before end_apply (the array is not grown while a worker reads it).
  void begin_apply(size_t capacity) {
    jobs_.resize(std::max(jobs_.size(), capacity));
    num_jobs_ = 0;
    published_.store(0, std::memory_order_relaxed);
    final_.store(false, std::memory_order_relaxed);
    open(kApplyKind);
  }
  void publish(EventForwarder* forwarder, const KvEvent* events, size_t n) {
    if (num_jobs_ == jobs_.size()) throw std::logic_error("Fleet: more KV-event batches in a window than counted");
    jobs_[num_jobs_++] = Job{forwarder, events, n};
    published_.store(num_jobs_, std::memory_order_release);
  }
  // Returns once every published batch is applied: by the worker that
  // joined, or here when none did.
  void end_apply() {
    final_.store(true, std::memory_order_release);
    const int joined = close();
    if (joined == 0)
      apply_from(0, num_jobs_);
    else
      wait_joined(joined);
    if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
  }

 private:
  void stop() {
    stop_.store(true, std::memory_order_release);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  void open(uint64_t kind) {
    done_.store(0, std::memory_order_relaxed);
    ++epoch_;
    gate_.store(epoch_ << kEpochShift | kind, std::memory_order_release);  // open, nobody joined
  }
  // A worker that has not joined by now stays out: only the ones inside are
  // waited for, not one still generating a request ahead.
  int close() { return static_cast<int>(gate_.fetch_or(kClosed, std::memory_order_acq_rel) & kJoinedMask); }
  void wait_joined(int joined) {
    for (int spins = 0; done_.load(std::memory_order_acquire) != joined; ++spins) wait(spins);
  }
  struct Job {
    EventForwarder* forwarder;
    const KvEvent* events;
    size_t n;
  };
  void apply_from(size_t from, size_t to) {
    try {
      for (size_t k = from; k < to; ++k) jobs_[k].forwarder->deliver(jobs_[k].events, jobs_[k].n);
    } catch (...) {
      if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::current_exception();
    }
  }
  // A worker's part of an apply: every batch, as it is published, until the last.
  void apply_all() {
    size_t applied = 0;
    for (;;) {
      const bool last = final_.load(std::memory_order_acquire);
      const size_t published = published_.load(std::memory_order_acquire);
      if (applied < published) {
        apply_from(applied, published);
        applied = published;
      } else if (last) {
        // The window's events are all applied: the router may work ahead on the next decision.
        try {
          fleet_.prepare_next_route();
        } catch (...) {
          if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::current_exception();
        }
        return;
      } else {
        TESTBED_SPIN_PAUSE();  // never yields: the caller's replay is feeding it
      }
    }
  }
  // Whoever holds the applying role (one thread at a time: the router sees
  // one caller) applies the stepped instances' KV events in the order they
  // were stepped, until it reaches one not stepped yet. False: nothing was
  // applied (another thread holds the role, or nothing is ready).
  bool apply_ready(const std::vector<int>& work, bool worker) {
    if (applying_.load(std::memory_order_relaxed) || applying_.exchange(true, std::memory_order_acquire)) return false;
    const size_t n = work.size();
    const size_t from = num_applied_.load(std::memory_order_relaxed);
    size_t a = from;
    try {
      for (; a < n; ++a) {
        const int32_t k = stepped_[a].load(std::memory_order_acquire);
        if (k < 0) break;
        fleet_.apply_window_kv(work[k]);
      }
      // The window's last: the router may work ahead on the next decision
      // while the caller replays (a worker only: the caller would route next anyway).
      if (worker && a == n && from < n) fleet_.prepare_next_route();
    } catch (...) {
      if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::current_exception();
    }
    num_applied_.store(a, std::memory_order_release);
    applying_.store(false, std::memory_order_release);
    return a > from;
  }
  // Applies the instances' events as they are stepped until all are (or a step failed).
  void apply_rest(const std::vector<int>& work, bool worker) {
    const size_t n = work.size();
    for (int spins = 0; num_applied_.load(std::memory_order_acquire) < n && !failed_.load(std::memory_order_acquire);
         ++spins)
      if (!apply_ready(work, worker)) wait(spins);
  }
  void mark_stepped(size_t k) {
    const size_t slot = num_stepped_.fetch_add(1, std::memory_order_acq_rel);
    stepped_[slot].store(static_cast<int32_t>(k), std::memory_order_release);
  }
  // A step's own errors are kept with its event (step_window); what escapes
  // that (memory running out) is kept here and rethrown by run().
  void take(const std::vector<int>& work, bool worker) {
    const bool apply = apply_stepped_;
    try {
      // Each thread claims its next instance before it steps the one it
      // holds, and loads the next one's records meanwhile (Fleet::load_records):
      // a window's instances are out of the cache.
      const size_t n = work.size();
      if (apply && worker) {
        // A worker that applies claims an instance only when it is about to
        // step it: one held while it applies would keep the caller waiting.
        for (;;) {
          apply_ready(work, true);
          const size_t k = next_.fetch_add(1, std::memory_order_relaxed);
          if (k >= n) break;
          fleet_.load_records(work[k]);
          fleet_.load_buffers(work[k]);
          fleet_.step_window(work[k]);
          mark_stepped(k);
        }
        apply_rest(work, true);  // as it is stepped; the caller replays meanwhile
        return;
      }
      size_t k = next_.fetch_add(1, std::memory_order_relaxed);
      if (k < n) fleet_.load_records(work[k]);
      while (k < n) {
        const size_t after = next_.fetch_add(1, std::memory_order_relaxed);
        if (after < n) fleet_.load_records(work[after]);
        fleet_.load_buffers(work[k]);
        fleet_.step_window(work[k]);
        if (apply) mark_stepped(k);
        k = after;
      }
    } catch (...) {
      if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::current_exception();
      next_.store(work.size(), std::memory_order_relaxed);  // the others stop taking
    }
  }
  static constexpr int kSpinsBeforeWork = 64;
  // Pauses before a waiting thread starts yielding its core. With a core for
  // every thread of the team, 2^16 (a millisecond or two): windows come every
  // few microseconds, and each sched_yield is a system call, which on this
  // project's VM cost the 2-thread fleet_1k.ini slice 4-10 s of system time
  // in 25 s (README, Fleet scale). With fewer cores than threads, 256: a
  // spinning thread would hold the core the one it waits for needs.
  const int spins_before_yield_;
  static int spins_before_yield(int threads) {
    return threads <= available_cpus() ? (1 << 16) : 256;
  }
  void wait(int spins) const {
    if (spins < spins_before_yield_)
      TESTBED_SPIN_PAUSE();
    else
      std::this_thread::yield();
  }
  void work() {
    uint64_t seen = 0;  // the last window joined or found closed
    for (int spins = 0;; ++spins) {
      uint64_t g = gate_.load(std::memory_order_acquire);
      const bool apply = g & kApplyKind;
      // An apply takes one worker: the batches go in order.
      if ((g >> kEpochShift) != seen && !(g & kClosed) && (!apply || (g & kJoinedMask) == 0) &&
          gate_.compare_exchange_strong(g, g + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        seen = g >> kEpochShift;
        if (apply)
          apply_all();
        else
          take(*work_, /*worker=*/true);
        done_.fetch_add(1, std::memory_order_acq_rel);
        spins = 0;
        continue;
      }
      if (g & kClosed || (g & kApplyKind && g & kJoinedMask)) seen = g >> kEpochShift;  // nothing for this one
      if (stop_.load(std::memory_order_acquire)) return;
      // Waiting long: generate a request ahead (workload.read_ahead) rather than yield.
      if (spins >= kSpinsBeforeWork && fleet_.source_->work_ahead()) {
        spins = kSpinsBeforeWork;
        continue;
      }
      wait(spins);
    }
  }

  Fleet& fleet_;
  std::vector<std::thread> threads_;
  const std::vector<int>* work_ = nullptr;
  // The gate of the team's current task: its number (above kEpochShift),
  // its kind, whether the caller has closed it, and how many workers joined
  // it before that.
  static constexpr int kEpochShift = 32;
  static constexpr uint64_t kClosed = uint64_t{1} << 31;
  static constexpr uint64_t kStepKind = 0, kApplyKind = uint64_t{1} << 30;
  static constexpr uint64_t kJoinedMask = kApplyKind - 1;
  std::atomic<uint64_t> gate_{0};
  uint64_t epoch_ = 0;  // the caller's count of tasks
  std::vector<Job> jobs_;
  size_t num_jobs_ = 0;
  std::atomic<size_t> published_{0};
  std::atomic<bool> final_{false};
  std::atomic<size_t> next_{0};
  std::atomic<int> done_{0};
  int joined_ = 0;  // the workers that joined the last run()
  // run(work, true): which instances (their places in work) are stepped, in
  // the order they were; how many; how many of those are applied; whether a
  // thread is applying.
  bool apply_stepped_ = false;
  std::unique_ptr<std::atomic<int32_t>[]> stepped_;
  size_t stepped_capacity_ = 0;
  std::atomic<size_t> num_stepped_{0};
  std::atomic<size_t> num_applied_{0};
  std::atomic<bool> applying_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

void Fleet::run_windows() {
  WindowTeam team(*this, options_.threads - 1);
  while (!loop_.empty()) {
    if (!loop_.next_is_owned()) {
      loop_.step();
      continue;
    }
    window_.clear();
    double skipped_t = -1.0;  // the clock passes the skipped events' times too, after the replay
    while (loop_.next_is_owned()) {
      const EventLoop::Owned o = loop_.take_owned();
      Instance& inst = *instances_[o.owner];
      if (o.rank == kRankStepEnd && o.tag != inst.generation) {  // the end of a step its failure dropped
        loop_.skipped();
        skipped_t = std::max(skipped_t, o.time);
        continue;
      }
      // Live routing: an instance has one event pending at a time. Routed
      // ahead (router_refresh_s), its requests' landings are pending too.
      if (!inst.taken.empty() && options_.router_refresh_s <= 0)
        throw std::logic_error("Fleet: two pending events of instance " + std::to_string(o.owner));
      if (inst.taken.empty()) window_.push_back(o.owner);
      Instance::WindowEvent ev;
      ev.t = o.time;
      ev.rank = o.rank;
      ev.seq = o.seq;
      inst.taken.push_back(ev);
    }
    window_has_limit_ = loop_.peek(window_limit_t_, window_limit_rank_);
    if (window_.size() == 1) {  // nothing to share
      load_records(window_[0]);
      load_buffers(window_[0]);
      step_window(window_[0]);
    } else if (!window_.empty()) {
      team.run(window_, kv_apply_stepped_);
    }
    replay_window(team);
    loop_.reached(skipped_t);
  }
}

// A worker: instance i's events of the window, in order. Reports go to the
// instance's DeferredSink and KV buffer; nothing outside the instance changes.
void Fleet::step_window(int i) {
  Instance& inst = *instances_[i];
  MetricsSink* sink = inst.engine->sink();
  if (sink) inst.engine->set_sink(inst.deferred.get());
  if (inst.forwarder) {
    inst.forwarder->buffer = &inst.kv_buffer;
    inst.forwarder->batches = &inst.kv_batches;
  }
  // The taken events, and the one event at most that the last spawned, in
  // the loop's order: at equal (time, rank) a taken one first, as its number
  // is the smaller (taken events were scheduled before the window).
  size_t next_taken = 0;
  bool spawned = false;
  size_t parent = 0;
  Instance::WindowEvent spawn;
  inst.window.clear();
  while (true) {
    if (spawned && (next_taken == inst.taken.size() || spawn.t < inst.taken[next_taken].t ||
                    (spawn.t == inst.taken[next_taken].t && spawn.rank < inst.taken[next_taken].rank))) {
      inst.window[parent].spawn_index = inst.window.size();
      inst.window.push_back(spawn);
      spawned = false;
    } else if (next_taken < inst.taken.size()) {
      inst.window.push_back(inst.taken[next_taken++]);
    } else {
      break;
    }
    const size_t k = inst.window.size() - 1;
    Instance::WindowEvent& ev = inst.window[k];  // what runs below reaches it as inst.window.back()
    try {
      if (ev.rank == kRankArrival) {
        window_land(i, ev.t);
      } else if (ev.rank == kRankStepStart) {
        inst.start_pending = false;
        if (!inst.busy) window_start(i, ev.t);
      } else {
        window_end(i, ev.t);
      }
    } catch (...) {
      ev.error = std::current_exception();
    }
    ev.sink_end = inst.deferred ? inst.deferred->size() : 0;
    ev.kv_end = inst.kv_buffer.size();
    ev.log_end = inst.logs.size();
    if (ev.spawns && !ev.error && in_window(ev.spawn_t, ev.spawn_rank)) {
      ev.spawn_in_window = true;
      spawn = Instance::WindowEvent();
      spawn.t = ev.spawn_t;
      spawn.rank = ev.spawn_rank;
      spawned = true;
      parent = k;
    }
  }
  if (inst.forwarder) {
    inst.forwarder->buffer = nullptr;
    inst.forwarder->batches = nullptr;
  }
  if (sink) inst.engine->set_sink(sink);
}

// start_step on a worker: the same, its effects beyond the instance kept.
void Fleet::window_start(int i, double now) {
  Instance& inst = *instances_[i];
  Instance::WindowEvent& ev = inst.window.back();
  const bool started = plan_step(i, now);
  for (const auto& seq : inst.engine->scheduler().cancelled()) {
    if (options_.log_events) keep_log(inst, RequestEvent::Kind::Cancel, seq->id());
    ++(ev.progress ? ev.cancelled_later : ev.cancelled);  // after a step's end: counted after the progress call
  }
  if (!started) return;
  ev.spawns = true;
  ev.spawn_t = now + inst.result.duration_s;
}

// end_step on a worker, for the pools run_windows takes (unified, fixed).
void Fleet::window_end(int i, double end) {
  Instance& inst = *instances_[i];
  Instance::WindowEvent& ev = inst.window.back();
  StepOutcome& out = inst.outcome;
  inst.engine->end_step(inst.plan, inst.result, end, out);
  inst.busy = false;
  inst.busy_s += end - out.start_s;
  if (options_.log_events)
    for (const SeqOutcome& o : out.seqs) {
      if (o.first_token) keep_log(inst, RequestEvent::Kind::FirstToken, o.seq->id());
      if (o.finished) keep_log(inst, RequestEvent::Kind::Finish, o.seq->id());
      if (o.cancelled) keep_log(inst, RequestEvent::Kind::Cancel, o.seq->id());
    }
  if (!out.handed_off.empty())
    throw std::logic_error("fleet: instance " + std::to_string(i) + " handed a sequence off outside a prefill pool");
  ev.finished += out.num_finished;
  ev.cancelled += out.num_cancelled;
  ev.progress = true;
  if (inst.engine->has_unfinished()) window_start(i, end);
}

// land on a worker: the request enters the engine; the loop's part (the
// counts, the kick's event) is kept for the replay.
void Fleet::window_land(int i, double now) {
  Instance& inst = *instances_[i];
  Instance::WindowEvent& ev = inst.window.back();
  Request request = std::move(inst.landings.front());
  inst.landings.pop_front();
  ev.landed = 1;
  const int64_t id = request.id;
  if (options_.log_events) {
    keep_log(inst, RequestEvent::Kind::Arrival, id, kLogNoInstance);
    keep_log(inst, RequestEvent::Kind::Route, id);
  }
  if (!inst.engine->add_request(std::move(request), now)) {
    if (options_.log_events) keep_log(inst, RequestEvent::Kind::Cancel, id);
    ev.rejected = 1;
    return;
  }
  // kick(): the fleet's checks, the event itself made at the replay.
  if (inst.busy || inst.start_pending || inst.failed || inst.state == Instance::State::Off ||
      inst.state == Instance::State::Starting)
    return;
  inst.start_pending = true;
  ev.spawns = true;
  ev.spawn_t = now;
  ev.spawn_rank = kRankStepStart;
}

void Fleet::keep_log(Instance& inst, RequestEvent::Kind kind, int64_t request, int instance) {
  inst.logs.push_back(Instance::Log{kind, request, inst.deferred ? inst.deferred->size() : 0, instance});
}

void Fleet::replay_window(WindowTeam& team) {
  // The routers' KV events: being applied by the team already (WindowTeam::run
  // with kv_apply_stepped_), or applied by a worker meanwhile, in this order,
  // unless they are delayed (fault.kv_event_delay_s: the loop schedules them).
  const bool applied = kv_apply_stepped_ && window_.size() > 1;
  if (!applied) {
    size_t num_batches = 0;
    for (int i : window_) num_batches += instances_[i]->kv_batches.size();
    if (num_batches <= 1 || options_.faults.kv_event_delay_s > 0) return merge_window(nullptr);
    team.begin_apply(num_batches);
  }
  const auto finish = [&] {
    if (applied)
      team.finish_apply();
    else
      team.end_apply();
  };
  try {
    merge_window(applied ? nullptr : &team, applied);
  } catch (...) {
    try {
      finish();
    } catch (...) {  // the replay's own error is the one one thread would have raised first
    }
    throw;
  }
  finish();
  clear_window();
}

void Fleet::merge_window(WindowTeam* team, bool kv_applied) {
  struct Next {
    double t;
    int rank;
    uint64_t seq;
    int instance;
    size_t k;  // its index in the instance's window
  };
  struct Later {
    bool operator()(const Next& a, const Next& b) const {
      return EventLoop::runs_after(a.t, a.rank, a.seq, b.t, b.rank, b.seq);
    }
  };
  std::priority_queue<Next, std::vector<Next>, Later> merge;
  for (int i : window_) {
    const Instance& inst = *instances_[i];
    merge.push(Next{inst.window[0].t, inst.window[0].rank, inst.window[0].seq, i, 0});
  }
  while (!merge.empty()) {
    const Next x = merge.top();
    merge.pop();
    Instance& inst = *instances_[x.instance];
    const Instance::WindowEvent& ev = inst.window[x.k];
    loop_.replayed(ev.t);
    touch(x.instance);
    // The sink hears the step's reports and the log's entries interleaved as they were made.
    for (; inst.logs_delivered < ev.log_end; ++inst.logs_delivered) {
      const Instance::Log& l = inst.logs[inst.logs_delivered];
      if (inst.deferred) inst.deferred->deliver(l.sink_mark);
      log(l.kind, ev.t, l.request, l.instance == kLogOwnInstance ? x.instance : l.instance);
    }
    if (inst.deferred) inst.deferred->deliver(ev.sink_end);
    // The router hears the KV events in the batches the engine published.
    // (Unless the team applied them as the instances were stepped.)
    const size_t num_batches = kv_applied ? 0 : inst.kv_batches.size();
    for (; inst.kv_batches_delivered < num_batches && inst.kv_batches[inst.kv_batches_delivered] <= ev.kv_end;
         ++inst.kv_batches_delivered) {
      const size_t end = inst.kv_batches[inst.kv_batches_delivered];
      if (team)
        team->publish(inst.forwarder, inst.kv_buffer.data() + inst.kv_delivered, end - inst.kv_delivered);
      else
        inst.forwarder->deliver(inst.kv_buffer.data() + inst.kv_delivered, end - inst.kv_delivered);
      inst.kv_delivered = end;
    }
    if (ev.landed) {
      ++added_;
      ++routed_[x.instance];
      rejected_ += ev.rejected;
    }
    finished_ += ev.finished;
    cancelled_ += ev.cancelled;
    if (ev.progress && *progress_) (*progress_)(finished_ + cancelled_, total_ >= 0 ? total_ : added_);
    cancelled_ += ev.cancelled_later;
    if (ev.error) std::rethrow_exception(ev.error);
    if (ev.spawns) {
      const uint64_t seq = loop_.take_seq();
      const int i = x.instance;
      if (ev.spawn_in_window)
        inst.window[ev.spawn_index].seq = seq;
      else if (ev.spawn_rank == kRankStepEnd)
        loop_.at_owned_seq(ev.spawn_t, kRankStepEnd, seq, i, inst.generation,
                           [this, i, gen = inst.generation](double end) {
                             if (instances_[i]->generation == gen) end_step(i, end);
                           });
      else
        loop_.at_owned_seq(ev.spawn_t, kRankStepStart, seq, i, 0, [this, i](double t) { start_kicked(i, t); });
    }
    // The instance's next event: its number is known (taken, or given above or earlier to a spawned one).
    if (x.k + 1 < inst.window.size()) {
      const Instance::WindowEvent& next = inst.window[x.k + 1];
      merge.push(Next{next.t, next.rank, next.seq, x.instance, x.k + 1});
    }
  }
  if (!team && !kv_applied) clear_window();  // else once the KV events are applied
}

void Fleet::prepare_next_route() {
  // The caller is replaying: it reads neither the pending request nor the router until this returns.
  Request* r = pending_arrival_;
  if (!r || class_router_ || !ingress_ || ingress_->spec.engines.size() < 2) return;
  if (!window_has_limit_ || window_limit_t_ != r->arrival_s || window_limit_rank_ != kRankArrival) return;
  Router& router = *ingress_->spec.router;
  if (!router.needs_block_hashes()) return;
  hash_prompt(*r, ingress_->spec.engines[0]->kv_cache().block_size());  // as choose_instance would
  router.prepare(*r, r->prompt_block_hashes);
}

void Fleet::apply_window_kv(int i) {
  const Instance& inst = *instances_[i];
  if (inst.forwarder && !inst.kv_buffer.empty()) inst.forwarder->deliver(inst.kv_buffer.data(), inst.kv_buffer.size());
}

void Fleet::clear_window() {
  for (int i : window_) {
    Instance& inst = *instances_[i];
    inst.taken.clear();
    inst.window.clear();
    if (inst.deferred) inst.deferred->clear();
    inst.kv_buffer.clear();
    inst.kv_batches.clear();
    inst.kv_delivered = inst.kv_batches_delivered = 0;
    inst.logs.clear();
    inst.logs_delivered = 0;
  }
}

}  // namespace testbed
