// The profiled cost model: the table interpolates exactly what is linear,
// extrapolates along the edges, survives a save/load round trip, and bad
// files are errors naming the file; the profiler fills every grid point.
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "sim/cost_model.h"
#include "sim/executor_profiler.h"
#include "sim/profile_table.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"

using namespace testbed;

namespace {

double linear_step(double p, double d, double c) { return 0.002 + 1e-5 * p + 3e-4 * d + 2e-7 * d * c; }

ProfileTable linear_table() {
  ProfileTable t;
  t.prefill_tokens = {0, 64, 256};
  t.decode_seqs = {0, 4, 16};
  t.context = {0, 128, 1024};
  for (double p : t.prefill_tokens)
    for (double d : t.decode_seqs)
      for (double c : t.context) t.step_s.push_back(linear_step(p, d, c));
  return t;
}

}  // namespace

TEST_CASE("a profile table interpolates and extrapolates a multilinear cost exactly", "[profiled]") {
  const ProfileTable t = linear_table();
  for (const std::array<double, 3>& s : {std::array<double, 3>{100, 7, 500}, {64, 4, 128}, {10, 1, 30}})
    CHECK(t.interpolate(s[0], s[1], s[2]) == Approx(linear_step(s[0], s[1], s[2])).epsilon(1e-12));
  // Beyond the grid: linear extrapolation along the last cells.
  CHECK(t.interpolate(512, 32, 2048) == Approx(linear_step(512, 32, 2048)).epsilon(1e-12));
}

TEST_CASE("a profile table survives a round trip and bad files name themselves", "[profiled]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("testbed_profile_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "p.h5").string();
  const ProfileTable t = linear_table();
  t.save(path);
  const ProfileTable back = ProfileTable::load(path);
  CHECK(back.step_s == t.step_s);
  CHECK(back.context == t.context);
  CHECK_THROWS_WITH(ProfileTable::load((dir / "none.h5").string()), Catch::Contains("none.h5"));
  { std::ofstream((dir / "junk.h5").string()) << "not hdf5"; }
  CHECK_THROWS_WITH(ProfileTable::load((dir / "junk.h5").string()), Catch::Contains("junk.h5"));
  ProfileTable bad = t;
  bad.step_s.pop_back();
  CHECK_THROWS_WITH(bad.save((dir / "bad.h5").string()), Catch::Contains("step_s"));
}

TEST_CASE("the profiler measures every grid point of a real executor", "[profiled]") {
  // A linear cost model behind the simulated executor stands in for a real
  // executor: the profile must reproduce it at the grid points.
  const ModelConfig model = test::micro_model(1000);
  CostModelConfig cm;
  set_options(cm, {{"cost_model.step_overhead_s", "0.001"},
                   {"cost_model.prefill_token_s", "1e-5"},
                   {"cost_model.decode_seq_s", "2e-4"},
                   {"cost_model.context_token_s", "1e-7"}});
  SimExecutor exec(make_cost_model(cm, model), 1000);
  ProfileGrid grid = default_profile_grid(128, 8, 300);
  grid.repeats = 1;
  CHECK(grid.prefill_tokens == std::vector<int>{0, 16, 32, 64, 128});
  CHECK(grid.decode_seqs == std::vector<int>{0, 1, 2, 4, 8});
  CHECK(grid.context == std::vector<int>{0, 64, 256, 300});
  const ProfileTable t = profile_executor(exec, grid, 16, 1000);
  for (size_t i = 0; i < grid.prefill_tokens.size(); ++i)
    for (size_t j = 0; j < grid.decode_seqs.size(); ++j)
      for (size_t k = 0; k < grid.context.size(); ++k) {
        const double P = grid.prefill_tokens[i], D = grid.decode_seqs[j], C = grid.context[k];
        if (P == 0 && D == 0) continue;
        const double context = (P > 0 ? C + P : 0) + D * (std::max(C, 1.0) + 1);
        INFO("P " << P << " D " << D << " C " << C);
        CHECK(t.step_s[t.index(i, j, k)] == Approx(0.001 + 1e-5 * P + 2e-4 * D + 1e-7 * context));
      }
}
