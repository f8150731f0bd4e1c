// CudaExecutor: the CpuExecutor's forward pass on the GPU (same flattening,
// same positions, same block tables, same sampling), with this project's
// kernels and cuBLAS bf16 GEMMs. The residual stream and every GEMM output stay
// in fp32; GEMM inputs, weights and the KV cache are bf16. The residual adds
// are the GEMM epilogue (beta = 1 into x).
// The batch is flattened on the host by flatten_batch (step_inputs.h).
#include "engine/cuda/cuda_executor_impl.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "engine/common/config_error.h"
#include "engine/cpu_executor.h"
#include "engine/cuda_module.h"
#include "engine/model/quantize_weights.h"
#include "engine/cuda/cuda_executor.h"
#include "engine/sampler.h"
#include "kernels/attention/attention.h"
#include "kernels/common/device_probe.h"
#include "kernels/common/model_ops.h"
#include "kernels/gemm/gemm.h"
#include "kernels/spec/verify.h"

namespace testbed {
namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(status)));
}

void require_arg(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("CUDA executor: " + what);
}

// Byte offset of `rows` rows of `cols` 16-bit values.
size_t bf16_rows(int rows, int cols) { return static_cast<size_t>(rows) * cols * 2; }

}  // namespace

bool cuda_device_available() { return probe_cuda_device().count > 0; }

std::unique_ptr<Executor> make_cuda_executor(const ModelConfig& cfg, const LlamaWeights& weights, int num_blocks,
                                             int block_size, int max_model_len) {
  return std::make_unique<CudaExecutor>(cfg, weights, num_blocks, block_size, max_model_len);
}

// executor.kind = cuda, from the config (the entry point engine/cuda_module.h hands the engine).
std::unique_ptr<Executor> make_cuda_executor(const ExecutorSetup& s) {
  const DeviceProbe p = probe_cuda_device();
  require(p.count > 0, "executor.kind",
          "cuda: no usable CUDA device (" + (p.error.empty() ? std::string("none found") : p.error) +
              (p.smi.empty() ? "" : "; nvidia-smi lists " + p.smi) + ")");
  // Quantized execution: w4a16 with RTN or GPTQ codes through the W4A16 kernel; fp8, AWQ
  // (input scales) and quantized checkpoints run on the CPU executor only, for now.
  require(s.model.precision != "w4a16" || (s.model.hidden_size % 256 == 0 && s.model.intermediate_size % 256 == 0 &&
                                           s.model.q_size() % 256 == 0),
          "model.precision", "w4a16 on the CUDA executor needs hidden, intermediate and q sizes that are multiples of 256");
  LlamaWeights w = load_weights(s.model, s.weights, s.weights_seed);
  // A quantized checkpoint runs on the GPU when its codes fit the kernels' layout (not GPTQ's act-order g_idx).
  for (const LayerWeights& L : w.layers)
    for (int i = 0; i < kNumLinears; ++i)
      require(w.quantized_format.empty() || (w.quantized_format == "fp8" ? !L.f8_codes[i].empty() : L.q4[i].n > 0),
              "model.weights",
              s.weights + ": its " + w.quantized_format +
                  " groups are not in column order (act-order g_idx) or use zero points above 15; the CUDA "
                  "executor's W4A16 kernel cannot read them, the CPU executor can (executor.kind = cpu)");
  return make_cuda_executor(s.model, quantized_weights(s.model, std::move(w), s.block_size), s.num_blocks,
                            s.block_size, s.max_model_len);
}

// The registry's "cuda" entry (engine/executor.cpp) calls these: provided when
// this code is linked in, or when the module holding it is loaded.
static const bool testbed_cuda_entry_points_provided =
    provide_cuda_entry_points(CudaEntryPoints{&make_cuda_executor}, kCudaEntryAbi);

CudaExecutor::CudaExecutor(const ModelConfig& cfg, const LlamaWeights& weights, int num_blocks, int block_size,
                           int max_model_len)
    : cfg_(cfg), max_model_len_(max_model_len) {
  require_arg(cfg.head_dim == 64 || cfg.head_dim == 128,
              "head_dim " + std::to_string(cfg.head_dim) + " is not supported (64 or 128)");
  require_arg(cfg.num_kv_heads > 0 && cfg.num_heads % cfg.num_kv_heads == 0,
              "num_attention_heads must be a multiple of num_key_value_heads");
  require_arg(cfg.num_heads / cfg.num_kv_heads <= kDecodeMaxGroup,
              "GQA group above " + std::to_string(kDecodeMaxGroup) + " is not supported");
  require_arg(num_blocks > 0 && block_size > 0 && max_model_len > 0,
              "num_blocks, block_size and max_model_len must be positive");
  layout_ = KvLayout{num_blocks, block_size, cfg.num_kv_heads, cfg.head_dim};

  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device), "SM count");
  decode_ctas_per_sm_ = decode_ctas_per_sm(DType::kBF16, cfg.head_dim, cfg.num_heads / cfg.num_kv_heads);

  // Memory first: the buffers free themselves if an allocation throws, the
  // stream and cuBLAS handle below would not (no destructor runs then).
  model_ = upload_model(cfg, weights, max_model_len);
  const size_t cache_bytes = layout_.num_elements() * 2;
  for (int l = 0; l < cfg.num_layers; ++l) {
    k_cache_.emplace_back(cache_bytes);
    v_cache_.emplace_back(cache_bytes);
    // Zeroed so a kernel bug that reads an unwritten slot shows as a wrong value, not as NaN garbage.
    cuda_check(cudaMemset(k_cache_.back().get(), 0, cache_bytes), "cudaMemset");
    cuda_check(cudaMemset(v_cache_.back().get(), 0, cache_bytes), "cudaMemset");
  }
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS || cublasSetStream(cublas_, stream_) != CUBLAS_STATUS_SUCCESS) {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
    throw std::runtime_error("CUDA executor: cuBLAS initialisation failed");
  }
}

CudaExecutor::~CudaExecutor() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaExecutor::gemm(const void* x_bf16, int rows, const void* w_bf16, int n, int k, float* y, float beta) {
  // Row-major Y = X W^T is column-major Y^T = W^T X^T: W is k x n column-major (lda k), X is k x rows.
  const float alpha = 1.0f;
  check_cublas(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &alpha, w_bf16, CUDA_R_16BF, k, x_bf16,
                            CUDA_R_16BF, k, &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

void CudaExecutor::linear(const void* x_bf16, int rows, const DeviceBuffer& w_bf16, const DeviceW4& w4,
                          const DeviceF8& f8, const DeviceBuffer& inv_scale, int n, int k, float* y, float beta) {
  if (inv_scale.get() != nullptr) {  // AWQ: the input divided by its per-channel scale
    awq16_.resize(bf16_rows(rows, k));
    cuda_check(launch_scale_columns_bf16(x_bf16, rows, k, inv_scale.as<float>(), awq16_.get(), stream_), "awq scale");
    x_bf16 = awq16_.get();
  }
  if (f8.present()) {  // dynamic W8A8: the input to e4m3 with one scale per token, then the FP8 GEMM
    f8_codes_.resize(static_cast<size_t>(rows) * k);
    f8_scales_.resize(sizeof(float) * rows);
    cuda_check(launch_quantize_rows_fp8(x_bf16, rows, k, f8_codes_.as<uint8_t>(), f8_scales_.as<float>(), stream_),
               "fp8 input quantization");
    Fp8GemmParams p;
    p.a = f8_codes_.as<uint8_t>();
    p.b = f8.codes.as<uint8_t>();
    p.sa = f8_scales_.as<float>();
    p.sb = f8.scales.as<float>();
    p.a_per_row = p.b_per_row = true;
    p.c = y;
    p.m = rows;
    p.n = n;
    p.k = k;
    p.beta = beta;
    cuda_check(launch_fp8_gemm(p, stream_), "fp8 gemm");
    return;
  }
  if (!w4.present()) {
    gemm(x_bf16, rows, w_bf16.get(), n, k, y, beta);
    return;
  }
  W4A16Params p;
  p.dtype = DType::kBF16;
  p.a = x_bf16;
  p.qweight = w4.qweight.as<uint32_t>();
  p.scales = w4.scales.get();
  p.zeros = w4.zeros.as<uint8_t>();
  p.c = y;
  p.m = rows;
  p.n = n;
  p.k = k;
  p.group = w4.group;
  p.beta = beta;
  cuda_check(launch_w4a16_gemm(p, stream_), "w4a16 gemm");
}

void CudaExecutor::run_layer(int l, const StepInputs& in, const int32_t* d) {
  const int T = in.num_tokens(), H = cfg_.hidden_size, Q = cfg_.q_size(), KV = cfg_.kv_size();
  const int I = cfg_.intermediate_size, d_head = cfg_.head_dim, ld = Q + 2 * KV;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const DeviceLayer& L = model_.layers[l];
  float* x = x_.as<float>();
  float* qkv = qkv_.as<float>();

  cuda_check(launch_rms_norm(x, H, L.attn_norm.as<float>(), T, 1, H, eps, DType::kBF16, h16_.get(), H, stream_),
             "rms_norm");
  linear(h16_.get(), T, L.w_qkv, L.q_qkv, L.f_qkv, L.inv_qkv, ld, H, qkv, 0.0f);
  if (cfg_.qk_norm) {
    cuda_check(launch_rms_norm(qkv, ld, L.q_norm.as<float>(), T, cfg_.num_heads, d_head, eps, DType::kFP32, qkv, ld,
                               stream_),
               "q_norm");
    cuda_check(launch_rms_norm(qkv + Q, ld, L.k_norm.as<float>(), T, cfg_.num_kv_heads, d_head, eps, DType::kFP32,
                               qkv + Q, ld, stream_),
               "k_norm");
  }
  // q and k heads sit side by side at the start of each fused row: one call rotates both.
  cuda_check(launch_rope(qkv, ld, T, cfg_.num_heads + cfg_.num_kv_heads, d_head, d + in.o_positions,
                         model_.rope_cos.as<float>(), model_.rope_sin.as<float>(), stream_),
             "rope");
  cuda_check(launch_store_kv_cache(qkv + Q, qkv + Q + KV, ld, T, d + in.o_slots, layout_, k_cache_[l].get(),
                                   v_cache_[l].get(), stream_),
             "store_kv_cache");
  cuda_check(launch_f32_to_bf16_rows(qkv, ld, T, Q, q16_.get(), Q, stream_), "q to bf16");

  // Attention reads every key (context and the new tokens just stored) from the cache.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_head));
  if (in.flat.num_multi > 0) {
    PagedPrefillParams p;
    p.dtype = DType::kBF16;
    p.q = q16_.get();
    p.out = attn16_.get();
    p.q_indptr = d + in.o_q_indptr;
    p.num_q_heads = cfg_.num_heads;
    p.max_q_len = in.flat.max_q_len;
    p.k_cache = k_cache_[l].get();
    p.v_cache = v_cache_[l].get();
    p.layout = layout_;
    p.table = PagedKvTable{d + in.o_kv_indptr, d + in.o_kv_indices, d + in.o_seq_lens, in.flat.num_multi};
    p.scale = scale;
    cuda_check(launch_paged_prefill_attention(p, stream_), "prefill attention");
  }
  if (in.flat.num_single > 0) {
    const size_t row_off = bf16_rows(in.flat.num_multi_rows, Q);
    PagedDecodeParams p;
    p.dtype = DType::kBF16;
    p.q = q16_.as<char>() + row_off;
    p.out = attn16_.as<char>() + row_off;
    p.num_q_heads = cfg_.num_heads;
    p.k_cache = k_cache_[l].get();
    p.v_cache = v_cache_[l].get();
    p.layout = layout_;
    // indptr values are absolute offsets into kv_indices, so the decode part of
    // the CSR table is a suffix of indptr and seq_lens.
    p.table = PagedKvTable{d + in.o_kv_indptr + in.flat.num_multi, d + in.o_kv_indices,
                           d + in.o_seq_lens + in.flat.num_multi, in.flat.num_single};
    p.scale = scale;
    p.plan = in.plan;
    p.workspace = decode_ws_.get();
    cuda_check(launch_paged_decode_attention(p, stream_), "decode attention");
  }

  linear(attn16_.get(), T, L.w_o, L.q_o, L.f_o, L.inv_o, H, Q, x, 1.0f);  // x += attn W_o^T
  cuda_check(launch_rms_norm(x, H, L.mlp_norm.as<float>(), T, 1, H, eps, DType::kBF16, h16_.get(), H, stream_),
             "rms_norm");
  linear(h16_.get(), T, L.w_gate_up, L.q_gate_up, L.f_gate_up, L.inv_gate_up, 2 * I, H, gate_up_.as<float>(), 0.0f);
  cuda_check(launch_silu_mul(gate_up_.as<float>(), T, I, act16_.get(), stream_), "silu_mul");
  linear(act16_.get(), T, L.w_down, L.q_down, L.f_down, L.inv_down, H, I, x, 1.0f);  // x += act W_down^T
}

StepResult CudaExecutor::execute(const Batch& batch) {
  const auto t0 = std::chrono::steady_clock::now();
  StepInputs in =
      make_step_inputs(batch, layout_.block_size, max_model_len_, cfg_.num_kv_heads, num_sms_, decode_ctas_per_sm_);
  const int T = in.num_tokens(), S = static_cast<int>(in.flat.logit_rows.size());
  const int H = cfg_.hidden_size, Q = cfg_.q_size(), KV = cfg_.kv_size(), V = cfg_.vocab_size;
  last_num_sampled_ = 0;
  StepResult result;
  if (T == 0) {
    for (int s = 0; s < batch.num_seqs(); ++s) result.add_none();
    result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  }

  // One upload for every index array.
  const std::vector<int32_t> ints = in.pack();
  ints_.resize(ints.size() * sizeof(int32_t));
  cuda_check(cudaMemcpyAsync(ints_.get(), ints.data(), ints.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
             "upload step inputs");
  const int32_t* d = ints_.as<int32_t>();

  x_.resize(sizeof(float) * T * H);
  h16_.resize(bf16_rows(T, H));
  qkv_.resize(sizeof(float) * T * (Q + 2 * KV));
  q16_.resize(bf16_rows(T, Q));
  attn16_.resize(bf16_rows(T, Q));
  gate_up_.resize(sizeof(float) * T * 2 * cfg_.intermediate_size);
  act16_.resize(bf16_rows(T, cfg_.intermediate_size));
  if (in.flat.num_single > 0)
    decode_ws_.resize(
        std::max<size_t>(1, decode_workspace_bytes(in.plan, in.flat.num_single, cfg_.num_heads, cfg_.head_dim)));

  cuda_check(launch_embedding_gather(model_.embed.get(), d + in.o_tokens, T, H, x_.as<float>(), stream_), "embedding");
  for (int l = 0; l < cfg_.num_layers; ++l) run_layer(l, in, d);

  // Logits only for the verified rows: each sampling item's last known token and its drafts.
  std::vector<int32_t> greedy(S);
  if (S > 0) {
    last_.resize(sizeof(float) * S * H);
    last16_.resize(bf16_rows(S, H));
    logits_.resize(sizeof(float) * static_cast<size_t>(S) * V);
    tokens_.resize(sizeof(int32_t) * S);
    cuda_check(launch_gather_rows(x_.as<float>(), d + in.o_logit_rows, S, H, last_.as<float>(), stream_), "gather");
    cuda_check(launch_rms_norm(last_.as<float>(), H, model_.final_norm.as<float>(), S, 1, H,
                               static_cast<float>(cfg_.rms_norm_eps), DType::kBF16, last16_.get(), H, stream_),
               "final norm");
    gemm(last16_.get(), S, model_.output_embedding(), V, H, logits_.as<float>(), 0.0f);
    cuda_check(launch_argmax(logits_.as<float>(), S, V, tokens_.as<int32_t>(), stream_), "argmax");
    cuda_check(cudaMemcpyAsync(greedy.data(), tokens_.get(), sizeof(int32_t) * S, cudaMemcpyDeviceToHost, stream_),
               "download tokens");
    cuda_check(cudaStreamSynchronize(stream_), "step");
    last_num_sampled_ = S;
  }
  // Greedy rows take the device's argmax; sampled rows (and rows whose
  // distribution is asked for) are downloaded and drawn on the host with the
  // shared sampler: the same seeded draw as the CPU executor.
  std::vector<float> row;
  sample_verified(
      batch, in.flat.logit_indptr, V,
      [&](int r) {
        row.resize(V);
        cuda_check(cudaMemcpy(row.data(), logits_.as<float>() + static_cast<size_t>(r) * V, sizeof(float) * V,
                              cudaMemcpyDeviceToHost),
                   "download logits");
        return row.data();
      },
      [&](int r) { return greedy[r]; }, result);
  cuda_check(cudaStreamSynchronize(stream_), "step");
  result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

KvBlockData CudaExecutor::read_kv_blocks(const std::vector<int32_t>& blocks) const {
  // [block][layer][K, V] bf16 tiles of block_stride elements, as CpuExecutor lays out its floats.
  const size_t tile = layout_.block_stride() * 2;
  cuda_check(cudaStreamSynchronize(stream_), "read KV blocks");  // the copies below run on the default stream
  KvBlockData data;
  data.num_blocks = static_cast<int>(blocks.size());
  data.bytes.resize(blocks.size() * cfg_.num_layers * 2 * tile);
  uint8_t* out = data.bytes.data();
  for (int32_t b : blocks)
    for (int l = 0; l < cfg_.num_layers; ++l)
      for (const DeviceBuffer* cache : {&k_cache_[l], &v_cache_[l]}) {
        cuda_check(cudaMemcpy(out, cache->as<const char>() + layout_.offset(b, 0, 0) * 2, tile, cudaMemcpyDeviceToHost),
                   "read KV block");
        out += tile;
      }
  return data;
}

void CudaExecutor::write_kv_blocks(const std::vector<int32_t>& blocks, const KvBlockData& data) {
  const size_t tile = layout_.block_stride() * 2;
  if (data.num_blocks != static_cast<int>(blocks.size()) || data.bytes.size() != blocks.size() * cfg_.num_layers * 2 * tile)
    throw std::logic_error("CudaExecutor::write_kv_blocks: the data does not hold " + std::to_string(blocks.size()) +
                           " blocks of this model's bf16 KV layout");
  cuda_check(cudaStreamSynchronize(stream_), "write KV blocks");
  const uint8_t* in = data.bytes.data();
  for (int32_t b : blocks)
    for (int l = 0; l < cfg_.num_layers; ++l)
      for (DeviceBuffer* cache : {&k_cache_[l], &v_cache_[l]}) {
        cuda_check(cudaMemcpy(cache->as<char>() + layout_.offset(b, 0, 0) * 2, in, tile, cudaMemcpyHostToDevice),
                   "write KV block");
        in += tile;
      }
}

void CudaExecutor::verify_rejection(const VerifyBatch& b, const VerifyOutput& out) {
  const int n = b.num_seqs;
  if (n == 0) return;
  const size_t drafts = static_cast<size_t>(b.draft_offsets[n]), V = static_cast<size_t>(b.vocab);
  // One buffer of 8-byte fields (seeds, request ids) then 4-byte ones; one of probabilities.
  const size_t n8 = 2 * static_cast<size_t>(n), n4 = (n + 1) + drafts + n + n + (drafts + n);
  verify_ints_.resize(8 * n8 + 4 * n4);
  verify_probs_.resize(sizeof(float) * (2 * drafts + n) * V);
  auto* seeds = verify_ints_.as<uint64_t>();
  auto* ids = reinterpret_cast<int64_t*>(seeds + n);
  auto* offsets = reinterpret_cast<int32_t*>(ids + n);
  int32_t* tokens = offsets + n + 1;
  int32_t* positions = tokens + drafts;
  int32_t* accepted = positions + n;
  int32_t* emitted = accepted + n;
  float* target = verify_probs_.as<float>();
  float* draft = target + (drafts + n) * V;
  auto up = [&](void* dst, const void* src, size_t bytes) {
    if (bytes > 0) cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "verify upload");
  };
  up(seeds, b.seeds, 8 * n);
  up(ids, b.request_ids, 8 * n);
  up(offsets, b.draft_offsets, 4 * (n + 1));
  up(tokens, b.draft_tokens, 4 * drafts);
  up(positions, b.positions, 4 * n);
  up(target, b.target_probs, sizeof(float) * (drafts + n) * V);
  up(draft, b.draft_probs, sizeof(float) * drafts * V);
  VerifyBatch d = b;
  d.seeds = seeds;
  d.request_ids = ids;
  d.draft_offsets = offsets;
  d.draft_tokens = tokens;
  d.positions = positions;
  d.target_probs = target;
  d.draft_probs = draft;
  cuda_check(launch_verify(d, VerifyOutput{accepted, emitted}, /*rejection=*/true, stream_), "launch_verify");
  cuda_check(cudaMemcpyAsync(out.num_accepted, accepted, 4 * n, cudaMemcpyDeviceToHost, stream_), "verify download");
  cuda_check(cudaMemcpyAsync(out.out_tokens, emitted, 4 * (drafts + n), cudaMemcpyDeviceToHost, stream_),
             "verify download");
  cuda_check(cudaStreamSynchronize(stream_), "verify");
}

std::vector<float> CudaExecutor::last_logits() const {
  return logits_.download<float>(static_cast<size_t>(last_num_sampled_) * cfg_.vocab_size);
}

}  // namespace testbed
