// The CUDA code loads only when a run chooses it (engine/cuda_module.h): in a
// CUDA build the testbed executable links neither the CUDA runtime nor cuBLAS,
// and executor.kind = cuda loads libtestbed_cuda.so (beside the executable, or
// $TESTBED_CUDA_MODULE), which brings them. The dynamic loader's own account
// (LD_DEBUG=files: every object it maps, at start or by dlopen) says what a
// run loaded. In a build without CUDA, the executor says it needs one.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "support/cli.h"

namespace {

using testbed_test::Outcome;
using testbed_test::run_cli;
using testbed_test::ScopedEnv;

// A short simulation (the Llama-3.1-8B roofline of sim_speed.ini, 50 requests).
std::string sim_run(const std::string& name) {
  return "run experiments/sim_speed.ini --workload.num_requests=50 --output " +
         testbed_test::scratch_dir("testbed_lazy_cuda", name).string() + " --overwrite";
}

// The tiny model on the CUDA executor.
std::string cuda_run(const std::string& name) {
  return "run experiments/quickstart.ini --executor.kind=cuda --workload.num_requests=2 --output " +
         testbed_test::scratch_dir("testbed_lazy_cuda", name).string() + " --overwrite";
}

// The loader mapped a file whose name holds `lib`: LD_DEBUG=files prints
// "file=<name> [0];  needed by <object>" for a dependency, "file=<path> [0];
// dynamically loaded by <object>" for a dlopen.
bool loaded(const Outcome& o, const std::string& lib) {
  for (size_t at = o.output.find("file="); at != std::string::npos; at = o.output.find("file=", at + 1)) {
    const size_t end = o.output.find(" [", at);
    if (end != std::string::npos && o.output.substr(at, end - at).find(lib) != std::string::npos) return true;
  }
  return false;
}

#ifdef TESTBED_HAVE_CUDA
// Under LD_DEBUG=bindings, the file name of the object the module's reference to
// `symbol` (mangled) was bound to, from the loader's line "binding file
// <dir>/libtestbed_cuda.so [0] to <dir>/<file> [0]: normal symbol `<symbol>'";
// empty when no such line.
std::string bound_to(const Outcome& o, const std::string& symbol) {
  const std::string from = "/libtestbed_cuda.so [0] to ", tail = " [0]: normal symbol `" + symbol + "'";
  for (size_t end = o.output.find(tail); end != std::string::npos; end = o.output.find(tail, end + 1)) {
    const size_t line = o.output.rfind('\n', end) + 1;  // npos + 1 = 0: the first line
    const size_t to = o.output.find(from, line);
    if (to == std::string::npos || to > end) continue;  // another object's reference
    const std::string target = o.output.substr(to + from.size(), end - to - from.size());
    return target.substr(target.rfind('/') + 1);
  }
  return "";
}
#endif

}  // namespace

#ifdef TESTBED_HAVE_CUDA

TEST_CASE("a simulation in a CUDA build loads neither the CUDA runtime nor cuBLAS", "[cli][lazy_cuda]") {
  ScopedEnv debug("LD_DEBUG", "files");
  const Outcome o = run_cli(sim_run("sim"));
  INFO(o.output.substr(0, 4000));
  REQUIRE(o.status == 0);
  // The loader did report (the executable's own libraries), so silence below means something.
  REQUIRE(loaded(o, "libboost_program_options"));
  // HDF5 is linked from its archive: its S3 driver's libcurl (and ~30 libraries behind it) stays out.
  CHECK_FALSE(loaded(o, "libcurl"));
  CHECK_FALSE(loaded(o, "libcudart"));
  CHECK_FALSE(loaded(o, "libcublas"));  // libcublas and libcublasLt
  CHECK_FALSE(loaded(o, "libcuda.so"));
  CHECK_FALSE(loaded(o, "libtestbed_cuda"));
}

TEST_CASE("executor.kind = cuda loads the CUDA module, which tells a missing device", "[cli][lazy_cuda]") {
  ScopedEnv debug("LD_DEBUG", "files");
  const Outcome o = run_cli(cuda_run("cuda"));
  INFO(o.output.substr(o.output.size() > 6000 ? o.output.size() - 6000 : 0));
  CHECK(loaded(o, "libtestbed_cuda"));
  CHECK(loaded(o, "libcudart"));
  CHECK(loaded(o, "libcublas"));
  CHECK_THAT(o.output, !Catch::Contains("unknown value") && !Catch::Contains("cannot load the CUDA module"));
  if (o.output.find("no usable CUDA device") != std::string::npos) {
    CHECK(o.status == 2);  // the CUDA executor's own error, as a ConfigError naming the key
    CHECK_THAT(o.output, Catch::Contains("executor.kind: cuda: no usable CUDA device"));
  } else {
    // A machine with a GPU: the module ran the executor, which refuses the tiny model (head_dim 32).
    WARN("a CUDA device is present: the CUDA executor ran");
    CHECK_THAT(o.output, Catch::Contains("head_dim 32 is not supported"));
  }
}

// The module leaves the engine's symbols to the executable (ENABLE_EXPORTS), and
// where both hold a copy (the weak definitions of inline functions, vtables,
// typeinfo, function-local statics) the loader binds the module to the
// executable's: one of each in the process. ConfigError's typeinfo stands for
// them all: the module throws ConfigError, the executable catches it.
TEST_CASE("the CUDA module binds the engine's symbols to the executable's copies", "[cli][lazy_cuda]") {
  ScopedEnv debug("LD_DEBUG", "bindings");
  const Outcome o = run_cli(cuda_run("bindings"));
  // typeinfo for testbed::ConfigError: both define it.
  CHECK(bound_to(o, "_ZTIN7testbed11ConfigErrorE") == "testbed");
  // Calls into the engine go to the executable (the module holds no engine code).
  CHECK(bound_to(o, "_ZN7testbed13flatten_batchERKNS_5BatchEii") == "testbed");
  // The module's own code stays its own.
  CHECK(bound_to(o, "_ZTVN7testbed12CudaExecutorE") == "libtestbed_cuda.so");
}

TEST_CASE("a CUDA module that cannot be loaded is an error naming its path", "[cli][lazy_cuda]") {
  const std::string missing = "/nonexistent/testbed-lazy-cuda/libtestbed_cuda.so";
  ScopedEnv module("TESTBED_CUDA_MODULE", missing);
  Outcome o = run_cli(cuda_run("missing"));
  INFO(o.output);
  CHECK(o.status == 2);
  CHECK_THAT(o.output, Catch::Contains("executor.kind: cuda: cannot load the CUDA module " + missing) &&
                           Catch::Contains("No such file") && Catch::Contains("TESTBED_CUDA_MODULE"));
  // A module that is not one: a shared object without the entry points.
  {
    ScopedEnv other("TESTBED_CUDA_MODULE", "libz.so.1");
    o = run_cli(cuda_run("not_a_module"));
    INFO(o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains("libz.so.1 loaded but provided no CUDA entry points"));
  }
  // A run that never chooses the CUDA executor never looks for the module.
  o = run_cli(sim_run("missing_sim"));
  INFO(o.output);
  CHECK(o.status == 0);
}

#else

TEST_CASE("executor.kind = cuda in a build without CUDA names the build", "[cli][lazy_cuda]") {
  const Outcome o = run_cli(cuda_run("no_cuda"));
  INFO(o.output);
  CHECK(o.status == 2);
  CHECK_THAT(o.output, Catch::Contains("'cuda' needs a build with CUDA"));
}

TEST_CASE("a simulation in a build without CUDA loads no CUDA library", "[cli][lazy_cuda]") {
  ScopedEnv debug("LD_DEBUG", "files");
  const Outcome o = run_cli(sim_run("sim"));
  INFO(o.output.substr(0, 4000));
  REQUIRE(o.status == 0);
  REQUIRE(loaded(o, "libboost_program_options"));  // the loader did report
  CHECK_FALSE(loaded(o, "libcurl"));               // HDF5 from its archive (CMakeLists.txt)
  CHECK_FALSE(loaded(o, "libcudart"));
  CHECK_FALSE(loaded(o, "libcublas"));
}

#endif
