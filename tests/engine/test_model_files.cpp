// Model files: Hugging Face config.json parsing and safetensors weights,
// including the errors a user must see for bad files.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "engine/common/config_error.h"
#include "engine/model/float16.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"
#include "support/engine_harness.h"

using namespace testbed;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  fs::path p = fs::temp_directory_path() / ("testbed_model_files_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p;
}

}  // namespace

TEST_CASE("shipped model configs parse with their published shapes", "[model_config]") {
  const ModelConfig tiny = ModelConfig::from_json_file("experiments/models/tiny.json");
  CHECK(tiny.num_layers == 4);
  CHECK(tiny.hidden_size == 256);
  CHECK(tiny.head_dim == 32);
  const ModelConfig l8 = ModelConfig::from_json_file("experiments/models/llama-3.1-8b.json");
  CHECK(l8.num_params() == Approx(8.03e9).epsilon(0.01));  // Llama 3.1 8B: 8.03 B parameters
  CHECK(l8.kv_bytes_per_token(2) == 2LL * 32 * 8 * 128 * 2);  // 128 KiB per token in bf16
  const ModelConfig l70 = ModelConfig::from_json_file("experiments/models/llama-3.1-70b.json");
  CHECK(l70.num_params() == Approx(70.6e9).epsilon(0.01));
  const ModelConfig q32 = ModelConfig::from_json_file("experiments/models/qwen3-32b.json");
  CHECK(q32.head_dim == 128);
  CHECK(q32.qk_norm);
  CHECK(q32.num_params() == Approx(32.8e9).epsilon(0.01));
}

TEST_CASE("model config errors name the file and field", "[model_config]") {
  CHECK_THROWS_WITH(ModelConfig::from_json_text("{\"hidden_size\": 64}", "m.json"),
                    Catch::Contains("m.json") && Catch::Contains("intermediate_size"));
  CHECK_THROWS_WITH(ModelConfig::from_json_text("{not json", "m.json"), Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(ModelConfig::from_json_file("/nonexistent/config.json"), Catch::Contains("/nonexistent/config.json"));
  CHECK_THROWS_WITH(ModelConfig::from_json_text(
                        "{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 1,"
                        "\"num_attention_heads\": 4, \"num_key_value_heads\": 3, \"vocab_size\": 10}",
                        "m.json"),
                    Catch::Contains("num_key_value_heads"));
}

TEST_CASE("safetensors round trip in F32 and F16 and BF16", "[safetensors]") {
  const ModelConfig cfg = test::micro_model();
  const LlamaWeights w = make_dummy_weights(cfg, 3);
  const fs::path dir = temp_dir();
  for (const std::string dtype : {"F32", "F16", "BF16"}) {
    const std::string path = (dir / ("w_" + dtype + ".safetensors")).string();
    save_safetensors_weights(cfg, w, path, dtype);
    const LlamaWeights back = load_safetensors_weights(cfg, path);
    for (size_t i = 0; i < w.embed.data.size(); i += 97) {
      const float v = w.embed.data[i];
      const float expected = dtype == "F32" ? v : dtype == "F16" ? fp16_to_float(float_to_fp16(v)) : bf16_to_float(float_to_bf16(v));
      REQUIRE(back.embed.data[i] == expected);
    }
    CHECK(back.layers[1].w_down.data == (dtype == "F32" ? w.layers[1].w_down.data : back.layers[1].w_down.data));
  }
}

TEST_CASE("half and bfloat16 conversions round to nearest even", "[safetensors]") {
  CHECK(fp16_to_float(float_to_fp16(1.0f)) == 1.0f);
  CHECK(fp16_to_float(float_to_fp16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(fp16_to_float(float_to_fp16(1e6f))));
  CHECK(fp16_to_float(float_to_fp16(5.96046448e-8f)) == 5.96046448e-8f);  // smallest subnormal
  CHECK(fp16_to_float(float_to_fp16(-0.333333f)) == Approx(-0.333333f).epsilon(1e-3));
  CHECK(bf16_to_float(float_to_bf16(1.00390625f)) == 1.0f);  // halfway rounds to even
  CHECK(bf16_to_float(float_to_bf16(3.0f)) == 3.0f);
}

TEST_CASE("truncated or mismatched safetensors files are clear errors", "[safetensors]") {
  const ModelConfig cfg = test::micro_model();
  const LlamaWeights w = make_dummy_weights(cfg, 3);
  const fs::path dir = temp_dir();
  const std::string good = (dir / "good.safetensors").string();
  save_safetensors_weights(cfg, w, good, "BF16");

  const std::string cut = (dir / "cut.safetensors").string();
  fs::copy_file(good, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(good) - 100);
  CHECK_THROWS_WITH(load_safetensors_weights(cfg, cut), Catch::Contains("cut.safetensors") && Catch::Contains("truncated"));

  const std::string stub = (dir / "stub.safetensors").string();
  { std::ofstream(stub) << "abc"; }
  CHECK_THROWS_WITH(load_safetensors_weights(cfg, stub), Catch::Contains("truncated"));

  ModelConfig wider = cfg;
  wider.intermediate_size *= 2;
  CHECK_THROWS_WITH(load_safetensors_weights(wider, good), Catch::Contains("mlp.gate_proj.weight") && Catch::Contains("shape"));

  ModelConfig deeper = cfg;
  deeper.num_layers += 1;
  CHECK_THROWS_WITH(load_safetensors_weights(deeper, good), Catch::Contains("missing tensor") && Catch::Contains("model.layers.2."));
  CHECK_THROWS_AS(load_safetensors_weights(cfg, (dir / "absent.safetensors").string()), ConfigError);
}
