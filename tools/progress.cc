// progress.cc — see progress.h.
#include "progress.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace rangeio::bench {

struct Progress::Line {
  std::mutex mu;  // guards phase, phase_start and stop
  std::condition_variable cv;
  std::string phase;
  std::chrono::steady_clock::time_point phase_start;
  bool stop = false;
  std::thread thread;  // started by Enable, joined by Done (one caller)
};

Progress::Progress() : line_(std::make_unique<Line>()) {}

Progress& Progress::Get() {
  static Progress p;
  return p;
}

void Progress::Enable(bool on) {
  enabled_.store(on && isatty(STDERR_FILENO) == 1);
  if (!enabled_.load() || line_->thread.joinable()) return;
  {
    std::lock_guard lk(line_->mu);
    line_->stop = false;
    line_->phase_start = std::chrono::steady_clock::now();
  }
  line_->thread = std::thread([this] { Loop(); });
}

void Progress::Phase(const std::string& name) {
  if (!enabled_.load()) return;
  std::lock_guard lk(line_->mu);
  line_->phase = name;
  line_->phase_start = std::chrono::steady_clock::now();
  reads_.store(0);
}

void Progress::Done() {
  {
    std::lock_guard lk(line_->mu);
    line_->stop = true;
    line_->cv.notify_all();
  }
  if (line_->thread.joinable()) line_->thread.join();
  if (enabled_.exchange(false)) std::fputs("\r\033[K", stderr);
}

Progress::~Progress() { Done(); }

void Progress::Loop() {
  using Clock = std::chrono::steady_clock;
  constexpr auto kTick = std::chrono::milliseconds(500);
  uint64_t last_reads = 0;
  Clock::time_point last = Clock::now();
  std::unique_lock lk(line_->mu);
  while (!line_->stop) {
    line_->cv.wait_for(lk, kTick);
    if (line_->stop) break;
    const Clock::time_point now = Clock::now();
    const uint64_t reads = reads_.load(std::memory_order_relaxed);
    const double dt = std::chrono::duration<double>(now - last).count();
    const double rate =
        reads >= last_reads && dt > 0 ? (reads - last_reads) / dt : 0;
    const double elapsed =
        std::chrono::duration<double>(now - line_->phase_start).count();
    std::fprintf(stderr, "\r\033[K%s: %.1f s, %llu reads, %.0f reads/s",
                 line_->phase.c_str(), elapsed,
                 static_cast<unsigned long long>(reads), rate);
    std::fflush(stderr);
    last_reads = reads;
    last = now;
  }
}

}  // namespace rangeio::bench
