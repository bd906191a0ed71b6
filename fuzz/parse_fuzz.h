// parse_fuzz.h — the checks of the parsing fuzz targets (url_fuzz,
// options_fuzz, http_response_fuzz), shared by their libFuzzer binaries and
// the gtest that replays their corpora (parse_fuzz_corpus_test.cc).
//
// Each takes any bytes and returns "" when every invariant holds, else a
// description of the first one broken. The invariants: no crash or
// sanitizer report; what parses is well-formed (and round-trips where there
// is a printer); every error and every redacted string holds no control
// character and stays within a bound, whatever the input (issue 16, points
// 3, 10 and 11).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rangeio::fuzz {

// The most characters an error may have, whatever the input: a message is a
// sentence plus escaped, bounded foreign text (kMaxForeignText).
inline constexpr size_t kMaxErrorChars = 4096;

// RedactUrl, ForeignText, ParseS3Url, ParseS3Endpoint, EncodeS3Key.
std::string CheckUrlInput(const uint8_t* data, size_t size);
// Options::Parse of "key=value,..." text, and its ToString round trip.
std::string CheckOptionsInput(const uint8_t* data, size_t size);
// Header lines through Response::AddHeaderLine, ParseContentRange,
// CheckDataHeaders, JudgeAnswer (plain and S3 dialect, with the S3 error
// XML), RetryAfterNanos.
std::string CheckHttpResponseInput(const uint8_t* data, size_t size);

// True when `s` is printable ASCII only.
inline bool Printable(const std::string& s) {
  for (const char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace rangeio::fuzz
