// push_stream.h (internal) — push delivery (ReadOptions::on_result): a
// stream whose results go to callbacks instead of Next().
//
// Whatever changes the inner stream (a completion on a backend's thread, an
// inline read on the caller's, the stall check on the deadline timer)
// pumps it: the thread that pumps takes every result ready and hands each
// to on_result, then the end to on_end. One thread delivers at a time; a
// change that arrives meanwhile makes that thread look again, so callbacks
// of one stream never overlap and come in the stream's delivery order.
//
// Cancel (the RangeStream's Cancel or destruction) stops delivery: once it
// returns, no callback runs or will run; one running on another thread is
// waited for; called from a callback, it takes effect when that returns.
//
// Thread-safety: thread-safe. Lifetime: held by its RangeStream, and by the
// inner stream (as its listener) until the end or Cancel.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "rangeio/reader.h"
#include "stream/stream_base.h"
#include "util/mutex.h"

namespace rangeio::detail {

class PushStream final : public StreamBase,
                         public StreamListener,
                         public std::enable_shared_from_this<PushStream> {
 public:
  PushStream(std::shared_ptr<StreamBase> inner,
             ReadOptions::ResultCallback on_result,
             ReadOptions::EndCallback on_end)
      : inner_(std::move(inner)),
        on_result_(std::move(on_result)),
        on_end_(std::move(on_end)) {}

  // Listens to the inner stream and delivers what is ready already.
  void Start();

  // StreamBase: results go to the callbacks, not to Poll.
  Result<std::optional<RangeResult>> Poll(bool* pending) override;
  void SetListener(std::shared_ptr<StreamListener> /*listener*/) override {}
  uint64_t RecheckAt() const override { return 0; }
  void Finish() override EXCLUDES(mu_);  // Cancel
  size_t size() const override { return inner_->size(); }

  // StreamListener.
  void OnStreamChange() override { Pump(); }

 private:
  void Pump() EXCLUDES(mu_);
  bool Deliver();
  void Close() EXCLUDES(mu_);
  void ArmRecheck() EXCLUDES(mu_);

  const std::shared_ptr<StreamBase> inner_;
  ReadOptions::ResultCallback on_result_;  // touched by the deliverer only
  ReadOptions::EndCallback on_end_;

  Mutex mu_;
  CondVar cv_;
  bool delivering_ GUARDED_BY(mu_) = false;
  bool again_ GUARDED_BY(mu_) = false;  // a change came while delivering
  bool done_ GUARDED_BY(mu_) = false;   // ended or cancelled: no more calls
  std::thread::id deliverer_ GUARDED_BY(mu_);
  bool recheck_armed_ GUARDED_BY(mu_) = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace rangeio::detail
