#include "stream/push_stream.h"

#include <utility>

#include "util/deadline_timer.h"

namespace rangeio::detail {

void PushStream::Start() {
  inner_->SetListener(shared_from_this());
  Pump();
}

Result<std::optional<RangeResult>> PushStream::Poll(bool* /*pending*/) {
  return Status::InvalidArgument(
      "this stream delivers its results to ReadOptions::on_result, not to "
      "Next()");
}

// Becomes the deliverer, or, if another thread is, makes it look again.
void PushStream::Pump() {
  const std::shared_ptr<PushStream> self = shared_from_this();
  {
    MutexLock lk(mu_);
    if (done_) return;
    if (delivering_) {
      again_ = true;
      return;
    }
    delivering_ = true;
    deliverer_ = std::this_thread::get_id();
  }
  for (;;) {
    const bool ended = Deliver() || cancelled_.load();
    if (ended) Close();  // still the deliverer: a Cancel waits for this
    MutexLock lk(mu_);
    if (!ended && again_ && !cancelled_.load()) {
      again_ = false;
      continue;
    }
    delivering_ = false;
    again_ = false;
    done_ = done_ || ended;
    cv_.NotifyAll();
    return;
  }
}

// Hands every ready result to on_result; true when the end (or the error
// that ended the stream) went to on_end.
bool PushStream::Deliver() {
  while (!cancelled_.load()) {
    bool pending = false;
    Result<std::optional<RangeResult>> r = inner_->Poll(&pending);
    if (!r.ok() || (!pending && !*r)) {
      if (!cancelled_.load() && on_end_) on_end_(r.status());
      return true;
    }
    if (pending) {
      ArmRecheck();
      return false;
    }
    if (on_result_) on_result_(std::move(**r));
  }
  return false;
}

// Ends the inner stream (which drops its hold on this listener) and the
// callbacks with what they captured. Called once, by the deliverer that saw
// the end or the cancel, or by Cancel when none was delivering; outside
// every callback.
void PushStream::Close() {
  inner_->Finish();
  on_result_ = nullptr;
  on_end_ = nullptr;
}

void PushStream::Finish() {
  {
    MutexLock lk(mu_);
    if (done_) return;
    cancelled_.store(true);
    if (delivering_ && deliverer_ == std::this_thread::get_id()) {
      return;  // inside a callback: the deliverer closes after it returns
    }
    while (delivering_) cv_.Wait(lk);
    if (done_) return;  // the deliverer closed it
    done_ = true;
  }
  Close();
}

// A stream pending on a stall (or waiting for admission) must be looked at
// again at its deadline even if nothing changes.
void PushStream::ArmRecheck() {
  const uint64_t at = inner_->RecheckAt();
  if (at == 0) return;
  {
    MutexLock lk(mu_);
    if (recheck_armed_) return;
    recheck_armed_ = true;
  }
  DeadlineTimer::Get().Schedule(at, [weak = weak_from_this()] {
    if (std::shared_ptr<PushStream> self = weak.lock()) {
      {
        MutexLock lk(self->mu_);
        self->recheck_armed_ = false;
      }
      self->Pump();
    }
  });
}

}  // namespace rangeio::detail
