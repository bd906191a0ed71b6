// parse_number.h (internal) — strict decimal parsing, the one place for it:
// options, byte ranges, HTTP header values, and the latency relay's arguments
// (tests/servers/latency_relay.cc, which includes it without linking
// librangeio: keep it header-only).
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>

namespace rangeio::detail {

// True when all of `s` is a decimal uint64_t (no sign, space or suffix).
inline bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

}  // namespace rangeio::detail
