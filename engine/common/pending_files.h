// Files being written that are not results yet (PATH.tmp before its rename).
// Whoever creates one registers it, and unregisters it once renamed into place
// or removed; on SIGINT, SIGTERM or SIGHUP, or when the CLI's last-resort
// handler runs, every registered file is removed, so an interrupted run leaves
// no unreadable half-written file behind.
//
//   PendingFile tmp(path + ".tmp");   // registered for its lifetime
//   ... write tmp.path() ..., rename it, tmp.done();   // else the destructor removes it
#pragma once

#include <string>

namespace testbed {

// Async-signal-safe removal of every registered file (the signal handler calls it).
void remove_pending_files();
// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove the pending files
// and then die of the signal as before (the shell sees the usual status).
void remove_pending_files_on_signals();

class PendingFile {
 public:
  explicit PendingFile(std::string path);
  ~PendingFile();  // unregisters, and removes the file unless done()
  void done() { done_ = true; }  // renamed into place (or removed): nothing left to clean up
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int slot_ = -1;
  bool done_ = false;
};

}  // namespace testbed
