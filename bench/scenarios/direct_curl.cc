// direct_curl.cc — see direct_curl.h.
#include "direct_curl.h"

#include <cstring>
#include <memory>
#include <vector>

#include "progress.h"

namespace rangeio::bench {
namespace {

// One in-flight GET.
struct DirectGet {
  CURL* easy = nullptr;
  std::vector<std::byte> buffer;
  size_t expected = 0;
  size_t received = 0;
  std::chrono::steady_clock::time_point started;
  std::string range;
};

size_t DirectWrite(char* data, size_t size, size_t n, void* user) {
  auto& g = *static_cast<DirectGet*>(user);
  const size_t len = size * n;
  if (g.received + len > g.expected) return 0;  // longer than asked: fail
  if (g.buffer.size() < g.expected) g.buffer.resize(g.expected);
  std::memcpy(g.buffer.data() + g.received, data, len);
  g.received += len;
  return len;
}

// A GET's easy handle, made once per run: `target`'s URL, signing and TLS
// settings, the body written into `g`'s buffer, HTTP/2 over TLS.
void InitGet(const DirectTarget& target, DirectGet* g) {
  g->easy = curl_easy_init();
  curl_easy_setopt(g->easy, CURLOPT_URL, target.url.c_str());
  curl_easy_setopt(g->easy, CURLOPT_WRITEFUNCTION, &DirectWrite);
  curl_easy_setopt(g->easy, CURLOPT_WRITEDATA, g);
  curl_easy_setopt(g->easy, CURLOPT_PRIVATE, g);
  curl_easy_setopt(g->easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(g->easy, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(g->easy, CURLOPT_HTTP_VERSION,
                   static_cast<long>(CURL_HTTP_VERSION_2TLS));
  curl_easy_setopt(g->easy, CURLOPT_SSL_VERIFYPEER,
                   target.verify_tls ? 1L : 0L);
  curl_easy_setopt(g->easy, CURLOPT_SSL_VERIFYHOST,
                   target.verify_tls ? 2L : 0L);
  if (!target.ca_file.empty()) {
    curl_easy_setopt(g->easy, CURLOPT_CAINFO, target.ca_file.c_str());
  }
  if (target.configure) target.configure(g->easy);
}

// The error of a GET that failed (`rc`), was not answered 206 (`status`)
// or brought another length than its range's.
Status GetError(const DirectGet& g, CURLcode rc, long status) {
  return Status::IoError("direct GET bytes=" + g.range + ": " +
                         (rc != CURLE_OK
                              ? curl_easy_strerror(rc)
                              : "HTTP " + std::to_string(status) + ", " +
                                    std::to_string(g.received) + " bytes"));
}

}  // namespace

DirectCurl::DirectCurl(uint32_t concurrency)
    : multi_(curl_multi_init()), concurrency_(concurrency) {
  curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS,
                    static_cast<long>(concurrency));
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS,
                    static_cast<long>(concurrency));
}

DirectCurl::~DirectCurl() { curl_multi_cleanup(multi_); }

Status DirectCurl::Run(const DirectTarget& target,
                       const std::function<std::optional<ByteRange>()>& next,
                       std::chrono::steady_clock::time_point deadline,
                       DirectFigures* f) {
  std::vector<DirectGet> gets(concurrency_);
  size_t in_flight = 0;
  size_t started_now = 0;
  Status failure;
  const auto start = [&](DirectGet& g) {
    const std::optional<ByteRange> r = next();
    if (!r) return;
    g.range = std::to_string(r->offset) + "-" + std::to_string(r->end() - 1);
    g.expected = r->length;
    g.received = 0;
    curl_easy_setopt(g.easy, CURLOPT_RANGE, g.range.c_str());
    g.started = std::chrono::steady_clock::now();
    curl_multi_add_handle(multi_, g.easy);
    ++f->gets;
    ++started_now;
    ++in_flight;
  };
  for (DirectGet& g : gets) InitGet(target, &g);
  const auto t0 = std::chrono::steady_clock::now();
  for (DirectGet& g : gets) start(g);
  int running = 1;
  while (in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
    curl_multi_perform(multi_, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      DirectGet* g = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
                        reinterpret_cast<char**>(&g));
      long status = 0;
      curl_easy_getinfo(g->easy, CURLINFO_RESPONSE_CODE, &status);
      const CURLcode rc = m->data.result;
      curl_multi_remove_handle(multi_, g->easy);
      --in_flight;
      if (rc != CURLE_OK || status != 206 || g->received != g->expected) {
        failure = GetError(*g, rc, status);
        break;
      }
      f->latency.Record(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now() - g->started)
              .count()));
      ++f->reads;
      f->bytes += g->received;
      Progress::Get().AddReads(1);
      start(*g);
    }
    if (!failure.ok()) break;
    // Send what completions just added at once; wait only when idle.
    if (started_now == 0) curl_multi_poll(multi_, nullptr, 0, 100, nullptr);
    started_now = 0;
  }
  const auto t1 = std::chrono::steady_clock::now();
  for (DirectGet& g : gets) {
    curl_multi_remove_handle(multi_, g.easy);
    curl_easy_cleanup(g.easy);
  }
  f->elapsed_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  return failure;
}

}  // namespace rangeio::bench
