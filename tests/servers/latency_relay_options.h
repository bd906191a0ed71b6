// latency_relay_options.h — the relay's options parsing; single-threaded.
//
// rangeio-latency-relay's command line, its --latency JSON and its upstream
// address, parsed and checked before the relay loop starts; a bad option
// ends the process with a line naming it (exit status 2).
//
//   rangeio-latency-relay --upstream HOST:PORT [--listen PORT]
//       [--latency JSON] [--seed N] [--port-file FILE]
//       [--rate-limit RPS [--burst N]]
//
// --rate-limit: a token bucket on the listener, as S3 limits GETs per
// prefix (about 5,500/s): RPS tokens a second, at most --burst of them
// (default RPS/20, 50 ms of the rate; at least 1) kept. A request that
// arrives to an empty bucket is answered, after its drawn latency like any
// other, with 503 and S3's SlowDown error body instead of going upstream.
// Only a request that arrives on an idle connection (no earlier request
// still waiting there) is judged: the relay does not parse responses, so
// it cannot put a 503 between the answers of a pipelining client.
//
// Latency models (--latency, the JSON of faultproxy.js, same PRNG and seed;
// drawn by src/sim/latency_model.h, as the simulated store's):
//   {"kind": "none"}
//   {"kind": "fixed", "ms": 24}
//   {"kind": "every", "k": 64, "base_ms": 1, "slow_ms": 10}  request n is slow
//                                                            when n % k == k-1
//   {"kind": "random", "p": 0.01, "base_ms": 1, "slow_ms": 100}
//   {"kind": "lognormal", "median_ms": 24, "sigma": 0.3}
//   {"kind": "mixture", "median_ms": 24, "sigma": 0.3, "p": 0.01,
//    "factor": 10}         lognormal, x factor with probability p (the
//                          relay's only; faultproxy.js has no mixture)
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "sim/latency_model.h"

namespace rangeio::relay {

inline constexpr char kProgram[] = "rangeio-latency-relay";

// Prints "rangeio-latency-relay: <message>" to stderr and exits with 2.
[[noreturn]] void Die(const std::string& message);

// "<what>: <strerror(errno)>".
std::string Errno(const char* what);

struct Options {
  uint16_t listen_port = 0;  // 0: a free port (see port_file)
  std::string upstream;      // HOST:PORT, as given
  sockaddr_storage upstream_addr{};
  socklen_t upstream_addr_len = 0;
  rangeio::detail::DelayModel latency;  // in ms; default: none (fixed 0)
  uint32_t seed = 1;                    // faultproxy.js's default
  std::string port_file;                // empty: not written
  uint32_t rate_limit = 0;              // requests/s; 0: no limit
  uint32_t burst = 0;                   // bucket size (0 before parsing)
};

// The options of argv (--help prints the usage and exits with 0), the
// upstream resolved; Die()s naming the option on a bad one.
Options ParseOptions(int argc, char** argv);

}  // namespace rangeio::relay
