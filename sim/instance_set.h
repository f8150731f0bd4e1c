// A set of instance ids (at most kMaxInstances) as one 64-bit word: the value
// type of the routers' block indexes. One word keeps an index entry at 16
// bytes, which is what keeps a fleet-wide index of millions of blocks in cache.
#pragma once

#include <cstdint>

namespace testbed {

constexpr int kMaxInstances = 64;

class InstanceSet {
 public:
  static InstanceSet all(int n) {
    InstanceSet s;
    for (int i = 0; i < n; ++i) s.insert(i);
    return s;
  }
  void insert(int i) { w_ |= bit(i); }
  void erase(int i) { w_ &= ~bit(i); }
  bool contains(int i) const { return (w_ & bit(i)) != 0; }
  bool empty() const { return w_ == 0; }
  InstanceSet operator&(const InstanceSet& o) const { return InstanceSet(w_ & o.w_); }
  InstanceSet minus(const InstanceSet& o) const { return InstanceSet(w_ & ~o.w_); }
  // Calls f(i) for every member, ascending.
  template <class F>
  void for_each(F f) const {
    for (uint64_t w = w_; w; w &= w - 1) f(__builtin_ctzll(w));
  }
  InstanceSet() = default;

 private:
  explicit InstanceSet(uint64_t w) : w_(w) {}
  static uint64_t bit(int i) { return uint64_t{1} << i; }
  uint64_t w_ = 0;
};

}  // namespace testbed
