// A set of instance ids (at most kMaxInstances) as a fixed bitset: the value
// type of the routers' block indexes, so a lookup costs no allocation.
#pragma once

#include <array>
#include <cstdint>

namespace testbed {

constexpr int kMaxInstances = 256;

class InstanceSet {
 public:
  static InstanceSet all(int n) {
    InstanceSet s;
    for (int i = 0; i < n; ++i) s.insert(i);
    return s;
  }
  void insert(int i) { w_[i >> 6] |= bit(i); }
  void erase(int i) { w_[i >> 6] &= ~bit(i); }
  bool contains(int i) const { return (w_[i >> 6] & bit(i)) != 0; }
  bool empty() const { return (w_[0] | w_[1] | w_[2] | w_[3]) == 0; }
  InstanceSet operator&(const InstanceSet& o) const {
    InstanceSet r;
    for (int k = 0; k < 4; ++k) r.w_[k] = w_[k] & o.w_[k];
    return r;
  }
  InstanceSet minus(const InstanceSet& o) const {
    InstanceSet r;
    for (int k = 0; k < 4; ++k) r.w_[k] = w_[k] & ~o.w_[k];
    return r;
  }
  // Calls f(i) for every member, ascending.
  template <class F>
  void for_each(F f) const {
    for (int k = 0; k < 4; ++k)
      for (uint64_t w = w_[k]; w; w &= w - 1) f(k * 64 + __builtin_ctzll(w));
  }

 private:
  static uint64_t bit(int i) { return uint64_t{1} << (i & 63); }
  std::array<uint64_t, 4> w_{};
};

}  // namespace testbed
