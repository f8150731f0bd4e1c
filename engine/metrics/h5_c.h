// HDF5 through its C API, for the files the testbed writes and reads
// (results_file.cpp, sim/profile_table.cpp).
//
// Not the C++ API: its archive's static objects (H5::PropList::DEFAULT and
// the rest) start the whole HDF5 library before main, in every process that
// links it. Taking that out took a bare `testbed` start from 8.6 to 6.0 ms
// and from 319 to 202 page faults (README, Fleet scale); driver.huge_pages,
// which executes the process again, paid it twice, and every command that
// never touches a file paid it once. Through the C API the
// library starts at its first call: in the process that writes or reads.
//
// H5Id owns an identifier and closes it with the function it was made for.
// A call that fails returns a negative value; check() turns that into an
// h5::Error naming the call and what HDF5's error stack says, and
// callers that read user files turn it into a ConfigError naming the file.
#pragma once

#include <hdf5.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace testbed::h5 {

// Silences HDF5's own printing of its error stack (the caller reports errors);
// the first call starts the library.
inline void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// The innermost error on HDF5's stack ("H5Fopen: unable to open file: ..."), or "".
inline std::string error_text() {
  std::string text;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
        if (n == 0) *static_cast<std::string*>(out) = std::string(e->func_name) + ": " + (e->desc ? e->desc : "");
        return 0;
      },
      &text);
  return text;
}

// What check() throws: a failed HDF5 call (callers catch it apart from their own ConfigErrors).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `value` when it is not negative; else an Error naming `what` and HDF5's reason.
template <class T>
T check(T value, const char* what) {
  if (value < 0) {
    const std::string why = error_text();
    throw Error(std::string(what) + " failed" + (why.empty() ? "" : " (" + why + ")"));
  }
  return value;
}

class H5Id {
 public:
  // Takes `id` (checked: a negative one is the error of `what`), closed by `close`.
  H5Id(hid_t id, herr_t (*close)(hid_t), const char* what) : id_(check(id, what)), close_(close) {}
  ~H5Id() { reset(); }
  H5Id(H5Id&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), close_(o.close_) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id& operator=(H5Id&&) = delete;
  operator hid_t() const { return id_; }
  // Closes now; a failed close (a file's last write) is an error, not silence.
  void close(const char* what) {
    if (id_ < 0) return;
    const herr_t r = close_(std::exchange(id_, H5I_INVALID_HID));
    check(r, what);
  }
  void reset() {
    if (id_ >= 0) close_(std::exchange(id_, H5I_INVALID_HID));
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

inline H5Id open_file(const std::string& path, unsigned flags) {
  return H5Id(H5Fopen(path.c_str(), flags, H5P_DEFAULT), H5Fclose, "H5Fopen");
}
inline H5Id open_group(hid_t at, const std::string& name) {
  return H5Id(H5Gopen2(at, name.c_str(), H5P_DEFAULT), H5Gclose, "H5Gopen");
}
inline H5Id open_dataset(hid_t at, const std::string& name) {
  return H5Id(H5Dopen2(at, name.c_str(), H5P_DEFAULT), H5Dclose, "H5Dopen");
}
// A fixed-length string type of `size` bytes (at least 1), NUL-padded or terminated.
inline H5Id string_type(size_t size, H5T_str_t pad) {
  H5Id t(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
  check(H5Tset_size(t, size < 1 ? 1 : size), "H5Tset_size");
  check(H5Tset_strpad(t, pad), "H5Tset_strpad");
  return t;
}

// The index that lists `obj`'s attributes in the order they were written
// when it tracks that order (the testbed's groups do), else by name.
inline H5_index_t attr_order(hid_t obj) {
  const H5Id plist(H5Gget_create_plist(obj), H5Pclose, "H5Gget_create_plist");
  unsigned flags = 0;
  check(H5Pget_attr_creation_order(plist, &flags), "H5Pget_attr_creation_order");
  return flags & H5P_CRT_ORDER_TRACKED ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
}

// Whether `name` is a link in `at` ("a/b": every part is).
inline bool exists(hid_t at, const std::string& name) {
  for (size_t end = name.find('/'); ; end = name.find('/', end + 1)) {
    const std::string part = name.substr(0, end);
    if (check(H5Lexists(at, part.c_str(), H5P_DEFAULT), "H5Lexists") <= 0) return false;
    if (end == std::string::npos) return true;
  }
}

// Whether attribute `attr` holds one string (not a number, not an array of
// strings, which read_string_attr would write past).
inline bool is_one_string(hid_t attr) {
  const H5Id type(H5Aget_type(attr), H5Tclose, "H5Aget_type");
  if (H5Tget_class(type) != H5T_STRING) return false;
  const H5Id space(H5Aget_space(attr), H5Sclose, "H5Aget_space");
  return check(H5Sget_simple_extent_npoints(space), "H5Sget_simple_extent_npoints") == 1;
}

// A string attribute of one value, fixed-length or variable-length, as text
// (a fixed-length one's padding NULs dropped). Throws when it is not one string.
inline std::string read_string_attr(hid_t attr) {
  if (!is_one_string(attr)) throw Error("the attribute is not one string");
  const H5Id type(H5Aget_type(attr), H5Tclose, "H5Aget_type");
  if (check(H5Tis_variable_str(type), "H5Tis_variable_str") > 0) {
    H5Id mem(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
    check(H5Tset_size(mem, H5T_VARIABLE), "H5Tset_size");
    char* s = nullptr;
    check(H5Aread(attr, mem, &s), "H5Aread");
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  const size_t size = H5Tget_size(type);
  std::string out(size, '\0');
  if (size) check(H5Aread(attr, type, out.data()), "H5Aread");
  return out.c_str();  // up to the first NUL
}

}  // namespace testbed::h5
