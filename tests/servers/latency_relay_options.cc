// latency_relay_options.cc — the relay's options parsing; single-threaded.
#include "latency_relay_options.h"

#include <netdb.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "util/parse_text.h"

namespace rangeio::relay {
namespace {

using rangeio::detail::DelayModel;
using rangeio::detail::ParseU64;

// --latency JSON as faultproxy.js takes it ("none" is a fixed 0 ms).
DelayModel ParseLatency(const std::string& text) {
  const std::string where = "--latency '" + text + "'";
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    Die(where + ": not a JSON object");
  }
  if (!j.contains("kind") || !j["kind"].is_string()) {
    Die(where +
        ": needs a string \"kind\" (none, fixed, every, random, "
        "lognormal, mixture)");
  }
  const std::string kind = j["kind"];
  // A non-negative number field; every field a kind names is required.
  auto number = [&](const char* field) {
    if (!j.contains(field) || !j[field].is_number() ||
        j[field].get<double>() < 0 || !std::isfinite(j[field].get<double>())) {
      Die(where + ": \"" + kind + "\" needs a non-negative number \"" + field +
          "\"");
    }
    return j[field].get<double>();
  };
  DelayModel m;
  if (kind == "none") {
    m.kind = DelayModel::Kind::kFixed;
  } else if (kind == "fixed") {
    m.kind = DelayModel::Kind::kFixed;
    m.base = number("ms");
  } else if (kind == "every") {
    m.kind = DelayModel::Kind::kEveryKth;
    if (!j.contains("k") || !j["k"].is_number_integer() ||
        j["k"].get<int64_t>() < 1) {
      Die(where + ": \"every\" needs an integer \"k\" >= 1");
    }
    m.every = j["k"].get<uint64_t>();
    m.base = number("base_ms");
    m.slow = number("slow_ms");
  } else if (kind == "random") {
    m.kind = DelayModel::Kind::kProbability;
    m.p = number("p");
    if (m.p > 1) Die(where + ": \"p\" is a probability, at most 1");
    m.base = number("base_ms");
    m.slow = number("slow_ms");
  } else if (kind == "lognormal") {
    m.kind = DelayModel::Kind::kLognormal;
    m.base = number("median_ms");
    m.sigma = number("sigma");
  } else if (kind == "mixture") {
    m.kind = DelayModel::Kind::kMixture;
    m.base = number("median_ms");
    m.sigma = number("sigma");
    m.p = number("p");
    if (m.p > 1) Die(where + ": \"p\" is a probability, at most 1");
    m.factor = number("factor");
    if (m.factor < 1) Die(where + ": \"factor\" must be at least 1");
  } else {
    Die(where + ": unknown kind \"" + kind +
        "\" (none, fixed, every, random, lognormal, mixture)");
  }
  return m;
}

template <typename T>
T ParseUnsigned(const char* option, std::string_view text, T max,
                const char* what) {
  uint64_t value = 0;
  if (!ParseU64(text, &value) || value > max) {
    Die(std::string(option) + " '" + std::string(text) + "': not " + what);
  }
  return static_cast<T>(value);
}

void ResolveUpstream(Options& o) {
  const size_t colon = o.upstream.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    Die("--upstream '" + o.upstream + "': not HOST:PORT");
  }
  const std::string host = o.upstream.substr(0, colon);
  const std::string port = o.upstream.substr(colon + 1);
  uint64_t port_number = 0;
  if (!ParseU64(port, &port_number) || port_number > 65535) {
    Die("--upstream '" + o.upstream + "': port '" + port +
        "' is not a number 0..65535");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    Die("--upstream '" + o.upstream + "': cannot resolve '" + host +
        "': " + gai_strerror(rc));
  }
  std::memcpy(&o.upstream_addr, found->ai_addr, found->ai_addrlen);
  o.upstream_addr_len = found->ai_addrlen;
  freeaddrinfo(found);
}

}  // namespace

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  std::exit(2);
}

std::string Errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  bool have_upstream = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: %s --upstream HOST:PORT [--listen PORT] [--latency JSON] "
          "[--seed N] [--port-file FILE] [--rate-limit RPS [--burst N]]\n",
          kProgram);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      Die(std::string(arg) + ": " +
          (arg.starts_with("--") ? "needs a value" : "unknown argument"));
    }
    const std::string_view value = argv[++i];
    if (arg == "--listen") {
      o.listen_port = ParseUnsigned<uint16_t>("--listen", value, 65535,
                                              "a port number (0..65535)");
    } else if (arg == "--upstream") {
      o.upstream = value;
      have_upstream = true;
    } else if (arg == "--latency") {
      o.latency = ParseLatency(std::string(value));
    } else if (arg == "--seed") {
      o.seed = ParseUnsigned<uint32_t>("--seed", value, UINT32_MAX,
                                       "an integer 0..4294967295");
    } else if (arg == "--port-file") {
      o.port_file = value;
    } else if (arg == "--rate-limit") {
      o.rate_limit = ParseUnsigned<uint32_t>("--rate-limit", value, 10'000'000,
                                             "requests/s 0..10000000");
    } else if (arg == "--burst") {
      o.burst = ParseUnsigned<uint32_t>("--burst", value, 10'000'000,
                                        "a request count 1..10000000");
      if (o.burst == 0) Die("--burst '0': not a request count 1..10000000");
    } else {
      Die("unknown option '" + std::string(arg) +
          "' (--listen, --upstream, --latency, --seed, --port-file, "
          "--rate-limit, --burst)");
    }
  }
  if (!have_upstream) Die("--upstream HOST:PORT is required");
  if (o.burst == 0) o.burst = std::max<uint32_t>(1, o.rate_limit / 20);
  ResolveUpstream(o);
  return o;
}

}  // namespace rangeio::relay
