// latency_relay_rate.h — the relay's --rate-limit: a token bucket, and the
// 503 SlowDown answer S3 gives above a prefix's request rate. Not
// thread-safe (the relay's single loop owns it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace rangeio::relay {

// S3's error document for a request above the rate.
inline std::string SlowDownResponse() {
  constexpr std::string_view kBody =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
      "<Message>Please reduce your request rate.</Message>"
      "<RequestId>rangeio-latency-relay</RequestId></Error>";
  return "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
         "Content-Length: " +
         std::to_string(kBody.size()) + "\r\n\r\n" + std::string(kBody);
}

// `rate` requests per second with bursts of `burst`; rate 0 admits all.
class TokenBucket {
 public:
  TokenBucket(uint32_t rate, uint32_t burst) : rate_(rate), burst_(burst) {}

  // True if a request arriving at `now_ns` may go upstream.
  bool Take(int64_t now_ns) {
    if (rate_ == 0) return true;
    tokens_ =
        at_ns_ == 0
            ? burst_
            : std::min(burst_, tokens_ + static_cast<double>(now_ns - at_ns_) *
                                             rate_ / 1e9);
    at_ns_ = now_ns;
    if (tokens_ < 1) {
      ++refused_;
      return false;
    }
    tokens_ -= 1;
    return true;
  }

  uint64_t refused() const { return refused_; }

 private:
  const double rate_;
  const double burst_;
  double tokens_ = 0;
  int64_t at_ns_ = 0;  // 0: not used yet (the bucket starts full)
  uint64_t refused_ = 0;
};

}  // namespace rangeio::relay
