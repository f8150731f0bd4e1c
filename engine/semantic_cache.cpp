// SemanticCache (see semantic_cache.h). Entries live in slots; a slot is also
// the entry's HNSW label. hnswlib 0.6.2 has no allow_replace_deleted, so a
// removed entry is markDelete'd and its slot goes on a free list; the next
// insert reuses the slot, and addPoint on an existing label rewrites that point
// in place (and unmarks it), so the index never holds more than `capacity`
// points. Two intrusive lists order the live slots: by recency (LRU eviction)
// and by insertion (TTL expiry, oldest first: times never decrease).
//
// hnswlib.h defines non-inline functions and globals (its CPU probes and
// distance-function pointers), so it may be included by one translation unit
// only: this one. The header forward-declares what it holds.
#include "engine/semantic_cache.h"

#include <hnswlib/hnswlib.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/block_hash.h"
#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void SemanticCacheConfig::bind(OptionTable& t) {
  t.add("ingress.semantic_cache", &enabled, "answer repeated and similar prompts from a response cache");
  t.add("ingress.semantic_tau", &tau, "semantic cache: cosine similarity of a semantic hit, in (0, 1]");
  t.add("ingress.cache_capacity", &capacity, "semantic cache: most entries (least recently used evicted)");
  t.add("ingress.cache_ttl_s", &ttl_s, "semantic cache: seconds an entry lives (0 = forever)");
  t.add("ingress.lookup_s", &lookup_s, "semantic cache: seconds a lookup adds to every request");
  t.add("ingress.hnsw_m", &hnsw_m, "semantic cache: HNSW links per node");
  t.add("ingress.hnsw_ef_construction", &hnsw_ef_construction, "semantic cache: HNSW candidates while inserting");
  t.add("ingress.hnsw_ef_search", &hnsw_ef_search, "semantic cache: HNSW candidates while searching");
}

void SemanticCacheConfig::validate() const {
  require(tau > 0 && tau <= 1, "ingress.semantic_tau", "must be in (0, 1]");
  require(capacity >= 1, "ingress.cache_capacity", "must be >= 1");
  require(capacity < (int64_t{1} << 31), "ingress.cache_capacity", "must be below 2^31");
  require(std::isfinite(ttl_s) && ttl_s >= 0, "ingress.cache_ttl_s", "must be >= 0 (0 = never expire)");
  require(std::isfinite(lookup_s) && lookup_s >= 0, "ingress.lookup_s", "must be finite and >= 0");
  require(hnsw_m > 0, "ingress.hnsw_m", "must be positive");
  require(hnsw_ef_construction > 0, "ingress.hnsw_ef_construction", "must be positive");
  require(hnsw_ef_search > 0, "ingress.hnsw_ef_search", "must be positive");
}

uint64_t prompt_hash(const std::vector<int32_t>& prompt) {
  return hash_block(0, prompt.data(), static_cast<int>(prompt.size()));
}

namespace {

constexpr size_t kHnswSeed = 100;  // hnswlib's level generator: fixed, so runs repeat

// HNSW's level 0 (every point's links and vector) is one block a search reads
// at random; at a million entries (~400 MB) nearly every read is also a TLB
// miss on 4 KiB pages. Transparent huge pages (where the kernel offers them on
// request) take most of those misses away. A hint only: nothing changes if refused.
void advise_huge_pages(void* block, size_t bytes) {
#ifdef __linux__
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(block) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(block) + bytes) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)block, (void)bytes;
#endif
}

}  // namespace

SemanticCache::SemanticCache(const SemanticCacheConfig& config, int dim, Search search)
    : config_(config), dim_(dim), search_(search), capacity_(config.capacity) {
  config_.validate();
  if (dim < 0) throw std::invalid_argument("SemanticCache: negative embedding dimension");
  if (dim_ > 0) {
    space_ = std::make_unique<hnswlib::InnerProductSpace>(static_cast<size_t>(dim_));
    if (search_ == Search::Hnsw) {
      index_ = std::make_unique<hnswlib::HierarchicalNSW<float>>(
          space_.get(), static_cast<size_t>(capacity_), static_cast<size_t>(config_.hnsw_m),
          static_cast<size_t>(config_.hnsw_ef_construction), kHnswSeed);
      index_->setEf(static_cast<size_t>(config_.hnsw_ef_search));
      advise_huge_pages(index_->data_level0_memory_, index_->max_elements_ * index_->size_data_per_element_);
    }
  }
}

SemanticCache::~SemanticCache() = default;

void SemanticCache::set_ef_search(int ef) {
  if (ef <= 0) throw std::invalid_argument("SemanticCache: ef_search must be positive");
  config_.hnsw_ef_search = ef;
  if (index_) index_->setEf(static_cast<size_t>(ef));
}

std::vector<float> SemanticCache::unit(const std::vector<float>& embedding) const {
  if (static_cast<int>(embedding.size()) != dim_)
    throw std::invalid_argument("SemanticCache: embedding of " + std::to_string(embedding.size()) +
                                " values, the cache's dimension is " + std::to_string(dim_));
  double sum = 0;
  for (float x : embedding) sum += double{x} * x;
  const double norm = std::sqrt(sum);
  if (!(norm > 0) || !std::isfinite(norm)) throw std::invalid_argument("SemanticCache: zero or non-finite embedding");
  std::vector<float> out(embedding.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(embedding[i] / norm);
  return out;
}

void SemanticCache::push_back(List& list, Link prev, Link next, int32_t slot) {
  entries_[slot].*prev = list.tail;
  entries_[slot].*next = -1;
  if (list.tail >= 0) entries_[list.tail].*next = slot;
  else list.head = slot;
  list.tail = slot;
}

void SemanticCache::unlink(List& list, Link prev, Link next, int32_t slot) {
  Entry& e = entries_[slot];
  if (e.*prev >= 0) entries_[e.*prev].*next = e.*next;
  else list.head = e.*next;
  if (e.*next >= 0) entries_[e.*next].*prev = e.*prev;
  else list.tail = e.*prev;
  e.*prev = e.*next = -1;
}

void SemanticCache::remove(int32_t slot) {
  Entry& e = entries_[slot];
  unlink(lru_, &Entry::lru_prev, &Entry::lru_next, slot);
  unlink(age_, &Entry::age_prev, &Entry::age_next, slot);
  const int32_t* indexed = by_hash_.find(e.hash);
  if (indexed && *indexed == slot) by_hash_.erase(e.hash);
  if (e.has_embedding && index_) index_->markDelete(static_cast<hnswlib::labeltype>(slot));
  e.id = -1;
  e.has_embedding = false;
  std::vector<int32_t>().swap(e.tokens);
  free_slots_.push_back(slot);
  --num_live_;
}

void SemanticCache::expire(double now) {
  if (now < last_now_) throw std::invalid_argument("SemanticCache: time went backwards");
  last_now_ = now;
  if (config_.ttl_s <= 0) return;
  while (age_.head >= 0 && now - entries_[age_.head].inserted_at > config_.ttl_s) {
    remove(age_.head);
    ++stats_.num_expirations;
  }
}

int32_t SemanticCache::find_exact(const std::vector<int32_t>& prompt, uint64_t hash) const {
  const int32_t* slot = by_hash_.find(hash);
  // A 64-bit collision between different prompts is no exact hit.
  return slot && entries_[*slot].tokens == prompt ? *slot : -1;
}

std::pair<int32_t, double> SemanticCache::nearest(const std::vector<float>& q) const {
  if (index_) {
    auto top = index_->searchKnn(q.data(), 1);  // skips deleted points; every other point is live
    if (top.empty()) return {-1, 0.0};
    return {static_cast<int32_t>(top.top().second), 1.0 - static_cast<double>(top.top().first)};
  }
  // The reference: every live entry, with the distance function HNSW uses, so
  // both searches compute bit-identical similarities.
  const auto distance = space_->get_dist_func();
  void* param = space_->get_dist_func_param();
  int32_t best = -1;
  float best_distance = 0;
  for (int32_t s = lru_.head; s >= 0; s = entries_[s].lru_next) {
    if (!entries_[s].has_embedding) continue;
    const float d = distance(q.data(), vectors_.data() + static_cast<size_t>(s) * dim_, param);
    if (best < 0 || d < best_distance || (d == best_distance && s < best)) best = s, best_distance = d;
  }
  if (best < 0) return {-1, 0.0};
  return {best, 1.0 - static_cast<double>(best_distance)};
}

SemanticCache::Lookup SemanticCache::lookup(const std::vector<int32_t>& prompt, const std::vector<float>& embedding,
                                            double now) {
  expire(now);
  ++stats_.num_lookups;
  Lookup out;
  std::vector<float> q;
  if (!embedding.empty() && dim_ > 0) q = unit(embedding);  // checked even when the prompt hits exactly
  int32_t slot = find_exact(prompt, prompt_hash(prompt));
  if (slot >= 0) {
    out.kind = Lookup::Kind::Exact;
    out.similarity = 1.0;
    ++stats_.num_exact_hits;
  } else if (!q.empty()) {
    const auto [near, similarity] = nearest(q);
    if (near >= 0) {
      out.similarity = similarity;
      if (similarity >= config_.tau) {
        slot = near;
        out.kind = Lookup::Kind::Semantic;
        ++stats_.num_semantic_hits;
      }
    }
  }
  if (slot >= 0) {
    out.intent = entries_[slot].intent;
    out.entry_id = entries_[slot].id;
    unlink(lru_, &Entry::lru_prev, &Entry::lru_next, slot);
    push_back(lru_, &Entry::lru_prev, &Entry::lru_next, slot);
  }
  return out;
}

void SemanticCache::insert(const std::vector<int32_t>& prompt, const std::vector<float>& embedding, int64_t intent,
                           double now) {
  expire(now);
  std::vector<float> q;
  if (!embedding.empty() && dim_ > 0) q = unit(embedding);  // checked before anything changes
  const uint64_t hash = prompt_hash(prompt);
  if (const int32_t old = find_exact(prompt, hash); old >= 0) remove(old);
  if (num_live_ >= capacity_) {
    remove(lru_.head);
    ++stats_.num_evictions;
  }
  int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[slot];
  e.id = next_id_++;
  e.intent = intent;
  e.inserted_at = now;
  e.hash = hash;
  e.tokens = prompt;
  e.has_embedding = !q.empty();
  if (!by_hash_.contains(hash)) by_hash_[hash] = slot;  // else a collision: the prompt is matched semantically only
  if (e.has_embedding) {
    if (index_) {
      index_->addPoint(q.data(), static_cast<hnswlib::labeltype>(slot));  // an existing (deleted) label: updated in place
    } else {
      if (vectors_.size() < entries_.size() * static_cast<size_t>(dim_)) vectors_.resize(entries_.size() * dim_);
      std::copy(q.begin(), q.end(), vectors_.begin() + static_cast<size_t>(slot) * dim_);
    }
  }
  push_back(lru_, &Entry::lru_prev, &Entry::lru_next, slot);
  push_back(age_, &Entry::age_prev, &Entry::age_next, slot);
  ++num_live_;
  ++stats_.num_insertions;
}

}  // namespace testbed
