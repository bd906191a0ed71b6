#include "buffer_pool.h"

#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace rangeio::detail {
namespace {

constexpr size_t kPageBytes = 4096;

size_t ClassOf(size_t size) {
  if (size <= kMinPooledBytes) return 0;
  return static_cast<size_t>(std::bit_width(size - 1)) -
         static_cast<size_t>(std::bit_width(kMinPooledBytes - 1));
}

size_t ClassBytes(size_t c) { return kMinPooledBytes << c; }

std::byte* AlignedNew(size_t bytes, size_t alignment) {
  void* p = std::aligned_alloc(alignment, bytes);
  if (p == nullptr) throw std::bad_alloc();  // as operator new would
  return static_cast<std::byte*>(p);
}

// One LIFO stack of idle buffers per size class, each with its own mutex
// (lock hold times are a push or a pop), and one count of idle bytes.
class BufferPool {
 public:
  BufferPool() {
    for (size_t c = 0; c < kSizeClasses; ++c) {
      classes_[c].free.reserve(PooledIdleCapBytes(c) / ClassBytes(c));
    }
  }

  std::byte* Take(size_t c) {
    Class& k = classes_[c];
    {
      std::lock_guard lk(k.mu);
      if (!k.free.empty()) {
        std::byte* p = k.free.back();
        k.free.pop_back();
        idle_bytes_.fetch_sub(ClassBytes(c), std::memory_order_relaxed);
        return p;
      }
    }
    return AlignedNew(ClassBytes(c), std::min(ClassBytes(c), kPageBytes));
  }

  void Give(size_t c, std::byte* p) {
    Class& k = classes_[c];
    const size_t bytes = ClassBytes(c);
    {
      std::lock_guard lk(k.mu);
      if ((k.free.size() + 1) * bytes <= PooledIdleCapBytes(c)) {
        if (idle_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes <=
            kMaxPooledIdleBytes) {
          k.free.push_back(p);
          return;
        }
        idle_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
      }
    }
    std::free(p);
  }

  size_t IdleBytes() {
    size_t total = 0;
    for (size_t c = 0; c < kSizeClasses; ++c) {
      std::lock_guard lk(classes_[c].mu);
      total += classes_[c].free.size() * ClassBytes(c);
    }
    return total;
  }

 private:
  struct Class {
    std::mutex mu;
    std::vector<std::byte*> free;  // guarded by mu
  };
  Class classes_[kSizeClasses];
  // Idle bytes in all classes: reserved before a push, so that concurrent
  // Give()s to different classes never exceed kMaxPooledIdleBytes.
  std::atomic<size_t> idle_bytes_{0};
};

// Never destroyed: buffers may be released by static destructors and by
// threads still running at exit.
BufferPool& Pool() {
  static BufferPool* pool = new BufferPool();
  return *pool;
}

}  // namespace

std::shared_ptr<std::byte> AllocatePooledBuffer(size_t size) {
  if (size > kMaxPooledBytes) {
    const size_t rounded = (size + kPageBytes - 1) / kPageBytes * kPageBytes;
    return std::shared_ptr<std::byte>(AlignedNew(rounded, kPageBytes),
                                      [](std::byte* p) { std::free(p); });
  }
  const size_t c = ClassOf(size);
  return std::shared_ptr<std::byte>(Pool().Take(c),
                                    [c](std::byte* p) { Pool().Give(c, p); });
}

size_t PooledIdleBytes() { return Pool().IdleBytes(); }

}  // namespace rangeio::detail
