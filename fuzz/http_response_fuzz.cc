// http_response_fuzz.cc — libFuzzer target: what an answer to a range GET
// means (src/http/http_response.h) and the S3 error XML (see parse_fuzz.h).
//
// Input layout: u8 status selector, u8 range selector, then text: header
// lines separated by '\n' up to an empty line, then the error body.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/http_response.h"
#include "parse_fuzz.h"
#include "s3/s3.h"
#include "s3/s3_dialect.h"
#include "util/redact.h"

namespace rangeio::fuzz {
namespace {

constexpr long kStatuses[] = {200, 206, 301, 400, 403, 404,
                              412, 416, 429, 500, 503, 999};
constexpr ByteRange kRanges[] = {{0, 1},
                                 {0, 100},
                                 {5, 10},
                                 {uint64_t{1} << 40, 1},
                                 {UINT64_MAX - 1, 1},
                                 {1000, uint64_t{1} << 62}};
constexpr std::string_view kWhat = "GET http://h/o";
constexpr uint64_t kDayNanos = uint64_t{86'400} * 1'000'000'000;

std::string CheckMessage(const Status& st, const char* what) {
  if (st.ok()) return "";
  if (!Printable(st.message())) {
    return std::string(what) + " error has a control character: " +
           detail::ForeignText(st.message());
  }
  if (st.message().size() > kMaxErrorChars) {
    return std::string(what) + " error has " +
           std::to_string(st.message().size()) + " characters";
  }
  return "";
}

}  // namespace

std::string CheckHttpResponseInput(const uint8_t* data, size_t size) {
  if (size < 2) return "";
  const long status = kStatuses[data[0] % std::size(kStatuses)];
  const ByteRange range = kRanges[data[1] % std::size(kRanges)];
  std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  detail::Response r;
  r.status = status;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text =
        nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line == "\r") break;
    r.AddHeaderLine(line);
    if (auto cr = detail::ParseContentRange(line)) {
      if (cr->total == UINT64_MAX) return "a total of 2^64-1 was accepted";
      if (!cr->unsatisfied && cr->last < cr->first) return "last < first";
    }
    if (detail::RetryAfterNanos(std::string(line), 0) > kDayNanos) {
      return "Retry-After beyond a day";
    }
  }
  r.error_body = std::string(text.substr(0, detail::kMaxErrorBody));
  if (r.content_length < -1) return "negative Content-Length kept";

  if (status == 200 || status == 206) {
    auto size_of = detail::CheckDataHeaders(kWhat, range, r);
    if (size_of.ok() && status == 206) {
      const auto cr = detail::ParseContentRange(r.content_range);
      if (!cr || cr->first != range.offset || cr->last != range.end() - 1) {
        return "CheckDataHeaders accepted Content-Range '" +
               detail::ForeignText(r.content_range) + "' for " +
               range.ToString();
      }
    }
    if (size_of.ok() && *size_of && **size_of == UINT64_MAX) {
      return "CheckDataHeaders gave the unknown size as a size";
    }
    if (std::string e = CheckMessage(size_of.status(), "CheckDataHeaders");
        !e.empty()) {
      return e;
    }
  }
  static const detail::S3Dialect* const s3 = [] {
    auto* d = new detail::S3Dialect("us-east-1", nullptr);
    (void)d->Init();
    return d;
  }();
  for (const detail::HttpDialect* dialect :
       {static_cast<const detail::HttpDialect*>(nullptr),
        static_cast<const detail::HttpDialect*>(s3)}) {
    for (bool probe : {false, true}) {
      const detail::Attempt a =
          detail::JudgeAnswer(kWhat, range, probe, r, dialect, 0);
      if (std::string e = CheckMessage(a.status, "JudgeAnswer"); !e.empty()) {
        return e;
      }
      if (a.status.ok() && (status != 200 && status != 206) &&
          !(probe && status == 416)) {
        return "JudgeAnswer took HTTP " + std::to_string(status) + " as data";
      }
      if (a.object_size == UINT64_MAX) return "object size 2^64-1";
      if (a.retry_after_ns > kDayNanos) return "retry after beyond a day";
    }
  }
  const detail::S3ErrorBody e = detail::ParseS3ErrorBody(r.error_body);
  if (e.code.size() > r.error_body.size() ||
      e.message.size() > r.error_body.size()) {
    return "an S3 error element longer than its body";
  }
  return "";
}

}  // namespace rangeio::fuzz

#ifndef RANGEIO_FUZZ_CORPUS_TEST
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string e = rangeio::fuzz::CheckHttpResponseInput(data, size);
  if (!e.empty()) {
    std::fprintf(stderr, "http_response_fuzz: %s\n", e.c_str());
    std::abort();
  }
  return 0;
}
#endif
