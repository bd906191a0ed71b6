// s3_dialect.h (internal) — S3 as a dialect of the HTTP transport: SigV4
// signing of every request and the reading of S3's XML error documents.
//
// The one place where S3 error codes become a StatusCode and a retry cause.
// Thread-safety: immutable once made; shared by every transfer of a source.
#pragma once

#include <curl/curl.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_dialect.h"
#include "s3/s3.h"

namespace rangeio::detail {

// What an S3 error code means beyond the HTTP status it came with: NoSuchKey
// and NoSuchBucket are NotFound whatever the status, SlowDown a throttle.
// Other codes leave the HTTP status's mapping (AccessDenied and
// InvalidAccessKeyId come with 403, InternalError with 500).
std::optional<StatusCode> StatusCodeOfS3Error(std::string_view code);
std::optional<RetryCause> RetryCauseOfS3Error(std::string_view code);

class S3Dialect final : public HttpDialect {
 public:
  // `credentials` null: anonymous requests, unsigned.
  S3Dialect(const std::string& region, const S3Credentials* credentials);
  ~S3Dialect() override;
  S3Dialect(const S3Dialect&) = delete;
  S3Dialect& operator=(const S3Dialect&) = delete;

  // Fails only when libcurl cannot allocate the header list.
  Status Init();

  CURLcode Configure(CURL* easy) const override;
  std::vector<std::string> HeaderLines() const override {
    return header_lines_;
  }
  ErrorDetail ReadErrorBody(std::string_view body) const override;

 private:
  const bool sign_;
  const std::string sigv4_;  // CURLOPT_AWS_SIGV4: "aws:amz:REGION:s3"
  const std::string access_key_id_;
  const std::string secret_access_key_;
  const std::string session_token_;
  std::vector<std::string> header_lines_;  // what headers_ holds
  curl_slist* headers_ = nullptr;          // owned: x-amz-content-sha256, token
};

}  // namespace rangeio::detail
