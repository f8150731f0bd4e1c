// Reading results.h5 groups back in the CLI tests: every dataset and float
// attribute of a group as doubles, and a bit-for-bit comparison of two of them.
#pragma once

#include <H5Cpp.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace testbed_test {

// Numeric datasets by name (text ones are left out); float attributes as "@name".
inline std::map<std::string, std::vector<double>> read_group(const std::filesystem::path& file, const std::string& group) {
  H5::H5File f(file.string(), H5F_ACC_RDONLY);
  H5::Group g = f.openGroup(group);
  std::map<std::string, std::vector<double>> out;
  for (hsize_t i = 0; i < g.getNumObjs(); ++i) {
    const std::string name = g.getObjnameByIdx(i);
    H5::DataSet ds = g.openDataSet(name);
    if (ds.getTypeClass() == H5T_STRING) continue;
    hsize_t dims[1];
    ds.getSpace().getSimpleExtentDims(dims);
    std::vector<double> v(dims[0]);
    if (dims[0]) ds.read(v.data(), H5::PredType::NATIVE_DOUBLE);
    out[name] = v;
  }
  for (int i = 0; i < g.getNumAttrs(); ++i) {
    H5::Attribute a = g.openAttribute(static_cast<unsigned>(i));
    if (a.getTypeClass() != H5T_FLOAT) continue;
    double v;
    a.read(H5::PredType::NATIVE_DOUBLE, &v);
    out["@" + a.getName()] = {v};
  }
  return out;
}

inline bool same_bits(const std::map<std::string, std::vector<double>>& a, const std::map<std::string, std::vector<double>>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second.size() != v.size()) return false;
    for (size_t i = 0; i < v.size(); ++i)
      if (!(v[i] == it->second[i] || (std::isnan(v[i]) && std::isnan(it->second[i])))) return false;
  }
  return true;
}

// A text attribute of a group ("" when it has none of that name).
inline std::string read_text_attr(const std::filesystem::path& file, const std::string& group, const std::string& name) {
  H5::H5File f(file.string(), H5F_ACC_RDONLY);
  H5::Group g = f.openGroup(group);
  if (!g.attrExists(name)) return "";
  H5::Attribute a = g.openAttribute(name);
  std::string v;
  a.read(a.getStrType(), v);
  return v;
}

}  // namespace testbed_test
