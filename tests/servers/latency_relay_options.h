// latency_relay_options.h — the relay's options parsing; single-threaded.
//
// rangeio-latency-relay's command line, its --latency JSON and its upstream
// address, parsed and checked before the relay loop starts; a bad option
// ends the process with a line naming it (exit status 2).
//
//   rangeio-latency-relay --upstream HOST:PORT [--listen PORT]
//       [--latency JSON] [--seed N] [--port-file FILE]
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
};

// The options of argv (--help prints the usage and exits with 0), the
// upstream resolved; Die()s naming the option on a bad one.
Options ParseOptions(int argc, char** argv);

}  // namespace rangeio::relay
