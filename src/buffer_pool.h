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
// are allocated and freed directly (aligned to 4 KiB). Each class keeps at
// most kPooledBytesPerClass bytes of free buffers; beyond that a released
// buffer is freed, so the pool never holds more than
// kSizeClasses * kPooledBytesPerClass (24 MiB) of idle memory.
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
// default response budget of 2C = 128 responses of 4 KiB four times over,
// while idle memory stays small next to the 64 MiB byte budget.
inline constexpr size_t kPooledBytesPerClass = size_t{2} << 20;

// A buffer of at least `size` bytes, owned by the returned pointer; its
// bytes are uninitialised. Destroying the last copy of the owner returns the
// buffer to the pool (or frees it). Aborts like operator new on exhaustion.
std::shared_ptr<std::byte> AllocatePooledBuffer(size_t size);

// Idle buffers currently held by the pool, in bytes (for tests and stats).
size_t PooledIdleBytes();

}  // namespace rangeio::detail
