#include "engine/block_hash.h"

#include <cstring>

#include "engine/request.h"

namespace testbed {
namespace {

// Four independent multiply-rotate lanes over 8-byte words (the structure of
// xxHash64, written from its description): the lanes keep the multiplier busy,
// so a 16-token block costs two rounds instead of eight dependent mixes.
constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t round(uint64_t acc, uint64_t word) { return rotl(acc + word * kP2, 31) * kP1; }
inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}
inline uint64_t load_word(const int32_t* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

}  // namespace

// 0 is reserved (the empty key of the hash tables that index blocks).
inline uint64_t nonzero(uint64_t h) { return h ? h : kP3; }

uint64_t root_block_hash(uint64_t cache_salt) { return nonzero(avalanche(cache_salt * kP1 + kP4)); }

uint64_t hash_block(uint64_t parent, const int32_t* tokens, int num_tokens) {
  uint64_t a = parent + kP1 + kP2, b = parent + kP2, c = parent, d = parent - kP1;
  int i = 0;
  for (; i + 8 <= num_tokens; i += 8) {
    a = round(a, load_word(tokens + i));
    b = round(b, load_word(tokens + i + 2));
    c = round(c, load_word(tokens + i + 4));
    d = round(d, load_word(tokens + i + 6));
  }
  uint64_t h = rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18);
  for (; i < num_tokens; ++i) h = rotl(h ^ (static_cast<uint32_t>(tokens[i]) * kP1), 23) * kP2 + kP3;
  h += static_cast<uint64_t>(num_tokens);
  return nonzero(avalanche(h ^ parent));
}

void extend_block_hashes(std::vector<uint64_t>& hashes, const std::vector<int32_t>& tokens,
                         int block_size, uint64_t cache_salt) {
  const size_t num_full = tokens.size() / static_cast<size_t>(block_size);
  uint64_t parent = hashes.empty() ? root_block_hash(cache_salt) : hashes.back();
  for (size_t b = hashes.size(); b < num_full; ++b) {
    parent = hash_block(parent, tokens.data() + b * block_size, block_size);
    hashes.push_back(parent);
  }
}

void hash_prompt(Request& request, int block_size) {
  if (request.prompt_hash_block_size == block_size) return;
  request.prompt_block_hashes.clear();
  extend_block_hashes(request.prompt_block_hashes, request.prompt, block_size, request.cache_salt);
  request.prompt_hash_block_size = block_size;
}

}  // namespace testbed
