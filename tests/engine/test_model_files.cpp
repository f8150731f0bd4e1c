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
#include "support/scratch.h"

using namespace testbed;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  return testbed_test::scratch_root("testbed_model_files");
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

TEST_CASE("mixture-of-experts configs parse: Mixtral, Qwen3-MoE, Qwen2-MoE, DeepSeekMoE", "[model_config][moe]") {
  const ModelConfig mix = ModelConfig::from_json_file("experiments/models/mixtral-8x7b.json");
  REQUIRE(mix.moe.enabled());
  CHECK(mix.architecture == "MixtralForCausalLM");
  CHECK(mix.moe.num_experts == 8);
  CHECK(mix.moe.experts_per_token == 2);
  CHECK(mix.moe.expert_intermediate == 14336);
  CHECK(mix.num_moe_layers() == 32);
  CHECK(mix.num_params() == Approx(46.7e9).epsilon(0.01));         // Mixtral 8x7B: 46.7 B parameters
  CHECK(mix.num_active_params() == Approx(12.9e9).epsilon(0.01));  // 12.9 B active per token
  const ModelConfig q = ModelConfig::from_json_file("experiments/models/qwen3-30b-a3b.json");
  CHECK(q.moe.num_experts == 128);
  CHECK(q.moe.experts_per_token == 8);
  CHECK(q.moe.expert_intermediate == 768);
  CHECK(q.qk_norm);
  CHECK(q.num_params() == Approx(30.5e9).epsilon(0.01));        // Qwen3-30B-A3B: 30.5 B total
  CHECK(q.num_active_params() == Approx(3.3e9).epsilon(0.03));  // 3.3 B activated
  // Qwen2-MoE: one shared expert of its own width, every other layer dense (decoder_sparse_step 2), layer 0 dense too.
  const ModelConfig q2 = ModelConfig::from_json_text(
      R"({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 64,
          "intermediate_size": 256, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 128,
          "num_experts": 6, "num_experts_per_tok": 2, "decoder_sparse_step": 2, "mlp_only_layers": [1],
          "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 100})",
      "q2.json");
  CHECK(q2.moe.num_shared_experts == 1);
  CHECK(q2.moe.shared_intermediate == 128);
  CHECK(q2.num_moe_layers() == 1);  // layers 1 and 3 sparse by step, layer 1 dense by mlp_only_layers
  // One MoE layer by hand: router 64 x 6, six experts and the shared one of 3 x 64 x width.
  CHECK(q2.num_layer_params() == q2.attention_params() + 64 * 6 + 3 * 64 * (6 * 32 + 128));
  // DeepSeekMoE: shared experts of the routed width, the first layers dense.
  const ModelConfig ds = ModelConfig::from_json_text(
      R"({"architectures": ["DeepseekForCausalLM"], "model_type": "deepseek", "hidden_size": 64,
          "intermediate_size": 256, "moe_intermediate_size": 16, "n_routed_experts": 16, "n_shared_experts": 2,
          "num_experts_per_tok": 4, "first_k_dense_replace": 1, "moe_layer_freq": 1,
          "num_hidden_layers": 3, "num_attention_heads": 4, "vocab_size": 100})",
      "ds.json");
  CHECK(ds.moe.num_shared_experts == 2);
  CHECK(ds.moe.shared_intermediate == 16);
  CHECK(ds.num_moe_layers() == 2);
  CHECK(ds.num_active_params() ==
        ds.num_params() - 2 * (3 * 64 * 16 * (16 - 4)));  // the 12 experts a token skips, in each MoE layer
}

TEST_CASE("unsupported architectures and attention are errors naming the field", "[model_config][moe]") {
  const std::string dims = R"("hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                               "num_attention_heads": 4, "vocab_size": 100)";
  auto parse = [&](const std::string& extra) { return ModelConfig::from_json_text("{" + dims + ", " + extra + "}", "m.json"); };
  CHECK_THROWS_WITH(parse(R"("architectures": ["GPT2LMHeadModel"])"),
                    Catch::Contains("m.json") && Catch::Contains("architectures") && Catch::Contains("GPT2LMHeadModel"));
  CHECK_THROWS_WITH(parse(R"("architectures": ["DeepseekV3ForCausalLM"])"), Catch::Contains("architectures"));
  CHECK_THROWS_WITH(parse(R"("kv_lora_rank": 512)"), Catch::Contains("kv_lora_rank"));
  CHECK_THROWS_WITH(parse(R"("model_type": "mistral", "sliding_window": 4096)"), Catch::Contains("sliding_window"));
  CHECK_THROWS_WITH(parse(R"("use_sliding_window": true)"), Catch::Contains("sliding_window"));
  CHECK_THROWS_WITH(parse(R"("num_local_experts": 8)"), Catch::Contains("num_experts_per_tok"));
  CHECK_THROWS_WITH(parse(R"("num_experts": 8, "num_experts_per_tok": 2)"), Catch::Contains("moe_intermediate_size"));
  CHECK_THROWS_WITH(parse(R"("num_local_experts": 4, "num_experts_per_tok": 5)"), Catch::Contains("num_experts_per_tok"));
  CHECK_THROWS_WITH(parse(R"("n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "moe_layer_freq": 2)"),
                    Catch::Contains("moe_layer_freq"));
  CHECK_THROWS_WITH(parse(R"("num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "mlp_only_layers": [5])"),
                    Catch::Contains("mlp_only_layers"));
  CHECK_NOTHROW(parse(R"("num_experts": 0)"));  // a dense config that carries the key
  // The executors run dense models only.
  const ModelConfig mix = ModelConfig::from_json_file("experiments/models/mixtral-8x7b.json");
  CHECK_THROWS_WITH(make_dummy_weights(mix, 1), Catch::Contains("mixture-of-experts") && Catch::Contains("model.config"));
}
