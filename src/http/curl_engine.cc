// curl_engine.cc — the shared libcurl event loop: epoll driving
// curl_multi_socket_action, per-attempt timeouts, retries with full-jitter
// backoff, and completions on the loop thread. What an answer means is
// decided in http_response.cc; how one transfer is set up, in transfer.cc.
// Thread-safety: see curl_engine.h; EngineCore's loop-thread state is only
// touched by the loop thread, the rest is guarded by its mutex.
#include "http/curl_engine.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http/endpoint_gate.h"
#include "http/transfer.h"
#include "util/clock.h"
#include "util/thread_name.h"

namespace rangeio::detail {
namespace {

// How often in-flight transfers are checked against the first-byte, stall
// and overall timeouts: 10 ms is far below any sane timeout and costs one
// pass over at most a few hundred transfers 100 times a second.
constexpr uint64_t kWatchdogNanos = 10'000'000;
// Upper bound of the idle-connection cache however many sources are open.
constexpr long kMaxCachedConnections = 4096;

constexpr uint64_t kNanosPerMs = 1'000'000;

uint64_t ToNanos(std::chrono::milliseconds ms) {
  return static_cast<uint64_t>(ms.count()) * kNanosPerMs;
}

}  // namespace

// The loop itself: one thread, one multi handle, one epoll set. Submit,
// Register, Stop and OnLoopThread may be called from any thread and meet the
// loop under mu_; everything else runs on the loop thread only.
class EngineCore : public std::enable_shared_from_this<EngineCore> {
 public:
  EngineCore() : rng_(std::random_device{}()) {}
  ~EngineCore() {
    for (CURL* e : idle_easy_) curl_easy_cleanup(e);
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }

  Status Init() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return Status::FromErrno(errno, "HTTP engine: epoll");
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return Status::FromErrno(errno, "HTTP engine: eventfd");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
      return Status::FromErrno(errno, "HTTP engine: epoll_ctl");
    }
    multi_ = curl_multi_init();
    if (multi_ == nullptr) return Status::Internal("curl_multi_init failed");
    // Multiplex HTTP/2 streams on one connection where offered.
    curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &OnSocket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, static_cast<void*>(this));
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &OnTimer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, static_cast<void*>(this));
    thread_ = std::thread([self = shared_from_this()] {
      NameThisThread("rio-http");
      self->Run();
    });
    MutexLock lk(mu_);
    loop_id_ = thread_.get_id();
    return Status::OK();
  }

  void Stop() EXCLUDES(mu_) {
    {
      MutexLock lk(mu_);
      stop_ = true;
    }
    WakeLoop();
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // the loop holds its own reference to this core
    } else {
      thread_.join();
    }
  }

  bool OnLoopThread() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return loop_id_ == std::this_thread::get_id();
  }

  void Register(uint32_t max_connections, bool add) EXCLUDES(mu_) {
    {
      MutexLock lk(mu_);
      if (add) {
        pools_.insert(max_connections);
      } else if (auto it = pools_.find(max_connections); it != pools_.end()) {
        pools_.erase(it);
      }
      config_dirty_ = true;
    }
    WakeLoop();
  }

  // Source::CancelReads (no tag: every read of the sink) and Source::Cancel
  // (one read): the loop ends the matching reads it runs or waits to retry.
  void RequestCancel(const ReadSink* sink, std::optional<uint64_t> tag)
      EXCLUDES(mu_) {
    {
      MutexLock lk(mu_);
      cancels_.push_back({sink, tag});
    }
    WakeLoop();
  }

  void Submit(std::unique_ptr<Transfer> t) EXCLUDES(mu_) {
    bool wake;
    {
      MutexLock lk(mu_);
      wake = incoming_.empty();  // else a wake-up is already pending
      incoming_.push_back(std::move(t));
    }
    if (wake) WakeLoop();
  }

 private:
  struct Done {
    std::unique_ptr<Transfer> transfer;
    Result<Slice> result;
  };
  // A cancel asked of the loop: one read (sink, tag), or with no tag every
  // read of the sink.
  struct CancelRequest {
    const ReadSink* sink;
    std::optional<uint64_t> tag;
  };
  struct Wake {
    uint64_t at;
    Transfer* t;
    bool operator>(const Wake& o) const { return at > o.at; }
  };

  // libcurl's event-driven interface: epoll reports which sockets are
  // ready, and only their transfers run (curl_multi_socket_action), where
  // curl_multi_perform would step every transfer and poll every socket on
  // each wake-up, a pass every chunk of a body and every new read would
  // wait for (bench http shows the difference).
  void Run() {
    std::vector<epoll_event> events(kMaxEvents);
    for (;;) {
      std::vector<std::unique_ptr<Transfer>> incoming;
      std::vector<CancelRequest> cancels;
      {
        MutexLock lk(mu_);
        incoming.swap(incoming_);
        cancels.swap(cancels_);
        if (config_dirty_) ApplyConfigLocked();
        if (stop_ && incoming.empty() && active_.empty()) return;
      }
      // Cancels first: they are for reads submitted before them, and a
      // sink's address may already belong to a new stream's reads that
      // are among `incoming`.
      CancelMatching(cancels, /*whole_sinks=*/true);
      uint64_t now = NowNanos();
      for (auto& t : incoming) Start(std::move(t), now);
      // One read's cancel (a hedge's loser) may be for a read just started.
      CancelMatching(cancels, /*whole_sinks=*/false);
      RunDueTimer();
      Reap();
      now = NowNanos();
      if (now >= next_watchdog_ns_) {
        Watchdog(now);
        next_watchdog_ns_ = now + kWatchdogNanos;
      }
      StartDueRetries(now);
      RunDueTimer();
      Reap();
      gate_.AdmitReady(
          [this, now = NowNanos()](Transfer* t) { Launch(t, now); });
      DeliverDone();
      const int n = ::epoll_wait(epoll_fd_, events.data(), kMaxEvents,
                                 PollTimeoutMs(NowNanos()));
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_) {
          uint64_t count;
          while (::read(wake_fd_, &count, sizeof count) > 0) {
          }
          continue;
        }
        const uint32_t ev = events[i].events;
        int mask = 0;
        if (ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) mask |= CURL_CSELECT_IN;
        if (ev & EPOLLOUT) mask |= CURL_CSELECT_OUT;
        if (ev & EPOLLERR) mask |= CURL_CSELECT_ERR;
        int running = 0;
        curl_multi_socket_action(multi_, fd, mask, &running);
      }
      // What those actions finished is reaped at the top of the loop.
    }
  }

  void WakeLoop() {
    const uint64_t one = 1;
    // EAGAIN: the counter is full, so a wake-up is pending anyway.
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }

  // Runs libcurl's timeouts once its timer is due (a transfer just added is
  // due at once: that is how it starts). A few passes at most: a timer
  // libcurl keeps at 0 waits for the next turn of the loop (epoll_wait with
  // no wait) rather than spinning here.
  void RunDueTimer() {
    for (int pass = 0; pass < 4 && timer_at_ns_ <= NowNanos(); ++pass) {
      timer_at_ns_ = kNoTimer;
      int running = 0;
      curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    }
  }

  // CURLMOPT_TIMERFUNCTION: when libcurl next needs RunDueTimer.
  static int OnTimer(CURLM*, long timeout_ms, void* user) {
    auto* self = static_cast<EngineCore*>(user);
    self->timer_at_ns_ =
        timeout_ms < 0
            ? kNoTimer
            : NowNanos() + static_cast<uint64_t>(timeout_ms) * kNanosPerMs;
    return 0;
  }

  // CURLMOPT_SOCKETFUNCTION: which of its sockets libcurl waits on, for
  // what. `socketp` (curl_multi_assign) marks a socket already in epoll.
  static int OnSocket(CURL*, curl_socket_t fd, int what, void* user,
                      void* socketp) {
    auto* self = static_cast<EngineCore*>(user);
    if (what == CURL_POLL_REMOVE) {
      // libcurl says so before it closes the socket; ENOENT is harmless.
      ::epoll_ctl(self->epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      curl_multi_assign(self->multi_, fd, nullptr);
      return 0;
    }
    epoll_event ev{};
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) |
                ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    ev.data.fd = fd;
    int op = socketp != nullptr ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (::epoll_ctl(self->epoll_fd_, op, fd, &ev) != 0) {
      // A descriptor number reused, or a socket epoll dropped on close:
      // the other operation is the right one.
      op = op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
      if (::epoll_ctl(self->epoll_fd_, op, fd, &ev) != 0) return -1;
    }
    curl_multi_assign(self->multi_, fd, self);
    return 0;
  }

  void ApplyConfigLocked() REQUIRES(mu_) {
    config_dirty_ = false;
    long per_host = 1;
    long cached = 0;
    for (uint32_t n : pools_) {
      per_host = std::max<long>(per_host, n);
      cached += n;
    }
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, per_host);
    curl_multi_setopt(
        multi_, CURLMOPT_MAXCONNECTS,
        std::clamp<long>(cached, per_host, kMaxCachedConnections));
  }

  int PollTimeoutMs(uint64_t now) {
    uint64_t ms = 1000;
    if (timer_at_ns_ != kNoTimer) {
      // Rounded up: epoll_wait counts whole milliseconds.
      ms = std::min<uint64_t>(
          ms, timer_at_ns_ > now
                  ? (timer_at_ns_ - now + kNanosPerMs - 1) / kNanosPerMs
                  : 0);
    }
    if (active_.size() > retry_heap_.size()) {
      ms = std::min<uint64_t>(ms, kWatchdogNanos / kNanosPerMs);
    }
    if (!retry_heap_.empty()) {
      const uint64_t at = retry_heap_.top().at;
      ms = std::min<uint64_t>(ms, at > now ? (at - now) / kNanosPerMs + 1 : 0);
    }
    if (!done_.empty()) ms = 0;
    return static_cast<int>(ms);
  }

  CURL* TakeEasy() {
    if (idle_easy_.empty()) return curl_easy_init();
    CURL* e = idle_easy_.back();
    idle_easy_.pop_back();
    return e;
  }

  void ReturnEasy(CURL* e) {
    curl_easy_reset(e);
    idle_easy_.push_back(e);
  }

  void Start(std::unique_ptr<Transfer> owned, uint64_t now) {
    Transfer* t = owned.get();
    t->index = active_.size();
    active_.push_back(std::move(owned));
    t->easy = TakeEasy();
    if (t->easy == nullptr) {
      return Complete(t, Status::Internal("curl_easy_init failed"));
    }
    Status st = ConfigureTransfer(*t);
    if (!st.ok()) return Complete(t, std::move(st));
    Launch(t, now);
  }

  void Launch(Transfer* t, uint64_t now) {
    t->waiting = false;
    t->gated = false;
    if (now >= t->deadline_ns) {
      return Fail(t, DeadlinePassedBeforeAttempt(*t),
                  std::to_string(t->attempt) + " attempts");
    }
    // Adaptive concurrency: past its endpoint's limit the attempt waits
    // in the gate, which launches it once a slot frees.
    if (!gate_.Enter(t, now)) return;
    t->ResetAttempt(now);
    ++t->attempt;
    if (Status st = ApplyVersionPin(*t); !st.ok()) {
      return Complete(t, std::move(st));
    }
    const uint64_t left_ms = (t->deadline_ns - now) / kNanosPerMs + 1;
    curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, static_cast<long>(left_ms));
    const CURLMcode mc = curl_multi_add_handle(multi_, t->easy);
    if (mc != CURLM_OK) {
      return Complete(t,
                      Status::Internal(t->What() + ": curl_multi_add_handle: " +
                                       curl_multi_strerror(mc)));
    }
    t->target->stats.Update([](HttpStats& s) { ++s.gets; });
  }

  void Reap() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* e = msg->easy_handle;
      const CURLcode rc = msg->data.result;
      Transfer* t = nullptr;
      curl_easy_getinfo(e, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
      curl_multi_remove_handle(multi_, e);
      AttemptEnded(t, JudgeTransfer(*t, rc), NowNanos());
    }
  }

  static uint64_t TimeToFirstByteNanos(CURL* e) {
    curl_off_t us = 0;
    curl_easy_getinfo(e, CURLINFO_STARTTRANSFER_TIME_T, &us);
    return static_cast<uint64_t>(us) * 1000;
  }

  void AttemptEnded(Transfer* t, Attempt a, uint64_t now) {
    long version = 0;
    curl_easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &version);
    const bool h2 = version == CURL_HTTP_VERSION_2_0;
    const uint64_t ttfb = TimeToFirstByteNanos(t->easy);
    const bool throttled = a.cause == RetryCause::kThrottled;
    if (ttfb > 0 || throttled) {
      t->target->stats.Update([ttfb, h2, throttled](HttpStats& s) {
        if (ttfb > 0) s.time_to_first_byte.Record(ttfb);
        s.http2_responses += h2 && ttfb > 0 ? 1 : 0;
        s.throttled += throttled ? 1 : 0;
      });
    }
    EndpointGate::Leave(t,
                        a.status.ok() ? EndpointLimit::Outcome::kAnswered
                        : throttled   ? EndpointLimit::Outcome::kThrottled
                                      : EndpointLimit::Outcome::kOther,
                        ttfb, now);
    if (a.status.ok()) {
      const uint64_t bytes = t->response.received;
      t->target->stats.Update([bytes](HttpStats& s) { s.bytes += bytes; });
      return Complete(t, std::move(t->buffer));
    }
    if (a.cause == RetryCause::kNone) return Complete(t, std::move(a.status));
    const HttpOptions& o = t->target->options;
    // Full jitter: uniform in [0, the cap].
    const uint64_t jitter = std::uniform_int_distribution<uint64_t>(
        0, BackoffCapNanos(o, t->attempt))(rng_);
    const RetryDecision d =
        DecideRetry(o, a, t->attempt, now, t->deadline_ns, jitter);
    if (!d.retry) return Fail(t, a.status, d.why);
    const RetryCause cause = a.cause;
    t->target->stats.Update([cause](HttpStats& s) { CountRetry(cause, &s); });
    if (!t->retries.empty()) t->retries += ", ";
    t->retries += RetryCauseName(cause);
    t->previous = a.status.message();
    t->waiting = true;
    retry_heap_.push({now + d.wait_ns, t});
  }

  // Ends with Cancelled every active transfer that a request of `cancels`
  // names (those for whole sinks, or those for one read): in flight
  // (removed from the multi handle, which closes a connection mid-answer)
  // or waiting to retry (taken out of the retry heap); its buffer goes too.
  void CancelMatching(const std::vector<CancelRequest>& cancels,
                      bool whole_sinks) {
    std::vector<Transfer*> doomed;
    for (const auto& owned : active_) {
      for (const CancelRequest& c : cancels) {
        if (c.tag.has_value() == whole_sinks || c.sink != owned->sink) continue;
        if (!c.tag || *c.tag == owned->tag) {
          doomed.push_back(owned.get());
          break;
        }
      }
    }
    if (doomed.empty()) return;
    std::vector<Wake> keep;
    for (; !retry_heap_.empty(); retry_heap_.pop()) {
      const Wake& w = retry_heap_.top();
      if (std::find(doomed.begin(), doomed.end(), w.t) == doomed.end()) {
        keep.push_back(w);
      }
    }
    for (const Wake& w : keep) retry_heap_.push(w);
    for (Transfer* t : doomed) gate_.Remove(t);
    for (Transfer* t : doomed) {
      if (!t->waiting) curl_multi_remove_handle(multi_, t->easy);
      Complete(t, Status::Cancelled(t->What() + ": cancelled"));
    }
  }

  // Completes `t` with the last attempt's error and how the retries went.
  // When the deadline cut the last attempt short, its error says little
  // ("timed out"): the one before it says why the read was still retrying.
  void Fail(Transfer* t, const Status& last, const std::string& why) {
    std::string msg = last.message() + " (" + why;
    if (!t->retries.empty()) msg += "; retried after: " + t->retries;
    if (NowNanos() >= t->deadline_ns && !t->previous.empty()) {
      msg += "; the attempt before failed with: " + t->previous;
    }
    msg += ")";
    Complete(t, Status(last.code(), std::move(msg)));
  }

  // Ends the attempts past their first-byte, stall or overall deadline, and
  // the reads whose deadline passed while waiting for an endpoint slot.
  void Watchdog(uint64_t now) {
    gate_.ExpireLate(now, [this, now](Transfer* t) {
      Fail(t, SlotWaitTimedOut(*t, now),
           "attempts sent: " + std::to_string(t->attempt));
    });
    std::vector<std::pair<Transfer*, std::string>> expired;
    for (const auto& owned : active_) {
      if (owned->waiting) continue;
      if (auto why = AttemptTimedOut(*owned, now)) {
        expired.emplace_back(owned.get(), std::move(*why));
      }
    }
    for (auto& [t, why] : expired) {
      curl_multi_remove_handle(multi_, t->easy);
      Attempt a;
      a.status = Status::IoError(t->What() + ": " + why);
      a.cause = RetryCause::kTimeout;
      AttemptEnded(t, std::move(a), now);
    }
  }

  void StartDueRetries(uint64_t now) {
    while (!retry_heap_.empty() && retry_heap_.top().at <= now) {
      Transfer* t = retry_heap_.top().t;
      retry_heap_.pop();
      Launch(t, now);
    }
  }

  // Takes `t` out of the loop; its sink is called by DeliverDone.
  void Complete(Transfer* t, Result<Slice> result) {
    const uint64_t latency = NowNanos() - t->start_ns;
    const bool ok = result.ok();
    const bool probe = t->size_probe;
    const bool cancelled =
        !ok && result.status().code() == StatusCode::kCancelled;
    t->target->stats.Update([&](HttpStats& s) {
      if (probe || cancelled) return;
      ok ? ++s.reads_ok : ++s.reads_failed;
      s.latency.Record(latency);
    });
    EndpointGate::Leave(t, EndpointLimit::Outcome::kOther, 0, NowNanos());
    if (t->easy != nullptr) ReturnEasy(t->easy);
    t->easy = nullptr;
    const size_t i = t->index;
    std::unique_ptr<Transfer> owned = std::move(active_[i]);
    if (i + 1 != active_.size()) {
      active_[i] = std::move(active_.back());
      active_[i]->index = i;
    }
    active_.pop_back();
    done_.push_back({std::move(owned), std::move(result)});
  }

  // Calls the sinks with no lock held: a sink may submit the next read, or
  // drop the last reference to its source (and so to this engine).
  void DeliverDone() {
    std::vector<Done> batch;
    batch.swap(done_);
    for (Done& d : batch) {
      ReadSink* sink = d.transfer->sink;
      const uint64_t tag = d.transfer->tag;
      d.transfer.reset();
      sink->OnReadDone(tag, std::move(d.result));
    }
  }

  static constexpr uint64_t kNoTimer = UINT64_MAX;
  static constexpr int kMaxEvents = 256;

  CURLM* multi_ = nullptr;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Submit, Register and Stop wake the loop
  std::thread thread_;
  std::mt19937_64 rng_;  // loop thread only

  Mutex mu_;
  std::vector<std::unique_ptr<Transfer>> incoming_ GUARDED_BY(mu_);
  std::vector<CancelRequest> cancels_ GUARDED_BY(mu_);
  std::multiset<uint32_t> pools_ GUARDED_BY(mu_);
  bool config_dirty_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread::id loop_id_ GUARDED_BY(mu_);

  // Loop thread only.
  std::vector<std::unique_ptr<Transfer>> active_;
  std::priority_queue<Wake, std::vector<Wake>, std::greater<>> retry_heap_;
  EndpointGate gate_;  // attempts waiting for their endpoint's limit
  std::vector<Done> done_;
  std::vector<CURL*> idle_easy_;
  uint64_t next_watchdog_ns_ = 0;
  uint64_t timer_at_ns_ = kNoTimer;  // libcurl's timer (OnTimer)
};

Result<std::shared_ptr<CurlEngine>> CurlEngine::Shared() {
  // Leaked on purpose: sources may outlive static destruction.
  static auto* mu = new Mutex;
  static auto* shared = new std::weak_ptr<CurlEngine>;
  MutexLock lk(*mu);
  if (auto e = shared->lock()) return e;
  static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (init != CURLE_OK) {
    return Status::Internal(std::string("curl_global_init failed: ") +
                            curl_easy_strerror(init));
  }
  auto core = std::make_shared<EngineCore>();
  RANGEIO_RETURN_NOT_OK(core->Init());
  auto engine = std::make_shared<CurlEngine>(std::move(core));
  *shared = engine;
  return engine;
}

CurlEngine::CurlEngine(std::shared_ptr<EngineCore> core)
    : core_(std::move(core)) {}

CurlEngine::~CurlEngine() { core_->Stop(); }

void CurlEngine::Register(uint32_t max_connections) {
  core_->Register(max_connections, true);
}

void CurlEngine::Unregister(uint32_t max_connections) {
  core_->Register(max_connections, false);
}

bool CurlEngine::OnLoopThread() const { return core_->OnLoopThread(); }

void CurlEngine::Cancel(const ReadSink* sink, uint64_t tag) {
  core_->RequestCancel(sink, tag == Source::kAllReads
                                 ? std::nullopt
                                 : std::optional<uint64_t>(tag));
}

void CurlEngine::Submit(std::shared_ptr<HttpTarget> target, ByteRange range,
                        Slice buffer, std::byte* dst, ReadSink* sink,
                        uint64_t tag, bool size_probe) {
  auto t = std::make_unique<Transfer>();
  const uint64_t now = NowNanos();
  t->start_ns = now;
  t->deadline_ns = now + ToNanos(target->options.deadline);
  t->target = std::move(target);
  t->range = range;
  t->buffer = std::move(buffer);
  t->dst = dst;
  t->sink = sink;
  t->tag = tag;
  t->size_probe = size_probe;
  core_->Submit(std::move(t));
}

}  // namespace rangeio::detail
