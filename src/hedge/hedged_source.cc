// hedged_source.cc — hedged reads: the per-source state (HedgeCore), the
// one timer thread that fires every source's hedges (HedgeTimer), and the
// Source facade. The rule is in hedged_source.h.
#include "hedge/hedged_source.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/clock.h"
#include "hedge/latency_tracker.h"
#include "util/mutex.h"
#include "rangeio/planner.h"
#include "util/thread_name.h"

namespace rangeio::detail {
namespace {

class HedgeCore;

// Every hedged source's deadlines, served by one process-wide thread: a
// source costs no thread of its own, and a batch of reads (one ReadMany)
// one heap entry. An entry holds its source's state weakly: a source whose
// reads have all completed is not kept alive by its pending deadlines.
class HedgeTimer {
 public:
  static HedgeTimer& Get() {
    // Leaked on purpose: sources may outlive static destruction.
    static auto* timer =
        new HedgeTimer;  // NOLINT(cppcoreguidelines-owning-memory)
    return *timer;
  }

  // Calls core->Fire(first, n) at `due_ns` (NowNanos), if it still exists.
  void Add(uint64_t due_ns, std::weak_ptr<HedgeCore> core, uint64_t first,
           uint64_t n) EXCLUDES(mu_) {
    bool wake = false;
    {
      MutexLock lk(mu_);
      wake = heap_.empty() || due_ns < heap_.front().due_ns;
      heap_.push_back({due_ns, std::move(core), first, n});
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
    if (wake) cv_.NotifyOne();
  }

 private:
  struct Entry {
    uint64_t due_ns;
    std::weak_ptr<HedgeCore> core;
    uint64_t first;
    uint64_t n;
    bool operator>(const Entry& o) const { return due_ns > o.due_ns; }
  };

  HedgeTimer() {
    std::thread([this] {
      NameThisThread("rio-hedge");
      Run();
    }).detach();
  }

  void Run() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::vector<Entry> heap_ GUARDED_BY(mu_);  // min-heap on due_ns
};

class HedgeCore final : public ReadSink,
                        public std::enable_shared_from_this<HedgeCore> {
 public:
  // `hedge=auto`: the percentile of recent latency a read must outlast.
  // Not p95 ("The Tail at Scale"): that hedges 5% of reads even with no
  // straggler at all, where issue 17 allows 3%; p98 hedges about 2%.
  static constexpr double kAutoPercentile = 0.98;
  // Never sooner: below a millisecond a read is a page-cache or local
  // device read, where a second copy joins the same queue and wins nothing.
  static constexpr uint64_t kFloorNanos = 1'000'000;
  // Fewer samples put a 98th percentile on fewer than 2 reads.
  static constexpr uint64_t kMinSamples = 100;
  // The cached auto delay is recomputed every this many samples (a scan of
  // 976 buckets).
  static constexpr uint32_t kRefreshEvery = 32;
  // A hedge that found no room is retried after delay / 4 (at least the
  // floor): soon enough to still cut a 10x straggler's tail, rarely enough
  // that the timer stays a small cost per outstanding read.
  static constexpr uint64_t kRetryDivisor = 4;

  HedgeCore(std::shared_ptr<Source> inner, const ReaderOptions& options,
            std::shared_ptr<LimiterCore> limiter,
            std::shared_ptr<StatsRecorder> stats)
      : inner_(std::move(inner)),
        limiter_(std::move(limiter)),
        stats_(std::move(stats)),
        auto_(options.hedge == ReaderOptions::Hedge::kAuto),
        fixed_ns_(static_cast<uint64_t>(
            std::chrono::nanoseconds(options.hedge_after).count())),
        budget_(options.hedge_budget) {}

  Source& inner() const { return *inner_; }

  // Issues `reads` for `sink` and arms their hedge deadline.
  void Issue(std::span<const ReadRequest> reads, ReadSink* sink) EXCLUDES(mu_);
  // The hedge deadline of reads [first, first + n) has passed.
  void Fire(uint64_t first, uint64_t n) EXCLUDES(mu_);

  // ReadSink, for both copies: tag = 2 * id + copy (0 primary, 1 hedge).
  void OnReadDone(uint64_t tag, Result<Slice> bytes) override EXCLUDES(mu_);

  std::string Describe() const EXCLUDES(mu_);

  // Source::CancelReads: every copy of `sink`'s undecided reads is
  // cancelled in the backend; each read then ends as its last copy does.
  void CancelFor(const ReadSink* sink) EXCLUDES(mu_) {
    std::vector<uint64_t> tags;
    {
      MutexLock lk(mu_);
      for (const auto& [id, p] : pending_) {
        if (p.sink != sink || p.decided) continue;
        for (uint64_t c = 0; c < 2; ++c) {
          if (p.out & (1u << c)) tags.push_back(2 * id + c);
        }
      }
    }
    for (uint64_t tag : tags) inner_->Cancel(this, tag);
  }

 private:
  struct Pending {
    ReadSink* sink;
    uint64_t tag;
    ByteRange range;
    uint64_t start_ns;
    uint8_t out = 1;  // bit c: copy c is in the backend
    bool decided = false;
    bool hedged = false;
  };

  uint64_t DelayLocked() const REQUIRES(mu_) {
    if (!auto_) return fixed_ns_;
    if (tracker_.weight() < kMinSamples) return 0;  // not yet: no hedge
    return std::max(kFloorNanos, auto_ns_);
  }
  bool BudgetAllowsLocked() const REQUIRES(mu_) {
    return static_cast<double>(hedges_ + 1) <=
           budget_ * static_cast<double>(primaries_);
  }
  void RecordLocked(uint64_t nanos) REQUIRES(mu_) {
    tracker_.Record(nanos);
    if (++since_refresh_ >= kRefreshEvery) {
      since_refresh_ = 0;
      auto_ns_ = tracker_.Percentile(kAutoPercentile);
    }
  }

  const std::shared_ptr<Source> inner_;
  const std::shared_ptr<LimiterCore> limiter_;
  const std::shared_ptr<StatsRecorder> stats_;
  const bool auto_;
  const uint64_t fixed_ns_;
  const double budget_;

  mutable Mutex mu_;
  std::unordered_map<uint64_t, Pending> pending_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 0;
  uint64_t primaries_ GUARDED_BY(mu_) = 0;  // reads issued
  uint64_t hedges_ GUARDED_BY(mu_) = 0;     // hedges issued
  uint64_t won_ GUARDED_BY(mu_) = 0;
  LatencyTracker tracker_ GUARDED_BY(mu_);
  uint64_t auto_ns_ GUARDED_BY(mu_) = 0;
  uint32_t since_refresh_ GUARDED_BY(mu_) = 0;
  // Held while any read is in the backend: completions land on live state.
  std::shared_ptr<HedgeCore> self_ GUARDED_BY(mu_);
};

void HedgeTimer::Run() {
  MutexLock lk(mu_);
  for (;;) {
    if (heap_.empty()) {
      cv_.Wait(lk);
      continue;
    }
    const uint64_t now = NowNanos();
    const uint64_t due = heap_.front().due_ns;
    if (now < due) {
      cv_.WaitFor(lk, std::chrono::nanoseconds(due - now));
      continue;
    }
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    Entry e = std::move(heap_.back());
    heap_.pop_back();
    lk.Unlock();
    if (std::shared_ptr<HedgeCore> core = e.core.lock()) {
      core->Fire(e.first, e.n);
    }
    lk.Lock();
  }
}

void HedgeCore::Issue(std::span<const ReadRequest> reads, ReadSink* sink) {
  constexpr size_t kBatch = 64;
  std::array<ReadRequest, kBatch> copies;
  while (!reads.empty()) {
    const size_t k = std::min(reads.size(), kBatch);
    const uint64_t now = NowNanos();
    uint64_t first = 0;
    uint64_t delay = 0;
    {
      MutexLock lk(mu_);
      if (pending_.empty()) self_ = shared_from_this();
      first = next_id_;
      next_id_ += k;
      primaries_ += k;
      for (size_t j = 0; j < k; ++j) {
        pending_.emplace(first + j,
                         Pending{sink, reads[j].tag, reads[j].range, now});
        copies[j] = {reads[j].range, 2 * (first + j)};
      }
      delay = DelayLocked();
    }
    inner_->ReadMany({copies.data(), k}, this);
    // Armed once the reads are out, so no hedge reaches the backend before
    // its primary; a read that completed meanwhile leaves it nothing to do.
    if (delay != 0) {
      HedgeTimer::Get().Add(now + delay, weak_from_this(), first, k);
    }
    reads = reads.subspan(k);
  }
}

// A read whose hedge finds the budget spent or the reserve taken is looked
// at again a little later (a straggler stays one), while it is outstanding.
void HedgeCore::Fire(uint64_t first, uint64_t n) {
  std::vector<ReadRequest> hedges;
  std::vector<uint64_t> later;
  uint64_t bytes = 0;
  uint64_t retry_ns = 0;
  {
    MutexLock lk(mu_);
    retry_ns = std::max(kFloorNanos, DelayLocked() / kRetryDivisor);
    bool room = true;
    for (uint64_t id = first; id < first + n; ++id) {
      auto it = pending_.find(id);
      if (it == pending_.end()) continue;
      Pending& p = it->second;
      if (p.decided || p.hedged || p.range.length == 0) continue;
      room = room && BudgetAllowsLocked() &&
             limiter_->TryAcquireHedge(p.range.length);
      if (!room) {
        later.push_back(id);
        continue;
      }
      p.hedged = true;
      p.out |= 2;
      ++hedges_;
      bytes += p.range.length;
      hedges.push_back({p.range, 2 * id + 1});
    }
  }
  const uint64_t at = NowNanos() + retry_ns;
  for (uint64_t id : later) HedgeTimer::Get().Add(at, weak_from_this(), id, 1);
  if (hedges.empty()) return;
  limiter_->RecordHedges(hedges.size(), 0, bytes);
  stats_->RecordHedges(hedges.size(), 0, bytes);
  inner_->ReadMany(hedges, this);
}

void HedgeCore::OnReadDone(uint64_t tag, Result<Slice> bytes) {
  const uint64_t id = tag / 2;
  const unsigned copy = tag % 2;
  const uint64_t now = NowNanos();
  ReadSink* deliver = nullptr;
  uint64_t outer_tag = 0;
  bool cancel_other = false;
  bool won = false;
  bool release = false;  // hand the hedge reserve permit back
  uint64_t length = 0;
  std::shared_ptr<HedgeCore> holder;  // keeps this alive to the end
  {
    MutexLock lk(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // cannot happen: one call per copy
    Pending& p = it->second;
    p.out &= ~(1u << copy);
    if (!p.decided && (bytes.ok() || p.out == 0)) {
      p.decided = true;
      deliver = p.sink;
      outer_tag = p.tag;
      won = copy == 1;
      won_ += won ? 1 : 0;
      // One sample per read: the primary's latency, or, when the hedge won,
      // how long the primary had been out (a lower bound on a straggler).
      RecordLocked(now - p.start_ns);
      cancel_other = p.out != 0;
    }
    if (p.out == 0) {
      release = p.hedged;
      length = p.range.length;
      pending_.erase(it);
      if (pending_.empty()) holder = std::move(self_);
    } else if (cancel_other) {
      holder = self_;  // the loser's completion may run inside Cancel
    }
  }
  if (deliver != nullptr) {
    deliver->OnReadDone(outer_tag, std::move(bytes));
  } else {
    bytes = Slice();  // a loser's bytes: freed now
  }
  if (won) {
    limiter_->RecordHedges(0, 1, 0);
    stats_->RecordHedges(0, 1, 0);
  }
  if (cancel_other) inner_->Cancel(this, tag ^ 1);
  if (release) limiter_->ReleaseHedge(length);
}

std::string HedgeCore::Describe() const {
  MutexLock lk(mu_);
  std::string rule = auto_
                         ? "auto (p98, floor 1 ms, now " +
                               std::to_string(DelayLocked() / 1000) + " us)"
                         : "after " + std::to_string(fixed_ns_ / 1000) + " us";
  return "hedged " + rule + ", budget " + std::to_string(budget_) + ": " +
         std::to_string(hedges_) + " hedges of " + std::to_string(primaries_) +
         " reads, " + std::to_string(won_) + " won";
}

class HedgedSource final : public Source {
 public:
  explicit HedgedSource(std::shared_ptr<HedgeCore> core)
      : core_(std::move(core)) {}

  const std::string& name() const override { return core_->inner().name(); }
  Result<uint64_t> Size() override { return core_->inner().Size(); }
  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    const ReadRequest r{range, tag};
    core_->Issue({&r, 1}, sink);
  }
  void ReadMany(std::span<const ReadRequest> reads, ReadSink* sink) override {
    core_->Issue(reads, sink);
  }
  size_t ReadCached(std::span<const ByteRange> ranges,
                    std::vector<std::optional<Slice>>* out) override {
    return core_->inner().ReadCached(ranges, out);
  }
  size_t Assist(size_t max_reads) override {
    return core_->inner().Assist(max_reads);
  }
  void Cancel(ReadSink* sink, uint64_t tag) override {
    if (tag == kAllReads) core_->CancelFor(sink);
  }
  SourceInfo Info() const override {
    SourceInfo info = core_->inner().Info();
    info.description =
        (info.description.empty() ? "" : info.description + "; ") +
        core_->Describe();
    return info;
  }

 private:
  const std::shared_ptr<HedgeCore> core_;
};

}  // namespace

std::shared_ptr<Source> MakeHedgedSource(std::shared_ptr<Source> inner,
                                         const ReaderOptions& options,
                                         std::shared_ptr<LimiterCore> limiter,
                                         std::shared_ptr<StatsRecorder> stats) {
  return std::make_shared<HedgedSource>(std::make_shared<HedgeCore>(
      std::move(inner), options, std::move(limiter), std::move(stats)));
}

}  // namespace rangeio::detail
