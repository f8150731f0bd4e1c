// A profile table (testbed profile's profile.h5): the bytes choose, for each
// dataset the reader expects, whether it exists, its rank (scalar to 3-D), its
// extents, its element type and its values (any bit pattern: NaN and Inf
// included); the harness writes that HDF5 file and the reader must judge it.
// (The bytes are not the file itself: fuzzing HDF5's own parser is not ours to fix.)
#include <H5Cpp.h>

#include <cstring>
#include <vector>

#include "fuzz_target.h"
#include "sim/profile_table.h"

namespace {

struct Bytes {
  const uint8_t* data;
  size_t size, at = 0;
  uint8_t next() { return at < size ? data[at++] : 0; }
  double number() {
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = bits << 8 | next();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
};

}  // namespace

FUZZ_TARGET(profile_table) {
  Bytes in{data, size};
  const std::string path = testbed_fuzz::write_input(nullptr, 0, ".h5");
  H5::Exception::dontPrint();
  {
    H5::H5File file(path, H5F_ACC_TRUNC);
    H5::Group g = file.createGroup("profile");
    for (const char* name : {"prefill_tokens", "decode_seqs", "context", "step_s"}) {
      const uint8_t shape = in.next();
      if (shape % 7 == 6) continue;  // absent
      const int rank = shape % 4;
      hsize_t dims[3] = {1, 1, 1};
      hsize_t count = 1;
      for (int r = 0; r < rank; ++r) count *= dims[r] = 1 + in.next() % 6;
      H5::DataSpace space = rank == 0 ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(rank, dims);
      std::vector<double> values(count);
      for (double& v : values) v = in.number();
      if (in.next() % 3 == 0) {
        std::vector<int32_t> ints(count);
        for (size_t i = 0; i < count; ++i) ints[i] = static_cast<int32_t>(in.next()) - 8;
        g.createDataSet(name, H5::PredType::NATIVE_INT32, space).write(ints.data(), H5::PredType::NATIVE_INT32);
      } else {
        g.createDataSet(name, H5::PredType::NATIVE_DOUBLE, space).write(values.data(), H5::PredType::NATIVE_DOUBLE);
      }
    }
    if (in.next() % 2) {  // an attribute of the wrong kind where a string is expected
      const double v = in.number();
      g.createAttribute("model", H5::PredType::NATIVE_DOUBLE, H5::DataSpace(H5S_SCALAR))
          .write(H5::PredType::NATIVE_DOUBLE, &v);
    }
  }
  testbed_fuzz::expect_config_error_only([&] { (void)testbed::ProfileTable::load(path); });
  return 0;
}
