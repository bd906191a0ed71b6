// The buffer pool behind Slice::Allocate: alignment, LIFO reuse, the bound
// on idle memory, per-thread caches, and release from other threads.
#include "util/buffer_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "rangeio/slice.h"

namespace rangeio::detail {
namespace {

uintptr_t Addr(const std::shared_ptr<std::byte>& p) {
  return reinterpret_cast<uintptr_t>(p.get());
}

TEST(BufferPoolTest, BuffersAreAlignedToTheirClassUpToAPage) {
  const struct {
    size_t size;
    uintptr_t alignment;
  } cases[] = {{0, 512},
               {1, 512},
               {512, 512},
               {513, 1024},
               {4096, 4096},
               {5000, 4096},
               {kMaxPooledBytes, 4096},
               {kMaxPooledBytes + 1, 4096},
               {(size_t{3} << 20) + 7, 4096}};
  for (const auto& c : cases) {
    std::shared_ptr<std::byte> b = AllocatePooledBuffer(c.size);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(Addr(b) % c.alignment, 0u) << "size " << c.size;
    std::memset(b.get(), 0xab, c.size);  // the whole size is writable
  }
}

TEST(BufferPoolTest, ReleasedBufferIsTheNextOneHandedOut) {
  std::shared_ptr<std::byte> a = AllocatePooledBuffer(4096);
  std::shared_ptr<std::byte> b = AllocatePooledBuffer(4096);
  const uintptr_t b_addr = Addr(b);
  b.reset();
  // LIFO: the most recently released (cache-warm) buffer comes back first,
  // also for another size of the same class.
  EXPECT_EQ(Addr(AllocatePooledBuffer(3000)), b_addr);
  EXPECT_NE(Addr(a), b_addr);
}

TEST(BufferPoolTest, IdleMemoryIsBoundedPerClass) {
  // 64 KiB (class 7) keeps 64 buffers (4 MiB); 4 KiB (class 3) keeps 2 MiB.
  static_assert(PooledIdleCapBytes(7) == 64 * 65536);
  static_assert(PooledIdleCapBytes(3) == kPooledBytesPerClass);
  for (const size_t size : {size_t{4096}, size_t{65536}}) {
    const size_t c = std::bit_width(size - 1) - std::bit_width(511u);
    const size_t before = PooledIdleBytes();
    {
      std::vector<std::shared_ptr<std::byte>> held;
      const size_t n = 2 * PooledIdleCapBytes(c) / size;  // twice the bound
      for (size_t i = 0; i < n; ++i) held.push_back(AllocatePooledBuffer(size));
    }
    // Only this class's bound was filled; the rest was freed.
    EXPECT_LE(PooledIdleBytes(), before + PooledIdleCapBytes(c)) << size;
    EXPECT_GE(PooledIdleBytes(), PooledIdleCapBytes(c)) << size;
    EXPECT_LE(PooledIdleBytes(), kMaxPooledIdleBytes) << size;
  }
}

TEST(BufferPoolTest, IdleMemoryIsBoundedInAll) {
  // Filling every class past its bound keeps at most kMaxPooledIdleBytes.
  size_t caps = 0;
  {
    std::vector<std::shared_ptr<std::byte>> held;
    for (size_t c = 0; c < kSizeClasses; ++c) {
      caps += PooledIdleCapBytes(c);
      const size_t size = kMinPooledBytes << c;
      for (size_t i = 0; i < PooledIdleCapBytes(c) / size + 1; ++i) {
        held.push_back(AllocatePooledBuffer(size));
      }
    }
  }
  ASSERT_GT(caps, kMaxPooledIdleBytes);  // else this test shows nothing
  EXPECT_LE(PooledIdleBytes(), kMaxPooledIdleBytes);
  EXPECT_GE(PooledIdleBytes(), kMaxPooledIdleBytes - kMaxPooledBytes);
}

TEST(BufferPoolTest, ThreadCacheIsBoundedAndGoesBackAtThreadExit) {
  // 16 KiB (class 5): no other test uses it, and a thread caches 4.
  constexpr size_t kSize = 16384;
  constexpr size_t kCap = kThreadCacheBytesPerClass / kSize;
  static_assert(kCap == 4 && kCap <= kThreadCacheBuffers);
  // Empty the shared stack of the class (other tests may have filled it to
  // its bound), so that it can take the exiting thread's buffers.
  std::vector<std::shared_ptr<std::byte>> drained;
  for (size_t i = 0; i < PooledIdleCapBytes(5) / kSize + 2 * kCap; ++i) {
    drained.push_back(AllocatePooledBuffer(kSize));
  }
  size_t cached = 0;
  std::vector<uintptr_t> released;
  std::thread t([&] {
    std::vector<std::shared_ptr<std::byte>> held;
    for (size_t i = 0; i < 3 * kCap; ++i) {
      held.push_back(AllocatePooledBuffer(kSize));
    }
    for (const auto& b : held) released.push_back(Addr(b));
    held.clear();
    cached = ThreadCachedBytes();
  });
  t.join();
  EXPECT_EQ(cached, kCap * kSize);
  EXPECT_LE(cached, kMaxThreadCachedBytes);
  // The exited thread's cache went to the shared stack, its most recently
  // released buffer on top: a thread with an empty cache gets it next.
  uintptr_t next = 0;
  std::thread([&] { next = Addr(AllocatePooledBuffer(kSize)); }).join();
  EXPECT_EQ(next, released.back());
}

TEST(BufferPoolTest, ThreadCacheMovesBuffersInBatches) {
  // Past its capacity a thread's cache hands its older half to the shared
  // stack and keeps the most recently released buffers.
  constexpr size_t kSize = 32768;  // class 6: a thread caches 2
  std::vector<std::shared_ptr<std::byte>> held;
  for (int i = 0; i < 8; ++i) held.push_back(AllocatePooledBuffer(kSize));
  const uintptr_t last = Addr(held.back());
  held.clear();
  EXPECT_LE(ThreadCachedBytes(), kMaxThreadCachedBytes);
  EXPECT_EQ(Addr(AllocatePooledBuffer(kSize)), last);
}

TEST(BufferPoolTest, LargeBuffersAreNotPooled) {
  const size_t before = PooledIdleBytes();
  AllocatePooledBuffer(kMaxPooledBytes + 1).reset();
  EXPECT_EQ(PooledIdleBytes(), before);
}

TEST(BufferPoolTest, BuffersMayBeReleasedOnOtherThreads) {
  // Each thread allocates and fills buffers; another thread releases them.
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<Slice>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&made, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::byte* p = nullptr;
        const size_t size = 512u << (i % 5);
        made[t].push_back(Slice::Allocate(size, &p));
        std::memset(p, t, size);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&made, t] {
      for (const Slice& s : made[(t + 1) % kThreads]) {
        EXPECT_EQ(s.data()[s.size() - 1], std::byte((t + 1) % kThreads));
      }
      made[(t + 1) % kThreads].clear();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(PooledIdleBytes(), kMaxPooledIdleBytes);
}

}  // namespace
}  // namespace rangeio::detail
