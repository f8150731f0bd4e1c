// driver.huge_pages: a simulation's memory on transparent huge pages.
//
// A large fleet's step reads the records of many sequences and several hash
// tables scattered over hundreds of MB to GB. On 4 KiB pages most of those
// reads also miss the TLB, and the miss is a page walk. The kernel backs a
// region with 2 MiB pages where it is madvise(MADV_HUGEPAGE)d (its `madvise`
// THP mode) and a whole 2 MiB range of it is untouched when first touched.
//
// So the switch, in this process, before the run allocates anything large:
//  - makes glibc's heap grow 1 GiB at a time (M_TOP_PAD), so each growth is
//    advised before most of it is touched;
//  - serves every allocation from that heap, none from a mapping of its own
//    (M_MMAP_MAX = 0), and keeps every thread on it (M_ARENA_MAX = 1): a
//    mapping, or another thread's arena, is memory this switch would not see;
//  - grows the heap once, advises it, and starts its free top on a 2 MiB
//    boundary (huge_pages.cpp says why).
// advise_heap_growth() (engine/common/heap_advice.h) then advises whatever the
// heap grew by since; the run calls it after every step and before building
// each engine, and large tables between allocating and filling themselves.
// What a step allocates and fills at once in a new growth stays on 4 KiB
// pages; with growths of 256 MiB that was 13% of fleet_speed.ini's memory,
// with 1 GiB 2% (README, Fleet scale).
//
// An earlier version set glibc's tunables (glibc.malloc.hugetlb=1 and
// top_pad) and executed the process again, since glibc reads them only at
// start; the second start cost the Azure run about 2% (README, Fleet scale).
// Results do not depend on the switch: only where the memory lies changes.
#pragma once

#include <string>

#include "engine/common/heap_advice.h"  // advise_heap_growth

namespace testbed {

// What applies to this process, for the results file (/run huge_pages): "on",
// "environment" (the user's GLIBC_TUNABLES or MALLOC_* variables already set
// malloc's pages, heap steps, mappings or arenas, so they were left as they
// are) or "off".
std::string huge_pages_state();

// Why huge pages cannot be had here ("" when they can): the kernel's THP mode
// is `never` or unknown, or the build's malloc is a sanitizer's.
std::string huge_pages_unavailable_reason();

// driver.huge_pages = on, or auto on a simulated run: sets malloc up and
// advises the heap (above). It does nothing for off, for auto on a run that
// is not simulated, when it ran already, when the user's environment sets
// malloc up (state "environment"), or for auto where huge pages are
// unavailable. For on where they are unavailable, or where the kernel refuses
// the advice, it throws a ConfigError naming driver.huge_pages.
void apply_huge_pages(const std::string& setting, bool simulated);

}  // namespace testbed
