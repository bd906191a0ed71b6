// thread_name.h (internal) — names rangeio's own threads.
#pragma once

#include <pthread.h>

namespace rangeio::detail {

// Names the calling thread, so that top -H, perf and gdb show which of
// rangeio's threads is which ("rio-uring", "rio-pread", ...). Linux allows
// 15 characters; a longer name or a failure leaves the thread unnamed,
// which changes nothing else.
inline void NameThisThread(const char* name) {
  (void)pthread_setname_np(pthread_self(), name);
}

}  // namespace rangeio::detail
