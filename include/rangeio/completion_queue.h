// rangeio/completion_queue.h — the results of many asynchronous reads on
// one handle that consumer threads wait on.
//
// Push delivery hands each result to a callback on the thread that
// completes it (range_stream.h, batch.h). A consumer that wants to take
// results on its own thread instead (a binding's event loop, a thread pool,
// a caller that multiplexes many requests) points those callbacks at a
// CompletionQueue and waits on it: a pollable handle. Results wait here
// with their Slices, so they hold response budget until taken and
// released; Close() drops them and every later one.
//
//   auto queue = CompletionQueue::Make();
//   batched->ReadAsync(range, queue->Callback(tag));
//   for (auto& c : queue->Wait(std::chrono::seconds(1))) Use(c.tag, c.result);
//
// Thread-safety: thread-safe; any number of producers and consumers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "rangeio/export.h"
#include "rangeio/range_stream.h"
#include "rangeio/slice.h"
#include "rangeio/status.h"

namespace rangeio {

class RANGEIO_EXPORT CompletionQueue
    : public std::enable_shared_from_this<CompletionQueue> {
 public:
  struct Completion {
    uint64_t tag = 0;
    Result<Slice> result = Slice();
  };

  static std::shared_ptr<CompletionQueue> Make();
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Queues one result under `tag` (dropped at once once closed).
  void Push(uint64_t tag, Result<Slice> result);
  // A callback for BatchedReader::ReadAsync and BlobHandle::ReadAsync that
  // queues its result under `tag`; it keeps the queue alive.
  std::function<void(Result<Slice>)> Callback(uint64_t tag);
  // ReadOptions whose results are queued under tag_base + their index
  // (errors with per_range_errors; without, the error that ends the stream
  // is queued under `end_tag`, and a clean end is not queued).
  ReadOptions Options(uint64_t tag_base, uint64_t end_tag,
                      ReadOptions options = {});

  // Takes up to `max` queued completions, oldest first, waiting up to
  // `timeout` for the first; empty when none came or the queue is closed.
  std::vector<Completion> Wait(std::chrono::nanoseconds timeout,
                               size_t max = SIZE_MAX);
  // Wait without waiting.
  std::vector<Completion> TryTake(size_t max = SIZE_MAX);

  // Drops what is queued (its budget goes back) and every later result;
  // wakes the threads in Wait. Idempotent.
  void Close();
  bool closed() const;
  size_t size() const;  // completions queued now

 private:
  CompletionQueue();
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace rangeio
