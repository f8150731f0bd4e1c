#include "experiments/cli/engine_factory.h"

#include <cmath>

#include "engine/common/config_error.h"
#include "engine/metrics/results_file.h"
#include "sim/hardware_spec.h"
#include "sim/memory_planner.h"
#include "sim/pool.h"
#include "sim/sim_executor.h"

namespace testbed {
namespace {

// The per-token acceptance A that explains a request's measured share of
// drafts accepted r, when each step drafted k̄ tokens on average and the
// verifier keeps drafts in turn with probability A until the first rejection:
//   r = (A + A^2 + ... + A^k̄) / k̄ = A (1 - A^k̄) / ((1 - A) k̄),  solved by bisection.
double acceptance_for_share(double r, double k_bar) {
  if (r <= 0) return 0.0;
  if (r >= 1) return 1.0;
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 60; ++i) {
    const double a = 0.5 * (lo + hi);
    const double share = a * (1 - std::pow(a, k_bar)) / ((1 - a) * k_bar);
    (share < r ? lo : hi) = a;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

std::shared_ptr<const std::unordered_map<int64_t, SpecRequestModel>> acceptance_from_run(const std::string& path) {
  const auto cols = read_results_columns(path, "requests",
                                         {"id", "spec_drafted", "spec_accepted", "spec_steps", "output_tokens"});
  auto out = std::make_shared<std::unordered_map<int64_t, SpecRequestModel>>();
  for (size_t i = 0; i < cols[0].size(); ++i) {
    const double drafted = cols[1][i], accepted = cols[2][i], steps = cols[3][i], output = cols[4][i];
    SpecRequestModel m;
    // Decode steps: every output token after the first came from one, accepted drafts aside.
    const double decode_steps = std::max(1.0, output - 1 - accepted);
    m.propose_share = std::min(1.0, steps / decode_steps);
    m.drafts_per_step = steps > 0 ? drafted / steps : 0.0;
    m.acceptance = drafted > 0 ? acceptance_for_share(accepted / drafted, std::max(1.0, m.drafts_per_step)) : 0.0;
    (*out)[static_cast<int64_t>(cols[0][i])] = m;
  }
  return out;
}

namespace {

// Engine config, capacity and cost model from one set of scheduler/cache/cost_model keys.
InstanceSetup prepare_instances(const RunConfig& config, const ModelConfig& model, const EngineConfig& engine,
                                const CostModelConfig& cost) {
  InstanceSetup s;
  s.engine = engine;
  s.engine.on_invalid = config.workload.params().on_invalid();
  s.engine.max_model_len = config.model.max_model_len > 0 ? config.model.max_model_len : model.max_position_embeddings;
  require(s.engine.max_model_len > 0, "model.max_model_len", "must be positive");
  if (!cost.hardware.empty()) require_file("cost_model.hardware", cost.hardware);
  if (config.needs_cost_model()) s.cost_model = make_cost_model(cost, model);
  // A draft model (spec.method = draft) shares the device: its weights and KV, and in simulation its steps.
  std::unique_ptr<ModelConfig> draft;
  if (config.spec.method.name == "draft")
    draft = std::make_unique<ModelConfig>(
        ModelConfig::from_json_file(require_file("spec.draft_config", draft_config_path(config.spec))));
  s.num_blocks = engine.cache.num_blocks;
  if (s.num_blocks == 0) {
    // A simulated GPU: the KV cache gets the device memory the weights leave.
    require(!cost.hardware.empty(), "cache.num_blocks",
            "must be set, or derived from memory with cost_model.hardware (a hardware spec)");
    const HardwareSpec hw = HardwareSpec::from_ini_file(cost.hardware);
    s.num_blocks = kv_blocks_from_memory(hw, model, s.engine.cache.block_size, s.engine.cache.gpu_memory_fraction,
                                         cost.tensor_parallel, draft.get());
  }
  s.tensor_parallel = cost.tensor_parallel;
  s.hardware = cost.hardware;
  s.executor.model = model;
  s.executor.weights = config.model.weights;
  s.executor.weights_seed = config.model.seed;
  s.executor.num_blocks = s.num_blocks;
  s.executor.block_size = s.engine.cache.block_size;
  s.executor.max_model_len = s.engine.max_model_len;
  s.executor.cost_model = s.cost_model;
  if (config.spec.enabled() && config.executor.kind.name == "sim") {  // the simulated executor drafts itself
    s.executor.spec_num_tokens = config.spec.num_tokens;
    s.executor.spec_max_batch_size = config.spec.max_batch_size;
    s.executor.spec_acceptance = config.spec.fixed_acceptance();
    s.executor.spec_seed = config.sampling.seed;
    if (draft) s.executor.spec_draft_cost_model = make_cost_model(cost, *draft);
    const std::string trace = config.spec.acceptance_trace();
    if (!trace.empty()) {
      s.executor.spec_per_request = acceptance_from_run(require_file("spec.acceptance", trace));
      s.executor.spec_acceptance = 0.0;  // on; each request's own comes from the map
    }
  }
  return s;
}

}  // namespace

int RunSetup::num_instances() const {
  return pools.empty() ? 1 : static_cast<int>(pool_of_instance.size());
}

RunSetup prepare_run(const RunConfig& config) {
  RunSetup s;
  // model.precision and the quantization keys apply to every model of the run.
  const auto load_model = [&](const std::string& key, const std::string& path) {
    ModelConfig m = ModelConfig::from_json_file(require_file(key, path));
    if (config.model.precision != "auto") m.precision = config.model.precision;
    m.quant_group_size = config.model.quant_group_size;
    m.quant_method = config.model.quantization;
    return m;
  };
  s.model = load_model("model.config", config.model.config);
  static_cast<InstanceSetup&>(s) = prepare_instances(config, s.model, config.engine, config.cost_model);
  for (const PoolConfig& p : config.pools()) {
    // A pool of its own model (model routing): the same tokenizer, so one workload's tokens fit every pool.
    const bool own = !p.model_config.empty() && p.model_config != config.model.config;
    const ModelConfig model = own ? load_model(p.prefix() + "model.config", p.model_config) : s.model;
    if (own)
      require(model.vocab_size == s.model.vocab_size, p.prefix() + "model.config",
              "has vocabulary " + std::to_string(model.vocab_size) + ", the run's model.config " +
                  std::to_string(s.model.vocab_size) + ": pools must share a tokenizer");
    with_key_prefix(p.prefix(), [&] { s.pools.push_back(prepare_instances(config, model, p.engine, p.cost_model)); });
    s.pools.back().engine.hand_off_after_prefill = p.hands_off_after_prefill();
    s.pools.back().engine.key_prefix = p.prefix();
    for (int k = 0; k < p.size; ++k) s.pool_of_instance.push_back(static_cast<int>(s.pools.size()) - 1);
  }
  if (config.model.weights != "dummy") require_file("model.weights", config.model.weights);
  return s;
}

std::unique_ptr<Executor> make_executor(const RunConfig& config, const InstanceSetup& s) {
  std::unique_ptr<Executor> exec = config.executor.kind.create(s.executor);
  if (config.executor.kind.name != "sim") {
    ProposerSetup ps;
    ps.vocab_size = s.executor.model.vocab_size;
    ps.block_size = s.executor.block_size;
    ps.num_blocks = s.executor.num_blocks;
    ps.max_model_len = s.executor.max_model_len;
    exec = with_proposer(std::move(exec), config.spec, ps);
  }
  if (config.executor.timing == "cost_model" && config.executor.kind.name != "sim")
    exec = std::make_unique<CostTimedExecutor>(std::move(exec), s.cost_model);
  return exec;
}

}  // namespace testbed
