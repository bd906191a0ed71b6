// tests/servers/latency_relay.cc (rangeio-latency-relay, the benchmarks'
// latency relay) run as a process, in front of an upstream inside this test
// (and of nginx when the test servers run): bytes relayed exactly, pipelined
// requests kept in order, the added latency applied (lower bounds only: the
// machine is shared), closes passed on, bad options refused naming the option.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "support/http_servers.h"
#include "support/loopback_server.h"
#include "support/test_util.h"

extern char** environ;

namespace rangeio::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Guards reads against a relay that never answers (a hang, not a speed
// assertion).
constexpr int kHangGuardSeconds = 20;

std::string TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string t =
      std::string(base && *base ? base : "/tmp") + "/latency_relay_test.XXXXXX";
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Byte i of the body the upstream answers /bytes/N with.
char PatternByte(size_t i) { return static_cast<char>((i * 131 + 7) % 251); }

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = PatternByte(i);
  return s;
}

void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << "send: " << std::strerror(errno);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

struct Response {
  std::string head;
  std::string body;
};

// Reads one HTTP response (a Content-Length body) from fd, buffering what
// follows it in *rest. False at EOF or error before a whole response.
bool ReadResponse(int fd, std::string* rest, Response* r) {
  char buf[65536];
  for (;;) {
    const size_t end = rest->find("\r\n\r\n");
    if (end != std::string::npos) {
      r->head = rest->substr(0, end + 2);
      const size_t cl = r->head.find("Content-Length: ");
      const size_t length =
          cl == std::string::npos ? 0 : std::stoul(r->head.substr(cl + 16));
      if (rest->size() >= end + 4 + length) {
        r->body = rest->substr(end + 4, length);
        rest->erase(0, end + 4 + length);
        return true;
      }
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    rest->append(buf, static_cast<size_t>(n));
  }
}

// Whether the peer closed fd (recv gives EOF or a reset) before the hang
// guard.
bool PeerClosed(int fd) {
  char c;
  const ssize_t n = recv(fd, &c, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  timeval guard{kHangGuardSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << std::strerror(errno);
  return fd;
}

// A tiny HTTP/1.1 upstream on its own threads. It answers
//   GET /bytes/N   N bytes of Pattern();
//   POST /echo     the request body;
//   GET /close     "bye", then closes the connection;
// each with an X-Path header, and logs the paths in arrival order.
class Upstream {
 public:
  int port() const { return server_.port(); }
  std::string hostport() const { return server_.hostport(); }

  std::vector<std::string> paths() {
    std::lock_guard<std::mutex> lock(mu_);
    return paths_;
  }

 private:
  // Answers fd's requests until it sends EOF, then closes its side (as
  // nginx does). The descriptor itself is closed by server_.
  void Serve(int fd) {
    ServeRequests(fd);
    shutdown(fd, SHUT_RDWR);
  }

  void ServeRequests(int fd) {
    std::string in;
    char buf[65536];
    for (;;) {
      const size_t end = in.find("\r\n\r\n");
      if (end == std::string::npos) {
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return;
        in.append(buf, static_cast<size_t>(n));
        continue;
      }
      const std::string head = in.substr(0, end + 2);
      std::string lower = head;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(ch));
      const size_t cl = lower.find("content-length: ");
      const size_t length =
          cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16));
      while (in.size() < end + 4 + length) {
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return;
        in.append(buf, static_cast<size_t>(n));
      }
      const std::string body = in.substr(end + 4, length);
      in.erase(0, end + 4 + length);
      const size_t sp = head.find(' ');
      const std::string path =
          head.substr(sp + 1, head.find(' ', sp + 1) - sp - 1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        paths_.push_back(path);
      }
      std::string answer = "bye";
      if (path.starts_with("/bytes/")) {
        answer = Pattern(std::stoul(path.substr(7)));
      } else if (path == "/echo") {
        answer = body;
      }
      const std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: " +
                                std::to_string(answer.size()) +
                                "\r\nX-Path: " + path + "\r\n\r\n" + answer;
      if (send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(reply.size())) {
        return;
      }
      if (path == "/close") return;
    }
  }

  std::mutex mu_;
  std::vector<std::string> paths_;                        // GUARDED_BY(mu_)
  LoopbackServer server_{[this](int fd) { Serve(fd); }};  // last: see its dtor
};

struct Exit {
  int status = -1;  // exit code, or -1 if killed by a signal
  std::string stderr_text;
};

// rangeio-latency-relay as a child process, its stderr kept in a file.
class RelayProcess {
 public:
  explicit RelayProcess(std::vector<std::string> args) : dir_(TempDir()) {
    // Options first, so that a case ending in an option without its value
    // stays so.
    args.insert(args.begin(),
                {RANGEIO_LATENCY_RELAY, "--port-file", dir_ + "/port"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, (dir_ + "/stderr").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc =
        posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(rc, 0) << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
  }
  RelayProcess(const RelayProcess&) = delete;
  RelayProcess& operator=(const RelayProcess&) = delete;

  ~RelayProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  // The port it listens on, once it wrote its port file (0 if it exited).
  int WaitPort() {
    std::string port;
    WaitUntil([&] {
      port = ReadFile(dir_ + "/port");
      return !port.empty() || waitpid(pid_, nullptr, WNOHANG) != 0;
    });
    return port.empty() ? 0 : std::stoi(port);
  }

  // Waits for it to exit (after SIGTERM when `terminate`).
  Exit Wait(bool terminate) {
    if (terminate) kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            ReadFile(dir_ + "/stderr")};
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

TEST(LatencyRelayTest, RelaysPipelinedRequestsAndLargeBodiesExactly) {
  Upstream upstream;
  RelayProcess relay({"--upstream", upstream.hostport()});
  const int port = relay.WaitPort();
  ASSERT_GT(port, 0);
  const int fd = Connect(port);
  // 3 MiB back (many pipe fills, the client reading late) and 300 KiB up,
  // pipelined in one write with small requests around them.
  const std::string post(300 * 1024 + 17, 'p');
  std::string posted = post;
  for (size_t i = 0; i < posted.size(); ++i) posted[i] = PatternByte(i * 7);
  SendAll(fd,
          "GET /bytes/10 HTTP/1.1\r\nHost: x\r\n\r\n"
          "GET /bytes/3145739 HTTP/1.1\r\nHost: x\r\n\r\n"
          "POST /echo HTTP/1.1\r\nHost: x\r\ncontent-length: " +
              std::to_string(posted.size()) + "\r\n\r\n" + posted +
              "GET /bytes/0 HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string rest;
  Response r;
  ASSERT_TRUE(ReadResponse(fd, &rest, &r));
  EXPECT_EQ(r.body, Pattern(10));
  ASSERT_TRUE(ReadResponse(fd, &rest, &r));
  EXPECT_TRUE(r.body == Pattern(3145739)) << "3 MiB body differs";
  ASSERT_TRUE(ReadResponse(fd, &rest, &r));
  EXPECT_TRUE(r.body == posted) << "echoed 300 KiB body differs";
  ASSERT_TRUE(ReadResponse(fd, &rest, &r));
  EXPECT_NE(r.head.find("X-Path: /bytes/0"), std::string::npos);
  EXPECT_EQ(rest, "");
  EXPECT_EQ(upstream.paths(),
            (std::vector<std::string>{"/bytes/10", "/bytes/3145739", "/echo",
                                      "/bytes/0"}));
  close(fd);

  // SIGTERM: a clean exit with the count of requests by method.
  const Exit exit = relay.Wait(/*terminate=*/true);
  EXPECT_EQ(exit.status, 0) << exit.stderr_text;
  EXPECT_NE(exit.stderr_text.find("4 requests (GET 3, POST 1)"),
            std::string::npos)
      << exit.stderr_text;
}

TEST(LatencyRelayTest, FixedDelayIsAddedToEachRequest) {
  Upstream upstream;
  RelayProcess relay({"--upstream", upstream.hostport(), "--latency",
                      R"({"kind": "fixed", "ms": 30})"});
  const int port = relay.WaitPort();
  ASSERT_GT(port, 0);
  const int fd = Connect(port);
  std::string rest;
  Response r;
  for (int i = 0; i < 2; ++i) {
    const auto start = Clock::now();
    SendAll(fd, "GET /bytes/100 HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(ReadResponse(fd, &rest, &r));
    EXPECT_GE(Clock::now() - start, milliseconds(30)) << "request " << i;
    EXPECT_EQ(r.body, Pattern(100));
  }
  close(fd);
}

// Request 1 is slow (50 ms), 0 and 2 are not: 2 still goes after 1, so its
// answer takes at least 50 ms and comes third.
TEST(LatencyRelayTest, KeepsOrderBehindASlowRequest) {
  Upstream upstream;
  RelayProcess relay(
      {"--upstream", upstream.hostport(), "--latency",
       R"({"kind": "every", "k": 2, "base_ms": 0, "slow_ms": 50})"});
  const int port = relay.WaitPort();
  ASSERT_GT(port, 0);
  const int fd = Connect(port);
  const auto start = Clock::now();
  SendAll(fd,
          "GET /bytes/1 HTTP/1.1\r\n\r\n"
          "GET /bytes/2 HTTP/1.1\r\n\r\n"
          "GET /bytes/3 HTTP/1.1\r\n\r\n");
  std::string rest;
  Response r;
  for (const char* path : {"/bytes/1", "/bytes/2", "/bytes/3"}) {
    ASSERT_TRUE(ReadResponse(fd, &rest, &r));
    EXPECT_NE(r.head.find(std::string("X-Path: ") + path), std::string::npos)
        << r.head;
  }
  EXPECT_GE(Clock::now() - start, milliseconds(50));
  EXPECT_EQ(upstream.paths(),
            (std::vector<std::string>{"/bytes/1", "/bytes/2", "/bytes/3"}));
  close(fd);
}

TEST(LatencyRelayTest, UpstreamCloseClosesTheClient) {
  Upstream upstream;
  RelayProcess relay({"--upstream", upstream.hostport()});
  const int port = relay.WaitPort();
  ASSERT_GT(port, 0);
  const int fd = Connect(port);
  SendAll(fd, "GET /close HTTP/1.1\r\n\r\n");
  std::string rest;
  Response r;
  ASSERT_TRUE(ReadResponse(fd, &rest, &r));
  EXPECT_EQ(r.body, "bye");
  EXPECT_TRUE(PeerClosed(fd));
  close(fd);
}

TEST(LatencyRelayTest, ClientHalfCloseStillGetsItsAnswers) {
  Upstream upstream;
  RelayProcess relay({"--upstream", upstream.hostport(), "--latency",
                      R"({"kind": "fixed", "ms": 5})"});
  const int port = relay.WaitPort();
  ASSERT_GT(port, 0);
  const int fd = Connect(port);
  SendAll(fd, "GET /bytes/70000 HTTP/1.1\r\n\r\nGET /bytes/5 HTTP/1.1\r\n\r\n");
  shutdown(fd, SHUT_WR);
  std::string rest;
  Response r;
  ASSERT_TRUE(ReadResponse(fd, &rest, &r));
  EXPECT_TRUE(r.body == Pattern(70000));
  ASSERT_TRUE(ReadResponse(fd, &rest, &r));
  EXPECT_EQ(r.body, Pattern(5));
  EXPECT_TRUE(PeerClosed(fd));  // the upstream saw the FIN and closed
  close(fd);
}

TEST(LatencyRelayTest, UnreachableUpstreamClosesTheClient) {
  int unused_port;
  {
    Upstream gone;  // a port that was just free
    unused_port = gone.port();
  }
  RelayProcess relay(
      {"--upstream", "127.0.0.1:" + std::to_string(unused_port)});
  const int port = relay.WaitPort();
  ASSERT_GT(port, 0);
  const int fd = Connect(port);
  SendAll(fd, "GET /bytes/1 HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(PeerClosed(fd));
  close(fd);
  const Exit exit = relay.Wait(/*terminate=*/true);
  EXPECT_EQ(exit.status, 0);
  EXPECT_NE(exit.stderr_text.find("connect"), std::string::npos)
      << exit.stderr_text;
}

// --rate-limit: a request that finds the token bucket empty is answered
// 503 with S3's SlowDown body and never reaches the upstream; requests
// pipelined behind another are not judged, and wait for its 503. Rate 1/s
// with a burst of 2: the third request, sent right after, finds no token.
TEST(LatencyRelayTest, RateLimitAnswersSlowDownAboveTheBucket) {
  Upstream upstream;
  RelayProcess relay(
      {"--upstream", upstream.hostport(), "--rate-limit", "1", "--burst", "2"});
  const int port = relay.WaitPort();
  ASSERT_GT(port, 0);
  const int fd = Connect(port);
  std::string rest;
  Response r;
  for (int i = 0; i < 3; ++i) {
    SendAll(fd, "GET /bytes/10 HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(ReadResponse(fd, &rest, &r)) << "request " << i;
    if (i < 2) {
      EXPECT_TRUE(r.head.starts_with("HTTP/1.1 200")) << r.head;
      EXPECT_EQ(r.body, Pattern(10));
    } else {
      EXPECT_TRUE(r.head.starts_with("HTTP/1.1 503")) << r.head;
      EXPECT_NE(r.body.find("<Code>SlowDown</Code>"), std::string::npos)
          << r.body;
    }
  }
  // Pipelined on the now idle connection: the first is judged (503), the
  // two behind it pass, and the answers keep their order.
  SendAll(fd,
          "GET /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n"
          "GET /bytes/2 HTTP/1.1\r\nHost: x\r\n\r\n"
          "GET /bytes/3 HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(ReadResponse(fd, &rest, &r));
  EXPECT_TRUE(r.head.starts_with("HTTP/1.1 503")) << r.head;
  for (int i = 2; i <= 3; ++i) {
    ASSERT_TRUE(ReadResponse(fd, &rest, &r)) << "pipelined " << i;
    EXPECT_EQ(r.body, Pattern(static_cast<size_t>(i)));
  }
  close(fd);
  // The 503s never went upstream.
  EXPECT_EQ(upstream.paths(),
            (std::vector<std::string>{"/bytes/10", "/bytes/10", "/bytes/2",
                                      "/bytes/3"}));
  const Exit exit = relay.Wait(/*terminate=*/true);
  EXPECT_EQ(exit.status, 0) << exit.stderr_text;
  EXPECT_NE(exit.stderr_text.find("2 answered 503 SlowDown"), std::string::npos)
      << exit.stderr_text;
}

TEST(LatencyRelayTest, BadOptionsFailNamingTheOption) {
  const struct {
    std::vector<std::string> args;
    std::string named;
  } cases[] = {
      {{}, "--upstream"},
      {{"--upstream", "nocolon"}, "--upstream"},
      {{"--upstream", "127.0.0.1:http"}, "--upstream"},
      {{"--upstream", "127.0.0.1:1", "--listen", "abc"}, "--listen"},
      {{"--upstream", "127.0.0.1:1", "--listen", "70000"}, "--listen"},
      {{"--upstream", "127.0.0.1:1", "--seed", "-1"}, "--seed"},
      {{"--upstream", "127.0.0.1:1", "--latency", "{"}, "--latency"},
      {{"--upstream", "127.0.0.1:1", "--latency", R"({"kind": "bogus"})"},
       "bogus"},
      {{"--upstream", "127.0.0.1:1", "--latency", R"({"kind": "fixed"})"},
       "\"ms\""},
      {{"--upstream", "127.0.0.1:1", "--latency",
        R"({"kind": "every", "k": 0, "base_ms": 1, "slow_ms": 2})"},
       "\"k\""},
      {{"--upstream", "127.0.0.1:1", "--frobnicate", "1"}, "--frobnicate"},
      {{"--upstream", "127.0.0.1:1", "--rate-limit", "fast"}, "--rate-limit"},
      {{"--upstream", "127.0.0.1:1", "--burst", "0"}, "--burst"},
      {{"--upstream"}, "--upstream"},
  };
  for (const auto& c : cases) {
    RelayProcess relay(c.args);
    const Exit exit = relay.Wait(/*terminate=*/false);
    EXPECT_NE(exit.status, 0) << c.named;
    EXPECT_NE(exit.stderr_text.find(c.named), std::string::npos)
        << "want '" << c.named << "' in: " << exit.stderr_text;
  }
}

// In front of nginx, as the benchmarks use it: a Range GET's 206 body is the
// file's bytes.
TEST(LatencyRelayTest, RelaysNginxRangeResponses) {
  RANGEIO_NEED_SERVERS(servers);
  RelayProcess relay({"--upstream", servers.NginxHostPort(), "--latency",
                      R"({"kind": "lognormal", "median_ms": 2, "sigma": 0.3})",
                      "--seed", "7"});
  const int port = relay.WaitPort();
  ASSERT_GT(port, 0);
  const std::string file = ReadFile(servers.nginx_root + "/pattern.bin");
  ASSERT_EQ(file.size(), kPatternBytes);
  const int fd = Connect(port);
  std::string requests;
  for (int i = 0; i < 8; ++i) {
    requests +=
        "GET /pattern.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=" +
        std::to_string(i * 100000) + "-" + std::to_string(i * 100000 + 102399) +
        "\r\n\r\n";
  }
  SendAll(fd, requests);
  std::string rest;
  Response r;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(ReadResponse(fd, &rest, &r)) << "response " << i;
    EXPECT_TRUE(r.head.starts_with("HTTP/1.1 206")) << r.head;
    EXPECT_TRUE(r.body == file.substr(i * 100000, 102400)) << "range " << i;
  }
  close(fd);
}

}  // namespace
}  // namespace rangeio::testing
