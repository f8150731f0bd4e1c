// advise_heap_growth(): the heap's growth since the last call, advised for
// transparent huge pages (madvise(MADV_HUGEPAGE)), where driver.huge_pages
// turned that on (experiments/cli/huge_pages.h sets malloc up and starts it).
// Until then, and in a process that never turns it on, it costs one compare.
//
// The run calls it after every step and before building each engine. Code
// that allocates a large table and fills it at once calls it in between
// (FlatHashMap64), since what is touched before the advice stays on 4 KiB
// pages: a 1,024-instance router's index is 16 tables of 64 MB, built before
// the first step.
#pragma once

#include <unistd.h>

#include <atomic>

namespace testbed {

namespace heap_advice_detail {
// The heap's end when last advised; null while off. Atomic: a fleet's worker
// thread can grow a table while the main thread reports a step (both calls
// then advise the same range, which is harmless).
extern std::atomic<char*> advised_end;
void advise_to(char* end);
}  // namespace heap_advice_detail

inline void advise_heap_growth() {
  char* const advised = heap_advice_detail::advised_end.load(std::memory_order_relaxed);
  if (advised == nullptr) return;
  char* end = static_cast<char*>(sbrk(0));
  if (end != advised) heap_advice_detail::advise_to(end);
}

// Starts following the heap, advised from `start` up to `end` already.
void follow_heap_from(char* start, char* end);
// madvise(MADV_HUGEPAGE) of [from, to), `from` rounded down to a page: 0, or
// the errno of the kernel's refusal.
int advise_heap_range(char* from, char* to);

}  // namespace testbed
