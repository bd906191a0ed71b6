// planned_stream.h (internal) — requested ranges read through a Plan.
//
// A Scheduler reads the plan's physical reads, and a PlannedStream maps
// each result back to the ranges it serves, as zero-copy slices of the
// read's buffer or, for a range spanning split parts, as one assembled copy.
// A physical buffer's budget is held until the last slice of it is released.
//
// Ordered delivery reads the physical reads in plan order, and the plan is
// made run by run (see MakePlanMap), so a read's ranges are consecutive
// requests and at most the reads of the next undelivered range are held
// here. In completion order, a range is handed out as soon as its last read
// arrives.
//
// With per-range errors a failed read does not end the stream: a read that
// served one range (or a part of a split range) is that range's error, and
// the ranges of a read that served several are read again one by one (a
// retry Scheduler of high priority, on the same limiter), so that an error
// reaches only the ranges it affects.
//
// Thread-safety: used by one thread at a time, like its RangeStream.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "limiter/limiter_core.h"
#include "rangeio/reader.h"
#include "rangeio/slice.h"
#include "stream/plan_map.h"
#include "stream/scheduler.h"
#include "stream/stream_base.h"
#include "stream/waker.h"
#include "util/stats_recorder.h"

namespace rangeio::detail {

class PlannedStream final : public StreamBase {
 public:
  // Makes the Scheduler that re-reads `ranges` alone (per-range errors);
  // `describe` names its read k.
  using RetryFactory = std::function<std::shared_ptr<Scheduler>(
      std::vector<ByteRange> ranges,
      std::function<std::string(uint64_t)> describe)>;

  // `hits` (empty, or one entry per range) holds the ranges served from
  // memory, as MakePlanMap was given them. `retry` is set with per-range
  // errors.
  PlannedStream(std::shared_ptr<const PlanMap> map,
                std::vector<std::optional<Slice>> hits, Delivery delivery,
                std::shared_ptr<StatsRecorder> stats,
                std::shared_ptr<LimiterCore> limiter,
                RetryFactory retry = nullptr);
  ~PlannedStream() override { Finish(); }

  // Starts `physical`, the stream of the plan's reads.
  void Start(std::shared_ptr<Scheduler> physical);

  Result<std::optional<RangeResult>> Poll(bool* pending) override;
  void SetListener(std::shared_ptr<StreamListener> listener) override;
  uint64_t RecheckAt() const override;
  void Finish() override;
  size_t size() const override { return map_->ranges.size(); }

 private:
  // The ranges of failed reads, read again one by one.
  struct Retry {
    std::shared_ptr<Scheduler> stream;
    std::vector<uint64_t> ranges;  // read k is of requested range ranges[k]
    bool done = false;
  };

  Result<std::optional<RangeResult>> End();
  Status Fail(Status st);
  std::optional<uint64_t> NextReady();
  Status PollOne(bool* pending);
  bool PollAll();
  void Arrive(RawResult r);
  void FailRead(uint64_t p, const Status& error);
  void Retried(const Retry& retry, RawResult r);
  void StartRetry(std::vector<uint64_t> ranges);
  void Complete(uint64_t i);
  RangeResult Deliver(uint64_t i);
  void Done(uint64_t p);
  Slice Assemble(uint64_t i, const RangeLocation& loc);
  void Flush();

  const std::shared_ptr<const PlanMap> map_;
  // Ranges served from memory (empty when none): handed out in turn.
  std::vector<std::optional<Slice>> hits_;
  const Delivery delivery_;
  const std::shared_ptr<StatsRecorder> stats_;
  const std::shared_ptr<LimiterCore> limiter_;
  const RetryFactory retry_;
  std::shared_ptr<Scheduler> physical_;
  std::vector<std::shared_ptr<Lease>> held_;  // per read, while needed
  std::vector<uint64_t> needs_;    // per read: ranges not yet handed out
  std::vector<uint64_t> missing_;  // per range: reads not yet arrived
  std::deque<uint64_t> ready_;     // as-completed: complete, not handed out
  // Per-range errors: ranges that failed, and ranges read again alone.
  std::unordered_map<uint64_t, Status> failed_;
  std::unordered_map<uint64_t, Slice> retried_;
  std::vector<Retry> retries_;
  // The push driver's listener, or (pull, once a retry runs) a Waker.
  std::shared_ptr<StreamListener> listener_;
  std::shared_ptr<Waker> waker_;
  uint64_t delivered_ = 0;
  uint64_t unflushed_ = 0;
  uint64_t unflushed_bytes_ = 0;
  bool physical_done_ = false;
  Status status_;
};

}  // namespace rangeio::detail
