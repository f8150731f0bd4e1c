// Executor: runs one step's batch. Three implementations share this interface:
// CpuExecutor (the real model, Eigen), CudaExecutor (the real model, this
// project's kernels) and SimExecutor (no model; a cost model predicts time).
#pragma once

#include <string>

#include "engine/batch.h"

namespace testbed {

class Executor {
 public:
  virtual ~Executor() = default;
  // Computes K/V for every item's new tokens (into the blocks of its block table)
  // and samples one token for each item that samples().
  virtual StepResult execute(const Batch& batch) = 0;
  virtual std::string name() const = 0;
};

}  // namespace testbed
