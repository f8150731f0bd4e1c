# The testbed executable holds none of HDF5's C++ API (engine/metrics/h5_c.h):
# that API's static objects start the whole HDF5 library before main in every
# process, and driver.huge_pages starts the process twice. Usage:
#   cmake -DNM=<nm> -DBIN=<testbed> -P check_no_hdf5_cpp.cmake
execute_process(COMMAND ${NM} -C ${BIN} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${BIN} failed (${rc})")
endif()
# The symbols were read: the executable's own code is listed.
string(FIND "${symbols}" " testbed::" own)
if(own EQUAL -1)
  message(FATAL_ERROR "${BIN}: no testbed:: symbol among its symbols (stripped?): the check cannot tell")
endif()
string(REGEX MATCHALL "[^\n]*H5::[^\n]*" cpp "${symbols}")
list(LENGTH cpp n)
if(n GREATER 0)
  list(GET cpp 0 first)
  message(FATAL_ERROR "${BIN} links ${n} symbols of HDF5's C++ API, e.g. ${first}: use the C API (engine/metrics/h5_c.h)")
endif()
message(STATUS "${BIN}: no HDF5 C++ API linked")
