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

namespace {
char* heap_start = nullptr;  // where the advice begins
}  // namespace

void follow_heap_from(char* start, char* end) {
  heap_start = start;
  heap_advice_detail::advised_end.store(end, std::memory_order_relaxed);
}

namespace heap_advice_detail {

std::atomic<char*> advised_end{nullptr};

void advise_to(char* end) {
  // From the start, not from the last end: glibc may have trimmed the heap and
  // grown it again since, and what grows back is a new mapping with no advice.
  // Advice already given costs the kernel a walk over the heap's one or two
  // mappings. A refusal cannot happen where the first advice was taken (the
  // same kernel, the same kind of memory); the growth would stay on 4 KiB pages.
  advise_heap_range(heap_start, end);
  advised_end.store(end, std::memory_order_relaxed);
}

}  // namespace heap_advice_detail

}  // namespace testbed
