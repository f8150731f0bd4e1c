// driver.huge_pages: a simulation's memory on transparent huge pages.
//
// A large fleet's step reads the records of many sequences and several hash
// tables scattered over hundreds of MB to GB. On 4 KiB pages most of those
// reads also miss the TLB, and the miss is a page walk. glibc's malloc can put
// what it maps on 2 MiB pages. glibc.malloc.hugetlb=1 makes it
// madvise(MADV_HUGEPAGE) every region it maps, which the kernel honours in
// its `madvise` THP mode. glibc.malloc.top_pad makes its heap grow in steps
// large enough that the advice covers whole 2 MiB ranges before they are
// first touched. Without top_pad, most of a fleet's heap stayed on 4 KiB
// pages (README, Fleet scale).
//
// glibc reads its tunables only when a process starts (GLIBC_TUNABLES), so
// the switch executes the process again with them set. The new process puts
// the environment back as the user had it first thing (restore_environment),
// so anything it starts sees no change. Results do not depend on it: only
// where the memory lies changes.
#pragma once

#include <string>

namespace testbed {

// The tunables the switch adds to GLIBC_TUNABLES.
extern const char* const kHugePageTunables;

// Called first thing in main. In the process the switch executed, it puts
// GLIBC_TUNABLES back as it was and remembers that the tunables apply.
void restore_environment_after_huge_pages_exec();

// What applies to this process, for the results file (/run huge_pages): "on"
// (the switch executed it with the tunables), "environment" (the user's
// GLIBC_TUNABLES already sets one of them, so it was left as it is) or "off".
std::string huge_pages_state();

// Why huge pages cannot be had here ("" when they can): the kernel's THP mode
// is `never` or unknown, or glibc is older than 2.35 (no hugetlb tunable).
std::string huge_pages_unavailable_reason();

// driver.huge_pages = on, or auto on a simulated run: executes this process
// again with the tunables. It does not return when it does that. It returns
// at once when the switch ran already, when GLIBC_TUNABLES sets the tunables,
// for off, or for auto when huge pages are unavailable. For on where they are
// unavailable it throws a ConfigError naming driver.huge_pages. When the exec
// itself fails it throws std::runtime_error.
void apply_huge_pages(const std::string& setting, bool simulated);

}  // namespace testbed
