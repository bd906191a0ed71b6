// serialized_batches.h — the cross-caller batching Lance had before its
// fix, on the public API: each drained batch waits until the previous
// batch's reads (on every source) have completed before its own start.
//
// One dispatcher thread drains the requests queued while the previous batch
// is in flight, waits for that batch to finish, then reads the drained batch
// (one pushed stream per source, as rangeio::BatchedReader does). Closed-loop
// callers settle into two cohorts whose batches alternate, each waiting for
// the other's slowest read: what bench blob's "serialized" rows measure
// against BatchedReader's "dispatched" ones.
//
// Thread-safety: thread-safe. Destruction waits for the requests queued.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "rangeio/reader.h"

namespace rangeio::bench {

class SerializedBatches {
 public:
  // Source i is read through readers[i].
  explicit SerializedBatches(std::vector<Reader> readers);
  ~SerializedBatches();
  SerializedBatches(const SerializedBatches&) = delete;
  SerializedBatches& operator=(const SerializedBatches&) = delete;

  // Blocks until the range's bytes (or its error) are there.
  Result<Slice> Read(size_t source, ByteRange range);

  size_t source_count() const { return readers_.size(); }
  // Batches drained so far (each waits for the one before it).
  uint64_t batches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  const Reader& reader(size_t source) const { return readers_[source]; }

 private:
  struct Request {
    size_t source;
    ByteRange range;
    std::function<void(Result<Slice>)> done;
  };
  void Run();
  void ReadBatch(std::vector<Request> batch);

  const std::vector<Reader> readers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> pending_;
  size_t in_flight_ = 0;  // requests of the batch being read
  uint64_t batches_ = 0;
  bool stop_ = false;
  std::thread dispatcher_;  // last: starts after the fields it reads
};

}  // namespace rangeio::bench
