// transfer.h (internal) — one range GET as the event loop drives it: its
// request, its destination buffer, the state of its current attempt, and the
// libcurl handle set up for it.
//
// Thread-safety: a Transfer is made on the submitting thread and then used
// by the loop thread only (libcurl's callbacks run there too).
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "http/curl_engine.h"
#include "http/http_response.h"
#include "rangeio/byte_range.h"
#include "rangeio/slice.h"
#include "rangeio/source.h"

namespace rangeio::detail {

struct Transfer {
  std::shared_ptr<HttpTarget> target;
  ByteRange range;
  Slice buffer;
  std::byte* dst = nullptr;
  ReadSink* sink = nullptr;
  uint64_t tag = 0;
  bool size_probe = false;

  CURL* easy = nullptr;
  size_t index = 0;  // position in the loop's list of active transfers
  // Backing off (until a retry due before the deadline: DecideRetry), or
  // waiting for an endpoint slot (until the deadline at most: EndpointGate).
  bool waiting = false;
  bool gated = false;           // waiting for a slot of target->endpoint
  bool holds_slot = false;      // the current attempt holds an endpoint slot
  uint64_t gated_since_ns = 0;  // when it began to wait for a slot
  uint64_t start_ns = 0;
  uint64_t deadline_ns = 0;
  uint32_t attempt = 0;  // attempts started
  std::string retries;   // "throttled, connection" for the final error
  std::string previous;  // the error of the attempt before the current one

  // The current attempt.
  uint64_t attempt_start_ns = 0;
  uint64_t last_progress_ns = 0;
  bool got_first_byte = false;
  uint64_t first_byte_ns = 0;      // when got_first_byte became true
  bool error_body_capped = false;  // stopped reading an error body
  bool body_is_data = false;       // the body is the range's bytes
  Response response;
  Status write_error;
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_slist* headers = nullptr;    // owned: the dialect's and If-Match
  HttpTarget::VersionPin sent_pin;  // the pin this attempt's request carries

  Transfer() = default;
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  ~Transfer() { curl_slist_free_all(headers); }

  void ResetAttempt(uint64_t now);

  // "GET <url>" and what the opener added: what failed.
  const std::string& What() const { return target->what; }
};

// Sets the options of `t.easy` that hold for every attempt of the read
// (URL, range, callbacks, timeouts, TLS, and the dialect's signing).
Status ConfigureTransfer(Transfer& t);

// Why the current attempt of `t` has timed out at `now` (deadline, first
// byte, stalled or too slow a body: the watchdog's checks); nullopt if not.
std::optional<std::string> AttemptTimedOut(const Transfer& t, uint64_t now);

// The error of a read whose deadline passed before its next attempt went
// out: at its launch, or at `now` while it waited for an endpoint slot.
Status DeadlinePassedBeforeAttempt(const Transfer& t);
Status SlotWaitTimedOut(const Transfer& t, uint64_t now);

// Before each attempt: the request carries the source's version pin, if it
// has one (HttpTarget::VersionPin).
Status ApplyVersionPin(Transfer& t);

// What the attempt that libcurl ended with `rc` amounts to; records the
// object size its answer states.
Attempt JudgeTransfer(Transfer& t, CURLcode rc);

}  // namespace rangeio::detail
