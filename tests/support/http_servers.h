// tests/support/http_servers.h — the real servers of the HTTP/S3 tests.
//
// tests/servers/run_servers.sh starts nginx, s3rver and the fault proxy and
// exports where they listen (RANGEIO_TEST_*). TestServers::Get() reads those
// variables; a test that needs the servers starts with
// RANGEIO_NEED_SERVERS(servers), which skips it with a message saying how to
// start them, or fails it when RANGEIO_REQUIRE_SERVERS=1 (what CI sets, so a
// CI run can never skip them silently).
//
// The Ceph RADOS Gateway (tests/servers/ceph_rgw.sh) is optional to
// run_servers.sh (it needs Debian's Ceph packages): a test of an RGW backend
// also starts with RANGEIO_NEED_BACKEND(servers, backend)
// (support/http_test_util.h), which skips or fails it the same way.
//
// ProxyListener makes a faultproxy listener of its own (upstream, latency,
// faults as JSON, see tests/servers/faultproxy.js) for the life of a test,
// so tests running in parallel never share a fault configuration.
//
// Thread-safety: ProxyListener is used by one thread; Get() is thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "rangeio/status.h"

namespace rangeio::testing {

struct TestServers {
  std::string nginx;              // http://127.0.0.1:PORT
  std::string nginx_root;         // the directory nginx serves
  std::string nginx_tls;          // https://127.0.0.1:PORT (HTTP/2 offered)
  std::string tls_ca;             // its self-signed certificate (PEM)
  std::string s3_endpoint;        // http://127.0.0.1:PORT (s3rver)
  std::string s3_vhost_endpoint;  // http://s3.localhost:PORT
  std::string bucket;
  std::string proxy_control;  // http://127.0.0.1:PORT
  // Ceph RGW; empty when run_servers.sh did not start it.
  std::string rgw_endpoint;        // http://127.0.0.1:PORT
  std::string rgw_vhost_endpoint;  // http://s3.localhost:PORT
  std::string rgw_access_key;      // its test user's keys
  std::string rgw_secret_key;

  // host:port of nginx and s3rver, as a proxy upstream.
  std::string NginxHostPort() const;
  std::string S3HostPort() const;
  std::string RgwHostPort() const;

  // nullopt when the variables are not set.
  static std::optional<TestServers> Get();
  // Whether RANGEIO_REQUIRE_SERVERS=1 (missing servers fail the test).
  static bool Required();
};

// Bytes of tests/servers/seed.js's objects: pattern.bin has this many bytes,
// byte i being SimulatedByteAt(i).
inline constexpr uint64_t kPatternBytes = (1 << 20) + 13;

class ProxyListener {
 public:
  // A listener in front of `upstream` (host:port) with `config` merged in
  // (keys "latency", "faults", "capture", "seed").
  static Result<ProxyListener> Make(const TestServers& servers,
                                    const std::string& upstream,
                                    nlohmann::json config = {});
  ProxyListener(ProxyListener&& other) noexcept;
  ProxyListener& operator=(ProxyListener&&) = delete;
  ~ProxyListener();  // closes the listener

  int port() const { return port_; }
  // http://127.0.0.1:PORT
  std::string base() const;
  // The listener's counters: requests, methods, faults, captured.
  Result<nlohmann::json> Stats() const;

 private:
  ProxyListener(std::string control, int port)
      : control_(std::move(control)), port_(port) {}
  std::string control_;
  int port_ = 0;
};

// A blocking HTTP request with libcurl (for the proxy's control API):
// returns the body of a 2xx answer, an error otherwise.
Result<std::string> HttpCall(const std::string& method, const std::string& url,
                             const std::string& body = "");

}  // namespace rangeio::testing

// Skips the test (or fails it under RANGEIO_REQUIRE_SERVERS=1) when the
// servers are not running; else declares `var` holding them.
#define RANGEIO_NEED_SERVERS(var)                                          \
  const auto var##_opt = ::rangeio::testing::TestServers::Get();           \
  if (!var##_opt) {                                                        \
    if (::rangeio::testing::TestServers::Required()) {                     \
      FAIL() << "RANGEIO_REQUIRE_SERVERS=1 but the HTTP test servers are " \
                "not running (RANGEIO_TEST_NGINX unset)";                  \
    }                                                                      \
    GTEST_SKIP() << "HTTP test servers are not running: start them with "  \
                    "eval \"$(tests/servers/run_servers.sh start DIR)\" "  \
                    "(after npm ci in tests/servers)";                     \
  }                                                                        \
  const ::rangeio::testing::TestServers& var = *var##_opt
