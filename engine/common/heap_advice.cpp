#include "engine/common/heap_advice.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>

namespace testbed {

int advise_heap_range(char* from, char* to) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  from = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(from) & ~(page - 1));
  if (to <= from) return 0;
  return madvise(from, static_cast<size_t>(to - from), MADV_HUGEPAGE) == 0 ? 0 : errno;
}

void follow_heap_from(char* end) { heap_advice_detail::advised_end = end; }

namespace heap_advice_detail {

char* advised_end = nullptr;

void advise_to(char* end) {
  // A refusal here cannot happen where the first advice was taken (the same
  // kernel, the same kind of memory); the growth would stay on 4 KiB pages.
  if (end > advised_end) advise_heap_range(advised_end, end);
  // A trimmed heap keeps its advice; what grows back is a new mapping.
  advised_end = end;
}

}  // namespace heap_advice_detail

}  // namespace testbed
