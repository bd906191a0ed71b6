#include "support/http_servers.h"

#include <curl/curl.h>

#include <cstdlib>
#include <utility>

namespace rangeio::testing {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string HostPort(const std::string& url) {
  const size_t p = url.find("://");
  return p == std::string::npos ? url : url.substr(p + 3);
}

size_t Append(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

}  // namespace

std::string TestServers::NginxHostPort() const { return HostPort(nginx); }
std::string TestServers::S3HostPort() const { return HostPort(s3_endpoint); }
std::string TestServers::RgwHostPort() const { return HostPort(rgw_endpoint); }

std::optional<TestServers> TestServers::Get() {
  TestServers s{Env("RANGEIO_TEST_NGINX"),
                Env("RANGEIO_TEST_NGINX_ROOT"),
                Env("RANGEIO_TEST_NGINX_TLS"),
                Env("RANGEIO_TEST_TLS_CA"),
                Env("RANGEIO_TEST_S3_ENDPOINT"),
                Env("RANGEIO_TEST_S3_VHOST_ENDPOINT"),
                Env("RANGEIO_TEST_S3_BUCKET"),
                Env("RANGEIO_TEST_PROXY_CONTROL"),
                Env("RANGEIO_TEST_RGW_ENDPOINT"),
                Env("RANGEIO_TEST_RGW_VHOST_ENDPOINT"),
                Env("RANGEIO_TEST_RGW_ACCESS_KEY"),
                Env("RANGEIO_TEST_RGW_SECRET_KEY")};
  if (s.nginx.empty() || s.s3_endpoint.empty() || s.proxy_control.empty()) {
    return std::nullopt;
  }
  return s;
}

bool TestServers::Required() { return Env("RANGEIO_REQUIRE_SERVERS") == "1"; }

Result<std::string> HttpCall(const std::string& method, const std::string& url,
                             const std::string& body) {
  CURL* e = curl_easy_init();
  if (e == nullptr) return Status::Internal("curl_easy_init failed");
  std::string out;
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10'000L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_slist* headers = nullptr;
  if (!body.empty()) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.c_str());
  }
  const CURLcode rc = curl_easy_perform(e);
  long status = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(e);
  if (rc != CURLE_OK) {
    return Status::IoError(method + " " + url + ": " + curl_easy_strerror(rc));
  }
  if (status < 200 || status > 299) {
    return Status::IoError(method + " " + url + ": HTTP " +
                           std::to_string(status) + ": " + out);
  }
  return out;
}

Result<ProxyListener> ProxyListener::Make(const TestServers& servers,
                                          const std::string& upstream,
                                          nlohmann::json config) {
  if (config.is_null()) config = nlohmann::json::object();
  config["upstream"] = upstream;
  RANGEIO_ASSIGN_OR_RETURN(
      std::string reply,
      HttpCall("POST", servers.proxy_control + "/listeners", config.dump()));
  const auto j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded() || !j.contains("port")) {
    return Status::IoError("faultproxy: unexpected reply " + reply);
  }
  return ProxyListener(servers.proxy_control, j["port"].get<int>());
}

ProxyListener::ProxyListener(ProxyListener&& other) noexcept
    : control_(std::move(other.control_)), port_(other.port_) {
  other.port_ = 0;
}

ProxyListener::~ProxyListener() {
  if (port_ == 0) return;
  try {
    (void)HttpCall("DELETE", control_ + "/listeners/" + std::to_string(port_));
  } catch (...) {  // std::bad_alloc: the listener is then left to the proxy
  }
}

std::string ProxyListener::base() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

Result<nlohmann::json> ProxyListener::Stats() const {
  RANGEIO_ASSIGN_OR_RETURN(
      std::string reply,
      HttpCall("GET", control_ + "/listeners/" + std::to_string(port_)));
  auto j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded()) return Status::IoError("faultproxy: bad JSON " + reply);
  return j;
}

}  // namespace rangeio::testing
