// What one cache line costs to move between two cores, the price of every
// hand-off between a fleet's threads (fleet.threads: the window's gate and
// counters, and each instance's lines when the other thread steps it):
//   ./build/sim/bench/bench_sim --benchmark_filter=core_to_core
// The benchmark's thread and a helper, each pinned to one of the first two
// CPUs this process may run on, pass a flag back and forth; the time per
// iteration is one round trip (two transfers of the line): 442-562 ns on
// this project's 2-vCPU AMD EPYC VM, where a second thread slows a
// 64-instance fleet and still speeds up a 1,024-instance one (README, Fleet
// scale).
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <string>
#include <thread>

namespace {

// The first two CPUs of this process's affinity mask (false: fewer than two).
bool first_two_cpus(int& a, int& b) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  a = b = -1;
  for (int c = 0; c < CPU_SETSIZE && b < 0; ++c)
    if (CPU_ISSET(c, &set)) (a < 0 ? a : b) = c;
  return b >= 0;
}

bool pin(pthread_t thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(thread, sizeof set, &set) == 0;
}

void core_to_core_round_trip(benchmark::State& state) {
  int a = 0, b = 0;
  if (!first_two_cpus(a, b)) {
    state.SkipWithError("needs two CPUs in the affinity mask");
    return;
  }
  cpu_set_t before;
  CPU_ZERO(&before);
  pthread_getaffinity_np(pthread_self(), sizeof before, &before);
  if (!pin(pthread_self(), a)) {
    state.SkipWithError("cannot pin the benchmark's thread");
    return;
  }
  // 0: the helper's turn is over; 1: a ping waits for it; 2: stop.
  alignas(64) std::atomic<int> flag{0};
  std::thread helper([&] {
    pin(pthread_self(), b);
    for (;;) {
      int f;
      while ((f = flag.load(std::memory_order_acquire)) == 0) {
      }
      if (f == 2) return;
      flag.store(0, std::memory_order_release);
    }
  });
  for (auto _ : state) {
    flag.store(1, std::memory_order_release);
    while (flag.load(std::memory_order_acquire) != 0) {
    }
  }
  flag.store(2, std::memory_order_release);
  helper.join();
  pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  state.SetLabel("cpus " + std::to_string(a) + " and " + std::to_string(b));
}
BENCHMARK(core_to_core_round_trip);

}  // namespace
