// run_disaggregated: a prefill engine and a decode engine on two threads of
// this process, the KV of every handed-off sequence copied between their
// executors (engine/driver.h).
//
// One mutex guards both engines' state (schedulers, KV caches) and the sink;
// each thread holds it for begin_step / end_step / imports and releases it
// while its executor computes, so the two engines' steps overlap as two
// devices' would. The KV copy runs on the decode thread without the lock: it
// reads blocks of the prefill executor that no running sequence writes (the
// exported ones) and writes blocks of the decode executor reserved by
// begin_import, while only the other executor computes.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "engine/common/config_error.h"
#include "engine/driver.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;

struct Shared {
  std::mutex m;
  std::condition_variable cv;    // a hand-off, a release, a finish, the end
  std::deque<HandOff> handoffs;  // first token sampled, not yet on the decode engine
  bool prefill_done = false, stop = false;
  std::exception_ptr error;
  int64_t added = 0, finished = 0, total = -1;
  const ProgressFn* progress = nullptr;
  Clock::time_point t0;
  double now() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
  void report() {
    if (*progress) (*progress)(finished, total >= 0 ? total : added);
  }
  void fail(std::exception_ptr e) {
    if (!error) error = e;
    stop = true;
    cv.notify_all();
  }
};

// The prefill engine: arrivals, steps, hand-offs.
void prefill_loop(Engine& prefill, RequestSource& source, std::optional<Request> pending, Shared& sh) {
  std::unique_lock<std::mutex> lk(sh.m);
  double idle_since = 0.0;
  while (!sh.stop) {
    double now = sh.now();
    if (pending && !prefill.has_unfinished()) {
      // Idle until the next arrival; the step starts at the arrival instant (run_realtime's convention).
      const double at = pending->arrival_s;
      sh.cv.wait_until(lk, sh.t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at)),
                       [&] { return sh.stop || sh.now() >= at; });
      if (sh.stop) break;
      now = std::max(at, idle_since);
    }
    for (; pending && pending->arrival_s <= now; pending = source.next()) {
      prefill.add_request(std::move(*pending), now);
      ++sh.added;
    }
    if (!prefill.has_unfinished()) {
      if (pending) continue;
      break;  // every request has left this engine
    }
    const StepPlan plan = prefill.begin_step(now);
    if (plan.empty()) {
      // Its blocks are held by exports waiting for the decode engine: wait for a release.
      if (prefill.kv_cache().num_exports() == 0)
        throw ConfigError("scheduler: the prefill engine could schedule nothing although requests wait "
                          "(configuration deadlock)");
      const int exports = prefill.kv_cache().num_exports();
      sh.cv.wait(lk, [&] { return sh.stop || prefill.kv_cache().num_exports() < exports; });
      continue;
    }
    lk.unlock();
    const StepResult result = prefill.executor().execute(plan.batch);
    lk.lock();
    StepOutcome out = prefill.end_step(plan, result, sh.now());
    for (HandOff& h : out.handed_off) {
      h.seq->handoff.prefill_instance = prefill.instance();
      h.seq->handoff.ready_s = out.end_s;
      sh.handoffs.push_back(std::move(h));
    }
    sh.finished += out.num_finished;  // one-token outputs finish where they are prefilled
    if (!prefill.has_unfinished()) idle_since = out.end_s;
    sh.report();
    sh.cv.notify_all();
  }
  sh.prefill_done = true;
  sh.cv.notify_all();
}

// The decode engine: imports (the KV copied), steps.
void decode_loop(Engine& prefill, Engine& decode, Shared& sh) {
  struct Moving {
    Sequence* seq;
    int64_t id;
    KvImport plan;
    double start;
  };
  std::vector<Moving> moving;
  std::unique_lock<std::mutex> lk(sh.m);
  while (!sh.stop) {
    // Reserve room for as many waiting hand-offs as fit, in order.
    while (!sh.handoffs.empty()) {
      Moving mv{sh.handoffs.front().seq.get(), sh.handoffs.front().kv.seq_id, {}, sh.now()};
      if (!decode.begin_import(sh.handoffs.front(), mv.plan)) break;  // back-pressure
      sh.handoffs.pop_front();
      moving.push_back(std::move(mv));
    }
    if (!moving.empty()) {
      lk.unlock();
      for (Moving& mv : moving) {
        const KvBlockData data = prefill.executor().read_kv_blocks(mv.plan.source_blocks);
        decode.executor().write_kv_blocks(mv.plan.dest_blocks, data);
        mv.seq->handoff.transfer_bytes = static_cast<int64_t>(data.bytes.size());
      }
      lk.lock();
      for (Moving& mv : moving) {
        Sequence::HandOffLog& log = mv.seq->handoff;
        log.transfer_start_s = mv.start;
        log.transfer_end_s = sh.now();
        log.transfer_blocks = static_cast<int>(mv.plan.dest_blocks.size());
        log.reused_blocks = mv.plan.num_reused_blocks;
        decode.end_import(mv.id, log.transfer_end_s);
        prefill.release_export(mv.id);
      }
      moving.clear();
      sh.cv.notify_all();  // the prefill engine's blocks are free again
    }
    if (!decode.has_unfinished()) {
      if (!sh.handoffs.empty())
        throw ConfigError("decode engine: a handed-off sequence never fits its KV cache (give the decode pool more "
                          "blocks)");
      if (sh.prefill_done) break;
      sh.cv.wait(lk, [&] { return sh.stop || sh.prefill_done || !sh.handoffs.empty(); });
      continue;
    }
    const StepPlan plan = decode.begin_step(sh.now());
    if (plan.empty()) throw std::logic_error("run_disaggregated: the decode engine scheduled nothing");
    lk.unlock();
    const StepResult result = decode.executor().execute(plan.batch);
    lk.lock();
    const StepOutcome out = decode.end_step(plan, result, sh.now());
    sh.finished += out.num_finished;
    sh.report();
  }
}

}  // namespace

double run_disaggregated(Engine& prefill, Engine& decode, RequestSource& source, bool offline,
                         const ProgressFn& progress, int64_t* num_finished) {
  if (!prefill.scheduler().hands_off_after_prefill())
    throw std::logic_error("run_disaggregated: the prefill engine does not hand sequences off");
  Shared sh;
  sh.total = source.size_hint();
  sh.progress = &progress;
  std::optional<Request> pending = source.next();
  if (offline)
    for (; pending; pending = source.next()) {
      pending->arrival_s = 0.0;
      prefill.add_request(std::move(*pending), 0.0);
      ++sh.added;
    }
  sh.t0 = Clock::now();
  const auto guarded = [&sh](auto f) {
    return [&sh, f] {
      try {
        f();
      } catch (...) {
        std::lock_guard<std::mutex> g(sh.m);
        sh.fail(std::current_exception());
      }
    };
  };
  std::thread p(guarded([&] { prefill_loop(prefill, source, std::move(pending), sh); }));
  std::thread d(guarded([&] { decode_loop(prefill, decode, sh); }));
  p.join();
  d.join();
  if (sh.error) std::rethrow_exception(sh.error);
  if (num_finished) *num_finished = sh.finished;
  return sh.now();
}

}  // namespace testbed
