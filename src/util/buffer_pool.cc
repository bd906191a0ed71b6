#include "util/buffer_pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "util/mutex.h"

namespace rangeio::detail {
namespace {

constexpr size_t kPageBytes = 4096;
// Room for the shared_ptr control block that owns a pooled buffer (vptr,
// two counts, the pointer and the BufferAllocator below: 48 bytes with
// libstdc++), checked by BufferAllocator::allocate.
constexpr size_t kControlBlockBytes = 64;

size_t ClassOf(size_t size) {
  if (size <= kMinPooledBytes) return 0;
  return static_cast<size_t>(std::bit_width(size - 1)) -
         static_cast<size_t>(std::bit_width(kMinPooledBytes - 1));
}

size_t ClassBytes(size_t c) { return kMinPooledBytes << c; }

// A thread caches at most this many buffers of class c (at least one), half
// of them moved to or from the shared stack at a time.
constexpr size_t ThreadCacheCap(size_t c) {
  return std::max<size_t>(
      1, std::min(kThreadCacheBuffers,
                  kThreadCacheBytesPerClass / (kMinPooledBytes << c)));
}
static_assert(
    [] {
      size_t total = 0;
      for (size_t c = 0; c < kThreadCachedClasses; ++c) {
        total += ThreadCacheCap(c) * (kMinPooledBytes << c);
      }
      return total;
    }() == kMaxThreadCachedBytes,
    "buffer_pool.h documents the thread cache bound");
constexpr size_t ThreadCacheBatch(size_t c) {
  return std::max<size_t>(1, ThreadCacheCap(c) / 2);
}

std::byte* AlignedNew(size_t bytes, size_t alignment) {
  void* p = std::aligned_alloc(alignment, bytes);
  if (p == nullptr) throw std::bad_alloc();  // as operator new would
  return static_cast<std::byte*>(p);
}

// An idle buffer and the memory of the control block that last owned it:
// both are recycled together, so handing out a buffer allocates nothing.
struct Entry {
  std::byte* data = nullptr;
  void* control = nullptr;  // kControlBlockBytes, or null when never used
};

void FreeEntry(const Entry& e) {
  std::free(e.data);
  ::operator delete(e.control);
}

// This thread's buffers of the small classes, LIFO per class. Constant-
// initialised and trivially destructible, so the hot path reads it with no
// guard; the ThreadCacheFlusher registered on first use empties it at thread
// exit.
struct ThreadCache {
  enum State : uint8_t { kUnused, kActive, kExited };
  State state;
  uint8_t count[kThreadCachedClasses];
  Entry entries[kThreadCachedClasses][kThreadCacheBuffers];
};
constinit thread_local ThreadCache tls_cache{};

// One LIFO stack of idle buffers per size class, each with its own mutex
// (lock hold times are a few pushes or pops), and one count of idle bytes.
class BufferPool {
 public:
  BufferPool() {
    for (size_t c = 0; c < kSizeClasses; ++c) {
      classes_[c].free.reserve(PooledIdleCapBytes(c) / ClassBytes(c));
    }
  }

  Entry Take(size_t c) {
    if (c < kThreadCachedClasses && tls_cache.count[c] > 0) {
      return tls_cache.entries[c][--tls_cache.count[c]];
    }
    return TakeSlow(c);
  }

  void Give(size_t c, Entry e) {
    if (c < kThreadCachedClasses && tls_cache.state == ThreadCache::kActive &&
        tls_cache.count[c] < ThreadCacheCap(c)) {
      tls_cache.entries[c][tls_cache.count[c]++] = e;
      return;
    }
    GiveSlow(c, e);
  }

  // Hands this thread's cached buffers to the shared stacks; the thread
  // caches nothing more.
  void FlushThreadCache() {
    for (size_t c = 0; c < kThreadCachedClasses; ++c) {
      GiveShared(c, tls_cache.entries[c], tls_cache.count[c]);
      tls_cache.count[c] = 0;
    }
    tls_cache.state = ThreadCache::kExited;
  }

  size_t IdleBytes() {
    size_t total = 0;
    for (size_t c = 0; c < kSizeClasses; ++c) {
      MutexLock lk(classes_[c].mu);
      total += classes_[c].free.size() * ClassBytes(c);
    }
    return total;
  }

 private:
  // The thread cache of class c is empty (or c is not cached): refill it
  // with up to a batch of the shared stack's most recent buffers.
  Entry TakeSlow(size_t c) {
    if (c < kThreadCachedClasses && StartThreadCache()) {
      const size_t n = TakeShared(c, tls_cache.entries[c], ThreadCacheBatch(c));
      if (n > 0) {
        tls_cache.count[c] = static_cast<uint8_t>(n - 1);
        return tls_cache.entries[c][n - 1];
      }
    } else {
      Entry e;
      if (TakeShared(c, &e, 1) == 1) return e;
    }
    return {AlignedNew(ClassBytes(c), std::min(ClassBytes(c), kPageBytes)),
            nullptr};
  }

  // The thread cache of class c is full (or not in use): its older half
  // goes to the shared stack, and `e` on top of what stays.
  void GiveSlow(size_t c, Entry e) {
    if (c >= kThreadCachedClasses || !StartThreadCache()) {
      GiveShared(c, &e, 1);
      return;
    }
    Entry* cached = tls_cache.entries[c];
    size_t n = tls_cache.count[c];
    if (n == ThreadCacheCap(c)) {
      const size_t out = ThreadCacheBatch(c);
      GiveShared(c, cached, out);
      std::memmove(cached, cached + out, (n - out) * sizeof(Entry));
      n -= out;
    }
    cached[n] = e;
    tls_cache.count[c] = static_cast<uint8_t>(n + 1);
  }

  // True when this thread's cache may be used: registers its flush at
  // thread exit on first use, false once that flush has run.
  static bool StartThreadCache();

  // Moves up to `max` of the most recent idle buffers of class c to
  // `out` (the most recent last); returns how many.
  size_t TakeShared(size_t c, Entry* out, size_t max) {
    Class& k = classes_[c];
    MutexLock lk(k.mu);
    const size_t n = std::min(max, k.free.size());
    std::copy(k.free.end() - static_cast<ptrdiff_t>(n), k.free.end(), out);
    k.free.resize(k.free.size() - n);
    idle_bytes_.fetch_sub(n * ClassBytes(c), std::memory_order_relaxed);
    return n;
  }

  // Pushes entries [0, n) of class c while the bounds allow; frees the rest
  // (outside the lock).
  void GiveShared(size_t c, const Entry* in, size_t n) {
    Class& k = classes_[c];
    const size_t bytes = ClassBytes(c);
    size_t kept = 0;
    {
      MutexLock lk(k.mu);
      for (; kept < n; ++kept) {
        if ((k.free.size() + 1) * bytes > PooledIdleCapBytes(c)) break;
        if (idle_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes >
            kMaxPooledIdleBytes) {
          idle_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
          break;
        }
        k.free.push_back(in[kept]);
      }
    }
    for (size_t i = kept; i < n; ++i) FreeEntry(in[i]);
  }

  struct Class {
    Mutex mu;
    std::vector<Entry> free GUARDED_BY(mu);
  };
  Class classes_[kSizeClasses];
  // Idle bytes in the shared stacks: reserved before a push, so that
  // concurrent Give()s to different classes never exceed
  // kMaxPooledIdleBytes.
  std::atomic<size_t> idle_bytes_{0};
};

// Never destroyed: buffers may be released by static destructors and by
// threads still running at exit.
BufferPool& Pool() {
  static BufferPool* pool = new BufferPool();
  return *pool;
}

struct ThreadCacheFlusher {
  ~ThreadCacheFlusher() { Pool().FlushThreadCache(); }
};
thread_local ThreadCacheFlusher tls_flusher;

bool BufferPool::StartThreadCache() {
  if (tls_cache.state == ThreadCache::kUnused) {
    // Odr-using the flusher constructs it, which registers its destructor
    // to run at this thread's exit.
    [[maybe_unused]] ThreadCacheFlusher* flusher = &tls_flusher;
    tls_cache.state = ThreadCache::kActive;
  }
  return tls_cache.state == ThreadCache::kActive;
}

// Allocates a pooled buffer's control block in the memory recycled with
// the buffer, and gives both back to the pool once the control block is
// destroyed (the shared_ptr's deleter does nothing): one pool operation
// and no malloc per buffer.
template <typename T>
struct BufferAllocator {
  using value_type = T;

  BufferAllocator(Entry e, size_t c) : entry(e), size_class(c) {}
  template <typename U>
  BufferAllocator(const BufferAllocator<U>& o)  // NOLINT: rebinding
      : entry(o.entry), size_class(o.size_class) {}

  T* allocate(size_t n) {
    static_assert(sizeof(T) <= kControlBlockBytes &&
                  alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    if (n != 1) throw std::bad_alloc();  // only a control block comes here
    return static_cast<T*>(entry.control);
  }
  void deallocate(T* p, size_t) { Pool().Give(size_class, {entry.data, p}); }

  template <typename U>
  bool operator==(const BufferAllocator<U>& o) const {
    return entry.data == o.entry.data;
  }

  Entry entry;
  size_t size_class;
};

struct NoDelete {
  void operator()(std::byte*) const {}
};

}  // namespace

std::shared_ptr<std::byte> AllocatePooledBuffer(size_t size) {
  if (size > kMaxPooledBytes) {
    const size_t rounded = (size + kPageBytes - 1) / kPageBytes * kPageBytes;
    return std::shared_ptr<std::byte>(AlignedNew(rounded, kPageBytes),
                                      [](std::byte* p) { std::free(p); });
  }
  const size_t c = ClassOf(size);
  Entry e = Pool().Take(c);
  if (e.control == nullptr) {
    try {
      e.control = ::operator new(kControlBlockBytes);
    } catch (...) {
      Pool().Give(c, e);
      throw;
    }
  }
  return std::shared_ptr<std::byte>(e.data, NoDelete(),
                                    BufferAllocator<std::byte>(e, c));
}

uint64_t MaxBufferBytes() {
  static const uint64_t max = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    constexpr uint64_t kPtrdiffMax = PTRDIFF_MAX;
    if (pages <= 0 || page <= 0) return kPtrdiffMax;
    return std::min(kPtrdiffMax,
                    static_cast<uint64_t>(pages) * static_cast<uint64_t>(page));
  }();
  return max;
}

Result<Slice> TryAllocateSlice(uint64_t size, std::byte** writable,
                               const std::string& what) {
  const auto refused = [&] {
    return Status::ResourceExhausted(
        what + ": cannot allocate a buffer of " + std::to_string(size) +
        " bytes (this machine's memory is " + std::to_string(MaxBufferBytes()) +
        " bytes)");
  };
  if (size > MaxBufferBytes()) return refused();
  try {
    return Slice::Allocate(static_cast<size_t>(size), writable);
  } catch (const std::bad_alloc&) {
    return refused();
  }
}

size_t PooledIdleBytes() { return Pool().IdleBytes(); }

size_t ThreadCachedBytes() {
  size_t total = 0;
  for (size_t c = 0; c < kThreadCachedClasses; ++c) {
    total += tls_cache.count[c] * ClassBytes(c);
  }
  return total;
}

}  // namespace rangeio::detail
