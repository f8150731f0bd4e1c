// Malformed hardware specs and profile tables: every bad file is a ConfigError
// naming the file and the key or dataset, never an HDF5 exception (which is not
// a std::exception), a heap overflow, an infinity or a hang.
#include <H5Cpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "engine/common/config_error.h"
#include "sim/hardware_spec.h"
#include "sim/profile_table.h"
#include "support/config_error_of.h"
#include "support/scratch.h"

using namespace testbed;
namespace fs = std::filesystem;

namespace {

const char* kSpec =
    "[device]\nname = test-gpu\n"
    "[compute]\nbf16_tflops = 1000\n"
    "[memory]\ncapacity_gib = 80\nbandwidth_gbps = 2000\n";

fs::path scratch() {
  return testbed_test::scratch_root("testbed_malformed_specs");
}

using testbed_test::config_error_of;

// The error of kSpec with `key = value` set in `section` (replacing the key where kSpec has it).
std::string spec_error(const std::string& section, const std::string& key, const std::string& value) {
  std::string text = kSpec;
  const std::string header = "[" + section + "]\n";
  const size_t at = text.find(header);
  const std::string line = key + " = " + value + "\n";
  if (at == std::string::npos) {
    text += header + line;
  } else {
    // Replace the key in its section when it is there, else add it.
    const size_t key_at = text.find(key + " = ", at);
    if (key_at != std::string::npos && text.rfind('[', key_at) == at)
      text.replace(key_at, text.find('\n', key_at) + 1 - key_at, line);
    else
      text.insert(at + header.size(), line);
  }
  return config_error_of([&] { HardwareSpec::from_ini_text(text, "gpu.ini"); });
}

}  // namespace

TEST_CASE("hardware spec capacities and bandwidths and peaks must be finite and positive", "[hardware_spec][malformed]") {
  REQUIRE(spec_error("memory", "capacity_gib", "80") == "");
  const std::pair<const char*, const char*> required[] = {
      {"compute", "bf16_tflops"}, {"memory", "capacity_gib"}, {"memory", "bandwidth_gbps"}};
  for (const auto& [section, key] : required)
    for (const char* value : {"0", "-1", "nan", "inf", "-inf", "1e400", "1e300"}) {
      INFO(section << "." << key << " = " << value);
      CHECK_THAT(spec_error(section, key, value),
                 Catch::StartsWith("gpu.ini") && Catch::Contains(std::string(section) + "." + key));
    }
  // Optional figures may be 0 (not supported / unknown) but never negative, non-finite or absurd.
  const std::pair<const char*, const char*> optional[] = {
      {"compute", "fp16_tflops"},      {"compute", "fp8_tflops"},     {"compute", "int8_tops"},
      {"compute", "fp32_tflops"},      {"interconnect", "bandwidth_gbps"}, {"interconnect", "latency_s"},
      {"memory", "reserve_gib"},       {"step", "overhead_s"},        {"all_reduce", "tp2_bus_gbps"},
      {"cost", "price_per_gpu_hour_usd"}, {"power", "tdp_w"}};
  for (const auto& [section, key] : optional) {
    for (const char* value : {"-1", "nan", "inf", "1e300"}) {
      INFO(section << "." << key << " = " << value);
      CHECK_THAT(spec_error(section, key, value),
                 Catch::StartsWith("gpu.ini") && Catch::Contains(std::string(section) + "." + key));
    }
  }
  CHECK(spec_error("compute", "fp8_tflops", "0") == "");
  for (const char* value : {"0", "1.5", "-0.5", "nan"}) {
    INFO(value);
    CHECK_THAT(spec_error("memory", "efficiency", value), Catch::Contains("gpu.ini: memory.efficiency"));
  }
}

TEST_CASE("a hardware spec path that is a directory or a FIFO or empty is an error naming it", "[hardware_spec][malformed]") {
  const std::string dir = (scratch() / "spec_dir.ini").string();
  fs::create_directories(dir);
  CHECK_THAT(config_error_of([&] { HardwareSpec::from_ini_file(dir); }), Catch::Contains(dir) && Catch::Contains("not a regular file"));
  const std::string fifo = (scratch() / "spec_fifo.ini").string();
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // opening it would block forever
  CHECK_THAT(config_error_of([&] { HardwareSpec::from_ini_file(fifo); }), Catch::Contains(fifo));
  const std::string empty = (scratch() / "empty.ini").string();
  std::ofstream(empty).flush();
  CHECK_THAT(config_error_of([&] { HardwareSpec::from_ini_file(empty); }), Catch::Contains(empty) && Catch::Contains("compute.bf16_tflops"));
  const std::string binary = (scratch() / "binary.ini").string();
  std::ofstream(binary, std::ios::binary) << std::string("\0\xff\x01[compute\n=", 12);
  CHECK_THAT(config_error_of([&] { HardwareSpec::from_ini_file(binary); }), Catch::Contains(binary));
  // Too long to stat (ENAMETOOLONG): the throwing std::filesystem calls would escape as filesystem_error.
  const std::string long_path = "/tmp/" + std::string(5000, 'a');
  CHECK_THAT(config_error_of([&] { HardwareSpec::from_ini_file(long_path + ".ini"); }), Catch::Contains("cannot open hardware spec"));
  CHECK_THAT(config_error_of([&] { ProfileTable::load(long_path + ".h5"); }), Catch::Contains("file not found"));
}

namespace {

struct Dataset {
  std::vector<hsize_t> dims;  // {} = scalar
  std::vector<double> values;
};

// A profile file with these datasets under /profile (none named: that dataset is absent).
std::string write_profile(const std::string& name, const std::map<std::string, Dataset>& datasets) {
  const std::string path = (scratch() / name).string();
  H5::H5File f(path, H5F_ACC_TRUNC);
  H5::Group g = f.createGroup("profile");
  for (const auto& [key, d] : datasets) {
    const H5::DataSpace space =
        d.dims.empty() ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(static_cast<int>(d.dims.size()), d.dims.data());
    g.createDataSet(key, H5::PredType::NATIVE_DOUBLE, space).write(d.values.data(), H5::PredType::NATIVE_DOUBLE);
  }
  return path;
}

std::map<std::string, Dataset> good_table() {
  return {{"prefill_tokens", {{2}, {0, 64}}},
          {"decode_seqs", {{2}, {0, 8}}},
          {"context", {{1}, {0}}},
          {"step_s", {{4}, {0.001, 0.002, 0.003, 0.004}}}};
}

}  // namespace

TEST_CASE("profile tables with non-finite or non-positive timings name the file and dataset", "[profiled][malformed]") {
  CHECK_NOTHROW(ProfileTable::load(write_profile("good.h5", good_table())));
  for (const double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), -0.002, 0.0}) {
    INFO(bad);
    auto d = good_table();
    d["step_s"].values[2] = bad;
    const std::string path = write_profile("bad_step.h5", d);
    CHECK_THAT(config_error_of([&] { ProfileTable::load(path); }), Catch::Contains(path) && Catch::Contains("profile/step_s") &&
                                                              Catch::Contains("index 2"));
  }
  for (const double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), -1.0}) {
    INFO(bad);
    auto d = good_table();
    d["decode_seqs"].values[1] = bad;
    const std::string path = write_profile("bad_axis.h5", d);
    CHECK_THAT(config_error_of([&] { ProfileTable::load(path); }), Catch::Contains(path) && Catch::Contains("decode_seqs"));
  }
}

TEST_CASE("profile datasets of the wrong rank or size or type are errors before anything is allocated", "[profiled][malformed]") {
  // Scalar, 2-D and 3-D datasets of each column (the rank regression), checked here for every dataset.
  for (const char* name : {"prefill_tokens", "decode_seqs", "context", "step_s"}) {
    for (const std::vector<hsize_t>& dims : {std::vector<hsize_t>{}, {2, 2}, {2, 2, 2}}) {
      INFO(name << " of rank " << dims.size());
      auto d = good_table();
      size_t n = 1;
      for (hsize_t x : dims) n *= x;
      d[name] = {dims, std::vector<double>(n, 1.0)};
      const std::string path = write_profile("rank.h5", d);
      CHECK_THAT(config_error_of([&] { ProfileTable::load(path); }), Catch::Contains(path) && Catch::Contains(name) &&
                                                                Catch::Contains("1-D"));
    }
  }
  // More values than the axes' grid: refused by its extent.
  auto d = good_table();
  d["step_s"] = {{5}, {1, 2, 3, 4, 5}};
  std::string path = write_profile("long.h5", d);
  CHECK_THAT(config_error_of([&] { ProfileTable::load(path); }), Catch::Contains("profile/step_s has 5 values, more than 4"));
  // A dataset that is missing, or of strings.
  d = good_table();
  d.erase("context");
  path = write_profile("missing.h5", d);
  CHECK_THAT(config_error_of([&] { ProfileTable::load(path); }), Catch::Contains(path) && Catch::Contains("not a profile table"));
  {
    path = (scratch() / "strings.h5").string();
    H5::H5File f(path, H5F_ACC_TRUNC);
    H5::Group g = f.createGroup("profile");
    for (const auto& [key, ds] : good_table()) {
      const hsize_t n = ds.values.size();
      if (key == "context") {
        const H5::StrType type(H5::PredType::C_S1, 8);
        const char text[8] = "context";
        g.createDataSet(key, type, H5::DataSpace(1, &n)).write(text, type);
      } else {
        g.createDataSet(key, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(1, &n))
            .write(ds.values.data(), H5::PredType::NATIVE_DOUBLE);
      }
    }
  }
  CHECK_THAT(config_error_of([&] { ProfileTable::load(path); }), Catch::Contains("profile/context must hold numbers"));
}

TEST_CASE("profile attributes that are not one string are errors and not overflows", "[profiled][malformed]") {
  const std::string path = write_profile("attr.h5", good_table());
  {
    H5::H5File f(path, H5F_ACC_RDWR);
    H5::Group g = f.openGroup("profile");
    // Three variable-length strings: reading them into one std::string would write past it.
    const H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
    const hsize_t n = 3;
    const char* values[3] = {"a", "b", "c"};
    g.createAttribute("executor", type, H5::DataSpace(1, &n)).write(type, values);
  }
  CHECK_THAT(config_error_of([&] { ProfileTable::load(path); }), Catch::Contains(path) && Catch::Contains("executor"));
  const std::string numeric = write_profile("attr_num.h5", good_table());
  {
    H5::H5File f(numeric, H5F_ACC_RDWR);
    const double v = 1;
    f.openGroup("profile").createAttribute("model", H5::PredType::NATIVE_DOUBLE, H5::DataSpace()).write(H5::PredType::NATIVE_DOUBLE, &v);
  }
  CHECK_THAT(config_error_of([&] { ProfileTable::load(numeric); }), Catch::Contains("model"));
}

TEST_CASE("a profile path that is a directory or empty or truncated is an error naming it", "[profiled][malformed]") {
  const std::string dir = (scratch() / "profile_dir.h5").string();
  fs::create_directories(dir);
  CHECK_THAT(config_error_of([&] { ProfileTable::load(dir); }), Catch::Contains(dir));
  const std::string empty = (scratch() / "empty.h5").string();
  std::ofstream(empty).flush();
  CHECK_THAT(config_error_of([&] { ProfileTable::load(empty); }), Catch::Contains(empty));
  // Every truncation of a good file (HDF5 exceptions inside become ConfigErrors).
  const std::string good = write_profile("whole.h5", good_table());
  const auto size = fs::file_size(good);
  const std::string cut = (scratch() / "cut.h5").string();
  for (uintmax_t keep = 0; keep < size; keep += 97) {
    fs::copy_file(good, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    INFO(keep << " of " << size << " bytes");
    CHECK_THAT(config_error_of([&] { ProfileTable::load(cut); }), Catch::Contains(cut));
  }
}
