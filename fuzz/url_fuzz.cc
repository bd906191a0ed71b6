// url_fuzz.cc — libFuzzer target: URL redaction and s3:// / endpoint
// parsing (see parse_fuzz.h). The input is the URL, as bytes.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "parse_fuzz.h"
#include "s3/s3.h"
#include "util/redact.h"

namespace rangeio::fuzz {

namespace {

std::string CheckError(const Status& st, const char* what) {
  if (st.ok()) return "";
  if (!Printable(st.message())) {
    return std::string(what) + " error has a control character: " +
           detail::ForeignText(st.message());
  }
  if (st.message().size() > kMaxErrorChars) {
    return std::string(what) + " error of " +
           std::to_string(st.message().size()) + " characters";
  }
  return "";
}

// A userinfo RedactUrl left: after any ":/" (and up to two more '/'), an
// authority (up to '/', '?', '#') holding an '@'. Empty when there is none.
std::string LeftUserinfo(std::string_view url) {
  for (size_t colon = url.find(":/"); colon != std::string_view::npos;
       colon = url.find(":/", colon + 1)) {
    size_t start = colon + 1;
    while (start < url.size() && start < colon + 4 && url[start] == '/') {
      ++start;
    }
    const std::string_view authority =
        url.substr(start, url.find_first_of("/?#", start) - start);
    const size_t at = authority.rfind('@');
    if (at != std::string_view::npos) {
      return std::string(authority.substr(0, at + 1));
    }
  }
  return "";
}

}  // namespace

std::string CheckUrlInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  const std::string red = detail::RedactUrl(url);
  if (!Printable(red)) return "RedactUrl left a control character: " + red;
  if (red.size() > 4 * 4 * detail::kMaxForeignText + 64) {
    return "RedactUrl gave " + std::to_string(red.size()) + " characters";
  }
  // A redacted URL has no userinfo left (unless cut short: its tail is
  // "... (N bytes)", which holds no ":/").
  if (const std::string left = LeftUserinfo(red); !left.empty()) {
    return "RedactUrl kept the userinfo '" + left + "': " + red;
  }
  const std::string shown = detail::ForeignText(url, 16);
  if (!Printable(shown) || shown.size() > 16 * 4 + 32) {
    return "ForeignText broke its bound: " + shown;
  }

  auto loc = detail::ParseS3Url(url);
  if (loc.ok()) {
    if ("s3://" + loc->bucket + "/" + loc->key != url || loc->key.empty() ||
        loc->key.size() > 1024 || loc->bucket.empty()) {
      return "ParseS3Url accepted a malformed URL";
    }
    const std::string enc = detail::EncodeS3Key(loc->key);
    for (size_t i = 0; i < enc.size(); ++i) {
      const char c = enc[i];
      const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                         (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                         c == '.' || c == '~' || c == '/';
      if (!plain && !(c == '%' && i + 2 < enc.size())) {
        return "EncodeS3Key left '" + std::string(1, c) + "' unencoded";
      }
      if (c == '%') i += 2;
    }
  }
  if (std::string e = CheckError(loc.status(), "ParseS3Url"); !e.empty()) {
    return e;
  }

  auto ep = detail::ParseS3Endpoint(url);
  if (ep.ok()) {
    if ((ep->scheme != "http" && ep->scheme != "https") ||
        ep->authority.empty() ||
        ep->authority.find_first_of("@/?# ") != std::string::npos) {
      return "ParseS3Endpoint accepted '" + detail::ForeignText(url) + "'";
    }
  }
  if (std::string e = CheckError(ep.status(), "ParseS3Endpoint"); !e.empty()) {
    return e;
  }
  if (!ep.ok() && !LeftUserinfo(ep.status().message()).empty() &&
      LeftUserinfo(url).size() > 1) {
    return "ParseS3Endpoint's error shows a userinfo: " + ep.status().message();
  }
  return "";
}

}  // namespace rangeio::fuzz

#ifndef RANGEIO_FUZZ_CORPUS_TEST
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string e = rangeio::fuzz::CheckUrlInput(data, size);
  if (!e.empty()) {
    std::fprintf(stderr, "url_fuzz: %s\n", e.c_str());
    std::abort();
  }
  return 0;
}
#endif
