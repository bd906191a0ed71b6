// The shared libcurl event loop: range GETs with exact-answer checks,
// timeouts, retries with full-jitter backoff, and completions on the loop
// thread.
#include "http/curl_engine.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "clock.h"
#include "http/s3.h"
#include "thread_name.h"

namespace rangeio::detail {
namespace {

// S3 error documents are well under 1 KiB; 16 KiB keeps any sane error body
// whole without letting a huge non-206 answer grow memory.
constexpr size_t kMaxErrorBody = 16 << 10;
// How often in-flight transfers are checked against the first-byte, stall
// and overall timeouts: 10 ms is far below any sane timeout and costs one
// pass over at most a few hundred transfers 100 times a second.
constexpr uint64_t kWatchdogNanos = 10'000'000;
// Upper bound of the idle-connection cache however many sources are open.
constexpr long kMaxCachedConnections = 4096;
// Redirects followed by plain HTTP sources (S3 never follows: a redirect
// would need a new signature). 5: what browsers tolerate many times over.
constexpr long kMaxRedirects = 5;

constexpr uint64_t kNanosPerMs = 1'000'000;

uint64_t ToNanos(std::chrono::milliseconds ms) {
  return static_cast<uint64_t>(ms.count()) * kNanosPerMs;
}

std::string_view TrimView(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' ||
                        s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

bool HeaderIs(std::string_view name, std::string_view want) {
  if (name.size() != want.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != want[i]) return false;
  }
  return true;
}

bool ParseU64View(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// "bytes FIRST-LAST/TOTAL" or "bytes */TOTAL"; TOTAL may be "*".
struct ContentRange {
  bool unsatisfied = false;  // "bytes */TOTAL"
  uint64_t first = 0;
  uint64_t last = 0;
  std::optional<uint64_t> total;
};

std::optional<ContentRange> ParseContentRange(std::string_view v) {
  constexpr std::string_view kUnit = "bytes ";
  if (v.substr(0, kUnit.size()) != kUnit) return std::nullopt;
  v.remove_prefix(kUnit.size());
  const size_t slash = v.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  ContentRange cr;
  const std::string_view span = v.substr(0, slash);
  const std::string_view total = v.substr(slash + 1);
  if (total != "*") {
    uint64_t t = 0;
    if (!ParseU64View(total, &t)) return std::nullopt;
    cr.total = t;
  }
  if (span == "*") {
    cr.unsatisfied = true;
    return cr;
  }
  const size_t dash = span.find('-');
  if (dash == std::string_view::npos ||
      !ParseU64View(span.substr(0, dash), &cr.first) ||
      !ParseU64View(span.substr(dash + 1), &cr.last) || cr.last < cr.first) {
    return std::nullopt;
  }
  return cr;
}

const char* ReasonPhrase(long status) {
  switch (status) {
    case 200:
      return "OK";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 307:
      return "Temporary Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 412:
      return "Precondition Failed";
    case 416:
      return "Range Not Satisfiable";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

// libcurl results worth another attempt, and why.
RetryCause CauseOf(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return RetryCause::kConnection;
    case CURLE_OPERATION_TIMEDOUT:
      return RetryCause::kTimeout;
    default:
      return RetryCause::kNone;
  }
}

const char* CauseName(RetryCause c) {
  switch (c) {
    case RetryCause::k5xx:
      return "server error";
    case RetryCause::kThrottled:
      return "throttled";
    case RetryCause::kConnection:
      return "connection";
    case RetryCause::kTimeout:
      return "timeout";
    case RetryCause::kNone:
      break;
  }
  return "none";
}

// One read: its request, its buffer, and the state of its current attempt.
struct Transfer {
  std::shared_ptr<HttpTarget> target;
  ByteRange range;
  Slice buffer;
  std::byte* dst = nullptr;
  ReadSink* sink = nullptr;
  uint64_t tag = 0;
  bool size_probe = false;

  CURL* easy = nullptr;
  size_t index = 0;      // position in EngineCore::active_
  bool waiting = false;  // backing off before the next attempt
  uint64_t start_ns = 0;
  uint64_t deadline_ns = 0;
  uint32_t attempt = 0;  // attempts started
  std::string retries;   // "2 throttled, 1 connection" for the final error
  std::string previous;  // the error of the attempt before the current one

  // The current attempt.
  uint64_t attempt_start_ns = 0;
  uint64_t last_progress_ns = 0;
  bool got_first_byte = false;
  bool body_started = false;  // the write callback has run
  bool body_is_data = false;  // ... and the answer is the range's bytes
  uint64_t received = 0;
  int64_t content_length = -1;
  std::string content_range;
  std::string retry_after;
  std::string error_body;
  Status write_error;
  char errbuf[CURL_ERROR_SIZE] = {};

  void ResetAttempt(uint64_t now) {
    attempt_start_ns = now;
    last_progress_ns = now;
    got_first_byte = false;
    body_started = false;
    body_is_data = false;
    received = 0;
    content_length = -1;
    content_range.clear();
    retry_after.clear();
    error_body.clear();
    write_error = Status::OK();
    errbuf[0] = '\0';
  }

  // "GET <url>", and for S3 " (bucket 'b', key 'k')": what failed.
  std::string What() const {
    return "GET " + target->shown_url + target->S3Context();
  }
  std::string RangeHeader() const {
    return "bytes=" + std::to_string(range.offset) + "-" +
           std::to_string(range.end() - 1);
  }
};

// The outcome of one attempt.
struct Attempt {
  Status status;  // OK: the read's bytes are in the buffer
  RetryCause cause = RetryCause::kNone;
  uint64_t retry_after_ns = 0;  // from a Retry-After header
};

// Records a total seen in a Content-Range; an error when it contradicts the
// size already known (the object was replaced, or size_hint is wrong).
Status NoteSize(Transfer& t, uint64_t total) {
  uint64_t known = HttpTarget::kUnknownSize;
  if (t.target->size.compare_exchange_strong(known, total) || known == total) {
    return Status::OK();
  }
  return Status::IoError(t.What() + ": the object has " +
                         std::to_string(total) + " bytes, not the " +
                         std::to_string(known) +
                         " bytes it had or was said to have (replaced while "
                         "being read, or a wrong size_hint?)");
}

// Checks the headers of a 206 or 200 before its body is taken as the range.
Status CheckDataHeaders(Transfer& t, long status) {
  if (status == 200) {
    // A server that ignores Range sends the whole object: acceptable only
    // when the whole object is what was asked for.
    if (t.range.offset == 0 && t.content_length >= 0 &&
        static_cast<uint64_t>(t.content_length) == t.range.length) {
      return NoteSize(t, t.range.length);
    }
    return Status::IoError(
        t.What() + ": the server ignored the Range header (" + t.RangeHeader() +
        ") and answered 200 OK with " +
        (t.content_length >= 0 ? std::to_string(t.content_length)
                               : std::string("an unknown number of")) +
        " bytes");
  }
  const std::optional<ContentRange> cr = ParseContentRange(t.content_range);
  if (!cr || cr->unsatisfied || cr->first != t.range.offset ||
      cr->last != t.range.end() - 1) {
    return Status::IoError(t.What() + ": asked for " + t.RangeHeader() +
                           ", got 206 with Content-Range '" + t.content_range +
                           "'");
  }
  if (t.content_length >= 0 &&
      static_cast<uint64_t>(t.content_length) != t.range.length) {
    return Status::IoError(t.What() + ": asked for " + t.RangeHeader() +
                           ", got 206 with Content-Length " +
                           std::to_string(t.content_length));
  }
  return cr->total ? NoteSize(t, *cr->total) : Status::OK();
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t len = size * n;
  t.got_first_byte = true;
  t.last_progress_ns = NowNanos();
  const std::string_view line(data, len);
  if (line.substr(0, 5) == "HTTP/") {  // a new answer (after a redirect)
    t.content_length = -1;
    t.content_range.clear();
    t.retry_after.clear();
    return len;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return len;
  const std::string_view name = TrimView(line.substr(0, colon));
  const std::string_view value = TrimView(line.substr(colon + 1));
  if (HeaderIs(name, "content-range")) {
    t.content_range = std::string(value);
  } else if (HeaderIs(name, "retry-after")) {
    t.retry_after = std::string(value);
  } else if (HeaderIs(name, "content-length")) {
    uint64_t v = 0;
    if (ParseU64View(value, &v) && v <= INT64_MAX) {
      t.content_length = static_cast<int64_t>(v);
    }
  }
  return len;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t len = size * n;
  t.last_progress_ns = NowNanos();
  if (!t.body_started) {
    t.body_started = true;
    long status = 0;
    curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
    if (status == 206 || status == 200) {
      t.write_error = CheckDataHeaders(t, status);
      if (!t.write_error.ok()) return 0;  // aborts with CURLE_WRITE_ERROR
      t.body_is_data = true;
    }
  }
  if (!t.body_is_data) {  // an error document
    const size_t room = kMaxErrorBody - t.error_body.size();
    t.error_body.append(data, std::min(room, len));
    return len;
  }
  if (len > t.range.length - t.received) {
    t.write_error =
        Status::IoError(t.What() + ": the body is longer than the " +
                        std::to_string(t.range.length) +
                        " bytes announced for " + t.RangeHeader());
    return 0;
  }
  std::memcpy(t.dst + t.received, data, len);
  t.received += len;
  return len;
}

// Seconds in a Retry-After header (delta-seconds or an HTTP date).
uint64_t RetryAfterNanos(const std::string& value) {
  uint64_t secs = 0;
  if (ParseU64View(value, &secs)) {
    return std::min<uint64_t>(secs, 86'400) * 1'000'000'000ull;
  }
  const time_t when = curl_getdate(value.c_str(), nullptr);
  const time_t now = std::time(nullptr);
  if (when <= now) return 0;
  return std::min<uint64_t>(static_cast<uint64_t>(when - now), 86'400) *
         1'000'000'000ull;
}

// The object's size as a 416 tells it: Content-Range "bytes */N", or S3's
// <ActualObjectSize>.
std::optional<uint64_t> TotalOf416(const Transfer& t) {
  const auto cr = ParseContentRange(t.content_range);
  if (cr && cr->total) return cr->total;
  uint64_t n = 0;
  if (t.target->s3 &&
      ParseU64View(ParseS3ErrorBody(t.error_body).actual_object_size, &n)) {
    return n;
  }
  return std::nullopt;
}

// The error of a non-2xx answer, mapped to a StatusCode and a retry cause.
Attempt HttpError(const Transfer& t, long status) {
  const HttpTarget& g = *t.target;
  std::string msg = t.What() + ": HTTP " + std::to_string(status);
  if (*ReasonPhrase(status)) msg += std::string(" ") + ReasonPhrase(status);
  S3ErrorBody s3;
  if (g.s3) s3 = ParseS3ErrorBody(t.error_body);
  if (!s3.code.empty()) msg += ", S3 error " + s3.code;
  if (!s3.message.empty()) msg += ": " + s3.message;
  if (status == 416) {
    if (const auto total = TotalOf416(t)) {
      msg += " (the object has " + std::to_string(*total) + " bytes)";
    }
  }
  Attempt a;
  if (status == 404 || s3.code == "NoSuchKey" || s3.code == "NoSuchBucket") {
    a.status = Status::NotFound(msg);
  } else if (status == 401 || status == 403) {
    a.status = Status::PermissionDenied(msg);
  } else if (status == 416) {
    a.status = Status::OutOfRange(msg);
  } else {
    a.status = Status::IoError(msg);
  }
  if (status == 429 || status == 503 || s3.code == "SlowDown") {
    a.cause = RetryCause::kThrottled;
  } else if (status >= 500 && status <= 599) {
    a.cause = RetryCause::k5xx;
  }
  if (a.cause != RetryCause::kNone && !t.retry_after.empty()) {
    a.retry_after_ns = RetryAfterNanos(t.retry_after);
  }
  return a;
}

}  // namespace

std::string HttpTarget::S3Context() const {
  if (!s3) return {};
  return " (bucket '" + bucket + "', key '" + key + "')";
}

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
    std::lock_guard lk(mu_);
    loop_id_ = thread_.get_id();
    return Status::OK();
  }

  void Stop() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    WakeLoop();
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // the loop holds its own reference to this core
    } else {
      thread_.join();
    }
  }

  bool OnLoopThread() {
    std::lock_guard lk(mu_);
    return loop_id_ == std::this_thread::get_id();
  }

  void Register(uint32_t max_connections, bool add) {
    {
      std::lock_guard lk(mu_);
      if (add) {
        pools_.insert(max_connections);
      } else if (auto it = pools_.find(max_connections); it != pools_.end()) {
        pools_.erase(it);
      }
      config_dirty_ = true;
    }
    WakeLoop();
  }

  void Submit(std::unique_ptr<Transfer> t) {
    bool wake;
    {
      std::lock_guard lk(mu_);
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
  struct Wake {
    uint64_t at;
    Transfer* t;
    bool operator>(const Wake& o) const { return at > o.at; }
  };

  // libcurl's event-driven interface: epoll reports which sockets are
  // ready, and only their transfers run (curl_multi_socket_action), where
  // curl_multi_perform would step every transfer and poll every socket on
  // each wake-up. With 64 transfers in flight that pass cost ~0.3 ms, and
  // every chunk of a body and every new read waited for it.
  void Run() {
    std::vector<epoll_event> events(kMaxEvents);
    for (;;) {
      std::vector<std::unique_ptr<Transfer>> incoming;
      {
        std::lock_guard lk(mu_);
        incoming.swap(incoming_);
        if (config_dirty_) ApplyConfigLocked();
        if (stop_ && incoming.empty() && active_.empty()) return;
      }
      uint64_t now = NowNanos();
      for (auto& t : incoming) Start(std::move(t), now);
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

  void ApplyConfigLocked() {
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

  // Options that hold for every attempt of the read.
  static Status Configure(Transfer& t) {
    CURL* e = t.easy;
    const HttpTarget& g = *t.target;
    const HttpOptions& o = g.options;
    const std::string range = std::to_string(t.range.offset) + "-" +
                              std::to_string(t.range.end() - 1);
    CURLcode rc = CURLE_OK;
    const auto set = [&](CURLoption opt, auto value) {
      if (rc == CURLE_OK) rc = curl_easy_setopt(e, opt, value);
    };
    set(CURLOPT_URL, g.url.c_str());
    set(CURLOPT_RANGE, range.c_str());
    set(CURLOPT_PRIVATE, static_cast<void*>(&t));
    set(CURLOPT_WRITEFUNCTION, &OnBody);
    set(CURLOPT_WRITEDATA, static_cast<void*>(&t));
    set(CURLOPT_HEADERFUNCTION, &OnHeader);
    set(CURLOPT_HEADERDATA, static_cast<void*>(&t));
    set(CURLOPT_ERRORBUFFER, t.errbuf);
    set(CURLOPT_NOSIGNAL, 1L);
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    set(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    // Over TLS a new host's transfers wait for its first connection's
    // handshake, whose ALPN says whether HTTP/2 lets them share it, rather
    // than each opening a connection. Never for cleartext: HTTP/2 is only
    // asked for over TLS here, yet libcurl would hold them until the first
    // answer had come back (a whole request's latency; in bench blob, 63
    // of the 64 first reads of every run waited ~24 ms more).
    if (HeaderIs(std::string_view(g.url).substr(0, 8), "https://")) {
      set(CURLOPT_PIPEWAIT, 1L);
    }
    set(CURLOPT_TCP_KEEPALIVE, 1L);
    set(CURLOPT_CONNECTTIMEOUT_MS,
        static_cast<long>(o.connect_timeout.count()));
    set(CURLOPT_FOLLOWLOCATION, g.follow_redirects ? 1L : 0L);
    set(CURLOPT_MAXREDIRS, kMaxRedirects);
    set(CURLOPT_PATH_AS_IS, g.path_as_is ? 1L : 0L);
    set(CURLOPT_SSL_VERIFYPEER, o.verify_tls ? 1L : 0L);
    set(CURLOPT_SSL_VERIFYHOST, o.verify_tls ? 2L : 0L);
    if (!o.ca_file.empty()) set(CURLOPT_CAINFO, o.ca_file.c_str());
    set(CURLOPT_USERAGENT, "rangeio/0.1");
    if (!g.sigv4.empty()) {
      set(CURLOPT_AWS_SIGV4, g.sigv4.c_str());
      set(CURLOPT_USERNAME, g.access_key_id.c_str());
      set(CURLOPT_PASSWORD, g.secret_access_key.c_str());
    }
    if (g.headers != nullptr) set(CURLOPT_HTTPHEADER, g.headers);
    if (rc != CURLE_OK) {
      return Status::Internal("configuring a libcurl transfer for " + t.What() +
                              ": " + curl_easy_strerror(rc));
    }
    return Status::OK();
  }

  void Start(std::unique_ptr<Transfer> owned, uint64_t now) {
    Transfer* t = owned.get();
    t->index = active_.size();
    active_.push_back(std::move(owned));
    t->easy = TakeEasy();
    if (t->easy == nullptr) {
      return Complete(t, Status::Internal("curl_easy_init failed"));
    }
    Status st = Configure(*t);
    if (!st.ok()) return Complete(t, std::move(st));
    Launch(t, now);
  }

  void Launch(Transfer* t, uint64_t now) {
    t->waiting = false;
    if (now >= t->deadline_ns) {
      return Fail(
          t,
          Status::IoError(t->What() + ": the deadline of " +
                          std::to_string(t->target->options.deadline.count()) +
                          " ms passed before attempt " +
                          std::to_string(t->attempt + 1)),
          std::to_string(t->attempt) + " attempts");
    }
    t->ResetAttempt(now);
    ++t->attempt;
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
      AttemptEnded(t, Judge(*t, rc), NowNanos());
    }
  }

  // What one finished attempt amounts to.
  static Attempt Judge(Transfer& t, CURLcode rc) {
    if (!t.write_error.ok()) return {t.write_error, RetryCause::kNone, 0};
    if (rc != CURLE_OK) {
      std::string text = t.errbuf[0] ? t.errbuf : curl_easy_strerror(rc);
      return {Status::IoError(t.What() + ": " + text + " (curl error " +
                              std::to_string(rc) + ")"),
              CauseOf(rc), 0};
    }
    long status = 0;
    curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
    // bytes=0-0 of an empty object: S3 answers 416 InvalidRange with
    // ActualObjectSize 0, RFC 9110 servers 416 with "bytes */0", nginx 200
    // with no body (the whole, empty, object).
    if (t.size_probe && ((status == 416 && TotalOf416(t) == 0) ||
                         (status == 200 && t.content_length == 0))) {
      return {NoteSize(t, 0), RetryCause::kNone, 0};
    }
    if (status != 206 && status != 200) return HttpError(t, status);
    if (!t.body_started) {  // no body at all: check the headers now
      Status st = CheckDataHeaders(t, status);
      if (!st.ok()) return {std::move(st), RetryCause::kNone, 0};
    }
    if (t.received != t.range.length) {
      // The connection ended cleanly but early (a lying Content-Length, a
      // proxy that cut the body): retry, never hand out short data.
      return {Status::IoError(t.What() + ": the body ended after " +
                              std::to_string(t.received) + " of " +
                              std::to_string(t.range.length) + " bytes"),
              RetryCause::kConnection, 0};
    }
    return {};
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
    if (const uint64_t ttfb = TimeToFirstByteNanos(t->easy); ttfb > 0) {
      t->target->stats.Update([ttfb, h2](HttpStats& s) {
        s.time_to_first_byte.Record(ttfb);
        s.http2_responses += h2 ? 1 : 0;
      });
    }
    if (a.status.ok()) {
      const uint64_t bytes = t->received;
      t->target->stats.Update([bytes](HttpStats& s) { s.bytes += bytes; });
      return Complete(t, std::move(t->buffer));
    }
    const HttpOptions& o = t->target->options;
    if (a.cause == RetryCause::kNone) return Complete(t, std::move(a.status));
    if (t->attempt >= o.max_attempts) {
      return Fail(t, a.status,
                  "gave up after " + std::to_string(t->attempt) + " attempts");
    }
    if (now >= t->deadline_ns) {
      return Fail(t, a.status,
                  "the deadline of " + std::to_string(o.deadline.count()) +
                      " ms passed during attempt " +
                      std::to_string(t->attempt));
    }
    // Full jitter: uniform in [0, min(cap, base * 2^(attempt - 1))].
    const uint64_t cap =
        std::min<uint64_t>(ToNanos(o.retry_max_backoff),
                           ToNanos(o.retry_base_backoff)
                               << std::min<uint32_t>(t->attempt - 1, 30));
    uint64_t wait = std::uniform_int_distribution<uint64_t>(0, cap)(rng_);
    wait = std::max(wait, a.retry_after_ns);
    if (now + wait >= t->deadline_ns) {
      return Fail(t, a.status,
                  "no time for attempt " + std::to_string(t->attempt + 1) +
                      " within the deadline of " +
                      std::to_string(o.deadline.count()) + " ms");
    }
    const RetryCause cause = a.cause;
    t->target->stats.Update([cause](HttpStats& s) {
      switch (cause) {
        case RetryCause::k5xx:
          ++s.retries_5xx;
          break;
        case RetryCause::kThrottled:
          ++s.retries_throttled;
          break;
        case RetryCause::kConnection:
          ++s.retries_connection;
          break;
        case RetryCause::kTimeout:
          ++s.retries_timeout;
          break;
        case RetryCause::kNone:
          break;
      }
    });
    if (!t->retries.empty()) t->retries += ", ";
    t->retries += CauseName(cause);
    t->previous = a.status.message();
    t->waiting = true;
    retry_heap_.push({now + wait, t});
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

  // Attempts past their first-byte, stall or overall deadline.
  void Watchdog(uint64_t now) {
    std::vector<std::pair<Transfer*, Attempt>> expired;
    for (const auto& owned : active_) {
      Transfer* t = owned.get();
      if (t->waiting) continue;
      const HttpOptions& o = t->target->options;
      if (now >= t->deadline_ns) {
        // A timeout like the others: AttemptEnded sees the deadline passed
        // and fails the read with the error of the attempt before, which
        // says why it was still retrying.
        expired.push_back(
            {t,
             {Status::IoError(t->What() +
                              ": no complete answer within the "
                              "deadline of " +
                              std::to_string(o.deadline.count()) + " ms"),
              RetryCause::kTimeout, 0}});
        continue;
      }
      if (!t->got_first_byte) {
        curl_off_t sent_us = 0;  // 0 until the request has gone out
        curl_easy_getinfo(t->easy, CURLINFO_PRETRANSFER_TIME_T, &sent_us);
        const uint64_t sent = t->attempt_start_ns + sent_us * 1000;
        if (sent_us > 0 && now > sent &&
            now - sent > ToNanos(o.first_byte_timeout)) {
          expired.push_back(
              {t,
               {Status::IoError(t->What() + ": no answer within the " +
                                std::to_string(o.first_byte_timeout.count()) +
                                " ms first-byte timeout"),
                RetryCause::kTimeout, 0}});
        }
        continue;
      }
      if (now > t->last_progress_ns &&
          now - t->last_progress_ns > ToNanos(o.stall_timeout)) {
        expired.push_back(
            {t,
             {Status::IoError(t->What() + ": the body stalled for " +
                              std::to_string(o.stall_timeout.count()) +
                              " ms after " + std::to_string(t->received) +
                              " of " + std::to_string(t->range.length) +
                              " bytes"),
              RetryCause::kTimeout, 0}});
      }
    }
    for (auto& [t, a] : expired) {
      curl_multi_remove_handle(multi_, t->easy);
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
    t->target->stats.Update([&](HttpStats& s) {
      if (probe) return;
      ok ? ++s.reads_ok : ++s.reads_failed;
      s.latency.Record(latency);
    });
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

  std::mutex mu_;
  std::vector<std::unique_ptr<Transfer>> incoming_;  // GUARDED_BY(mu_)
  std::multiset<uint32_t> pools_;                    // GUARDED_BY(mu_)
  bool config_dirty_ = false;                        // GUARDED_BY(mu_)
  bool stop_ = false;                                // GUARDED_BY(mu_)
  std::thread::id loop_id_;                          // GUARDED_BY(mu_)

  // Loop thread only.
  std::vector<std::unique_ptr<Transfer>> active_;
  std::priority_queue<Wake, std::vector<Wake>, std::greater<>> retry_heap_;
  std::vector<Done> done_;
  std::vector<CURL*> idle_easy_;
  uint64_t next_watchdog_ns_ = 0;
  uint64_t timer_at_ns_ = kNoTimer;  // libcurl's timer (OnTimer)
};

Result<std::shared_ptr<CurlEngine>> CurlEngine::Shared() {
  // Leaked on purpose: sources may outlive static destruction.
  static auto* mu = new std::mutex;
  static auto* shared = new std::weak_ptr<CurlEngine>;
  std::lock_guard lk(*mu);
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
