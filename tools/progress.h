// progress.h — the one updating status line of a long benchmark run.
//
// When enabled (stderr is a terminal and --quiet was not given), a thread
// rewrites one line on stderr every half second: the phase running, its
// elapsed time, the reads done in it and the rate over the last interval.
// Disabled, every call is a no-op, so scenarios call it unconditionally and
// piped or CI output stays clean.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace rangeio::bench {

class Progress {
 public:
  // The process's reporter (scenarios and the CLI share it).
  static Progress& Get();

  // Turns the line on or off; on only takes effect when stderr is a tty.
  void Enable(bool on);
  // A new phase ("http: rangeio"): its clock and read count start at 0.
  void Phase(const std::string& name);
  void AddReads(uint64_t n) {
    if (enabled_.load(std::memory_order_relaxed)) {
      reads_.fetch_add(n, std::memory_order_relaxed);
    }
  }
  // Clears the line and stops the thread (before printing a table).
  void Done();

  ~Progress();

 private:
  struct Line;  // the printing thread and what it prints (progress.cc)
  Progress();
  void Loop();
  std::atomic<bool> enabled_{false};
  std::atomic<uint64_t> reads_{0};
  const std::unique_ptr<Line> line_;
};

}  // namespace rangeio::bench
