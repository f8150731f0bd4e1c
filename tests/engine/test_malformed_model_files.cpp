// Malformed model files: every bad config.json or safetensors file is a
// ConfigError naming the file and the field or tensor, never a JSON library
// exception, a silently narrowed value, an overflow or an out-of-bounds read
// (run under ASan/UBSan to see the last two). Ends with a small deterministic
// fuzz of both readers: a mutated file loads or throws ConfigError, nothing else.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/common/config_error.h"
#include "engine/common/rng.h"
#include "engine/model/float16.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/quantized_checkpoint.h"
#include "engine/model/safetensors.h"
#include "support/engine_harness.h"
#include "support/config_error_of.h"
#include "support/scratch.h"

using namespace testbed;
namespace fs = std::filesystem;

namespace {

fs::path scratch() {
  return testbed_test::scratch_root("testbed_malformed_model");
}

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = (scratch() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

using testbed_test::config_error_of;

const std::string kDims = R"("hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "vocab_size": 100)";

// A config of kDims with `extra` fields; a key in both is taken from `extra` (the last one wins).
std::string config_error(const std::string& extra) {
  return config_error_of([&] { ModelConfig::from_json_text("{" + kDims + (extra.empty() ? "" : ", ") + extra + "}", "m.json"); });
}

// A safetensors file of `header` (JSON text) and `data` bytes.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string header_error(const std::string& name, const std::string& header, const std::string& data) {
  const std::string path = write_file(name, safetensors_bytes(header, data));
  return config_error_of([&] { SafetensorsFile file(path); });
}

}  // namespace

TEST_CASE("config.json numbers beyond double are errors naming the file", "[model_config][malformed]") {
  // Regression: nlohmann's out_of_range.406 ("number overflow") escaped as exit 1.
  CHECK_THAT(config_error(R"("rope_theta": 1e400)"), Catch::Contains("m.json") && Catch::Contains("1e400"));
  CHECK_THAT(config_error(R"("hidden_size": -1e400)"), Catch::Contains("m.json: not valid JSON"));
  CHECK_THAT(config_error_of([] { ModelConfig::from_json_text("", "empty.json"); }), Catch::Contains("empty.json"));
  // Deeply nested values: the error describes them without recursing through them.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_THAT(config_error("\"hidden_size\": " + deep), Catch::Contains("hidden_size") && Catch::Contains("an array"));
}

TEST_CASE("config.json integers must be whole and fit an int and every value must have its JSON type", "[model_config][malformed]") {
  // Regression: 4294967552 read as 256 and 256.7 as 256.
  CHECK_THAT(config_error(R"("hidden_size": 4294967552)"),
             Catch::Contains("m.json: hidden_size: 4294967552 does not fit an int"));
  CHECK_THAT(config_error(R"("hidden_size": 18446744073709551615)"), Catch::Contains("hidden_size: 18446744073709551615 does not fit"));
  CHECK_THAT(config_error(R"("vocab_size": -4294967296)"), Catch::Contains("vocab_size") && Catch::Contains("does not fit"));
  CHECK_THAT(config_error(R"("hidden_size": 256.7)"), Catch::Contains("m.json: hidden_size: 256.7 is not an integer"));
  CHECK_THAT(config_error(R"("hidden_size": 1e30)"), Catch::Contains("hidden_size") && Catch::Contains("does not fit"));
  CHECK_THAT(config_error(R"("hidden_size": "64")"), Catch::Contains("hidden_size: expected an integer"));
  CHECK_THAT(config_error(R"("num_hidden_layers": true)"), Catch::Contains("num_hidden_layers"));
  CHECK_THAT(config_error(R"("tie_word_embeddings": "yes")"), Catch::Contains("tie_word_embeddings"));
  CHECK_THAT(config_error(R"("torch_dtype": 16)"), Catch::Contains("torch_dtype"));
  CHECK_THAT(config_error(R"("rope_theta": "1e4")"), Catch::Contains("rope_theta"));
  CHECK_THAT(config_error(R"("model_type": ["llama"])"), Catch::Contains("model_type"));
  CHECK_THAT(config_error(R"("rope_scaling": 2)"), Catch::Contains("rope_scaling"));
  CHECK_THAT(config_error(R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "mlp_only_layers": [4294967296])"),
             Catch::Contains("mlp_only_layers"));
  CHECK_THAT(config_error(R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "mlp_only_layers": 1)"),
             Catch::Contains("mlp_only_layers"));
  // A whole number written as a float is that integer.
  CHECK(ModelConfig::from_json_text("{" + kDims + R"(, "hidden_size": 64.0})", "m.json").hidden_size == 64);
}

TEST_CASE("config.json sizes and reals out of range are errors naming the key", "[model_config][malformed]") {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                          "num_key_value_heads", "max_position_embeddings", "head_dim"}) {
    INFO(key);
    CHECK_THAT(config_error("\"" + std::string(key) + "\": 0"), Catch::Contains(std::string("m.json: ") + key + ": "));
    CHECK_THAT(config_error("\"" + std::string(key) + "\": -3"), Catch::Contains(std::string("m.json: ") + key + ": "));
  }
  for (const char* key : {"rope_theta", "rms_norm_eps"}) {
    INFO(key);
    CHECK_THAT(config_error("\"" + std::string(key) + "\": 0"), Catch::Contains(std::string(key) + ": ") && Catch::Contains("positive"));
    CHECK_THAT(config_error("\"" + std::string(key) + "\": -1e-5"), Catch::Contains(std::string(key) + ": "));
  }
  CHECK_THAT(config_error(R"("initializer_range": -0.02)"), Catch::Contains("initializer_range"));
  CHECK_THAT(config_error(R"("rope_scaling": {"rope_type": "llama3", "factor": 0})"), Catch::Contains("rope_scaling.factor"));
  CHECK_THAT(config_error(R"("rope_scaling": {"rope_type": "llama3"})"), Catch::Contains("rope_scaling.factor"));
  CHECK_THAT(config_error(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4})"),
             Catch::Contains("rope_scaling.high_freq_factor"));
  CHECK_THAT(config_error(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 0})"),
             Catch::Contains("rope_scaling.original_max_position_embeddings"));
  CHECK_THAT(config_error(R"("rope_scaling": {"rope_type": "yarn", "factor": 8})"), Catch::Contains("rope_scaling.rope_type"));
  CHECK_THAT(config_error(R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "n_shared_experts": -1)"),
             Catch::Contains("n_shared_experts"));
  CHECK_THAT(config_error(R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "decoder_sparse_step": 0)"),
             Catch::Contains("decoder_sparse_step"));
}

TEST_CASE("config.json products of sizes that overflow are errors and not undefined behaviour", "[model_config][malformed]") {
  // Regression: q_size() = heads x head_dim overflowed int (65536 x 65536 = 2^32).
  CHECK_THAT(config_error(R"("num_attention_heads": 65536, "num_key_value_heads": 65536, "head_dim": 65536)"),
             Catch::Contains("m.json: num_attention_heads x head_dim: 4294967296 does not fit an int"));
  // Parameter counts past 2^50 (int64_t products of products).
  CHECK_THAT(config_error(R"("hidden_size": 1048576, "num_attention_heads": 8, "vocab_size": 2147483647)"),
             Catch::Contains("m.json") && Catch::Contains("parameters, more than 2^50"));
  CHECK_THAT(config_error(R"("hidden_size": 2147483584, "intermediate_size": 2147483647, "num_attention_heads": 2, "head_dim": 2)"),
             Catch::Contains("more than 2^50"));
  CHECK_THAT(config_error(R"("num_hidden_layers": 2147483647)"), Catch::Contains("num_hidden_layers"));
  CHECK_THAT(config_error(R"("num_local_experts": 2147483647, "num_experts_per_tok": 2, "intermediate_size": 2147483647)"),
             Catch::Contains("more than 2^50"));
  // The largest shipped model still parses, and its counts are exact.
  const ModelConfig l70 = ModelConfig::from_json_file("experiments/models/llama-3.1-70b.json");
  CHECK(l70.num_params() == Approx(70.6e9).epsilon(0.01));
}

TEST_CASE("an unsupported model_type or a mismatched architectures is an error naming the supported ones", "[model_config][malformed]") {
  const std::string gpt2 = config_error(R"("model_type": "gpt2")");
  CHECK_THAT(gpt2, Catch::Contains("m.json: model_type: 'gpt2' is not supported") && Catch::Contains("llama") &&
                       Catch::Contains("qwen3_moe"));
  CHECK_THAT(config_error(R"("architectures": ["GPT2LMHeadModel"])"),
             Catch::Contains("architectures") && Catch::Contains("LlamaForCausalLM"));
  // Qwen3 read as a Llama would silently lose its q/k norms.
  CHECK_THAT(config_error(R"("architectures": ["Qwen3ForCausalLM"], "model_type": "llama")"),
             Catch::Contains("model_type: 'llama' does not match architectures 'Qwen3ForCausalLM'"));
  CHECK(ModelConfig::from_json_text("{" + kDims + R"(, "architectures": ["Qwen3ForCausalLM"]})", "m.json").qk_norm);
  // A mixture-of-experts architecture without its experts would be a silently dense model.
  CHECK_THAT(config_error(R"("architectures": ["MixtralForCausalLM"])"), Catch::Contains("num_local_experts"));
  // The shipped MoE models keep loading (simulated; the executors reject them by name).
  const ModelConfig mix = ModelConfig::from_json_file("experiments/models/mixtral-8x7b.json");
  CHECK(mix.moe.num_experts == 8);
  const ModelConfig q = ModelConfig::from_json_file("experiments/models/qwen3-30b-a3b.json");
  CHECK(q.moe.num_experts == 128);
  CHECK(q.qk_norm);
  CHECK_THAT(config_error_of([&] { make_dummy_weights(mix, 1); }), Catch::Contains("mixture-of-experts"));
}

TEST_CASE("a model config path that is a directory or a FIFO or empty is an error naming it", "[model_config][malformed]") {
  const std::string dir = (scratch() / "config_dir.json").string();
  fs::create_directories(dir);
  CHECK_THAT(config_error_of([&] { ModelConfig::from_json_file(dir); }), Catch::Contains(dir) && Catch::Contains("not a regular file"));
  const std::string fifo = (scratch() / "config_fifo.json").string();
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // opening it would block forever
  CHECK_THAT(config_error_of([&] { ModelConfig::from_json_file(fifo); }), Catch::Contains(fifo));
  const std::string empty = write_file("empty.json", "");
  CHECK_THAT(config_error_of([&] { ModelConfig::from_json_file(empty); }), Catch::Contains(empty) && Catch::Contains("not valid JSON"));
  // Too long to stat (ENAMETOOLONG): the throwing std::filesystem calls would escape as filesystem_error.
  const std::string long_path = "/tmp/" + std::string(5000, 'a') + ".json";
  CHECK_THAT(config_error_of([&] { ModelConfig::from_json_file(long_path); }), Catch::Contains("cannot open model config"));
  CHECK_THAT(config_error_of([&] { SafetensorsFile f(long_path); }), Catch::Contains("cannot open safetensors file"));
  CHECK_THAT(config_error_of([&] { load_weights(test::micro_model(), long_path, 1); }), Catch::Contains("model.weights"));
}

TEST_CASE("safetensors headers that are not JSON or too long or malformed name the file and tensor", "[safetensors][malformed]") {
  const std::string f32 = R"("dtype": "F32", "shape": [2])";
  const std::string data(8, '\0');
  // Regression: out_of_range.406 escaped the reader.
  CHECK_THAT(header_error("num.safetensors", R"({"__metadata__": {"x": 1e400}})", data),
             Catch::Contains("num.safetensors") && Catch::Contains("not valid JSON"));
  // The header length claims more than the file holds (up to 2^64 - 1).
  std::string huge = safetensors_bytes("{}", data);
  for (int i = 0; i < 8; ++i) huge[i] = '\xff';
  const std::string huge_path = write_file("huge.safetensors", huge);
  CHECK_THAT(config_error_of([&] { SafetensorsFile f(huge_path); }), Catch::Contains("huge.safetensors") && Catch::Contains("truncated"));
  // A header past the format's 100 MB limit (a sparse file: nothing is written).
  std::string over = safetensors_bytes("{}", "");
  for (int i = 0; i < 8; ++i) over[i] = static_cast<char>((uint64_t{100000001} >> (8 * i)) & 0xff);
  const std::string over_path = write_file("over.safetensors", over.substr(0, 8));
  fs::resize_file(over_path, 8 + 100000001);
  CHECK_THAT(config_error_of([&] { SafetensorsFile f(over_path); }), Catch::Contains("over.safetensors") && Catch::Contains("limit"));
  fs::remove(over_path);
  CHECK_THAT(header_error("list.safetensors", "[1, 2]", ""), Catch::Contains("not a JSON object"));
  CHECK_THAT(header_error("entry.safetensors", R"({"w": 3})", ""), Catch::Contains("tensor 'w'"));
  CHECK_THAT(header_error("nodtype.safetensors", R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", data),
             Catch::Contains("tensor 'w': dtype"));
  CHECK_THAT(header_error("dtype.safetensors", R"({"w": {"dtype": "F128", "shape": [2], "data_offsets": [0, 8]}})", data),
             Catch::Contains("tensor 'w': unknown dtype 'F128'"));
  CHECK_THAT(header_error("shape.safetensors", R"({"w": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", data),
             Catch::Contains("tensor 'w': shape"));
  for (const char* dim : {"-1", "1.5", "1e30", "\"2\"", "[2]"}) {
    INFO(dim);
    CHECK_THAT(header_error("dim.safetensors", std::string(R"({"w": {"dtype": "F32", "shape": [)") + dim +
                                                   R"(], "data_offsets": [0, 8]}})", data),
               Catch::Contains("dim.safetensors: tensor 'w': shape"));
  }
  for (const char* offsets : {"[0]", "[0, 8, 16]", "[-8, 0]", "[0.0, 8.0]", "8"}) {
    INFO(offsets);
    CHECK_THAT(header_error("off.safetensors", "{\"w\": {" + f32 + ", \"data_offsets\": " + offsets + "}}", data),
               Catch::Contains("off.safetensors: tensor 'w': data_offsets"));
  }
}

TEST_CASE("safetensors offsets that overflow or mismatch or leave the file or overlap name the tensor", "[safetensors][malformed]") {
  const std::string data(16, '\0');
  // Regression: the element count 2^32 x 2^32 wrapped to 0 (signed overflow) and matched offsets [0, 0].
  CHECK_THAT(header_error("wrap.safetensors",
                          R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", data),
             Catch::Contains("wrap.safetensors: tensor 'w': shape holds more bytes"));
  CHECK_THAT(header_error("wrap2.safetensors",
                          R"({"w": {"dtype": "BF16", "shape": [4611686018427387904, 2], "data_offsets": [0, 0]}})", data),
             Catch::Contains("tensor 'w'"));
  CHECK_THAT(header_error("size.safetensors", R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", data),
             Catch::Contains("size.safetensors: tensor 'w': data_offsets [0, 8) do not match its shape [3] and dtype F32"));
  CHECK_THAT(header_error("back.safetensors", R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", data),
             Catch::Contains("tensor 'w'"));
  CHECK_THAT(header_error("out.safetensors", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}})", data),
             Catch::Contains("out.safetensors: truncated") && Catch::Contains("tensor 'w'"));
  CHECK_THAT(header_error("far.safetensors",
                          R"({"w": {"dtype": "U8", "shape": [8], "data_offsets": [18446744073709551608, 18446744073709551615]}})", data),
             Catch::Contains("tensor 'w'"));
  CHECK_THAT(header_error("overlap.safetensors",
                          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                          data),
             Catch::Contains("overlap.safetensors: tensors 'a' and 'b' overlap"));
  // Empty tensors share no bytes; adjacent ones touch without overlapping.
  CHECK(header_error("fine.safetensors",
                     R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                         "b": {"dtype": "F32", "shape": [0, 5], "data_offsets": [4, 4]},
                         "c": {"dtype": "I64", "shape": [1], "data_offsets": [8, 16]}})",
                     data) == "");
  // Not a file at all.
  const std::string dir = (scratch() / "dir.safetensors").string();
  fs::create_directories(dir);
  CHECK_THAT(config_error_of([&] { SafetensorsFile f(dir); }), Catch::Contains(dir) && Catch::Contains("not a regular file"));
  CHECK_THAT(config_error_of([&] { load_weights(test::micro_model(), dir, 1); }), Catch::Contains("model.weights"));
}

TEST_CASE("safetensors weights holding NaN or Inf are errors naming the tensor", "[safetensors][malformed]") {
  const ModelConfig cfg = test::micro_model();
  for (const std::string dtype : {"F32", "F16", "BF16"}) {
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()}) {
      INFO(dtype << " " << bad);
      LlamaWeights w = make_dummy_weights(cfg, 3);
      w.layers[1].wv.data[17] = bad;
      const std::string path = (scratch() / ("nan_" + dtype + ".safetensors")).string();
      save_safetensors_weights(cfg, w, path, dtype);
      CHECK_THAT(config_error_of([&] { load_safetensors_weights(cfg, path); }),
                 Catch::Contains(path) && Catch::Contains("model.layers.1.self_attn.v_proj.weight") &&
                     Catch::Contains("at element 17"));
    }
  }
}

TEST_CASE("the finiteness check costs little next to reading the weights", "[safetensors][malformed]") {
  // A 4-layer model of hidden 256 (~6 M parameters, 12 MB in BF16): the check is
  // one pass over floats already in cache, next to a file read and a conversion.
  const ModelConfig cfg = test::micro_model(4096, 4, 256, 8, 2);
  const std::string path = (scratch() / "timing.safetensors").string();
  save_safetensors_weights(cfg, make_dummy_weights(cfg, 1), path, "BF16");
  SafetensorsFile file(path);
  const std::vector<int64_t> shape = file.shape_of("model.embed_tokens.weight");
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor t = file.read("model.embed_tokens.weight", shape);
  const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto t1 = std::chrono::steady_clock::now();
  size_t finite = 0;
  for (float v : t.data) finite += std::isfinite(v) ? 1 : 0;
  const double check_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  REQUIRE(finite == t.data.size());
  // Reported, not asserted (timings on a shared machine): a pass alone is a
  // small share of the read that includes it.
  WARN("read " << t.data.size() << " BF16 values in " << read_s * 1e3 << " ms; a finiteness pass alone takes "
               << check_s * 1e3 << " ms");
}

namespace {

// Every tensor of the micro model as F32, layer 0's gate_proj replaced by `linear` (its prefix's tensors).
std::string checkpoint_with(const ModelConfig& cfg, const std::string& name, const std::vector<RawTensor>& linear) {
  LlamaWeights w = make_dummy_weights(cfg, 2);
  std::vector<RawTensor> out = linear;
  for_each_weight(cfg, w, [&](const std::string& n, Tensor& t, const std::vector<int64_t>& shape, bool) {
    if (n == "model.layers.0.mlp.gate_proj.weight") return;
    std::vector<uint8_t> bytes(t.data.size() * 4);
    std::memcpy(bytes.data(), t.data.data(), bytes.size());
    out.push_back({n, "F32", shape, bytes});
  });
  const std::string path = (scratch() / name).string();
  write_safetensors_raw(path, out);
  return path;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST_CASE("quantized checkpoints with impossible packing or non-finite values name the tensor", "[quant][checkpoint][malformed]") {
  const std::string prefix = "model.layers.0.mlp.gate_proj";
  // Regression: GPTQ with N = 36 (not a multiple of 8) read qzeros past their end (heap overflow).
  const ModelConfig narrow = ModelConfig::from_json_text(
      R"({"hidden_size": 64, "intermediate_size": 36, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 64})",
      "narrow.json");
  std::vector<uint16_t> scales(36, float_to_fp16(0.01f));
  std::vector<uint8_t> scale_bytes(scales.size() * 2);
  std::memcpy(scale_bytes.data(), scales.data(), scale_bytes.size());
  const std::string gptq = checkpoint_with(narrow, "gptq36.safetensors",
                                           {{prefix + ".qweight", "I32", {8, 36}, std::vector<uint8_t>(8 * 36 * 4, 0x11)},
                                            {prefix + ".scales", "F16", {1, 36}, scale_bytes},
                                            {prefix + ".qzeros", "I32", {1, 4}, std::vector<uint8_t>(16, 0x77)}});
  std::string format;
  CHECK_THAT(config_error_of([&] { load_checkpoint(narrow, gptq, &format); }),
             Catch::Contains("gptq36.safetensors") && Catch::Contains(prefix + ".qweight"));

  const ModelConfig cfg = test::micro_model();
  const int64_t n = cfg.intermediate_size, k = cfg.hidden_size;
  std::vector<uint8_t> codes(static_cast<size_t>(n * k), 0x38);  // 1.0
  codes[5] = 0x7F;                                                 // e4m3 NaN
  const std::string nan_code = checkpoint_with(cfg, "fp8_nan.safetensors",
                                               {{prefix + ".weight", "F8_E4M3", {n, k}, codes},
                                                {prefix + ".weight_scale", "F32", {1}, f32_bytes({0.5f})}});
  CHECK_THAT(config_error_of([&] { load_checkpoint(cfg, nan_code, &format); }),
             Catch::Contains("fp8_nan.safetensors") && Catch::Contains(prefix + ".weight") && Catch::Contains("NaN"));
  codes[5] = 0x38;
  const std::string inf_scale =
      checkpoint_with(cfg, "fp8_inf.safetensors",
                      {{prefix + ".weight", "F8_E4M3", {n, k}, codes},
                       {prefix + ".weight_scale", "F32", {1}, f32_bytes({std::numeric_limits<float>::infinity()})}});
  CHECK_THAT(config_error_of([&] { load_checkpoint(cfg, inf_scale, &format); }), Catch::Contains(prefix + ".weight_scale"));
  const std::string fine = checkpoint_with(cfg, "fp8_ok.safetensors",
                                           {{prefix + ".weight", "F8_E4M3", {n, k}, codes},
                                            {prefix + ".weight_scale", "F32", {1}, f32_bytes({0.5f})}});
  CHECK_NOTHROW(load_checkpoint(cfg, fine, &format));
  CHECK(format == "fp8");
}

TEST_CASE("fuzzed config.json and safetensors files load or throw ConfigError and nothing else", "[model_config][safetensors][malformed]") {
  // Deterministic mutations of good files: byte flips, insertions of JSON
  // punctuation and digits, truncations. Under ASan/UBSan this also checks that
  // no mutation reads out of bounds or overflows.
  Rng rng(20240501);
  const std::string config_text = [] {
    std::ifstream in("experiments/models/qwen3-30b-a3b.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  REQUIRE(!config_text.empty());
  const char* tokens[] = {"1e400", "-", "4294967552", "0", "[", "]", "{", "}", ",", "\"", ".5", "null", "true", "9"};
  auto mutate = [&](std::string s, size_t lo, size_t hi) {
    const int edits = 1 + static_cast<int>(rng.below(3));
    for (int e = 0; e < edits && hi > lo; ++e) {
      const size_t at = lo + rng.below(hi - lo);
      switch (rng.below(3)) {
        case 0: s[at] = static_cast<char>(rng.below(256)); break;
        case 1: s.insert(at, tokens[rng.below(sizeof tokens / sizeof *tokens)]); hi = s.size(); break;
        default: s.erase(at, 1 + rng.below(4)); hi = std::min(hi, s.size()); break;
      }
    }
    return s;
  };
  int configs_ok = 0;
  for (int i = 0; i < 1500; ++i) {
    const std::string text = mutate(config_text, 0, config_text.size());
    try {
      ModelConfig::from_json_text(text, "fuzz.json");
      ++configs_ok;
    } catch (const ConfigError&) {
    }
  }
  INFO(configs_ok << " of 1500 mutated configs parsed");

  const ModelConfig cfg = test::micro_model(64, 1, 32, 2, 1);
  const std::string good = (scratch() / "fuzz_good.safetensors").string();
  save_safetensors_weights(cfg, make_dummy_weights(cfg, 5), good, "BF16");
  const std::string bytes = [&] {
    std::ifstream in(good, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  const std::string path = (scratch() / "fuzz.safetensors").string();
  int loads_ok = 0;
  for (int i = 0; i < 600; ++i) {
    std::string s = i % 10 == 0 ? bytes.substr(0, rng.below(bytes.size())) : mutate(bytes, 0, 8 + header_len);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << s;
    try {
      load_safetensors_weights(cfg, path);
      ++loads_ok;
    } catch (const ConfigError&) {
    }
  }
  INFO(loads_ok << " of 600 mutated safetensors files loaded");
  SUCCEED();
}
