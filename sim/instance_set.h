// A set of instance ids within one group of 64 (group g: ids 64g .. 64g + 63)
// as one 64-bit word: the value type of the routers' block indexes, which keep
// one such word per block and group that holds it (sim/prefix_index.h). One
// word keeps an index entry at 16 bytes, which is what keeps a fleet-wide
// index of millions of blocks in cache; a fleet of any size is groups of 64.
#pragma once

#include <cstdint>

namespace testbed {

constexpr int kInstancesPerGroup = 64;
// The largest fleet or pool (instance ids are ints; routers score each instance per decision).
constexpr int kMaxInstances = 65536;

class InstanceSet {
 public:
  InstanceSet() = default;
  // The members of word `w` of group `group`.
  InstanceSet(int group, uint64_t w) : base_(group * kInstancesPerGroup), w_(w) {}
  // Instances 0 .. n-1 of group 0 (n <= 64).
  static InstanceSet all(int n) {
    InstanceSet s;
    for (int i = 0; i < n; ++i) s.insert(i);
    return s;
  }
  // i must lie in the set's group.
  void insert(int i) { w_ |= bit(i); }
  void erase(int i) { w_ &= ~bit(i); }
  bool contains(int i) const { return i >= base_ && i < base_ + kInstancesPerGroup && (w_ & bit(i)) != 0; }
  bool empty() const { return w_ == 0; }
  uint64_t word() const { return w_; }
  // Calls f(i) for every member, ascending.
  template <class F>
  void for_each(F f) const {
    for (uint64_t w = w_; w; w &= w - 1) f(base_ + __builtin_ctzll(w));
  }

 private:
  uint64_t bit(int i) const { return uint64_t{1} << (i - base_); }
  int base_ = 0;
  uint64_t w_ = 0;
};

}  // namespace testbed
