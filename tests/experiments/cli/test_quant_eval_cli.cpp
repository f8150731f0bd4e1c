// testbed quant-eval: per method and group size, KL divergence and top-1
// agreement against the unquantized model; 8-bit costs less than 4-bit, and
// bad flags exit 2 naming them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "support/cli.h"

namespace fs = std::filesystem;
using testbed_test::Outcome;
using testbed_test::run_cli;

TEST_CASE("quant-eval reports KL and top-1 agreement per method", "[cli][quant]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_quant", "eval");
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 2048,
    "initializer_range": 0.1})";
  std::ofstream(dir / "q.ini") << "[model]\nconfig = micro.json\n[executor]\nkind = cpu\n[cache]\nnum_blocks = 64\n";
  const Outcome o = run_cli("quant-eval " + (dir / "q.ini").string() + " --methods fp8,rtn,gptq --groups 64 --tokens 48 --output " +
                            (dir / "out").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  std::ifstream csv(dir / "out" / "quant_eval.csv");
  std::string line;
  std::getline(csv, line);
  CHECK(line == "method,group,kl_mean,kl_p90,top1_agreement,positions");
  std::map<std::string, double> kl, top1;
  while (std::getline(csv, line)) {
    std::stringstream ss(line);
    std::string method, group, klm, klp, t1, pos;
    std::getline(ss, method, ',');
    std::getline(ss, group, ',');
    std::getline(ss, klm, ',');
    std::getline(ss, klp, ',');
    std::getline(ss, t1, ',');
    std::getline(ss, pos, ',');
    kl[method] = std::stod(klm);
    top1[method] = std::stod(t1);
    CHECK(pos == "48");
  }
  REQUIRE(kl.size() == 3);
  for (const auto& [m, v] : kl) {
    INFO(m);
    CHECK(v > 0);
    CHECK(top1[m] >= 0);
    CHECK(top1[m] <= 1);
  }
  CHECK(kl["fp8"] < kl["rtn"]);  // 3 mantissa bits per weight cost less than 4-bit codes
  for (const std::string bad : {"--methods int3", "--groups 48", "--tokens 1", "--model.precision=fp8"}) {
    const Outcome b = run_cli("quant-eval " + (dir / "q.ini").string() + " " + bad + " --output " + (dir / "bad").string());
    INFO(bad << "\n" << b.output);
    CHECK(b.status == 2);
  }
}
