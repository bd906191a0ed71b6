// latency_relay.cc — the relay's epoll loop and main; single-threaded.
//
// rangeio-latency-relay, the HTTP/1.1 latency relay in front of nginx for
// `rangeio-bench http` and `rangeio-bench blob`
// (tests/servers/run_servers.sh starts two: lognormal 24 ms, and none).
//
// Usage and the --latency models: latency_relay_options.h.
//
// The kernel here has no netem, so the benchmarks' latency is added in user
// space, and whatever adds it must not be the bottleneck (issue 5: at least
// 3x the ~2,300 requests/s the benchmarks ask). faultproxy.js's relayTcp mode
// costs ~300 us of CPU per 100 KiB response in Node; this relay does the same
// job with one epoll loop and no user-space copy of response bytes.
//
// Per client connection, one upstream connection. Only the client's request
// heads are parsed (plus a Content-Length body): request n goes upstream at
// max(its arrival + delay(n), when request n-1 went), so a connection's
// requests keep their order, as in faultproxy.js's relayTcp. Responses are
// not parsed: upstream bytes are splice()d to the client through a pipe of
// the connection's own. Request bodies sent chunked are refused (rangeio and
// curl send none).
//
// With --rate-limit, a token bucket answers requests above the rate with
// 503 SlowDown (latency_relay_options.h), for `rangeio-bench throttle`.
//
// SIGTERM or SIGINT ends it; it then prints one line to stderr: requests by
// method, connections, response bytes and how late the timers fired.
// Single-threaded: one epoll loop owns every connection.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "latency_relay_connection.h"
#include "latency_relay_options.h"
#include "latency_relay_rate.h"
#include "sim/latency_model.h"

namespace rangeio::relay {
namespace {

// Client bytes read per recv(): several pipelined request heads.
constexpr size_t kReadBytes = 64 * 1024;
constexpr int kMaxEvents = 256;

// epoll keys: the listener, the timer, the signals; connection id k uses
// 2k (client side) and 2k + 1 (upstream side), ids starting at kFirstId.
constexpr uint64_t kListenKey = 0;
constexpr uint64_t kTimerKey = 1;
constexpr uint64_t kSignalKey = 2;
constexpr uint64_t kFirstId = 2;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

using rangeio::detail::Mulberry32;
using rangeio::detail::NormalFromUniforms;

class Relay {
 public:
  explicit Relay(Options options)
      : options_(std::move(options)), random_(options_.seed) {}

  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  ~Relay() {
    for (auto& [id, c] : connections_) CloseFds(c);
    for (int fd : {listen_fd_, timer_fd_, signal_fd_, epoll_fd_}) {
      if (fd >= 0) close(fd);
    }
  }

  // Listens, writes the port file, then relays until SIGTERM or SIGINT.
  void Run() {
    Setup();
    std::vector<epoll_event> events(kMaxEvents);
    while (!stopping_) {
      const int n = epoll_wait(epoll_fd_, events.data(), kMaxEvents, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        Die(Errno("epoll_wait"));
      }
      for (int i = 0; i < n; ++i) OnEvent(events[i]);
      ArmTimer();
    }
  }

  void PrintSummary() const {
    std::string methods;
    for (const auto& [method, count] : methods_) {
      methods +=
          (methods.empty() ? "" : ", ") + method + " " + std::to_string(count);
    }
    std::fprintf(
        stderr,
        "%s: %llu requests (%s) on %llu connections, %llu response "
        "bytes, %llu answered 503 SlowDown; delayed requests sent %.3f ms "
        "late on average, %.3f ms at most (%llu delayed)\n",
        kProgram, static_cast<unsigned long long>(requests_),
        methods.empty() ? "none" : methods.c_str(),
        static_cast<unsigned long long>(accepted_),
        static_cast<unsigned long long>(response_bytes_),
        static_cast<unsigned long long>(bucket_.refused()),
        delayed_ ? late_ns_sum_ / 1e6 / static_cast<double>(delayed_) : 0.0,
        static_cast<double>(late_ns_max_) / 1e6,
        static_cast<unsigned long long>(delayed_));
  }

 private:
  struct TimerEntry {
    int64_t due_ns;
    uint64_t id;
    bool operator>(const TimerEntry& o) const { return due_ns > o.due_ns; }
  };

  void Setup() {
    // Benchmarks hold ~200 connections, each taking 4 descriptors.
    rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
        nofile.rlim_cur < nofile.rlim_max) {
      nofile.rlim_cur = nofile.rlim_max;
      setrlimit(RLIMIT_NOFILE, &nofile);
    }
    // A client gone mid-response is an EPIPE from splice, not a signal.
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    if (sigprocmask(SIG_BLOCK, &stop, nullptr) != 0) Die(Errno("sigprocmask"));
    signal_fd_ = signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC);
    if (signal_fd_ < 0) Die(Errno("signalfd"));

    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) Die(Errno("epoll_create1"));
    // timerfd, not epoll_wait's millisecond timeout: a 24 ms median must not
    // be rounded to whole milliseconds (hrtimer precision; the summary line
    // reports how late the timers fired).
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) Die(Errno("timerfd_create"));
    Listen();
    Watch(listen_fd_, EPOLLIN, kListenKey);
    Watch(timer_fd_, EPOLLIN, kTimerKey);
    Watch(signal_fd_, EPOLLIN, kSignalKey);
    WritePortFile();
  }

  void Listen() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) Die(Errno("socket"));
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(options_.listen_port);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) !=
        0) {
      Die("--listen " + std::to_string(options_.listen_port) + ": " +
          Errno("bind 127.0.0.1"));
    }
    if (listen(listen_fd_, SOMAXCONN) != 0) Die(Errno("listen"));
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }

  // Written whole under a temporary name, so a reader never sees half.
  void WritePortFile() const {
    if (options_.port_file.empty()) return;
    const std::string tmp = options_.port_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) Die("--port-file '" + tmp + "': " + Errno("open"));
    std::fprintf(f, "%u\n", static_cast<unsigned>(port_));
    if (std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), options_.port_file.c_str()) != 0) {
      Die("--port-file '" + options_.port_file + "': " + Errno("write"));
    }
  }

  void Watch(int fd, uint32_t events, uint64_t key) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      Die(Errno("epoll_ctl"));
    }
  }

  void OnEvent(const epoll_event& ev) {
    const uint64_t key = ev.data.u64;
    if (key == kListenKey) return Accept();
    if (key == kTimerKey) return OnTimer();
    if (key == kSignalKey) {
      stopping_ = true;
      return;
    }
    auto it = connections_.find(key >> 1);
    if (it == connections_.end()) return;  // closed earlier in this batch
    Connection& c = it->second;
    const bool upstream_side = key & 1;
    const bool in = ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR);
    const bool out = ev.events & (EPOLLOUT | EPOLLHUP | EPOLLERR);
    if (upstream_side) {
      if (!c.upstream_connected && out && !FinishConnect(c)) {
        return Close(c);
      }
      c.upstream_readable |= in;
      c.upstream_writable |= out && c.upstream_connected;
    } else {
      c.client_readable |= in;
      c.client_writable |= out;
    }
    if (!Pump(c)) Close(c);
  }

  void Accept() {
    for (;;) {
      const int fd =
          accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
        // Out of descriptors: the connection waits in the backlog, and
        // epoll (level-triggered here) retries.
        std::fprintf(stderr, "%s: %s\n", kProgram, Errno("accept").c_str());
        return;
      }
      ++accepted_;
      Connection c;
      c.id = next_id_++;
      c.client = fd;
      if (!OpenUpstream(c)) {
        CloseFds(c);
        continue;
      }
      Connection& conn = connections_.emplace(c.id, std::move(c)).first->second;
      const uint32_t edge = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
      Watch(conn.client, edge, conn.id << 1);
      Watch(conn.upstream, edge, conn.id << 1 | 1);
    }
  }

  bool OpenUpstream(Connection& c) {
    const int one = 1;
    setsockopt(c.client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
      std::fprintf(stderr, "%s: %s\n", kProgram, Errno("pipe2").c_str());
      return false;
    }
    c.pipe_r = pipe_fds[0];
    c.pipe_w = pipe_fds[1];
    const int size = fcntl(c.pipe_w, F_SETPIPE_SZ, kPipeBytes);
    c.pipe_capacity =
        static_cast<size_t>(size > 0 ? size : fcntl(c.pipe_w, F_GETPIPE_SZ));
    c.upstream = socket(options_.upstream_addr.ss_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.upstream < 0) {
      std::fprintf(stderr, "%s: %s\n", kProgram, Errno("socket").c_str());
      return false;
    }
    setsockopt(c.upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c.upstream,
                reinterpret_cast<const sockaddr*>(&options_.upstream_addr),
                options_.upstream_addr_len) == 0) {
      c.upstream_connected = true;
      c.upstream_writable = true;
    } else if (errno != EINPROGRESS) {
      std::fprintf(stderr, "%s: upstream %s: %s\n", kProgram,
                   options_.upstream.c_str(), Errno("connect").c_str());
      return false;
    }
    return true;
  }

  bool FinishConnect(Connection& c) {
    int error = 0;
    socklen_t len = sizeof error;
    getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      std::fprintf(stderr, "%s: upstream %s: connect: %s\n", kProgram,
                   options_.upstream.c_str(), std::strerror(error));
      return false;
    }
    c.upstream_connected = true;
    return true;
  }

  // Moves whatever can move on c's four directions. False: c is done (an
  // error, logged, or the upstream closed and its bytes reached the client).
  bool Pump(Connection& c) {
    if (c.client_readable && !c.client_eof && !ReadClient(c)) return false;
    if (!WriteReply(c) || !WriteUpstream(c) || !RelayResponse(c)) {
      return false;
    }
    if (c.upstream_eof && c.piped == 0) return false;
    // The client sent its last request (half-close): pass the FIN on once
    // every request went upstream; the upstream then answers and closes.
    if (c.client_eof && !c.upstream_shut && c.upstream_connected &&
        c.waiting.empty() && c.out_sent == c.out.size()) {
      shutdown(c.upstream, SHUT_WR);
      c.upstream_shut = true;
    }
    return true;
  }

  bool ReadClient(Connection& c) {
    for (;;) {
      const ssize_t n = recv(c.client, scratch_, sizeof scratch_, 0);
      if (n > 0) {
        c.in.append(scratch_, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        c.client_eof = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        c.client_readable = false;
        break;
      }
      if (errno != ECONNRESET) {
        std::fprintf(stderr, "%s: client: %s\n", kProgram,
                     Errno("recv").c_str());
      }
      return false;
    }
    return ParseRequests(c);
  }

  // Cuts c.in into whole requests and schedules each.
  bool ParseRequests(Connection& c) {
    const int64_t now = NowNs();
    const std::string_view in = c.in;
    size_t used = 0;
    for (;;) {
      const size_t from =
          std::max(used, c.in_scanned > 3 ? c.in_scanned - 3 : 0);
      const size_t end = in.find("\r\n\r\n", from);
      if (end == std::string_view::npos) {
        c.in_scanned = in.size();
        if (in.size() - used > kMaxHeadBytes) {
          std::fprintf(stderr,
                       "%s: client sent %zu bytes without ending a request "
                       "head; closing it\n",
                       kProgram, in.size() - used);
          return false;
        }
        break;
      }
      const std::string_view head = in.substr(used, end + 2 - used);
      std::string error;
      const int64_t body = BodyBytes(head, &error);
      if (body < 0) {
        std::fprintf(stderr, "%s: client request: %s; closing it\n", kProgram,
                     error.c_str());
        return false;
      }
      const size_t total = end + 4 - used + static_cast<size_t>(body);
      if (in.size() - used < total) {
        c.in_scanned = used;  // the head is found again once the body is in
        break;
      }
      Schedule(c, head.substr(0, head.find(' ')), in.substr(used, total), now);
      used += total;
      c.in_scanned = used;
    }
    if (used > 0) {
      c.in.erase(0, used);
      c.in_scanned -= std::min(c.in_scanned, used);
    }
    ForwardDue(c, now);
    return true;
  }

  // Request n goes at max(now + delay(n), when the one before it goes).
  void Schedule(Connection& c, std::string_view method,
                std::string_view request, int64_t now) {
    const uint64_t n = requests_++;
    auto it = methods_.find(method);
    if (it == methods_.end()) it = methods_.emplace(method, 0).first;
    ++it->second;
    auto uniform = [this] { return random_.Next(); };
    const double delay_ms = options_.latency.Delay(
        n, uniform, [&uniform] { return NormalFromUniforms(uniform); });
    const bool throttled = c.Idle() && !bucket_.Take(now);
    const int64_t due =
        std::max(now + static_cast<int64_t>(delay_ms * 1e6), c.last_due_ns);
    c.last_due_ns = due;
    c.waiting.push_back({due, due > now, throttled, std::string(request)});
  }

  // The relay's own answer to the client, once every upstream byte before
  // it went out (a throttled request is only ever on an idle connection);
  // the requests behind it go upstream once it is sent, so that their
  // answers come after it.
  bool WriteReply(Connection& c) {
    while (c.client_writable && c.piped == 0 && c.reply_sent < c.reply.size()) {
      const ssize_t n = send(c.client, c.reply.data() + c.reply_sent,
                             c.reply.size() - c.reply_sent, MSG_NOSIGNAL);
      if (n >= 0) {
        c.reply_sent += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        c.client_writable = false;
        return true;
      }
      return false;  // the client is gone
    }
    if (c.reply_sent == c.reply.size() && !c.reply.empty()) {
      c.reply.clear();
      c.reply_sent = 0;
      ForwardDue(c, NowNs());
    }
    return true;
  }

  // Moves the requests due by now to c.out, and keeps a timer on the next.
  void ForwardDue(Connection& c, int64_t now) {
    while (!c.waiting.empty() && c.waiting.front().due_ns <= now &&
           c.reply.empty()) {
      Connection::Waiting& w = c.waiting.front();
      if (w.delayed) {
        // How late its timer fired (and was handled): the precision of the
        // added latency.
        const int64_t late = now - w.due_ns;
        late_ns_sum_ += static_cast<double>(late);
        late_ns_max_ = std::max(late_ns_max_, late);
        ++delayed_;
      }
      if (w.throttled) {
        c.reply = SlowDownResponse();
        c.reply_sent = 0;
      } else if (c.out_sent == c.out.size()) {
        c.out = std::move(w.bytes);
        c.out_sent = 0;
      } else {
        c.out += w.bytes;
      }
      c.waiting.pop_front();
    }
    // Held behind a pending 503, the next one is forwarded by WriteReply.
    if (c.reply.empty() && !c.waiting.empty() &&
        c.timer_due_ns != c.waiting.front().due_ns) {
      c.timer_due_ns = c.waiting.front().due_ns;
      timers_.push({c.timer_due_ns, c.id});
    }
  }

  bool WriteUpstream(Connection& c) {
    while (c.upstream_writable && c.out_sent < c.out.size()) {
      const ssize_t n = send(c.upstream, c.out.data() + c.out_sent,
                             c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (n >= 0) {
        c.out_sent += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        c.upstream_writable = false;
        break;
      }
      std::fprintf(stderr, "%s: upstream %s: %s\n", kProgram,
                   options_.upstream.c_str(), Errno("send").c_str());
      return false;
    }
    if (c.out_sent == c.out.size() && !c.out.empty()) {
      c.out.clear();
      c.out_sent = 0;
    }
    return true;
  }

  // Upstream -> pipe -> client. The pipe is filled only when empty, so that
  // an EAGAIN from the fill means the socket is drained, not the pipe full
  // (splice gives the same errno for both).
  bool RelayResponse(Connection& c) {
    constexpr unsigned kFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
    for (;;) {
      if (c.piped > 0) {
        if (!c.client_writable) return true;
        const ssize_t n =
            splice(c.pipe_r, nullptr, c.client, nullptr, c.piped, kFlags);
        if (n > 0) {
          c.piped -= static_cast<size_t>(n);
          response_bytes_ += static_cast<uint64_t>(n);
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
          c.client_writable = false;
          return true;
        }
        if (n < 0 && errno != EPIPE && errno != ECONNRESET) {
          std::fprintf(stderr, "%s: client: %s\n", kProgram,
                       Errno("splice").c_str());
        }
        return false;  // the client is gone
      }
      if (!c.upstream_readable || c.upstream_eof) return true;
      const ssize_t n = splice(c.upstream, nullptr, c.pipe_w, nullptr,
                               c.pipe_capacity, kFlags);
      if (n > 0) {
        c.piped = static_cast<size_t>(n);
        continue;
      }
      if (n == 0) {
        c.upstream_eof = true;
        return true;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        c.upstream_readable = false;
        return true;
      }
      if (errno != ECONNRESET) {
        std::fprintf(stderr, "%s: upstream %s: %s\n", kProgram,
                     options_.upstream.c_str(), Errno("splice").c_str());
      }
      return false;
    }
  }

  void OnTimer() {
    uint64_t expirations;
    // Clears the timerfd's readiness; EAGAIN when it was re-armed already.
    if (read(timer_fd_, &expirations, sizeof expirations) < 0 &&
        errno != EAGAIN) {
      Die(Errno("read timerfd"));
    }
    const int64_t now = NowNs();
    while (!timers_.empty() && timers_.top().due_ns <= now) {
      const TimerEntry t = timers_.top();
      timers_.pop();
      auto it = connections_.find(t.id);
      if (it == connections_.end() || it->second.timer_due_ns != t.due_ns) {
        continue;  // closed, or an older entry of a live connection
      }
      Connection& c = it->second;
      c.timer_due_ns = -1;
      ForwardDue(c, now);
      if (!Pump(c)) Close(c);
    }
  }

  // Points the timerfd at the earliest deadline, if that changed.
  void ArmTimer() {
    if (timers_.empty() || timers_.top().due_ns == armed_ns_) return;
    armed_ns_ = timers_.top().due_ns;
    itimerspec spec{};
    spec.it_value.tv_sec = armed_ns_ / 1'000'000'000;
    spec.it_value.tv_nsec = armed_ns_ % 1'000'000'000;
    if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) {
      Die(Errno("timerfd_settime"));
    }
  }

  static void CloseFds(Connection& c) {
    for (int fd : {c.client, c.upstream, c.pipe_r, c.pipe_w}) {
      if (fd >= 0) close(fd);
    }
  }

  // Both sockets close (the client sees FIN, or RST if it sent bytes we did
  // not read), as faultproxy.js's relayTcp does on either side's close.
  void Close(Connection& c) {
    CloseFds(c);
    connections_.erase(c.id);
  }

  Options options_;
  Mulberry32 random_;
  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  int timer_fd_ = -1;
  int signal_fd_ = -1;
  uint16_t port_ = 0;
  bool stopping_ = false;
  uint64_t next_id_ = kFirstId;
  std::unordered_map<uint64_t, Connection> connections_;
  std::priority_queue<TimerEntry, std::vector<TimerEntry>,
                      std::greater<TimerEntry>>
      timers_;
  int64_t armed_ns_ = -1;
  char scratch_[kReadBytes];

  uint64_t requests_ = 0;
  std::map<std::string, uint64_t, std::less<>> methods_;
  uint64_t accepted_ = 0;
  uint64_t response_bytes_ = 0;
  TokenBucket bucket_{options_.rate_limit, options_.burst};  // --rate-limit
  uint64_t delayed_ = 0;
  double late_ns_sum_ = 0;
  int64_t late_ns_max_ = 0;
};

}  // namespace
}  // namespace rangeio::relay

int main(int argc, char** argv) {
  rangeio::relay::Relay relay(rangeio::relay::ParseOptions(argc, argv));
  relay.Run();
  relay.PrintSummary();
  return 0;
}
