#include "experiments/cli/huge_pages.h"

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "engine/common/config_error.h"
#include "engine/common/heap_advice.h"

// A sanitizer's malloc replaces glibc's, and glibc's mallopt does not reach it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TESTBED_SANITIZER_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TESTBED_SANITIZER_MALLOC 1
#endif
#endif

namespace testbed {

namespace {

// Each heap growth: enough for the advice to cover whole 2 MiB ranges before
// they are first touched. 1 GiB of address space costs nothing until touched;
// a freed top above it goes back to the kernel.
constexpr int kTopPad = 1 << 30;
constexpr size_t kFirstGrowth = 256 << 20;
constexpr uintptr_t kHugePage = 2 << 20;

std::string& state() {
  static std::string s = "off";
  return s;
}

// The user set malloc up already: glibc's tunables, or the older variables it still reads.
bool user_sets_malloc() {
  if (const char* t = std::getenv("GLIBC_TUNABLES"))
    for (const char* key : {"glibc.malloc.hugetlb", "glibc.malloc.top_pad", "glibc.malloc.mmap_threshold",
                            "glibc.malloc.mmap_max", "glibc.malloc.arena_max", "glibc.malloc.trim_threshold"})
      if (std::strstr(t, key)) return true;
  for (const char* var : {"MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX",
                          "MALLOC_TRIM_THRESHOLD_"})
    if (std::getenv(var)) return true;
  return false;
}

}  // namespace

std::string huge_pages_state() { return state(); }

std::string huge_pages_unavailable_reason() {
#ifdef TESTBED_SANITIZER_MALLOC
  return "this build's malloc is the sanitizer's, which glibc's mallopt does not set up";
#endif
  const char* path = "/sys/kernel/mm/transparent_hugepage/enabled";
  std::ifstream in(path);
  std::string mode;
  std::getline(in, mode);
  if (!in && mode.empty()) return std::string("the kernel offers no transparent huge pages (") + path + " is not readable)";
  if (mode.find("[always]") == std::string::npos && mode.find("[madvise]") == std::string::npos)
    return std::string("the kernel's transparent huge pages are off (") + path + ": " + mode + ")";
  return "";
}

void apply_huge_pages(const std::string& setting, bool simulated) {
  if (setting == "off" || state() != "off") return;  // "on" or "environment": settled already
  if (setting == "auto" && !simulated) return;
  if (user_sets_malloc()) {
    state() = "environment";
    return;
  }
  std::string why = huge_pages_unavailable_reason();
  // The heap is never trimmed (M_TRIM_THRESHOLD -1): a free top handed back
  // to the kernel comes back as a growth on small pages until the next
  // advice, each page faulted and zeroed again (16,000 of a 100k-request
  // slice of fleet_1k.ini's 20,000 page faults: README, Fleet scale).
  if (why.empty() && (mallopt(M_ARENA_MAX, 1) != 1 || mallopt(M_MMAP_MAX, 0) != 1 ||
                      mallopt(M_TOP_PAD, kTopPad) != 1 || mallopt(M_TRIM_THRESHOLD, -1) != 1))
    why = "glibc's mallopt refused the heap's settings";
  if (why.empty()) {
    // Grow the heap now, so the first growth is advised before anything is
    // put in it. A 2 MiB range that holds a page touched before the advice
    // stays on 4 KiB pages, and two are touched here:
    //  - the allocation that grows the heap writes the new free top's header
    //    where it ends. So it is large, and that range lies 256 MiB in;
    //  - the range where the heap ended before. The free top starts there
    //    once the large allocation is freed. So one more chunk takes the top
    //    up to the first 2 MiB boundary at least 1 MiB on (glibc carves a
    //    chunk that no free one fits from the top). It is kept for good: at
    //    most 3 MiB of address space, and only its header is touched.
    // With neither, the Azure trace's request records went in those ranges,
    // and 300 to 500 of the run's 600 to 980 page faults were theirs.
    char* before = static_cast<char*>(sbrk(0));
    void* probe = std::malloc(kFirstGrowth);
    if (probe == nullptr) throw std::bad_alloc();
    *static_cast<volatile char*>(probe) = 0;  // used, so the compiler keeps the call
    char* end = static_cast<char*>(sbrk(0));
    const int err = advise_heap_range(before, end);
    std::free(probe);
    if (err != 0) {
      why = std::string("the kernel refused madvise(MADV_HUGEPAGE) on the heap: ") + std::strerror(err);
    } else {
      follow_heap_from(before, end);
      advise_heap_growth();  // the free may have trimmed it
      const uintptr_t top = reinterpret_cast<uintptr_t>(sbrk(0)) - mallinfo2().keepcost;  // the free top's header
      const uintptr_t boundary = (top + (1 << 20) + kHugePage - 1) & ~(kHugePage - 1);
      // Asking for n bytes gives a chunk of n + 8 rounded up to 16 (glibc, 64 bits).
      // This runs once (state() is "on" after it), and the chunk is never freed.
      if (void* filler = std::malloc(boundary - top - 8))
        *static_cast<volatile char*>(filler) = 0;  // used, so the compiler keeps the call (it dropped an unused one)
      state() = "on";
      return;
    }
  }
  if (setting == "on") throw ConfigError("driver.huge_pages: on, but " + why + " (auto or off runs without them)");
}

}  // namespace testbed
