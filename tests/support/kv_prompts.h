// Test helpers for the KV cache's property tests: sequences, and prompts that
// share a few prefixes so prefix lookups hit (partly).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/common/rng.h"
#include "engine/sequence.h"

namespace testbed::test {

// A sequence of `tokens` asking for 8 output tokens.
inline std::unique_ptr<Sequence> kv_sequence(int64_t id, std::vector<int32_t> tokens) {
  Request r;
  r.id = id;
  r.prompt = std::move(tokens);
  r.max_output_tokens = 8;
  return std::make_unique<Sequence>(std::move(r));
}

// Three prefixes of three blocks each, tokens below `vocab`.
inline std::vector<std::vector<int32_t>> shared_prefixes(Rng& rng, int block_size, int vocab) {
  std::vector<std::vector<int32_t>> prefixes(3);
  for (auto& p : prefixes)
    for (int i = 0; i < 3 * block_size; ++i) p.push_back(static_cast<int32_t>(rng.below(vocab)));
  return prefixes;
}

// One of `prefixes` cut by up to two blocks' worth of tokens, then one to
// three blocks of fresh tokens: a prompt whose lookup hits part of the way.
inline std::unique_ptr<Sequence> prompt_sharing(Rng& rng, const std::vector<std::vector<int32_t>>& prefixes,
                                                int block_size, int vocab, int64_t id) {
  std::vector<int32_t> tokens = prefixes[rng.below(prefixes.size())];
  tokens.resize(tokens.size() - rng.below(block_size * 2));
  for (int i = 0, n = 1 + static_cast<int>(rng.below(3 * block_size)); i < n; ++i)
    tokens.push_back(static_cast<int32_t>(rng.below(vocab)));
  return kv_sequence(id, std::move(tokens));
}

}  // namespace testbed::test
