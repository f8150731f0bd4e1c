// fleet.threads: a simulated fleet stepped by several threads gives the
// one-thread results bit for bit (sim/fleet_windows.cpp), on runs that
// exercise what a window must replay in order: prefix-index events (at once
// and late), failures that drop a step in flight and re-route or lose its
// requests, stragglers, client cancellations (by time and by tokens), the
// event log, per-step records, samples. The runs are small; 4 threads on a
// 2-core machine only time-slice, which changes nothing but the wall time.
#include <H5Cpp.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/cli.h"
#include "support/h5_read.h"

namespace fs = std::filesystem;
using testbed_test::run_cli;

namespace {

// The result groups of a file (run: wall time and command line; config: the text differs by the key).
std::vector<std::string> result_groups(const fs::path& file) {
  H5::H5File f(file.string(), H5F_ACC_RDONLY);
  std::vector<std::string> out;
  for (hsize_t i = 0; i < f.getNumObjs(); ++i) {
    const std::string name = f.getObjnameByIdx(i);
    if (name != "run" && name != "config") out.push_back(name);
  }
  return out;
}

double run_attr(const fs::path& file, const char* name) {
  H5::H5File f(file.string(), H5F_ACC_RDONLY);
  H5::Attribute a = f.openGroup("run").openAttribute(name);
  double v = 0;
  a.read(H5::PredType::NATIVE_DOUBLE, &v);
  return v;
}

void check_same_for_any_threads(const std::string& name, const std::string& args) {
  const fs::path dir = testbed_test::scratch_dir("testbed_fleet_threads", name);
  for (const char* threads : {"1", "2", "4"}) {
    const auto o = run_cli(args + " --fleet.threads=" + threads + " --output " + (dir / threads).string());
    INFO(o.output);
    REQUIRE(o.status == 0);
  }
  const fs::path one = dir / "1" / "results.h5";
  const std::vector<std::string> groups = result_groups(one);
  CHECK(groups.size() >= 4);  // requests, summary, instances, itl at least
  for (const char* threads : {"2", "4"}) {
    const fs::path other = dir / threads / "results.h5";
    CHECK(result_groups(other) == groups);
    CHECK(run_attr(other, "simulated_s") == run_attr(one, "simulated_s"));
    for (const std::string& group : groups) {
      INFO(name << ": threads " << threads << ", /" << group);
      const auto a = testbed_test::read_group(one, group);
      CHECK(testbed_test::same_bits(a, testbed_test::read_group(other, group)));
    }
  }
}

}  // namespace

TEST_CASE("fleet.threads: the same results with faults, late events, cancellations and the event log",
          "[cli][fleet][threads]") {
  // 8 instances at 24 req/s: windows of several instances; instance 1 fails at 12 s (its requests re-routed),
  // instance 0 runs at half speed for a while, the index hears of blocks 2 ms late, a third of the clients leave.
  check_same_for_any_threads(
      "faults", "run experiments/prefix_routing.ini --workload.num_requests=400 --fleet.num_instances=8"
                " --router.type=prefix_precise --fault.fail=1@12 --fault.slow=0@2-10x2 --fault.kv_event_delay_s=0.002"
                " --workload.cancel_fraction=0.3 --workload.cancel_after=tokens --output.events=true"
                " --output.steps=true --fleet.sample_interval_s=1");
  check_same_for_any_threads(
      "lose", "run experiments/prefix_routing.ini --workload.num_requests=400 --fleet.num_instances=8"
              " --router.type=prefix_approx --fault.fail=3@8 --fault.on_failure=lose --workload.cancel_fraction=0.3"
              " --workload.cancel_after=time --workload.cancel_mean=2 --output.events=true");
}

TEST_CASE("fleet.threads: the same results on 256 instances of the fleet-scale mix", "[cli][fleet][threads]") {
  check_same_for_any_threads(
      "mix", "run experiments/fleet_1k.ini --workload.num_requests=3000 --cache.num_blocks=2000"
             " --fleet.num_instances=256 --workload.profile_trace=traces/samples/azure2023_conv_head300.csv");
}

TEST_CASE("fleet.threads refuses what a worker cannot do, naming the key", "[cli][fleet][threads]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_fleet_threads", "refused");
  const struct {
    std::string args, why;
  } cases[] = {
      {"run experiments/prefix_routing.ini --fleet.threads=0", "must be in [1, 64]"},
      {"run experiments/prefix_routing.ini --fleet.threads=65", "must be in [1, 64]"},
      {"run experiments/pd_speed.ini --fleet.threads=2", "hands KV over"},
      // (experiments/autoscale.ini replays a trace from ../shared, which a fresh clone may lack)
      {"run experiments/prefix_routing.ini --autoscale.policy=target --autoscale.signal=active_seqs"
       " --autoscale.target=32 --fleet.threads=2",
       "autoscales"},
      {"run experiments/prefix_routing.ini --ingress.semantic_cache=true --fleet.threads=2", "ingress cache"},
      {"run experiments/quickstart.ini --fleet.threads=2", "driver.mode = simulated"},
  };
  int k = 0;
  for (const auto& c : cases) {
    const fs::path out = dir / std::to_string(k++);
    const auto o = run_cli(c.args + " --output " + out.string());
    INFO(c.args << "\n" << o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains("fleet.threads") && Catch::Contains(c.why));
    CHECK(!fs::exists(out / "results.h5"));
  }
}
