// tests/support/collecting_sink.h — a ReadSink that records completions.
//
// For testing a Source directly: records each OnReadDone by tag, counts
// duplicate completions, notes which thread completed each read, and lets
// the test wait for a number of completions.
//
// Thread-safety: OnReadDone may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "rangeio/source.h"

namespace rangeio::testing {

class CollectingSink final : public ReadSink {
 public:
  struct Done {
    Result<Slice> bytes = Status::Internal("unset");
    std::thread::id thread;
    std::chrono::steady_clock::time_point at;
  };

  void OnReadDone(uint64_t tag, Result<Slice> bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.count(tag)) ++duplicates_;
    done_[tag] = Done{std::move(bytes), std::this_thread::get_id(),
                      std::chrono::steady_clock::now()};
    order_.push_back(tag);
    cv_.notify_all();
  }

  bool WaitFor(size_t n,
               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done_.size() >= n; });
  }

  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_.size();
  }
  size_t duplicates() const {
    std::lock_guard<std::mutex> lock(mu_);
    return duplicates_;
  }
  // Precondition: tag completed.
  Done Get(uint64_t tag) const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_.at(tag);
  }
  bool Has(uint64_t tag) const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_.count(tag) != 0;
  }
  std::vector<uint64_t> order() const {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Done> done_;
  std::vector<uint64_t> order_;
  size_t duplicates_ = 0;
};

}  // namespace rangeio::testing
