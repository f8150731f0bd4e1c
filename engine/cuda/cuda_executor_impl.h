// CudaExecutor: the class behind make_cuda_executor (cuda_executor.h). Exposed
// for the GPU tests, which compare its logits with CpuExecutor's; everything
// else should use the plain factory header.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "engine/cuda/device_model.h"
#include "engine/cuda/step_inputs.h"
#include "engine/executor.h"
#include "engine/kv_layout.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"
#include "kernels/common/device_buffer.h"

namespace testbed {

class CudaExecutor : public Executor {
 public:
  CudaExecutor(const ModelConfig& cfg, const LlamaWeights& weights, int num_blocks, int block_size, int max_model_len);
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  StepResult execute(const Batch& batch) override;
  std::string name() const override { return "cuda"; }
  // Bytes of each block, every layer: [layer][K, V] bf16 tiles of [kv_head][slot][head_dim].
  KvBlockData read_kv_blocks(const std::vector<int32_t>& blocks) const override;
  void write_kv_blocks(const std::vector<int32_t>& blocks, const KvBlockData& data) override;
  // Rejection sampling on the device with this project's kernel (kernels/spec/verify.cu):
  // the host batch is uploaded, verified, and its outputs copied back.
  void verify_rejection(const VerifyBatch& batch, const VerifyOutput& out) override;

  // Logits of the last step's verified rows, [rows, vocab], copied to the host.
  std::vector<float> last_logits() const;
  const KvLayout& layout() const { return layout_; }

 private:
  // y[rows, n] = x[rows, k] * w[n, k]^T + beta * y: bf16 inputs, fp32 output and accumulation.
  void gemm(const void* x_bf16, int rows, const void* w_bf16, int n, int k, float* y, float beta);
  // The same through the W4A16 kernel when the layer's weights are int4 (model.precision = w4a16).
  void linear(const void* x_bf16, int rows, const DeviceBuffer& w_bf16, const DeviceW4& w4, const DeviceF8& f8,
              const DeviceBuffer& inv_scale, int n, int k, float* y, float beta);
  void run_layer(int layer, const StepInputs& in, const int32_t* dev_ints);

  ModelConfig cfg_;
  KvLayout layout_;
  int max_model_len_ = 0;
  int num_sms_ = 1;
  int decode_ctas_per_sm_ = 1;  // occupancy of the decode kernel, for plan_decode
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceModel model_;
  std::vector<DeviceBuffer> k_cache_, v_cache_;  // per layer, bf16, KvLayout
  // Step inputs and activations; they grow to the largest step seen.
  DeviceBuffer verify_ints_, verify_probs_;  // verify_rejection's inputs and outputs
  DeviceBuffer f8_codes_, f8_scales_;        // fp8: a linear's input quantized per token
  DeviceBuffer awq16_;                       // awq: a linear's input divided by its scale
  DeviceBuffer ints_, x_, h16_, qkv_, q16_, attn16_, gate_up_, act16_, last_, last16_, logits_, tokens_, decode_ws_;
  int last_num_sampled_ = 0;
};

}  // namespace testbed
