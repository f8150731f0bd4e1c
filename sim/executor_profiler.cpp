#include "sim/executor_profiler.h"

#include <algorithm>
#include <memory>

#include "engine/common/rng.h"
#include "engine/sequence.h"

namespace testbed {
namespace {

std::vector<int> powers_up_to(int start, int limit) {
  std::vector<int> v;
  for (int x = start; x < limit; x *= 2) v.push_back(x);
  v.push_back(limit);
  return v;
}

}  // namespace

ProfileGrid default_profile_grid(int max_batch_tokens, int max_num_seqs, int max_context) {
  ProfileGrid g;
  g.prefill_tokens = {0};
  for (int p : powers_up_to(16, max_batch_tokens)) g.prefill_tokens.push_back(p);
  g.decode_seqs = {0};
  for (int d : powers_up_to(1, max_num_seqs)) g.decode_seqs.push_back(d);
  g.context = {0};
  for (int c = 64; c < max_context; c *= 4) g.context.push_back(c);
  if (max_context > 0) g.context.push_back(max_context);
  return g;
}

int blocks_for_grid(const ProfileGrid& g, int block_size) {  // (sharing only lowers it)
  const int p = *std::max_element(g.prefill_tokens.begin(), g.prefill_tokens.end());
  const int d = *std::max_element(g.decode_seqs.begin(), g.decode_seqs.end());
  const int c = *std::max_element(g.context.begin(), g.context.end());
  return (d + 1) * ((c + std::max(p, 1) + block_size) / block_size + 1);
}

ProfileTable profile_executor(Executor& executor, const ProfileGrid& grid, int block_size, int vocab_size,
                              const std::function<void(int, int)>& on_point) {
  ProfileTable table;
  table.executor = executor.name();
  for (int p : grid.prefill_tokens) table.prefill_tokens.push_back(p);
  for (int d : grid.decode_seqs) table.decode_seqs.push_back(d);
  for (int c : grid.context) table.context.push_back(c);
  table.step_s.assign(grid.prefill_tokens.size() * grid.decode_seqs.size() * grid.context.size(), 0.0);
  Rng rng(12345);
  // Every grid point's batch is built first; then all points run once per
  // pass (pass 0 warms up and is discarded), so a slow spell of a shared
  // machine spreads over all points instead of skewing a few. Within a pass a
  // point runs twice back to back and the second run counts: a serving engine
  // repeats similar steps, so its caches are warm for the shape it runs.
  struct Point {
    size_t index;
    std::vector<std::unique_ptr<Sequence>> seqs;
    Batch batch;
    std::vector<double> times;
  };
  std::vector<Point> points;
  for (size_t i = 0; i < grid.prefill_tokens.size(); ++i)
    for (size_t j = 0; j < grid.decode_seqs.size(); ++j)
      for (size_t k = 0; k < grid.context.size(); ++k) {
        const int P = grid.prefill_tokens[i], D = grid.decode_seqs[j], C = grid.context[k];
        if (P == 0 && D == 0) continue;
        Point pt;
        pt.index = table.index(i, j, k);
        const int shared_blocks = std::min(grid.shared_prefix_tokens, C) / block_size;
        int next_block = shared_blocks;  // ids [0, shared_blocks) hold the shared prefix
        auto add = [&](int prompt_len, int extra_tokens, int computed, int num_new) {
          Request r;
          r.id = static_cast<int64_t>(pt.seqs.size());
          for (int t = 0; t < prompt_len; ++t) r.prompt.push_back(static_cast<int32_t>(rng.below(vocab_size)));
          r.max_output_tokens = extra_tokens + 1;
          auto s = std::make_unique<Sequence>(std::move(r));
          for (int t = 0; t < extra_tokens; ++t) s->append_token(static_cast<int32_t>(rng.below(vocab_size)));
          const int blocks = (computed + num_new + block_size - 1) / block_size;
          for (int b = 0; b < blocks; ++b) s->block_table.push_back(b < shared_blocks ? b : next_block++);
          s->num_computed_tokens = computed;
          pt.batch.add(s.get(), computed, num_new);
          pt.seqs.push_back(std::move(s));
        };
        if (P > 0) add(C + P, 0, C, P);  // a prompt chunk after C cached tokens
        for (int s = 0; s < D; ++s) add(std::max(C, 1), 1, std::max(C, 1), 1);  // decode over C tokens
        points.push_back(std::move(pt));
      }
  const int passes = std::max(grid.repeats, 1) + 1;
  const int total = passes * static_cast<int>(points.size());
  int done = 0;
  for (int pass = 0; pass < passes; ++pass)
    for (Point& pt : points) {
      executor.execute(pt.batch);
      const double t = executor.execute(pt.batch).duration_s;
      if (pass > 0) pt.times.push_back(t);
      if (on_point) on_point(++done, total);
    }
  for (Point& pt : points) {
    std::sort(pt.times.begin(), pt.times.end());
    table.step_s[pt.index] = pt.times[pt.times.size() / 2];
  }
  // The empty batch (P = D = 0) never runs; give it the cheapest measured step.
  double cheapest = 0;
  for (double v : table.step_s)
    if (v > 0 && (cheapest == 0 || v < cheapest)) cheapest = v;
  for (double& v : table.step_s)
    if (v <= 0) v = cheapest;
  return table;
}

}  // namespace testbed
