// SemanticCache: the response cache an LLM-serving ingress puts in front of the
// engines (GPTCache: Bang, "GPTCache: An Open-Source Semantic Cache for LLM
// Applications", NLP-OSS 2023). A request is answered from the cache, without
// reaching an engine, when
//   - its normalised prompt was cached before (an exact hit), or else
//   - the nearest cached prompt embedding has cosine similarity >= tau (a
//     semantic hit; the answer may be wrong: the entry's intent may differ).
// Normalisation is the workload's tokenisation: the token ids themselves (two
// wordings are equal when their token ids are), hashed to 64 bits; a hash
// match is confirmed against the stored tokens, so an exact hit is never false.
// The nearest neighbour comes from HNSW (Malkov & Yashunin, "Efficient and
// robust approximate nearest neighbor search using Hierarchical Navigable Small
// World graphs", TPAMI 2018; hnswlib, Debian libhnswlib-dev) over unit vectors
// with the inner-product space, so cos = 1 - distance. Search::Exhaustive
// answers the same lookups by scanning every live entry with the same distance
// function: the reference the HNSW cache is tested against.
//
// Keys (SemanticCacheConfig):
//   ingress.semantic_cache        on/off (false)
//   ingress.semantic_tau          cosine threshold of a semantic hit, in (0, 1] (0.9; 1 ~ exact only)
//   ingress.cache_capacity        most entries; a full cache evicts its least recently used (100000)
//   ingress.cache_ttl_s           an entry older than this is expired at the next lookup (0: never)
//   ingress.lookup_s              simulated seconds a lookup adds to every request (0.0005;
//                                 the wall-clock drivers measure theirs: engine/ingress.h)
//   ingress.hnsw_m                HNSW links per node (16)
//   ingress.hnsw_ef_construction  HNSW candidate list while inserting (100)
//   ingress.hnsw_ef_search        HNSW candidate list while searching (64; >= size: exact)
//
// Times (`now`) never decrease from one call to the next. A lookup first
// removes every expired entry, then tries the exact match, then the semantic
// one; a hit refreshes the entry's recency (not its age). The same sequence of
// calls gives the same results (HNSW's level generator has a fixed seed).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "engine/flat_hash_map.h"

namespace hnswlib {
template <typename dist_t>
class HierarchicalNSW;
class InnerProductSpace;
}  // namespace hnswlib

namespace testbed {

class OptionTable;

struct SemanticCacheConfig {
  bool enabled = false;
  double tau = 0.9;
  int64_t capacity = 100000;
  double ttl_s = 0;  // 0: entries never expire
  double lookup_s = 0.0005;
  int hnsw_m = 16;
  int hnsw_ef_construction = 100;
  int hnsw_ef_search = 64;
  void bind(OptionTable& t);
  void validate() const;
};

struct SemanticCacheStats {
  int64_t num_lookups = 0;
  int64_t num_exact_hits = 0;
  int64_t num_semantic_hits = 0;
  int64_t num_insertions = 0;
  int64_t num_evictions = 0;    // removed to make room (LRU)
  int64_t num_expirations = 0;  // removed for age (ttl_s)
};

class SemanticCache {
 public:
  enum class Search { Hnsw, Exhaustive };
  struct Lookup {
    enum class Kind { Miss, Exact, Semantic };
    Kind kind = Kind::Miss;
    int64_t intent = -1;  // of the entry that answered; -1 on a miss
    // 1 on an exact hit; else the nearest live entry's cosine (a miss too);
    // -infinity when no embedding was compared.
    double similarity = -std::numeric_limits<double>::infinity();
    int64_t entry_id = -1;  // the answering entry (ids count insertions from 0); -1 on a miss
    bool is_hit() const { return kind != Kind::Miss; }
  };

  // `dim`: embedding length (0: exact matching only). Embeddings passed in are
  // either empty (exact matching only for that prompt) or of length `dim`, not all zero.
  SemanticCache(const SemanticCacheConfig& config, int dim, Search search = Search::Hnsw);
  ~SemanticCache();
  SemanticCache(const SemanticCache&) = delete;
  SemanticCache& operator=(const SemanticCache&) = delete;

  Lookup lookup(const std::vector<int32_t>& prompt, const std::vector<float>& embedding, double now);
  // Caches the answer to `prompt` (of `intent`), evicting the LRU entry when
  // full. A prompt already cached is replaced (new intent, age and recency).
  void insert(const std::vector<int32_t>& prompt, const std::vector<float>& embedding, int64_t intent, double now);

  // HNSW's search breadth (ingress.hnsw_ef_search), changeable between lookups
  // without a rebuild: a sweep over it, or a benchmark.
  void set_ef_search(int ef);

  int64_t size() const { return num_live_; }
  int64_t capacity() const { return capacity_; }
  const SemanticCacheStats& stats() const { return stats_; }

 private:
  struct Entry {
    int64_t id = -1;  // -1: the slot is free
    int64_t intent = -1;
    double inserted_at = 0;
    uint64_t hash = 0;
    bool has_embedding = false;
    std::vector<int32_t> tokens;
    int32_t lru_prev = -1, lru_next = -1;  // recency list: head least recent
    int32_t age_prev = -1, age_next = -1;  // insertion list: head oldest
  };
  struct List {
    int32_t head = -1, tail = -1;
  };
  using Link = int32_t Entry::*;

  void expire(double now);
  void remove(int32_t slot);
  int32_t find_exact(const std::vector<int32_t>& prompt, uint64_t hash) const;
  // The nearest live entry with an embedding to unit vector `q`: (slot, cosine), slot -1 if none.
  std::pair<int32_t, double> nearest(const std::vector<float>& q) const;
  std::vector<float> unit(const std::vector<float>& embedding) const;
  void push_back(List& list, Link prev, Link next, int32_t slot);
  void unlink(List& list, Link prev, Link next, int32_t slot);

  SemanticCacheConfig config_;
  int dim_;
  Search search_;
  int64_t capacity_;
  std::vector<Entry> entries_;      // by slot (= HNSW label)
  std::vector<int32_t> free_slots_;  // removed entries' slots, reused (HNSW updates the point in place)
  FlatHashMap64<int32_t> by_hash_;  // prompt hash -> slot
  List lru_, age_;
  int64_t num_live_ = 0, next_id_ = 0;
  double last_now_ = -std::numeric_limits<double>::infinity();
  SemanticCacheStats stats_;
  std::unique_ptr<hnswlib::InnerProductSpace> space_;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> index_;  // Search::Hnsw
  std::vector<float> vectors_;                              // Search::Exhaustive: unit vectors by slot
};

// The cache's 64-bit prompt hash (never 0).
uint64_t prompt_hash(const std::vector<int32_t>& prompt);

}  // namespace testbed
