// ResultsFile: one HDF5 file per run. Tables are groups of equal-length 1-D
// column datasets (h5py: f["requests"]["ttft_s"][:]); scalars are attributes.
// It writes to PATH.tmp and renames on commit(), so an interrupted or failed run
// never leaves a half-written results file.
//
// Layout written by `testbed run`:
//   /requests  id, instance, arrival_s, first_token_s, finish_s, ttft_s, tpot_s, e2e_s,
//              prompt_tokens, cached_tokens, output_tokens, preemptions
//   /cancelled (runs with cancellations or lost requests) id, instance, arrival_s, cancel_s,
//              first_token_s (-1: none), prompt_tokens, output_tokens, reason (0 deadline, 1 tokens, 2 lost, 3 rejected)
//   /steps     instance, start_s, duration_s, num_seqs, prefill_tokens, decode_tokens,
//              kv_blocks_used, kv_tokens, num_preempted, num_waiting, num_running (the last three after the step)
//   /itl       itl_s, count: every inter-token gap, binned (0.8% wide), for ITL distributions
//   /summary   attributes (see summary.h); /summary_units: each one's unit (engine/metrics/units.h)
// Every column carries a "unit" attribute (engine/metrics/units.h says what each is).
//   /config    attributes: the resolved config, key -> value string
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/pending_files.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"

namespace testbed::h5 {
class H5Id;
}

namespace testbed {

// One attribute read back from a results file: a number or a text.
struct ResultsAttr {
  std::string name;
  bool is_text = false;
  double number = 0.0;
  std::string text;
};

// The attributes of `group` in the results file `path`, in the file's order.
// Throws ConfigError naming the file when it cannot be read or has no such group.
std::vector<ResultsAttr> read_results_attrs(const std::string& path, const std::string& group);
// The attributes of several groups, the file opened once; a missing group is an error.
std::vector<std::vector<ResultsAttr>> read_results_attrs(const std::string& path, const std::vector<std::string>& groups);

// The numeric columns `names` of table `group` (as doubles), the file opened once.
// Throws ConfigError naming the file, the group or the column when one is missing.
std::vector<std::vector<double>> read_results_columns(const std::string& path, const std::string& group,
                                                      const std::vector<std::string>& names);

// How a numeric column is stored: chunked, shuffled and deflated (level 1),
// or contiguous and raw. Integer columns are compressed; columns of doubles
// from kCompressedFloatRows rows on.
constexpr size_t kCompressedFloatRows = size_t{1} << 20;
bool compressed_column(bool integral, size_t rows);

class ResultsFile {
 public:
  explicit ResultsFile(const std::string& path);
  ~ResultsFile();  // removes the temporary file unless committed

  // A column of a documented table (engine/metrics/units.h), with its unit
  // attribute; an undocumented column is a std::logic_error.
  void add_column(const std::string& group, const std::string& name, const std::vector<double>& v);
  void add_column(const std::string& group, const std::string& name, const std::vector<int64_t>& v);
  void add_column(const std::string& group, const std::string& name, const std::vector<int32_t>& v);
  // A column of text (fixed-length HDF5 strings, as long as the longest; h5py reads bytes).
  void add_column(const std::string& group, const std::string& name, const std::vector<std::string>& v);
  // A column of a table whose columns depend on the run (sweeps, fidelity), with its unit given.
  void add_column(const std::string& group, const std::string& name, const std::string& unit, const std::vector<double>& v);
  void add_column(const std::string& group, const std::string& name, const std::string& unit, const std::vector<int64_t>& v);
  void add_column(const std::string& group, const std::string& name, const std::string& unit, const std::vector<int32_t>& v);
  void add_column(const std::string& group, const std::string& name, const std::string& unit,
                  const std::vector<std::string>& v);
  void set_attr(const std::string& group, const std::string& name, double v);
  void set_attr(const std::string& group, const std::string& name, const std::string& v);

  void write_requests(const std::vector<RequestRecord>& requests);
  void write_steps(const std::vector<StepRecord>& steps);
  // /autoscale: t, pool, active, starting, draining, desired, signal and every signal
  // (autoscaled runs only; nothing when `samples` is empty).
  void write_autoscale(const std::vector<ScaleSample>& samples);
  // /itl: the inter-token gaps' histogram (itl_s: a bin's middle, count), non-empty bins ascending.
  void write_itl(const LogHistogram& itl);
  // /cancelled (see above); nothing when `cancelled` is empty.
  void write_cancelled(const std::vector<CancelRecord>& cancelled);
  // /events: t, event (name), request, instance, bytes (output.events).
  void write_events(const std::vector<RequestEvent>& events);
  void write_summary(const Summary& summary);
  void write_config(const std::vector<std::pair<std::string, std::string>>& config);
  // Output token ids of each request (ragged: /tokens/request_id, offsets, ids).
  void write_tokens(const std::vector<int64_t>& request_ids, const std::vector<std::vector<int32_t>>& tokens);

  void commit();

 private:
  void ensure_group(const std::string& group);
  std::string path_, tmp_path_;
  std::unique_ptr<h5::H5Id> file_;  // HDF5 through its C API (engine/metrics/h5_c.h)
  bool committed_ = false;
  std::unique_ptr<PendingFile> pending_;  // removed on a signal until committed
};

}  // namespace testbed
