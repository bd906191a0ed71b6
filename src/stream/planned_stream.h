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
// Thread-safety: used by one thread at a time, like its RangeStream.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "limiter/limiter_core.h"
#include "rangeio/reader.h"
#include "rangeio/slice.h"
#include "util/stats_recorder.h"
#include "stream/plan_map.h"
#include "stream/scheduler.h"
#include "stream/stream_base.h"

namespace rangeio::detail {

class PlannedStream final : public StreamBase {
 public:
  // `hits` (empty, or one entry per range) holds the ranges served from
  // memory, as MakePlanMap was given them.
  PlannedStream(std::shared_ptr<const PlanMap> map,
                std::vector<std::optional<Slice>> hits, Delivery delivery,
                std::shared_ptr<StatsRecorder> stats,
                std::shared_ptr<LimiterCore> limiter);
  ~PlannedStream() override { Finish(); }

  // Starts `physical`, the stream of the plan's reads.
  void Start(std::shared_ptr<Scheduler> physical);

  Result<std::optional<RangeResult>> Next() override { return Poll(nullptr); }
  Result<std::optional<RangeResult>> Poll(bool* pending) override;
  void SetWaker(std::shared_ptr<Waker> waker) override {
    physical_->SetWaker(std::move(waker));
  }
  void Finish() override;
  size_t size() const override { return map_->ranges.size(); }

 private:
  Result<std::optional<RangeResult>> End();
  Status Fail(Status st);
  std::optional<uint64_t> NextReady();
  void Arrive(RawResult r);
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
  std::shared_ptr<Scheduler> physical_;
  std::vector<std::shared_ptr<Lease>> held_;  // per read, while needed
  std::vector<uint64_t> needs_;    // per read: ranges not yet handed out
  std::vector<uint64_t> missing_;  // per range: reads not yet arrived
  std::deque<uint64_t> ready_;     // as-completed: complete, not handed out
  uint64_t delivered_ = 0;
  uint64_t unflushed_ = 0;
  uint64_t unflushed_bytes_ = 0;
  bool physical_done_ = false;
  Status status_;
};

}  // namespace rangeio::detail
