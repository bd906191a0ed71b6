// buffer_pool.h — recycled, aligned byte buffers for read destinations.
//
// Every read that copies (a backend that owns its buffers, a pread, the
// copying in-memory source) needs a fresh destination, and a hot read path
// does this millions of times a second. malloc/free of page-sized blocks
// walks glibc's bins and, once the buffers are freed, often hands back a
// different, cold address each time; the copy into it then pays for the
// cache misses. The pool keeps recently released buffers of each size class
// and hands the most recently released one out first (LIFO), so a steady
// stream of reads keeps writing into cache-warm memory.
//
// Size classes are powers of two from 512 B to 1 MiB; a buffer is aligned to
// min(its class, 4 KiB), which is also what O_DIRECT needs. Larger requests
// are allocated and freed directly (aligned to 4 KiB). Idle buffers are
// kept up to PooledIdleCapBytes(class) per class (2 MiB, or 64 buffers for
// classes above 32 KiB) and kMaxPooledIdleBytes (64 MiB) in all; beyond
// that a released buffer is freed.
//
// Why 64 large buffers: with C = 64 reads of 1 MiB in flight, the consumer
// releases results in bursts of tens while new reads start. Kept to two
// buffers, each burst went back to glibc, whose large blocks are mmapped or
// trimmed, so the next reads faulted in fresh zeroed pages: 64 O_DIRECT
// reads of 1 MiB on io_uring (`rangeio bench local`) spent 65% of their CPU
// in clear_page, and CPU per read fell from 13.3 to 5.2-7.0 CPU s per 100k
// reads with the larger cap.
//
// Thread-safety: all functions may be called from any thread; a buffer may be
// released on a different thread from the one that allocated it.
#pragma once

#include <cstddef>
#include <memory>

namespace rangeio::detail {

inline constexpr size_t kMinPooledBytes = 512;
inline constexpr size_t kMaxPooledBytes = size_t{1} << 20;
inline constexpr size_t kSizeClasses = 12;  // 512 B .. 1 MiB
// 2 MiB of idle buffers per class: 512 page-sized buffers, enough for the
// default response budget of 2C = 128 responses of 4 KiB four times over.
inline constexpr size_t kPooledBytesPerClass = size_t{2} << 20;
// Large classes keep this many buffers (C at the default concurrency).
inline constexpr size_t kPooledBuffersPerClass = 64;
// All classes together: the default response byte budget, so idle memory
// never exceeds what one default reader may hold in results.
inline constexpr size_t kMaxPooledIdleBytes = size_t{64} << 20;

// The most idle bytes class `c` (0 = 512 B, ..., kSizeClasses - 1 = 1 MiB)
// keeps.
constexpr size_t PooledIdleCapBytes(size_t c) {
  const size_t bytes = kMinPooledBytes << c;
  return bytes * kPooledBuffersPerClass > kPooledBytesPerClass
             ? bytes * kPooledBuffersPerClass
             : kPooledBytesPerClass;
}

// A buffer of at least `size` bytes, owned by the returned pointer; its
// bytes are uninitialised. Destroying the last copy of the owner returns the
// buffer to the pool (or frees it). Aborts like operator new on exhaustion.
std::shared_ptr<std::byte> AllocatePooledBuffer(size_t size);

// Idle buffers currently held by the pool, in bytes (for tests and stats).
size_t PooledIdleBytes();

}  // namespace rangeio::detail
