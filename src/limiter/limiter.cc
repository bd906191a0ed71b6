#include "rangeio/limiter.h"

#include <algorithm>

#include "limiter/limiter_core.h"

namespace rangeio {
namespace detail {

LimiterCore::LimiterCore(uint32_t io_concurrency, uint32_t budget_count,
                         uint64_t budget_bytes, uint32_t hedge_reserve)
    : io_(io_concurrency),
      count_(budget_count),
      bytes_(budget_bytes),
      hedge_reserve_(hedge_reserve) {}

// A pump in progress on this thread: the limiter, its reusable grant list,
// and the reads that completed inline during its OnGrant calls.
struct LimiterCore::PumpFrame {
  const LimiterCore* core = nullptr;
  std::vector<Grant> grants;
  uint64_t done = 0;     // permits of reads that completed inline
  bool recheck = false;  // a pump re-entered: the queue may admit more
};

namespace {
// Limiters this thread is pumping right now, innermost last. A pump
// re-entered on the same thread (an inline completion inside OnGrant)
// returns at once: the outer loop re-checks the queue after its grants, so
// nothing is lost and the stack does not grow with the number of inline
// completions. Other threads pump concurrently: admission decisions are made
// under the lock, the reads themselves are issued outside it, in parallel;
// whatever another thread frees while this one issues, it admits itself.
// Frames are reused (a deque keeps references stable as depth grows).
thread_local std::deque<LimiterCore::PumpFrame> tls_frames;
thread_local size_t tls_depth = 0;

LimiterCore::PumpFrame* FrameOf(const LimiterCore* core) {
  for (size_t i = 0; i < tls_depth; ++i) {
    if (tls_frames[i].core == core) return &tls_frames[i];
  }
  return nullptr;
}
}  // namespace

// A read fits when an I/O permit is free and the budget takes one more
// response of `cost` bytes. A read larger than the whole byte budget fits
// only when nothing else is retained, so it is admitted alone and never
// deadlocks.
bool LimiterCore::Fits(uint64_t cost) const {
  if (in_flight_ >= io_ || retained_count_ >= count_) return false;
  if (cost > bytes_) return retained_count_ == 0;
  return retained_bytes_ + cost <= bytes_;
}

void LimiterCore::Extend(const std::shared_ptr<PermitClient>& c,
                         uint64_t count) {
  mu_.Lock();
  c->stop_ = std::min(c->total_, c->next_ + count);
  if (c->next_ >= c->stop_ || c->queued_) {
    mu_.Unlock();
    return;
  }
  c->queued_ = true;
  queue_.push_back(c);
  if (c->high_priority_.load(std::memory_order_relaxed)) ++high_queued_;
  stats_.waiting_streams = queue_.size();
  PumpAndUnlock();
}

void LimiterCore::Withdraw(PermitClient* c) {
  MutexLock lk(mu_);
  c->stop_ = c->next_;
  if (!c->queued_) return;
  c->queued_ = false;
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [c](const auto& q) { return q.get() == c; });
  if (it != queue_.end()) EraseLocked(it);
  stats_.waiting_streams = queue_.size();
}

void LimiterCore::EraseLocked(
    const std::deque<std::shared_ptr<PermitClient>>::iterator& it) {
  if ((*it)->high_priority_.load(std::memory_order_relaxed)) --high_queued_;
  queue_.erase(it);
}

// A read that completed inside this thread's own pump of this limiter hands
// its permit back when that pump re-takes the lock, right after the OnGrant
// call that issued it returns: one lock round-trip fewer per inline read.
void LimiterCore::ReadsDone(size_t n) {
  if (PumpFrame* f = FrameOf(this)) {
    f->done += n;
    return;
  }
  mu_.LockSpinning();
  in_flight_ -= n;
  PumpAndUnlock();
}

void LimiterCore::RecordReads(const uint64_t* latency_ns, size_t n,
                              uint64_t bytes, uint64_t errors) {
  MutexLock lk(mu_);
  StatsRecorder::AddReads(&stats_, latency_ns, n, bytes, errors);
}

// Hands back the limiter's hold on itself when the last retained response
// goes; the caller destroys it after unlocking (it may free this).
std::shared_ptr<LimiterCore> LimiterCore::ReleaseResponsesLocked(
    uint64_t n, uint64_t bytes) {
  retained_count_ -= n;
  retained_bytes_ -= bytes;
  return retained_count_ == 0 ? std::move(self_) : nullptr;
}

void LimiterCore::ReleaseResponses(uint64_t n, uint64_t bytes) {
  std::shared_ptr<LimiterCore> self;  // destroyed last: may free this
  mu_.LockSpinning();
  self = ReleaseResponsesLocked(n, bytes);
  PumpAndUnlock();
}

void LimiterCore::ReturnUnused(uint64_t bytes) {
  std::shared_ptr<LimiterCore> self;  // destroyed last: may free this
  mu_.LockSpinning();
  --in_flight_;
  ++stats_.reads_cancelled;
  self = ReleaseResponsesLocked(1, bytes);
  PumpAndUnlock();
}

void LimiterCore::RecordDelivered(uint64_t ranges, uint64_t bytes,
                                  uint64_t cancelled) {
  MutexLock lk(mu_);
  StatsRecorder::AddDelivered(&stats_, ranges, bytes, cancelled);
}

// The waiting client with the fewest undelivered results, the first such in
// queue order (a served client moves to the back, so ties go round-robin).
// Max-min fair shares of the response budget: a stream whose consumer keeps
// up is never starved by streams whose results pile up, which is what keeps
// one thread merging k streams live (with a budget of at least 2k), and no
// single huge request can take the whole window.
std::deque<std::shared_ptr<PermitClient>>::iterator
LimiterCore::NextClientLocked() {
  auto best = queue_.begin();
  if (queue_.size() == 1) return best;
  // A high-priority client (a read its caller blocks on) goes before all
  // others; several go round-robin among themselves. The count spares the
  // scan when there is none, as there mostly is not.
  for (auto it = queue_.begin(); high_queued_ > 0 && it != queue_.end(); ++it) {
    if ((*it)->high_priority_.load(std::memory_order_relaxed)) return it;
  }
  uint64_t least = (*best)->UndeliveredLocked();
  for (auto it = std::next(best); it != queue_.end() && least > 0; ++it) {
    const uint64_t u = (*it)->UndeliveredLocked();
    if (u < least) {
      least = u;
      best = it;
    }
  }
  return best;
}

// Admits as much as fits, one read per turn while several clients wait (a
// lone client takes everything that fits in one pass, up to its pass
// limit), and issues the grants with mu_ dropped. It takes mu_ again only
// when its own grants left something to admit: a full pass, or reads that
// completed (or responses released) inline on this thread meanwhile. What
// other threads free, they pump themselves.
void LimiterCore::PumpAndUnlock() {
  if (PumpFrame* outer = FrameOf(this)) {
    outer->recheck = true;
    mu_.Unlock();
    return;
  }
  if (tls_frames.size() <= tls_depth) tls_frames.emplace_back();
  PumpFrame& frame = tls_frames[tls_depth++];
  frame.core = this;
  std::vector<Grant>& grants = frame.grants;
  for (;;) {
    bool pass_full = false;
    while (AdmitOneLocked(grants, &pass_full)) {
    }
    if (grants.empty()) break;
    mu_.Unlock();
    frame.recheck = false;
    for (const Grant& g : grants) g.client->OnGrant(g.first, g.n);
    grants.clear();
    if (!pass_full && frame.done == 0 && !frame.recheck) {
      frame.core = nullptr;
      --tls_depth;
      return;
    }
    mu_.LockSpinning();
    ApplyInlineDoneLocked(frame);
  }
  frame.core = nullptr;
  --tls_depth;
  mu_.Unlock();
}

// Admits one read of the chosen client, adding it to `grants`; false when
// the queue is empty, the read does not fit or the client's pass is full
// (then *pass_full is set).
// The chosen client is served first even when another's read would fit:
// skipping it would let small reads starve a large one. A paused client
// leaves the queue when its turn comes.
bool LimiterCore::AdmitOneLocked(std::vector<Grant>& grants, bool* pass_full) {
  if (queue_.empty()) return false;
  const auto it = NextClientLocked();
  PermitClient* c = it->get();
  if (c->paused_.load(std::memory_order_acquire)) {
    c->queued_ = false;  // until it extends again
    EraseLocked(it);
    stats_.waiting_streams = queue_.size();
    return true;
  }
  const uint64_t cost = c->CostOf(c->next_);
  if (!Fits(cost)) return false;
  ++in_flight_;
  // Retained responses outlive every reader and handle (slices hold them):
  // the limiter keeps itself alive while any is retained.
  if (retained_count_++ == 0) self_ = shared_from_this();
  retained_bytes_ += cost;
  UpdatePeaksLocked();
  if (!grants.empty() && grants.back().client.get() == c &&
      grants.back().first + grants.back().n == c->next_) {
    ++grants.back().n;
  } else {
    grants.push_back({*it, c->next_, 1});
  }
  ++c->next_;
  *pass_full =
      grants.back().n >= c->pass_limit_.load(std::memory_order_relaxed);
  if (c->next_ >= c->stop_) {
    c->queued_ = false;
    EraseLocked(it);
  } else if (queue_.size() > 1) {
    std::shared_ptr<PermitClient> moved = std::move(*it);
    queue_.erase(it);
    queue_.push_back(std::move(moved));
  }
  return !*pass_full;
}

// Occupancy counts hedges in flight (see TryAcquireHedge).
void LimiterCore::UpdatePeaksLocked() {
  stats_.peak_in_flight = std::max(stats_.peak_in_flight, in_flight_ + hedges_);
  stats_.peak_retained_count =
      std::max(stats_.peak_retained_count, retained_count_ + hedges_);
  stats_.peak_retained_bytes =
      std::max(stats_.peak_retained_bytes, retained_bytes_ + hedge_bytes_);
}

bool LimiterCore::TryAcquireHedge(uint64_t bytes) {
  MutexLock lk(mu_);
  if (hedges_ >= hedge_reserve_) return false;
  ++hedges_;
  hedge_bytes_ += bytes;
  UpdatePeaksLocked();
  return true;
}

void LimiterCore::ReleaseHedges(uint64_t n, uint64_t bytes) {
  MutexLock lk(mu_);
  hedges_ -= n;
  hedge_bytes_ -= bytes;
}

void LimiterCore::RecordHedges(uint64_t issued, uint64_t won, uint64_t bytes) {
  MutexLock lk(mu_);
  StatsRecorder::AddHedges(&stats_, issued, won, bytes);
}

void LimiterCore::ApplyInlineDoneLocked(PumpFrame& f) {
  in_flight_ -= f.done;
  f.done = 0;
}

Stats LimiterCore::GetStats() const {
  MutexLock lk(mu_);
  Stats s = stats_;
  s.in_flight = in_flight_ + hedges_;
  s.retained_count = retained_count_ + hedges_;
  s.retained_bytes = retained_bytes_ + hedge_bytes_;
  s.waiting_streams = queue_.size();
  return s;
}

}  // namespace detail

Result<std::shared_ptr<Limiter>> Limiter::Make(const LimiterOptions& options) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  auto core = std::make_shared<detail::LimiterCore>(
      options.io_concurrency, options.EffectiveResponseBudgetCount(),
      options.response_budget_bytes,
      options.EffectiveHedgeReserve(ReaderOptions::kDefaultHedgeBudget));
  return std::shared_ptr<Limiter>(new Limiter(std::move(core)));
}

Result<std::shared_ptr<Limiter>> Limiter::Make(const Options& options) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  return Make(options.ResolvedLimiter());
}

Limiter::Limiter(std::shared_ptr<detail::LimiterCore> core)
    : core_(std::move(core)) {}
Limiter::~Limiter() = default;

uint32_t Limiter::io_concurrency() const { return core_->io_concurrency(); }
uint32_t Limiter::response_budget_count() const {
  return core_->budget_count();
}
uint64_t Limiter::response_budget_bytes() const {
  return core_->budget_bytes();
}
uint32_t Limiter::hedge_reserve() const { return core_->hedge_reserve(); }
Stats Limiter::GetStats() const { return core_->GetStats(); }
bool Limiter::Stalled() const { return core_->Stalled(); }

}  // namespace rangeio
