// rangeio_sigv4_capture — sends the S3 requests that sigv4_check.py
// verifies: for each s3:// URL on the command line, one source opened with
// the default S3Options (so credentials, region and endpoint come from the
// environment, as for a user), and two reads of bytes [0, 10) one second
// apart on it (the second reuses the pooled handle and must be signed
// afresh). Prints one line per read: "<url> ok" or "<url> <error>".
// Exits 0 when every read succeeded.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"

int main(int argc, char** argv) {
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    rangeio::HttpOptions http;
    http.size_hint = 100;  // the capture server's object size
    http.max_attempts = 1;
    auto src = rangeio::OpenS3Source(argv[i], {}, http);
    if (!src.ok()) {
      std::printf("%s %s\n", argv[i], src.status().ToString().c_str());
      ++failures;
      continue;
    }
    for (int read = 0; read < 2; ++read) {
      if (read == 1) std::this_thread::sleep_for(std::chrono::seconds(1));
      rangeio::testing::CollectingSink sink;
      (*src)->Read({0, 10}, &sink, 0);
      if (!sink.WaitFor(1, std::chrono::seconds(20))) {
        std::printf("%s timed out\n", argv[i]);
        return 2;
      }
      auto bytes = sink.Get(0).bytes;
      std::printf("%s %s\n", argv[i],
                  bytes.ok() ? "ok" : bytes.status().ToString().c_str());
      failures += bytes.ok() ? 0 : 1;
    }
  }
  return failures == 0 ? 0 : 1;
}
