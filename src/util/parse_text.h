// parse_text.h (internal) — strict decimal and byte-size parsing, whitespace
// trimming and ASCII case-insensitive comparison, the one place for them:
// options, byte ranges, URLs, HTTP header values, AWS config files, and the
// latency relay's arguments (tests/servers/latency_relay.cc, which includes
// it without linking librangeio: keep it header-only). Stateless.
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

// `s` without leading blanks (space, tab) and trailing blanks or line ends
// (space, tab, CR, LF): header lines and config lines both end that way.
inline std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' ||
                        s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// `s` starts with `lower` (written in lower case), ignoring ASCII case: URL
// schemes and header names.
inline bool StartsWithNoCase(std::string_view s, std::string_view lower) {
  if (s.size() < lower.size()) return false;
  for (size_t i = 0; i < lower.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

// `s` equals `lower` (written in lower case), ignoring ASCII case.
inline bool EqualsNoCase(std::string_view s, std::string_view lower) {
  return s.size() == lower.size() && StartsWithNoCase(s, lower);
}

// "64", "64K", "64KiB", "1M", "1MiB", "2G", "2GiB", "1T", "1TiB" (binary
// multiples).
inline bool ParseBytes(std::string_view s, uint64_t* out) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  uint64_t n = 0;
  if (!ParseU64(s.substr(0, digits), &n)) return false;
  const std::string_view suffix = s.substr(digits);
  int shift = 0;
  if (suffix.empty() || suffix == "B") {
    shift = 0;
  } else if (suffix == "K" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GiB") {
    shift = 30;
  } else if (suffix == "T" || suffix == "TiB") {
    shift = 40;
  } else {
    return false;
  }
  if (shift != 0 && n > (UINT64_MAX >> shift)) return false;
  *out = n << shift;
  return true;
}

}  // namespace rangeio::detail
