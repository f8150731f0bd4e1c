#include "engine/common/pending_files.h"

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

#include <unistd.h>

namespace testbed {
namespace {

// Fixed storage: a signal handler may neither allocate nor lock.
constexpr int kSlots = 64;
constexpr size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<bool> g_used[kSlots];
std::mutex g_mutex;  // registration only (never taken by the handler)

void on_signal(int sig) {
  remove_pending_files();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void remove_pending_files() {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load()) ::unlink(g_paths[i]);
}

void remove_pending_files_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_signal);
}

PendingFile::PendingFile(std::string path) : path_(std::move(path)) {
  if (path_.size() >= kPathMax) return;  // not removable on a signal; still written and renamed as usual
  std::lock_guard<std::mutex> lock(g_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load()) continue;
    std::memcpy(g_paths[i], path_.c_str(), path_.size() + 1);
    g_used[i].store(true);
    slot_ = i;
    return;
  }
}

PendingFile::~PendingFile() {
  if (slot_ >= 0) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_used[slot_].store(false);
  }
  if (!done_) ::unlink(path_.c_str());
}

}  // namespace testbed
