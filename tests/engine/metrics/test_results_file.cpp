// ResultsFile: columns (double, int64, int32) and attributes (double, string) read
// back with the HDF5 C++ API have exactly the values and types written; commit()
// renames PATH.tmp to PATH; a file destroyed uncommitted leaves neither (and an
// older PATH untouched); committing over a file replaces it; write_requests /
// write_steps / write_summary / write_config / write_tokens lay out the groups and
// columns the header documents.
#include <H5Cpp.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/rng.h"
#include "engine/metrics/results_file.h"
#include "engine/metrics/units.h"
#include "support/config_error_of.h"

using namespace testbed;
namespace fs = std::filesystem;

namespace {

// A scratch directory under the system temp directory, named by pid and test,
// removed (with everything in it) at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : dir_(fs::temp_directory_path() /
             ("testbed_test_results_file_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

std::set<std::string> members(const H5::Group& g) {
  std::set<std::string> out;
  for (hsize_t i = 0; i < g.getNumObjs(); ++i) out.insert(g.getObjnameByIdx(i));
  return out;
}

std::set<std::string> attr_names(const H5::Group& g) {
  std::set<std::string> out;
  for (int i = 0; i < g.getNumAttrs(); ++i) out.insert(g.openAttribute(static_cast<unsigned>(i)).getName());
  return out;
}

hsize_t length(const H5::DataSet& ds) {
  H5::DataSpace space = ds.getSpace();
  REQUIRE(space.getSimpleExtentNdims() == 1);
  hsize_t dims[1];
  space.getSimpleExtentDims(dims);
  return dims[0];
}

// Reads a 1-D dataset, first checking its stored type is `type` exactly.
template <class T>
std::vector<T> read_column(const H5::Group& g, const std::string& name, const H5::PredType& type) {
  H5::DataSet ds = g.openDataSet(name);
  INFO("column " << name);
  CHECK(ds.getDataType() == type);
  std::vector<T> v(length(ds));
  if (!v.empty()) ds.read(v.data(), type);
  return v;
}

std::vector<double> read_doubles(const H5::Group& g, const std::string& name) {
  H5::DataSet ds = g.openDataSet(name);
  INFO("column " << name);
  CHECK(ds.getTypeClass() == H5T_FLOAT);
  CHECK(ds.getFloatType().getSize() == 8);
  return read_column<double>(g, name, H5::PredType::NATIVE_DOUBLE);
}

std::vector<int64_t> read_int64s(const H5::Group& g, const std::string& name) {
  H5::DataSet ds = g.openDataSet(name);
  INFO("column " << name);
  CHECK(ds.getTypeClass() == H5T_INTEGER);
  CHECK(ds.getIntType().getSize() == 8);
  CHECK(ds.getIntType().getSign() == H5T_SGN_2);
  return read_column<int64_t>(g, name, H5::PredType::NATIVE_INT64);
}

std::vector<int32_t> read_int32s(const H5::Group& g, const std::string& name) {
  H5::DataSet ds = g.openDataSet(name);
  INFO("column " << name);
  CHECK(ds.getTypeClass() == H5T_INTEGER);
  CHECK(ds.getIntType().getSize() == 4);
  CHECK(ds.getIntType().getSign() == H5T_SGN_2);
  return read_column<int32_t>(g, name, H5::PredType::NATIVE_INT32);
}

double read_double_attr(const H5::Group& g, const std::string& name) {
  H5::Attribute a = g.openAttribute(name);
  INFO("attribute " << name);
  CHECK(a.getTypeClass() == H5T_FLOAT);
  CHECK(a.getFloatType().getSize() == 8);
  CHECK(a.getSpace().getSimpleExtentType() == H5S_SCALAR);
  double v = NAN;
  a.read(H5::PredType::NATIVE_DOUBLE, &v);
  return v;
}

std::string read_string_attr(const H5::Group& g, const std::string& name) {
  H5::Attribute a = g.openAttribute(name);
  INFO("attribute " << name);
  CHECK(a.getTypeClass() == H5T_STRING);
  CHECK(a.getSpace().getSimpleExtentType() == H5S_SCALAR);
  std::string s;
  a.read(a.getStrType(), s);
  return s;
}

RequestRecord request(int64_t id, int32_t instance, double arrival, double first, double finish, int32_t prompt,
                      int32_t cached, int32_t output, int32_t preemptions) {
  RequestRecord r;
  r.id = id;
  r.instance = instance;
  r.arrival_s = arrival;
  r.first_token_s = first;
  r.finish_s = finish;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  r.output_tokens = output;
  r.preemptions = preemptions;
  return r;
}

}  // namespace

TEST_CASE("results file columns and attributes read back with their values and types", "[metrics][results_file]") {
  ScratchDir scratch("roundtrip");
  const std::string path = scratch.file("run.h5");
  const std::vector<double> d = {0.0, -1.5, 3.141592653589793, 1e-300, 1e300, NAN, INFINITY};
  const std::vector<int64_t> i64 = {0, -1, INT64_MAX, INT64_MIN, 1LL << 40};
  const std::vector<int32_t> i32 = {7, -7, INT32_MAX, INT32_MIN};
  std::vector<double> big(100000);  // longer than one 65536-row chunk
  Rng rng(3);
  for (double& x : big) x = rng.normal();
  {
    ResultsFile f(path);
    f.add_column("table", "d", "s", d);
    f.add_column("table", "i64", "bytes", i64);
    f.add_column("table", "i32", "tokens", i32);
    f.add_column("table", "empty", "1", std::vector<double>{});
    f.add_column("other", "big", "1", big);
    f.set_attr("table", "scale", 2.5);
    f.set_attr("table", "label", std::string("hello, results"));
    f.set_attr("table", "replaced", 1.0);
    f.set_attr("table", "replaced", -4.0);  // a second set replaces the first
    f.set_attr("attrs_only", "x", 0.125);
    CHECK(fs::exists(path + ".tmp"));  // written to PATH.tmp until commit
    CHECK_FALSE(fs::exists(path));
    f.commit();
    CHECK(fs::exists(path));
    CHECK_FALSE(fs::exists(path + ".tmp"));
  }
  CHECK(fs::exists(path));  // the destructor of a committed file keeps it
  CHECK_FALSE(fs::exists(path + ".tmp"));

  H5::H5File file(path, H5F_ACC_RDONLY);
  CHECK(members(file.openGroup("/")) == std::set<std::string>{"table", "other", "attrs_only"});
  H5::Group t = file.openGroup("table");
  CHECK(members(t) == std::set<std::string>{"d", "i64", "i32", "empty"});
  const std::vector<double> d_back = read_doubles(t, "d");
  REQUIRE(d_back.size() == d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    if (std::isnan(d[i]))
      CHECK(std::isnan(d_back[i]));
    else
      CHECK(d_back[i] == d[i]);
  }
  CHECK(read_int64s(t, "i64") == i64);
  CHECK(read_int32s(t, "i32") == i32);
  CHECK(read_doubles(t, "empty").empty());
  CHECK(read_doubles(file.openGroup("other"), "big") == big);

  CHECK(attr_names(t) == std::set<std::string>{"scale", "label", "replaced"});
  CHECK(read_double_attr(t, "scale") == 2.5);
  CHECK(read_string_attr(t, "label") == "hello, results");
  CHECK(read_double_attr(t, "replaced") == -4.0);
  H5::Group a = file.openGroup("attrs_only");
  CHECK(members(a).empty());
  CHECK(read_double_attr(a, "x") == 0.125);
}

TEST_CASE("results columns: integers and long columns of doubles are shuffled and deflated, short doubles raw", "[metrics][results_file]") {
  CHECK_FALSE(compressed_column(false, 0));
  CHECK_FALSE(compressed_column(true, 0));
  CHECK(compressed_column(true, 1));
  CHECK_FALSE(compressed_column(false, kCompressedFloatRows - 1));
  CHECK(compressed_column(false, kCompressedFloatRows));

  ScratchDir scratch("filters");
  const std::string path = scratch.file("run.h5");
  std::vector<double> long_doubles(kCompressedFloatRows);
  for (size_t i = 0; i < long_doubles.size(); ++i) long_doubles[i] = 0.001 * static_cast<double>(i % 5000);
  std::vector<int64_t> ids(70000);
  std::iota(ids.begin(), ids.end(), int64_t{0});
  const std::vector<double> short_doubles(70000, 2.5);
  {
    ResultsFile f(path);
    f.add_column("t", "long_doubles", "s", long_doubles);
    f.add_column("t", "short_doubles", "s", short_doubles);
    f.add_column("t", "ids", "1", ids);
    f.add_column("t", "counts", "1", std::vector<int32_t>{3, 1, 2});
    f.commit();
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5::Group t = file.openGroup("t");
  const auto filters = [&](const std::string& name) {
    H5::DSetCreatPropList p = t.openDataSet(name).getCreatePlist();
    std::vector<H5Z_filter_t> out;
    for (int i = 0; i < p.getNfilters(); ++i) {
      unsigned int flags = 0;
      size_t n = 0;
      unsigned int info = 0;
      char label[32];
      out.push_back(p.getFilter(i, flags, n, nullptr, sizeof label, label, info));
    }
    return out;
  };
  const std::vector<H5Z_filter_t> shuffled_deflated = {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE};
  CHECK(filters("long_doubles") == shuffled_deflated);
  CHECK(filters("ids") == shuffled_deflated);
  CHECK(filters("counts") == shuffled_deflated);
  CHECK(filters("short_doubles").empty());
  CHECK(t.openDataSet("short_doubles").getCreatePlist().getLayout() == H5D_CONTIGUOUS);
  CHECK(read_doubles(t, "long_doubles") == long_doubles);
  CHECK(read_doubles(t, "short_doubles") == short_doubles);
  CHECK(read_int64s(t, "ids") == ids);
  CHECK(read_int32s(t, "counts") == std::vector<int32_t>{3, 1, 2});
}

TEST_CASE("a results file destroyed without commit leaves no file", "[metrics][results_file]") {
  ScratchDir scratch("uncommitted");
  const std::string path = scratch.file("run.h5");
  {
    ResultsFile f(path);
    f.add_column("requests", "id", std::vector<int64_t>{1, 2, 3});
    f.set_attr("summary", "num_requests", 1.0);
    CHECK(fs::exists(path + ".tmp"));
    CHECK_FALSE(fs::exists(path));
  }
  CHECK_FALSE(fs::exists(path));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK(fs::is_empty(scratch.file("")));
}

TEST_CASE("an uncommitted results file leaves an older file at its path untouched", "[metrics][results_file]") {
  ScratchDir scratch("keep_old");
  const std::string path = scratch.file("run.h5");
  {
    ResultsFile f(path);
    f.add_column("g", "old", "1", std::vector<double>{1.0, 2.0});
    f.commit();
  }
  {
    ResultsFile f(path);
    f.add_column("g", "new", "1", std::vector<double>{3.0});
  }  // not committed
  CHECK_FALSE(fs::exists(path + ".tmp"));
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5::Group g = file.openGroup("g");
  CHECK(members(g) == std::set<std::string>{"old"});
  CHECK(read_doubles(g, "old") == std::vector<double>{1.0, 2.0});
}

TEST_CASE("committing over an existing results file replaces it", "[metrics][results_file]") {
  ScratchDir scratch("replace");
  const std::string path = scratch.file("run.h5");
  {
    ResultsFile f(path);
    f.add_column("first", "a", "1", std::vector<double>{1.0, 2.0, 3.0});
    f.set_attr("first", "tag", std::string("one"));
    f.commit();
  }
  {
    ResultsFile f(path);
    f.add_column("second", "b", "1", std::vector<int32_t>{9, 8});
    f.set_attr("second", "tag", std::string("two"));
    f.commit();
  }
  CHECK_FALSE(fs::exists(path + ".tmp"));
  H5::H5File file(path, H5F_ACC_RDONLY);
  CHECK(members(file.openGroup("/")) == std::set<std::string>{"second"});  // nothing left of the first
  H5::Group g = file.openGroup("second");
  CHECK(read_int32s(g, "b") == std::vector<int32_t>{9, 8});
  CHECK(read_string_attr(g, "tag") == "two");
}

TEST_CASE("a results file that cannot be created is a ConfigError", "[metrics][results_file]") {
  ScratchDir scratch("bad_path");
  CHECK_THROWS_AS(ResultsFile(scratch.file("no_such_dir/run.h5")), ConfigError);
}

TEST_CASE("write_requests writes the documented request columns", "[metrics][results_file]") {
  ScratchDir scratch("requests");
  const std::string path = scratch.file("run.h5");
  // Given out of id order; the last one has a single output token (TPOT NaN).
  const std::vector<RequestRecord> recs = {
      request(7, 1, 0.5, 0.75, 2.75, 100, 32, 9, 0),
      request(2, 0, 0.0, 0.25, 1.25, 40, 0, 5, 2),
      request(5, 3, 1.0, 1.5, 1.5, 12, 8, 1, 1),
  };
  {
    ResultsFile f(path);
    f.write_requests(recs);
    f.commit();
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5::Group g = file.openGroup("requests");
  CHECK(members(g) == std::set<std::string>{"id", "instance", "arrival_s", "first_token_s", "finish_s", "ttft_s",
                                            "tpot_s", "e2e_s", "prompt_tokens", "cached_tokens", "output_tokens",
                                            "preemptions"});
  const auto id = read_int64s(g, "id");
  const auto instance = read_int32s(g, "instance");
  const auto arrival = read_doubles(g, "arrival_s");
  const auto first = read_doubles(g, "first_token_s");
  const auto finish = read_doubles(g, "finish_s");
  const auto ttft = read_doubles(g, "ttft_s");
  const auto tpot = read_doubles(g, "tpot_s");
  const auto e2e = read_doubles(g, "e2e_s");
  const auto prompt = read_int32s(g, "prompt_tokens");
  const auto cached = read_int32s(g, "cached_tokens");
  const auto output = read_int32s(g, "output_tokens");
  const auto preemptions = read_int32s(g, "preemptions");
  for (size_t n : {id.size(), instance.size(), arrival.size(), first.size(), finish.size(), ttft.size(), tpot.size(),
                   e2e.size(), prompt.size(), cached.size(), output.size(), preemptions.size()})
    CHECK(n == recs.size());
  REQUIRE(id.size() == recs.size());
  CHECK(std::set<int64_t>(id.begin(), id.end()) == std::set<int64_t>{2, 5, 7});
  // Each row holds the values of the record with its id.
  std::map<int64_t, RequestRecord> by_id;
  for (const RequestRecord& r : recs) by_id[r.id] = r;
  for (size_t i = 0; i < id.size(); ++i) {
    const RequestRecord& r = by_id.at(id[i]);
    INFO("request " << r.id);
    CHECK(instance[i] == r.instance);
    CHECK(arrival[i] == r.arrival_s);
    CHECK(first[i] == r.first_token_s);
    CHECK(finish[i] == r.finish_s);
    CHECK(ttft[i] == r.first_token_s - r.arrival_s);
    CHECK(e2e[i] == r.finish_s - r.arrival_s);
    if (r.output_tokens > 1)
      CHECK(tpot[i] == (r.finish_s - r.first_token_s) / (r.output_tokens - 1));
    else
      CHECK(std::isnan(tpot[i]));
    CHECK(prompt[i] == r.prompt_tokens);
    CHECK(cached[i] == r.cached_tokens);
    CHECK(output[i] == r.output_tokens);
    CHECK(preemptions[i] == r.preemptions);
  }
  // Known values: request 2's TTFT 0.25 s, TPOT (1.25 - 0.25) / 4 = 0.25 s; request 7's E2E 2.25 s.
  for (size_t i = 0; i < id.size(); ++i) {
    if (id[i] == 2) {
      CHECK(ttft[i] == 0.25);
      CHECK(tpot[i] == 0.25);
    }
    if (id[i] == 7) CHECK(e2e[i] == 2.25);
  }
}

TEST_CASE("write_requests of no requests writes empty columns", "[metrics][results_file]") {
  ScratchDir scratch("no_requests");
  const std::string path = scratch.file("run.h5");
  {
    ResultsFile f(path);
    f.write_requests({});
    f.write_steps({});
    f.commit();
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5::Group r = file.openGroup("requests");
  CHECK(members(r).size() == 12);
  for (const std::string& name : members(r)) CHECK(length(r.openDataSet(name)) == 0);
  H5::Group s = file.openGroup("steps");
  CHECK(members(s).size() == 11);
  for (const std::string& name : members(s)) CHECK(length(s.openDataSet(name)) == 0);
}

TEST_CASE("write_steps writes the documented step columns", "[metrics][results_file]") {
  ScratchDir scratch("steps");
  const std::string path = scratch.file("run.h5");
  std::vector<StepRecord> steps;
  for (int i = 0; i < 5; ++i) {
    StepRecord s;
    s.instance = i % 2;
    s.start_s = 0.5 * i;
    s.duration_s = 0.01 * (i + 1);
    s.num_seqs = 3 + i;
    s.prefill_tokens = 100 * i;
    s.decode_tokens = 2 + i;
    s.kv_blocks_used = 10 + i;
    s.kv_tokens = 150 + 7 * i;
    s.num_preempted = i == 3 ? 1 : 0;
    s.num_waiting = 4 - i;
    s.num_running = 3 + i;
    steps.push_back(s);
  }
  {
    ResultsFile f(path);
    f.write_steps(steps);
    f.commit();
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5::Group g = file.openGroup("steps");
  CHECK(members(g) == std::set<std::string>{"instance", "start_s", "duration_s", "num_seqs", "prefill_tokens",
                                            "decode_tokens", "kv_blocks_used", "kv_tokens", "num_preempted",
                                            "num_waiting", "num_running"});
  // Steps keep their order.
  const auto instance = read_int32s(g, "instance");
  const auto start = read_doubles(g, "start_s");
  const auto duration = read_doubles(g, "duration_s");
  const auto num_seqs = read_int32s(g, "num_seqs");
  const auto prefill = read_int32s(g, "prefill_tokens");
  const auto decode = read_int32s(g, "decode_tokens");
  const auto kv = read_int32s(g, "kv_blocks_used");
  const auto kv_tokens = read_int64s(g, "kv_tokens");
  const auto preempted = read_int32s(g, "num_preempted");
  const auto waiting = read_int32s(g, "num_waiting");
  const auto running = read_int32s(g, "num_running");
  REQUIRE(instance.size() == steps.size());
  for (size_t n : {start.size(), duration.size(), num_seqs.size(), prefill.size(), decode.size(), kv.size(),
                   kv_tokens.size(), preempted.size(), waiting.size(), running.size()})
    CHECK(n == steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    INFO("step " << i);
    CHECK(instance[i] == steps[i].instance);
    CHECK(start[i] == steps[i].start_s);
    CHECK(duration[i] == steps[i].duration_s);
    CHECK(num_seqs[i] == steps[i].num_seqs);
    CHECK(prefill[i] == steps[i].prefill_tokens);
    CHECK(decode[i] == steps[i].decode_tokens);
    CHECK(kv[i] == steps[i].kv_blocks_used);
    CHECK(kv_tokens[i] == steps[i].kv_tokens);
    CHECK(preempted[i] == steps[i].num_preempted);
    CHECK(waiting[i] == steps[i].num_waiting);
    CHECK(running[i] == steps[i].num_running);
  }
}

TEST_CASE("write_summary and write_config write attributes", "[metrics][results_file]") {
  ScratchDir scratch("summary_config");
  const std::string path = scratch.file("run.h5");
  Summary summary;
  summary.set("num_requests", 12);
  summary.set("ttft_p50_s", 0.0375);
  summary.set("tpot_mean_s", NAN);
  summary.set("duration_s", 4.5);
  const std::vector<std::pair<std::string, std::string>> config = {
      {"model.config", "micro.json"}, {"scheduler.max_num_seqs", "8"}, {"router.kind", "prefix_precise"}};
  {
    ResultsFile f(path);
    f.write_summary(summary);
    f.write_config(config);
    f.commit();
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  CHECK(members(file.openGroup("/")) == std::set<std::string>{"summary", "summary_units", "config"});
  // Every summary value has its unit beside it.
  H5::Group u = file.openGroup("summary_units");
  CHECK(read_string_attr(u, "num_requests") == "requests");
  CHECK(read_string_attr(u, "ttft_p50_s") == "s");
  CHECK(read_string_attr(u, "duration_s") == "s");
  CHECK(attr_names(u).size() == 4);
  H5::Group s = file.openGroup("summary");
  CHECK(members(s).empty());  // scalars only
  CHECK(attr_names(s) == std::set<std::string>{"num_requests", "ttft_p50_s", "tpot_mean_s", "duration_s"});
  CHECK(read_double_attr(s, "num_requests") == 12.0);
  CHECK(read_double_attr(s, "ttft_p50_s") == 0.0375);
  CHECK(std::isnan(read_double_attr(s, "tpot_mean_s")));
  CHECK(read_double_attr(s, "duration_s") == 4.5);
  H5::Group c = file.openGroup("config");
  CHECK(members(c).empty());
  CHECK(attr_names(c) == std::set<std::string>{"model.config", "scheduler.max_num_seqs", "router.kind"});
  for (const auto& [key, value] : config) CHECK(read_string_attr(c, key) == value);
}

TEST_CASE("write_summary and write_config create their groups even when empty", "[metrics][results_file]") {
  ScratchDir scratch("empty_groups");
  const std::string path = scratch.file("run.h5");
  {
    ResultsFile f(path);
    f.write_summary(Summary{});
    f.write_config({});
    f.commit();
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  CHECK(members(file.openGroup("/")) == std::set<std::string>{"summary", "config"});
  CHECK(file.openGroup("summary").getNumAttrs() == 0);
  CHECK(file.openGroup("config").getNumAttrs() == 0);
}

TEST_CASE("write_tokens writes ragged token ids by request", "[metrics][results_file]") {
  ScratchDir scratch("tokens");
  const std::string path = scratch.file("run.h5");
  {
    ResultsFile f(path);
    f.write_tokens({30, 10, 20}, {{7, 8, 9}, {1}, {}});
    f.commit();
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5::Group g = file.openGroup("tokens");
  CHECK(members(g) == std::set<std::string>{"request_id", "offsets", "ids"});
  const auto req = read_int64s(g, "request_id");
  const auto offsets = read_int64s(g, "offsets");
  const auto ids = read_int32s(g, "ids");
  REQUIRE(req.size() == 3);
  REQUIRE(offsets.size() == req.size() + 1);
  CHECK(offsets.front() == 0);
  CHECK(offsets.back() == static_cast<int64_t>(ids.size()));
  CHECK(ids.size() == 4);
  // Request k's tokens are ids[offsets[k], offsets[k+1]).
  const std::map<int64_t, std::vector<int32_t>> want = {{30, {7, 8, 9}}, {10, {1}}, {20, {}}};
  for (size_t k = 0; k < req.size(); ++k) {
    INFO("request " << req[k]);
    REQUIRE(offsets[k] <= offsets[k + 1]);
    const std::vector<int32_t> got(ids.begin() + offsets[k], ids.begin() + offsets[k + 1]);
    CHECK(got == want.at(req[k]));
  }
  CHECK(std::set<int64_t>(req.begin(), req.end()) == std::set<int64_t>{10, 20, 30});
}

TEST_CASE("write_itl writes every gap's bin, from which the quantiles follow", "[metrics][results_file]") {
  ScratchDir scratch("itl");
  const std::string path = scratch.file("run.h5");
  LogHistogram h;
  Rng rng(3);
  for (int i = 0; i < 5000; ++i) h.add(0.01 + 0.05 * rng.uniform() * rng.uniform());
  {
    ResultsFile f(path);
    f.write_itl(h);
    f.commit();
  }
  const auto cols = read_results_columns(path, "itl", {"itl_s", "count"});
  double total = 0;
  for (size_t i = 0; i < cols[0].size(); ++i) {
    if (i > 0) CHECK(cols[0][i] > cols[0][i - 1]);
    CHECK(cols[1][i] > 0);
    total += cols[1][i];
  }
  CHECK(total == 5000);
  // The p99 from the table (the first bin whose cumulative count passes 0.99 x (n - 1)) is the histogram's.
  double seen = 0, p99 = 0;
  for (size_t i = 0; i < cols[0].size(); ++i) {
    seen += cols[1][i];
    if (seen > 0.99 * 4999) {
      p99 = cols[0][i];
      break;
    }
  }
  CHECK(p99 == h.quantile(0.99));
}

TEST_CASE("every column carries its unit, and an undocumented one is an internal error", "[metrics][results_file]") {
  ScratchDir scratch("units");
  const std::string path = scratch.file("run.h5");
  {
    ResultsFile f(path);
    RequestRecord r;
    r.id = 1;
    r.prompt_tokens = 5;
    f.write_requests({r});
    f.add_column("sweep_like", "workload.rate", "config", std::vector<double>{2.0});
    CHECK_THROWS_AS(f.add_column("requests", "no_such_column", std::vector<double>{1.0}), std::logic_error);
    Summary bad;
    bad.set("an_undocumented_metric", 1.0);
    CHECK_THROWS_AS(f.write_summary(bad), std::logic_error);
    f.commit();
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  const auto unit_of = [&](const std::string& ds) {
    H5::DataSet d = file.openDataSet(ds);
    H5::Attribute a = d.openAttribute("unit");
    std::string v;
    a.read(a.getStrType(), v);
    return std::string(v.c_str());
  };
  CHECK(unit_of("requests/ttft_s") == "s");
  CHECK(unit_of("requests/prompt_tokens") == "tokens");
  CHECK(unit_of("requests/id") == "id");
  CHECK(unit_of("sweep_like/workload.rate") == "config");
  // Every documented table's columns have a unit from the vocabulary in units.h.
  const std::set<std::string> vocabulary = {"s", "tokens", "requests", "blocks", "bytes", "GB", "FLOP", "USD", "kWh",
                                            "GPU-s", "GPU-h/day", "tok/s", "req/s", "req/day", "tok/kWh", "USD/Mtok",
                                            "instances", "seqs", "steps", "count", "id", "1", "bool", "code", "text",
                                            "signal"};
  for (const TableDoc& t : table_docs())
    for (const MetricDoc& c : t.columns) {
      INFO(t.group << "/" << c.name);
      CHECK(vocabulary.count(c.unit));
      CHECK_FALSE(c.meaning.empty());
    }
  for (const MetricDoc& d : summary_docs()) {
    INFO(d.name);
    CHECK(vocabulary.count(d.unit));
    CHECK_FALSE(d.meaning.empty());
  }
  CHECK(summary_unit("pool_decode_gpu_seconds") == "GPU-s");  // a pattern's instance
  CHECK_THROWS_AS(summary_unit("pool__gpu_seconds"), std::logic_error);  // <NAME> is never empty
}

TEST_CASE("the results readers take a file written by another tool: attributes by name, variable-length strings",
          "[metrics][results_file]") {
  // As h5py writes by default: groups that do not track creation order,
  // variable-length string attributes, a 2-D dataset beside the columns.
  ScratchDir scratch("foreign");
  const std::string path = scratch.file("other.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    H5::Group g = f.createGroup("summary");
    H5::StrType vlen(H5::PredType::C_S1, H5T_VARIABLE);
    g.createAttribute("zeta", vlen, H5::DataSpace(H5S_SCALAR)).write(vlen, std::string("last by name"));
    const double x = 2.5;
    g.createAttribute("alpha", H5::PredType::NATIVE_DOUBLE, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_DOUBLE, &x);
    H5::StrType fixed(H5::PredType::C_S1, 8);
    fixed.setStrpad(H5T_STR_NULLPAD);
    g.createAttribute("mid", fixed, H5::DataSpace(H5S_SCALAR)).write(fixed, std::string("pad\0\0\0\0\0", 8));
    H5::Group t = f.createGroup("requests");
    const hsize_t n[1] = {3}, nn[2] = {2, 2};
    const int32_t ids[3] = {4, 5, 6};
    t.createDataSet("id", H5::PredType::NATIVE_INT32, H5::DataSpace(1, n)).write(ids, H5::PredType::NATIVE_INT32);
    const double grid[4] = {1, 2, 3, 4};
    t.createDataSet("grid", H5::PredType::NATIVE_DOUBLE, H5::DataSpace(2, nn)).write(grid, H5::PredType::NATIVE_DOUBLE);
    H5::StrType word(H5::PredType::C_S1, 4);
    t.createDataSet("word", word, H5::DataSpace(1, n)).write("abcdefghijkl", word);
  }
  const std::vector<ResultsAttr> attrs = read_results_attrs(path, "summary");
  REQUIRE(attrs.size() == 3);
  CHECK(attrs[0].name == "alpha");  // no creation order kept: by name
  CHECK_FALSE(attrs[0].is_text);
  CHECK(attrs[0].number == 2.5);
  CHECK(attrs[1].name == "mid");
  CHECK(attrs[1].is_text);
  CHECK(attrs[1].text == "pad");  // the padding NULs dropped
  CHECK(attrs[2].name == "zeta");
  CHECK(attrs[2].is_text);
  CHECK(attrs[2].text == "last by name");
  CHECK(read_results_columns(path, "requests", {"id"}) == std::vector<std::vector<double>>{{4, 5, 6}});
  CHECK_THAT(testbed_test::config_error_of([&] { read_results_columns(path, "requests", {"grid"}); }),
             Catch::Contains("/requests/grid is not a column (1-D)"));
  CHECK_THAT(testbed_test::config_error_of([&] { read_results_columns(path, "requests", {"word"}); }),
             Catch::Contains("/requests/word is not numeric"));
  CHECK_THAT(testbed_test::config_error_of([&] { read_results_columns(path, "requests", {"none"}); }),
             Catch::Contains("/requests has no column none"));
  CHECK_THAT(testbed_test::config_error_of([&] { read_results_attrs(path, "steps"); }), Catch::Contains("no group /steps"));
  // Not an HDF5 file at all: a ConfigError naming the file, with HDF5's reason.
  const std::string junk = scratch.file("junk.h5");
  { std::ofstream(junk) << "not hdf5"; }
  CHECK_THAT(testbed_test::config_error_of([&] { read_results_attrs(junk, "summary"); }),
             Catch::Contains(junk + ": cannot read results file (H5Fopen failed"));
}
