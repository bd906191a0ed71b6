// Slice: ref-counted immutable views; the owner lives while any view does.
#include "rangeio/slice.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace rangeio {
namespace {

// An owner whose destruction the test can observe.
std::shared_ptr<const void> CountedOwner(std::vector<std::byte>* bytes,
                                         std::atomic<int>* destroyed) {
  return std::shared_ptr<const void>(bytes, [destroyed](const void* p) {
    delete static_cast<const std::vector<std::byte>*>(p);
    ++*destroyed;
  });
}

Slice FromString(const std::string& s, std::atomic<int>* destroyed) {
  auto* v = new std::vector<std::byte>(s.size());
  std::memcpy(v->data(), s.data(), s.size());
  return Slice(CountedOwner(v, destroyed), v->data(), v->size());
}

TEST(SliceTest, DefaultIsEmpty) {
  Slice s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.span().size(), 0u);
  EXPECT_EQ(s.AsStringView(), "");
}

TEST(SliceTest, CopyOfCopiesBytes) {
  std::string text = "hello, ranges";
  Slice s = Slice::CopyOf(std::as_bytes(std::span(text)));
  text[0] = 'J';
  EXPECT_EQ(s.AsStringView(), "hello, ranges");
  EXPECT_NE(static_cast<const void*>(s.data()),
            static_cast<const void*>(text.data()));
  Slice empty = Slice::CopyOf({});
  EXPECT_TRUE(empty.empty());
}

TEST(SliceTest, AllocateGivesWritableBuffer) {
  std::byte* w = nullptr;
  Slice s = Slice::Allocate(5, &w);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(s.size(), 5u);
  std::memcpy(w, "abcde", 5);
  EXPECT_EQ(s.AsStringView(), "abcde");
  EXPECT_EQ(s.data(), w);
}

TEST(SliceTest, CopiesAndSubSlicesShareTheBuffer) {
  std::atomic<int> destroyed{0};
  Slice s = FromString("0123456789", &destroyed);
  Slice copy = s;
  Slice sub = s.Sub(3, 4);
  EXPECT_EQ(copy.data(), s.data());
  EXPECT_EQ(sub.data(), s.data() + 3);
  EXPECT_EQ(sub.AsStringView(), "3456");
  EXPECT_EQ(s.Sub(10, 0).size(), 0u);
  s.Reset();
  EXPECT_TRUE(s.empty());
  copy.Reset();
  EXPECT_EQ(destroyed.load(), 0) << "sub-slice must keep the buffer alive";
  EXPECT_EQ(sub.AsStringView(), "3456");
  sub.Reset();
  EXPECT_EQ(destroyed.load(), 1);
}

TEST(SliceTest, WithOwnerAttachesALease) {
  std::atomic<int> buffer_gone{0}, lease_gone{0};
  Slice s = FromString("payload", &buffer_gone);
  // A lease that keeps the original slice (and so the buffer) alive and
  // reports its own release, like the scheduler's budget lease.
  struct Lease {
    Lease(Slice k, std::atomic<int>* g) : keep(std::move(k)), gone(g) {}
    ~Lease() { ++*gone; }
    Slice keep;
    std::atomic<int>* gone;
  };
  auto lease = std::make_shared<Lease>(s, &lease_gone);
  Slice leased = s.WithOwner(lease);
  lease.reset();
  s.Reset();
  EXPECT_EQ(leased.AsStringView(), "payload");
  EXPECT_EQ(lease_gone.load(), 0);
  EXPECT_EQ(buffer_gone.load(), 0);
  Slice sub = leased.Sub(0, 3);
  leased.Reset();
  EXPECT_EQ(lease_gone.load(), 0) << "sub-slice of a leased slice holds it";
  EXPECT_EQ(sub.AsStringView(), "pay");
  sub.Reset();
  EXPECT_EQ(lease_gone.load(), 1);
  EXPECT_EQ(buffer_gone.load(), 1);
}

TEST(SliceTest, SharedAcrossThreads) {
  std::atomic<int> destroyed{0};
  Slice s = FromString(std::string(4096, 'x'), &destroyed);
  std::vector<std::thread> threads;
  std::atomic<size_t> total{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([s, &total] {
      for (int i = 0; i < 1000; ++i) {
        Slice c = s.Sub(i % 4000, 96);
        total += c.size();
      }
    });
  }
  s.Reset();
  for (auto& t : threads) t.join();
  EXPECT_EQ(total.load(), 4u * 1000 * 96);
  EXPECT_EQ(destroyed.load(), 1);
}

}  // namespace
}  // namespace rangeio
