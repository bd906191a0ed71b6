// latency_relay_connection.h — one relayed connection's state; not thread-safe.
//
// A Connection is the relay's state for one client connection and its
// upstream connection, owned by the relay's single epoll loop
// (latency_relay.cc); BodyBytes frames the requests read from the client.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "util/parse_text.h"

namespace rangeio::relay {

// A request head this large without its blank line is not from rangeio or
// curl (theirs are < 1 KiB): the connection is closed rather than buffered.
inline constexpr size_t kMaxHeadBytes = 64 * 1024;
// Pipe capacity per connection: 128 KiB holds a whole 100 KiB response, so
// one splice in and one out usually move it (the default 64 KiB takes two of
// each). Not more: every pipe counts against the per-user quota of 64 MiB
// (/proc/sys/fs/pipe-user-pages-soft), shared with the other relay, and
// past it the kernel hands out 8 KiB pipes. When F_SETPIPE_SZ is refused the
// default size is kept.
inline constexpr int kPipeBytes = 128 * 1024;

// One client connection and its upstream connection. The *_ready flags are
// what edge-triggered epoll last said and no EAGAIN has contradicted since.
struct Connection {
  uint64_t id = 0;
  int client = -1;
  int upstream = -1;
  int pipe_r = -1;  // upstream bytes on their way to the client
  int pipe_w = -1;
  size_t pipe_capacity = 0;
  size_t piped = 0;  // bytes in the pipe
  bool upstream_connected = false;
  bool client_readable = true;
  bool client_writable = true;
  bool upstream_readable = false;
  bool upstream_writable = false;
  bool client_eof = false;
  bool upstream_eof = false;
  bool upstream_shut = false;

  std::string in;         // client bytes not yet a whole request
  size_t in_scanned = 0;  // in[0, in_scanned) holds no "\r\n\r\n"

  struct Waiting {
    int64_t due_ns;
    bool delayed;    // due after its arrival: its lateness is measured
    bool throttled;  // answered 503 SlowDown when due, never sent upstream
    std::string bytes;
  };
  std::deque<Waiting> waiting;  // due times non-decreasing
  int64_t last_due_ns = 0;
  int64_t timer_due_ns = -1;  // the heap's entry for waiting.front()

  std::string out;  // due request bytes, out[out_sent..] not yet sent
  size_t out_sent = 0;
  std::string reply;      // the relay's own answer (503), reply[reply_sent..]
  size_t reply_sent = 0;  // not yet sent to the client

  // No request of this connection waits or is unsent, and no answer of the
  // relay's own is pending.
  bool Idle() const {
    return waiting.empty() && out_sent == out.size() && reply.empty();
  }
};

// The content length of a request head ("" lines ended by CRLF), or -1 with
// *error set.
inline int64_t BodyBytes(std::string_view head, std::string* error) {
  int64_t length = 0;
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    const size_t start = pos + 2;
    const size_t end = head.find("\r\n", start);
    const std::string_view line = head.substr(start, end - start);
    pos = end;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    auto is = [&](std::string_view want) {
      return name.size() == want.size() &&
             std::equal(
                 name.begin(), name.end(), want.begin(), [](char a, char b) {
                   return std::tolower(static_cast<unsigned char>(a)) == b;
                 });
    };
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
      value.remove_suffix(1);
    }
    if (is("transfer-encoding")) {
      *error = "chunked request bodies are not supported";
      return -1;
    }
    if (is("content-length")) {
      uint64_t n = 0;
      if (rangeio::detail::ParseU64(value, &n) && n <= INT64_MAX) {
        length = static_cast<int64_t>(n);
      } else {
        *error = "bad Content-Length '" + std::string(value) + "'";
        return -1;
      }
    }
  }
  return length;
}

}  // namespace rangeio::relay
