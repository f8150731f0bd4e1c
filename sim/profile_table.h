// ProfileTable: step durations measured on a real executor over a grid of batch
// shapes, read back by the `profiled` cost model.
//   axes:  prefill_tokens P (prompt tokens computed in the step),
//          decode_seqs D    (sequences decoding one token),
//          context C        (tokens already in the KV cache per sequence, mean over the batch)
//   value: step_s[P][D][C]  (median of the measured repeats)
// Stored in HDF5 as /profile/{prefill_tokens, decode_seqs, context, step_s} with
// attributes describing where it was measured.
#pragma once

#include <string>
#include <vector>

#include "engine/cost_model.h"

namespace testbed {

class ProfileTable {
 public:
  std::vector<double> prefill_tokens, decode_seqs, context;  // ascending
  std::vector<double> step_s;                                // size P * D * C
  std::string executor;                                      // where it was measured
  std::string model;

  size_t index(size_t p, size_t d, size_t c) const { return (p * decode_seqs.size() + d) * context.size() + c; }
  // Trilinear interpolation inside the grid, linear extrapolation along the
  // last two grid lines outside it; never below the smallest measured step.
  double interpolate(double prefill_tokens, double decode_seqs, double context) const;
  // The step time of a batch: its prompt positions, decoding sequences and mean cached context.
  double predict(const StepShape& shape) const;

  void save(const std::string& path) const;
  // Throws ConfigError naming the file (and the dataset) when it is missing or
  // malformed: not HDF5 (HDF5's own exceptions are caught and rethrown), a
  // dataset that is not 1-D or too long, axes that do not ascend, a table of
  // the wrong size, a non-finite or non-positive duration. Fuzz entry point:
  // only ConfigError.
  static ProfileTable load(const std::string& path);
  void validate(const std::string& origin) const;
};

}  // namespace testbed
