// s3_dialect.cc — SigV4 signing options and S3 error-document
// classification for the HTTP transport. Immutable after Init(); see
// s3_dialect.h.
#include "s3/s3_dialect.h"

#include "util/parse_text.h"
#include "util/redact.h"

namespace rangeio::detail {
namespace {

// SHA-256 of the empty string: the payload hash of a GET. libcurl >= 7.87
// computes the same for a GET signed for service "s3"; sending it ourselves
// gives the same signed request on every libcurl version, and every
// S3-compatible store accepts it (some reject UNSIGNED-PAYLOAD over http).
constexpr char kEmptyPayloadSha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

}  // namespace

std::optional<StatusCode> StatusCodeOfS3Error(std::string_view code) {
  if (code == "NoSuchKey" || code == "NoSuchBucket") {
    return StatusCode::kNotFound;
  }
  return std::nullopt;
}

std::optional<RetryCause> RetryCauseOfS3Error(std::string_view code) {
  if (code == "SlowDown") return RetryCause::kThrottled;
  return std::nullopt;
}

S3Dialect::S3Dialect(const std::string& region,
                     const S3Credentials* credentials)
    : sign_(credentials != nullptr),
      sigv4_("aws:amz:" + region + ":s3"),
      access_key_id_(credentials != nullptr ? credentials->access_key_id : ""),
      secret_access_key_(credentials != nullptr ? credentials->secret_access_key
                                                : ""),
      session_token_(credentials != nullptr ? credentials->session_token : "") {
}

S3Dialect::~S3Dialect() { curl_slist_free_all(headers_); }

Status S3Dialect::Init() {
  if (!sign_) return Status::OK();
  header_lines_.push_back(std::string("x-amz-content-sha256: ") +
                          kEmptyPayloadSha256);
  if (!session_token_.empty()) {
    header_lines_.push_back("x-amz-security-token: " + session_token_);
  }
  for (const std::string& line : header_lines_) {
    curl_slist* h = curl_slist_append(headers_, line.c_str());
    if (h == nullptr) return Status::Internal("curl_slist_append failed");
    headers_ = h;
  }
  return Status::OK();
}

CURLcode S3Dialect::Configure(CURL* easy) const {
  if (!sign_) return CURLE_OK;
  CURLcode rc = curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sigv4_.c_str());
  if (rc == CURLE_OK) {
    rc = curl_easy_setopt(easy, CURLOPT_USERNAME, access_key_id_.c_str());
  }
  if (rc == CURLE_OK) {
    rc = curl_easy_setopt(easy, CURLOPT_PASSWORD, secret_access_key_.c_str());
  }
  if (rc == CURLE_OK) rc = curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers_);
  return rc;
}

ErrorDetail S3Dialect::ReadErrorBody(std::string_view body) const {
  const S3ErrorBody e = ParseS3ErrorBody(body);
  ErrorDetail d;
  // The server's text, escaped and bounded: an entity-encoded newline or
  // escape sequence must not forge lines in a log.
  if (!e.code.empty()) d.text += ", S3 error " + ForeignText(e.code);
  if (!e.message.empty()) d.text += ": " + ForeignText(e.message);
  d.code = StatusCodeOfS3Error(e.code);
  d.cause = RetryCauseOfS3Error(e.code);
  uint64_t size = 0;
  // UINT64_MAX is no size (and the transport's "unknown size").
  if (ParseU64(e.actual_object_size, &size) && size != UINT64_MAX) {
    d.object_size = size;
  }
  return d;
}

}  // namespace rangeio::detail
