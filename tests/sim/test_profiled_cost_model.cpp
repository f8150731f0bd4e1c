// The profiled cost model: the table interpolates exactly what is linear,
// extrapolates along the edges, survives a save/load round trip, and bad
// files are errors naming the file; the profiler fills every grid point.
#include <H5Cpp.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "sim/cost_model.h"
#include "sim/executor_profiler.h"
#include "sim/profile_table.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"
#include "support/scratch.h"

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
  const std::filesystem::path dir = testbed_test::scratch_root("testbed_profile");
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

namespace {

// A profile file whose profile/<bad_name> dataset has the given extents
// (rank 0: a scalar); the other datasets are the linear table's.
std::string write_profile_with(const std::filesystem::path& dir, const std::string& bad_name,
                               const std::vector<hsize_t>& dims) {
  const std::string path = (dir / ("rank_" + bad_name + std::to_string(dims.size()) + ".h5")).string();
  const ProfileTable t = linear_table();
  H5::H5File f(path, H5F_ACC_TRUNC);
  H5::Group g = f.createGroup("profile");
  const std::map<std::string, const std::vector<double>*> columns = {
      {"prefill_tokens", &t.prefill_tokens}, {"decode_seqs", &t.decode_seqs}, {"context", &t.context},
      {"step_s", &t.step_s}};
  for (const auto& [name, values] : columns) {
    if (name == bad_name) {
      const H5::DataSpace space = dims.empty() ? H5::DataSpace(H5S_SCALAR)
                                               : H5::DataSpace(static_cast<int>(dims.size()), dims.data());
      size_t n = 1;
      for (hsize_t d : dims) n *= d;
      std::vector<double> v(n, 1.0);  // far more values than the column holds for rank 2 and 3
      g.createDataSet(name, H5::PredType::NATIVE_DOUBLE, space).write(v.data(), H5::PredType::NATIVE_DOUBLE);
    } else {
      const hsize_t n = values->size();
      g.createDataSet(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(1, &n))
          .write(values->data(), H5::PredType::NATIVE_DOUBLE);
    }
  }
  return path;
}

}  // namespace

TEST_CASE("a profile dataset of the wrong rank is an error, not an overflow", "[profiled]") {
  // Regression: the reader took one extent into hsize_t dims[1]; a 2-D or 3-D
  // dataset overflowed the heap and a scalar one left dims uninitialised.
  const std::filesystem::path dir = testbed_test::scratch_root("testbed_profile_rank");
  for (const std::vector<hsize_t>& dims : {std::vector<hsize_t>{}, {3, 3}, {24, 24, 24}}) {
    for (const char* name : {"step_s", "context"}) {
      INFO(name << " of rank " << dims.size());
      const std::string path = write_profile_with(dir, name, dims);
      CHECK_THROWS_WITH(ProfileTable::load(path), Catch::Contains(path) && Catch::Contains(name) &&
                                                      Catch::Contains("1-D"));
    }
  }
  std::filesystem::remove_all(dir);
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
