#include "serialized_batches.h"

#include <future>
#include <optional>
#include <utility>

namespace rangeio::bench {

SerializedBatches::SerializedBatches(std::vector<Reader> readers)
    : readers_(std::move(readers)), dispatcher_([this] { Run(); }) {}

SerializedBatches::~SerializedBatches() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  dispatcher_.join();
}

Result<Slice> SerializedBatches::Read(size_t source, ByteRange range) {
  if (source >= readers_.size()) {
    return Status::InvalidArgument("no source " + std::to_string(source));
  }
  auto promise = std::make_shared<std::promise<Result<Slice>>>();
  std::future<Result<Slice>> f = promise->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({source, range, [promise](Result<Slice> r) {
                          promise->set_value(std::move(r));
                        }});
  }
  cv_.notify_all();
  return f.get();
}

// Drains what queued while the previous batch was read, then waits for that
// batch to finish before reading the drained one.
void SerializedBatches::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopped, nothing queued
    std::vector<Request> batch(std::make_move_iterator(pending_.begin()),
                               std::make_move_iterator(pending_.end()));
    pending_.clear();
    ++batches_;
    cv_.wait(lock, [&] { return in_flight_ == 0; });
    in_flight_ = batch.size();
    lock.unlock();
    ReadBatch(std::move(batch));
    lock.lock();
  }
}

namespace {

// One source's part of a batch: its requests, which of them were answered
// (by its callbacks, which never overlap), and its stream, held until the
// end.
struct Group {
  std::vector<size_t> members;
  std::vector<bool> delivered;
  std::mutex mu;
  std::optional<RangeStream> stream;  // guarded by mu
  bool ended = false;                 // guarded by mu
};

}  // namespace

// One pushed stream per source; each result goes to its caller and, with
// the batch's last, lets the next batch start.
void SerializedBatches::ReadBatch(std::vector<Request> batch) {
  auto requests = std::make_shared<std::vector<Request>>(std::move(batch));
  auto finished = [this](size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_ -= n;
    if (in_flight_ == 0) cv_.notify_all();
  };
  for (size_t s = 0; s < readers_.size(); ++s) {
    auto g = std::make_shared<Group>();
    std::vector<ByteRange> ranges;
    for (size_t i = 0; i < requests->size(); ++i) {
      if ((*requests)[i].source != s) continue;
      g->members.push_back(i);
      ranges.push_back((*requests)[i].range);
    }
    if (ranges.empty()) continue;
    g->delivered.assign(ranges.size(), false);
    ReadOptions o;
    o.delivery = Delivery::kAsCompleted;
    o.per_range_errors = true;
    o.on_result = [requests, g, finished](RangeResult r) {
      g->delivered[r.index] = true;
      Request& req = (*requests)[g->members[r.index]];
      req.done(r.status.ok() ? Result<Slice>(std::move(r.bytes))
                             : Result<Slice>(std::move(r.status)));
      finished(1);
    };
    o.on_end = [requests, g, finished](const Status& st) {
      for (size_t j = 0; j < g->members.size(); ++j) {
        if (g->delivered[j]) continue;
        (*requests)[g->members[j]].done(
            st.ok() ? Status::Internal("stream ended without this range") : st);
        finished(1);
      }
      std::optional<RangeStream> ended;  // dropped outside the lock
      std::lock_guard<std::mutex> lock(g->mu);
      g->ended = true;
      ended.swap(g->stream);
    };
    Result<RangeStream> started = readers_[s].ReadRanges(ranges, o);
    if (!started.ok()) {
      for (size_t i : g->members) (*requests)[i].done(started.status());
      finished(g->members.size());
      continue;
    }
    std::lock_guard<std::mutex> lock(g->mu);
    if (!g->ended) g->stream.emplace(std::move(*started));
  }
}

}  // namespace rangeio::bench
