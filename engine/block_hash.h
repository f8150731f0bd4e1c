// Prefix-cache block hashes. A full block's hash chains its parent's hash,
// its token ids and an extra key (cache salt), so equal hashes mean equal
// prefixes, not only equal blocks (vLLM's and SGLang's rule).
#pragma once

#include <cstdint>
#include <vector>

namespace testbed {

struct Request;

// Hash of the (empty) parent of a sequence's first block, for a cache salt.
uint64_t root_block_hash(uint64_t cache_salt);

// Hash of one block of `num_tokens` token ids whose parent block hashed to `parent`.
// Never 0 (hash tables of blocks use 0 as their empty key).
uint64_t hash_block(uint64_t parent, const int32_t* tokens, int num_tokens);

// Extend `hashes` to cover every full block of `tokens` (hashes already there are kept).
void extend_block_hashes(std::vector<uint64_t>& hashes, const std::vector<int32_t>& tokens,
                         int block_size, uint64_t cache_salt);

// The request's prompt hashed in `block_size` blocks (prompt_block_hashes),
// unless it is already; the engine's sequence adopts them.
void hash_prompt(Request& request, int block_size);

}  // namespace testbed
