// Loading a record ahead of its use by reading it. A prefetch instruction is
// only a hint the processor may drop: in a large fleet (an instance's records
// cold since its last step) the hints issued for the instance whose event
// comes next left the stalls where they were, while plain reads of one byte
// per cache line, their values unused, took 10-11% off one-thread runs of a
// 1,024-instance fleet (README, Fleet scale; why the hints did nothing was not
// measured: this machine has no hardware counters). A read waits for its line
// where a hint would not, so these are for loading an event ahead, not a
// loop iteration ahead.
#pragma once

#include <cstddef>

namespace testbed {

// Reads one byte of every cache line [p, p + bytes) touches (nothing when
// bytes is 0). The bytes must be live: a read past an object's end is one
// (AddressSanitizer reports it), so an object of unknown size is read at p only.
inline void load_lines(const void* p, size_t bytes) {
  if (bytes == 0) return;
  const volatile char* c = static_cast<const volatile char*>(p);
  for (size_t b = 0; b < bytes; b += 64) (void)c[b];
  (void)c[bytes - 1];
}

}  // namespace testbed
