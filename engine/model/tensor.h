// A host tensor of floats with its shape (row-major). Weights live in these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace testbed {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  bool empty() const { return data.empty(); }
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
};

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace testbed
