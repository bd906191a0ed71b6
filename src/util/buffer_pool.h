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
// are allocated and freed directly (aligned to 4 KiB). The shared stacks
// keep idle buffers up to PooledIdleCapBytes(class) per class (2 MiB, or 64
// buffers for classes above 32 KiB) and kMaxPooledIdleBytes (64 MiB) in all;
// beyond that a released buffer is freed.
//
// Why 64 large buffers: with C = 64 reads of 1 MiB in flight, the consumer
// releases results in bursts of tens while new reads start. With fewer,
// each burst goes back to glibc, whose large blocks are mmapped or trimmed,
// so the next reads fault in fresh zeroed pages and spend most of their CPU
// in clear_page (bench local, 1 MiB O_DIRECT rows).
//
// Each thread also keeps a small LIFO cache per class up to 64 KiB, so that
// a thread that releases buffers and allocates more (a consumer that drops
// each result while the memory source or the page cache refills its window
// inline) takes no lock per buffer: with it and the recycled control block
// below, copying into pooled buffers costs about what a bare memcpy into
// fixed buffers does, where the shared mutex taken twice per buffer and a
// malloc'd control block cost far more (the copying memory source in bench
// hot-cache). A thread's cache holds at most kThreadCacheBuffers buffers and
// kThreadCacheBytesPerClass bytes per class (at least one buffer),
// kMaxThreadCachedBytes (376 KiB) in all; these are not counted in
// PooledIdleBytes(). A full or empty cache moves half its capacity to or
// from the shared stack under one lock, and the whole cache goes back to the
// shared stacks when its thread exits.
//
// The shared_ptr control block that owns a pooled buffer is recycled with
// the buffer, so handing out a pooled buffer does not call malloc.
//
// Thread-safety: all functions may be called from any thread; a buffer may be
// released on a different thread from the one that allocated it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "rangeio/slice.h"
#include "rangeio/status.h"

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

// Classes 0..7 (512 B .. 64 KiB) are cached per thread, each up to
// kThreadCacheBuffers buffers and kThreadCacheBytesPerClass bytes (but at
// least one buffer): 16 buffers of 4 KiB, the size of a typical page read,
// make the lock cost per buffer 1/8 of a lock when buffers move between
// threads, while 64 reader threads (a pread pool) hold at most 24 MiB.
inline constexpr size_t kThreadCachedClasses = 8;
inline constexpr size_t kThreadCacheBuffers = 16;
inline constexpr size_t kThreadCacheBytesPerClass = size_t{64} << 10;
inline constexpr size_t kMaxThreadCachedBytes = size_t{376} << 10;

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

// The largest buffer worth trying to allocate: the machine's physical
// memory (and never more than PTRDIFF_MAX).
uint64_t MaxBufferBytes();

// Slice::Allocate that reports failure instead of throwing: ResourceExhausted
// naming `what` and the size when `size` exceeds MaxBufferBytes() or the
// allocator refuses it. For buffers whose size a peer or a caller chose.
Result<Slice> TryAllocateSlice(uint64_t size, std::byte** writable,
                               const std::string& what);

// Idle buffers currently held by the pool's shared stacks, in bytes (for
// tests and stats); thread caches are not included.
size_t PooledIdleBytes();

// Idle buffers in the calling thread's cache, in bytes (for tests).
size_t ThreadCachedBytes();

}  // namespace rangeio::detail
