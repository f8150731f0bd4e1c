// What every number in a results file is, in one place: the unit and meaning
// of each /summary key and of each column of the tables `testbed run` writes.
// ResultsFile looks units up here and writes them beside the values
// (/summary_units KEY, and a "unit" attribute on every column), so a reader
// never has to guess from a name's suffix; the README's list of summary keys
// is checked against summary_docs() by a test.
//
// Units: s, tokens, requests, blocks, bytes, GB, FLOP, USD, kWh, GPU-s, GPU-h/day,
// tok/s, req/s, tok/kWh, USD/Mtok, instances, seqs, steps, count, id, 1 (a
// ratio or share in [0, 1] unless its meaning says otherwise), bool (0 or 1),
// code (an enumeration: the meaning lists the values), text, signal (autoscale:
// the unit of the signal the policy reads).
#pragma once

#include <string>
#include <vector>

namespace testbed {

struct MetricDoc {
  std::string name;  // a key or column; <NAME> stands for a pool's name, <METRIC> for a summary key
  std::string unit;
  std::string meaning;
};

// Every /summary key `testbed run` can write (run and fleet metrics; fidelity's own below).
const std::vector<MetricDoc>& summary_docs();
// The unit of summary key `key` (a pattern's instance, e.g. pool_decode_utilization).
// Throws std::logic_error for a key summary_docs() does not document: a new
// metric must say what it is before it is written.
std::string summary_unit(const std::string& key);
bool is_documented_summary_key(const std::string& key);

// The tables of a run's results file, each with its columns.
struct TableDoc {
  std::string group;
  std::vector<MetricDoc> columns;
};
const std::vector<TableDoc>& table_docs();
// The unit of column `column` of table `group`; std::logic_error when undocumented.
std::string column_unit(const std::string& group, const std::string& column);

}  // namespace testbed
