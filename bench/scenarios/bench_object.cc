// bench_object.cc — see bench_object.h.
#include "bench_object.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace rangeio::bench {
namespace {

// SHA-256 of the empty string: a GET's payload hash, sent as the library's
// S3 requests send it, so that both sides make the same signed request (some
// S3-compatible stores refuse UNSIGNED-PAYLOAD over http).
constexpr char kEmptyPayloadSha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// `given` when set, else the first of `names` set and not empty in the
// environment (empty counts as unset, as for the AWS tools), else
// `fallback`.
std::string Setting(const std::string& given,
                    std::initializer_list<const char*> names,
                    const std::string& fallback = "") {
  if (!given.empty()) return given;
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return v;
  }
  return fallback;
}

std::string Lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool StartsWithNoCase(const std::string& s, const std::string& lower) {
  return Lower(s.substr(0, lower.size())) == lower;
}

// RFC 3986 unreserved characters and '/' as they are, every other byte as
// %XX: a key (or bucket) as S3 wants it in a request path, and signs it.
std::string EncodeKey(const std::string& key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size() * 3);
  for (const unsigned char c : key) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~' ||
        c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

struct Endpoint {
  std::string scheme;     // "http" or "https"
  std::string authority;  // host[:port]
  bool aws = false;       // the host ends with .amazonaws.com
};

// "http(s)://host[:port]", a trailing '/' allowed. The error does not show
// the text, which may carry user:password.
Result<Endpoint> ParseEndpoint(std::string text) {
  if (!text.empty() && text.back() == '/') text.pop_back();
  const size_t sep = text.find("://");
  Endpoint ep;
  if (sep != std::string::npos) {
    ep.scheme = Lower(text.substr(0, sep));
    ep.authority = text.substr(sep + 3);
  }
  if ((ep.scheme != "http" && ep.scheme != "https") || ep.authority.empty() ||
      ep.authority.find_first_of("/?#@ ") != std::string::npos) {
    return Status::InvalidArgument(
        "bench: the S3 endpoint is not http(s)://host[:port]");
  }
  const std::string host = ep.authority.substr(0, ep.authority.find(':'));
  constexpr std::string_view kAws = ".amazonaws.com";
  ep.aws = Lower(host).ends_with(kAws);
  return ep;
}

// S3Addressing::kAuto as the library resolves it: virtual-hosted on AWS
// for a bucket that is a DNS label (a-z, 0-9, '-'; 3..63), else path style.
bool VirtualHosted(S3Addressing style, const Endpoint& ep,
                   const std::string& bucket) {
  if (style != S3Addressing::kAuto) {
    return style == S3Addressing::kVirtualHosted;
  }
  if (!ep.aws || bucket.size() < 3 || bucket.size() > 63 ||
      bucket.front() == '-' || bucket.back() == '-') {
    return false;
  }
  for (const char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

// libcurl's SigV4 settings for one region and one set of keys.
struct BenchObject::Signing {
  std::string sigv4;    // "aws:amz:REGION:s3"
  std::string userpwd;  // "key:secret"
  curl_slist* get_headers = nullptr;
  curl_slist* put_headers = nullptr;

  Signing() = default;
  Signing(const Signing&) = delete;
  Signing& operator=(const Signing&) = delete;
  ~Signing() {
    curl_slist_free_all(get_headers);
    curl_slist_free_all(put_headers);
  }
};

Result<std::shared_ptr<const BenchObject::Signing>> BenchObject::MakeSigning(
    const S3Options& s3, const std::string& region) {
  const bool given = !s3.access_key_id.empty() || !s3.secret_access_key.empty();
  const std::string key =
      given ? s3.access_key_id : Setting("", {"AWS_ACCESS_KEY_ID"});
  const std::string secret =
      given ? s3.secret_access_key : Setting("", {"AWS_SECRET_ACCESS_KEY"});
  if (key.empty() && secret.empty()) {
    return std::shared_ptr<const Signing>();
  }
  if (key.empty() || secret.empty()) {
    return Status::InvalidArgument(
        "bench: an S3 access key id and secret access key must be given "
        "together");
  }
  auto s = std::make_shared<Signing>();
  s->sigv4 = "aws:amz:" + region + ":s3";
  s->userpwd = key + ":" + secret;
  const std::string token =
      given ? s3.session_token : Setting("", {"AWS_SESSION_TOKEN"});
  const std::string token_line = "x-amz-security-token: " + token;
  s->get_headers = curl_slist_append(
      nullptr,
      (std::string("x-amz-content-sha256: ") + kEmptyPayloadSha256).c_str());
  // The body is not hashed: every store this bench targets (RGW, s3rver,
  // S3) accepts an unsigned payload on a signed PUT.
  s->put_headers =
      curl_slist_append(nullptr, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!token.empty()) {
    s->get_headers = curl_slist_append(s->get_headers, token_line.c_str());
    s->put_headers = curl_slist_append(s->put_headers, token_line.c_str());
  }
  if (s->get_headers == nullptr || s->put_headers == nullptr) {
    return Status::Internal("bench: curl_slist_append failed");
  }
  return std::shared_ptr<const Signing>(std::move(s));
}

Result<BenchObject> BenchObject::Resolve(const std::string& url,
                                         const S3Options& s3) {
  BenchObject o;
  o.url_ = url;
  o.s3_options_ = s3;
  if (StartsWithNoCase(url, "http://") || StartsWithNoCase(url, "https://")) {
    o.get_url_ = url;
    return o;
  }
  const size_t slash = url.find('/', 5);
  if (!StartsWithNoCase(url, "s3://") || slash == std::string::npos ||
      slash == 5 || slash + 1 == url.size()) {
    return Status::InvalidArgument(
        "bench: '" + url +
        "' is not an http://, https:// or s3://bucket/key URL");
  }
  const std::string bucket = url.substr(5, slash - 5);
  const std::string key = url.substr(slash + 1);
  const std::string region =
      Setting(s3.region, {"AWS_REGION", "AWS_DEFAULT_REGION"}, "us-east-1");
  RANGEIO_ASSIGN_OR_RETURN(
      const Endpoint ep,
      ParseEndpoint(Setting(s3.endpoint,
                            {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"},
                            "https://s3." + region + ".amazonaws.com")));
  o.s3_ = true;
  o.get_url_ = VirtualHosted(s3.addressing, ep, bucket)
                   ? ep.scheme + "://" + bucket + "." + ep.authority + "/" +
                         EncodeKey(key)
                   : ep.scheme + "://" + ep.authority + "/" +
                         EncodeKey(bucket) + "/" + EncodeKey(key);
  RANGEIO_ASSIGN_OR_RETURN(o.signing_, MakeSigning(s3, region));
  return o;
}

Result<BenchObject> BenchObject::Sibling(const std::string& name) const {
  const size_t slash = url_.rfind('/');
  return Resolve(url_.substr(0, slash + 1) + name, s3_options_);
}

Result<std::shared_ptr<Source>> BenchObject::Open(
    const HttpOptions& http) const {
  if (!s3()) return OpenHttpSource(url_, http);
  return OpenS3Source(url_, s3_options_, http);
}

void BenchObject::Sign(CURL* easy) const {
  if (signing_ == nullptr) return;
  curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, signing_->sigv4.c_str());
  curl_easy_setopt(easy, CURLOPT_USERPWD, signing_->userpwd.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, signing_->get_headers);
}

Status BenchObject::Put(const std::string& path) const {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"),
                                             &std::fclose);
  if (file == nullptr) {
    return Status::FromErrno(errno, "bench: opening '" + path + "' to upload");
  }
  (void)std::fseek(file.get(), 0, SEEK_END);
  const long size = std::ftell(file.get());
  std::rewind(file.get());
  std::unique_ptr<CURL, void (*)(CURL*)> easy(curl_easy_init(),
                                              &curl_easy_cleanup);
  if (easy == nullptr || size < 0) {
    return Status::Internal("bench: cannot set up the upload of '" + path +
                            "'");
  }
  CURL* e = easy.get();
  curl_easy_setopt(e, CURLOPT_URL, get_url_.c_str());
  curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(e, CURLOPT_READDATA, file.get());
  curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
  if (signing_ != nullptr) {
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, signing_->sigv4.c_str());
    curl_easy_setopt(e, CURLOPT_USERPWD, signing_->userpwd.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, signing_->put_headers);
  }
  const CURLcode rc = curl_easy_perform(e);
  long code = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
  if (rc != CURLE_OK || code / 100 != 2) {
    return Status::IoError("bench: uploading '" + path + "' to '" + url_ +
                           "': " +
                           (rc != CURLE_OK ? std::string(curl_easy_strerror(rc))
                                           : "HTTP " + std::to_string(code)));
  }
  return Status::OK();
}

}  // namespace rangeio::bench
