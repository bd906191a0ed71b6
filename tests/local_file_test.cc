// The local-file backend beyond what every engine must do (that is in
// local_conformance_test.cc and source_conformance_test.cc): Reader::OpenFile
// and the default engine, io_uring's registered buffers, the fall-back when
// io_uring is refused, engine names, and the pread pool's page-cache helpers
// (hit_threads).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "local/local_read.h"
#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"
#include "support/gated_source.h"
#include "support/source_conformance.h"
#include "support/test_util.h"
#include "uring/uring_file.h"

namespace rangeio {
namespace {

using testing::ExpectLimiterDrains;
using ::testing::HasSubstr;
using testing::LimitOptions;
using testing::MatchesPattern;
using ::testing::StartsWith;
using testing::WaitUntil;

class LocalFileTest : public ::testing::Test {
 protected:
  // A file of `size` pattern bytes (PatternByteAt).
  std::string WriteFile(const std::string& name, size_t size) {
    return scratch_.WriteFile(name, size);
  }

  testing::ScratchDir scratch_;
  const std::string dir_ = scratch_.path();
};

TEST_F(LocalFileTest, ReaderOpenFileUsesTheDefaultEngine) {
  std::string path = WriteFile("open.bin", 10'000);
  auto reader = Reader::OpenFile(path, LimitOptions(4));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->source()->name(), path);
  EXPECT_THAT(reader->source()->Describe(),
              StartsWith(DefaultLocalEngine(false) == LocalEngine::kUring
                             ? "io_uring, queue depth 4"
                             : "pread pool, up to 4 threads"));
  const std::vector<ByteRange> ranges = {{0, 10'000}};
  auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);

  auto missing = Reader::OpenFile(dir_ + "/missing.bin");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto dir = Reader::OpenFile(dir_);
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  auto bad = Reader::OpenFile(path, LimitOptions(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("read-thread-num"));
}

// An O_DIRECT file through io_uring with a queue depth of `threads`.
Result<std::shared_ptr<Source>> OpenDirectUring(const std::string& path,
                                                uint32_t threads) {
  LocalFileOptions o;
  o.engine = LocalEngine::kUring;
  o.direct = true;
  o.threads = threads;
  return OpenLocalFile(path, o);
}

// io_uring with O_DIRECT reads wide ranges (64 KiB..1 MiB, what a
// coalescing planner issues) into registered buffers. That slices keep their
// bytes while held, while later reads reuse released buffers, every backend
// must show: source_conformance_test.cc, SlicesKeepTheirBytesWhileHeld.
TEST_F(LocalFileTest, WideDirectReadsThroughIoUringUseRegisteredBuffers) {
  constexpr size_t kSize = 8 << 20;
  std::string path = WriteFile("wide.bin", kSize);
  auto source = OpenDirectUring(path, 4);
  if (!source.ok() && testing::IsDirectUnsupported(source.status())) {
    GTEST_SKIP() << source.status().ToString();
  }
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::mt19937_64 rng(9);
  std::vector<ByteRange> ranges;
  for (int i = 0; i < 40; ++i) {
    const uint64_t len = (64 << 10) + rng() % (1 << 20);
    ranges.push_back({rng() % (kSize - len + 1), len});
  }
  Options options = LimitOptions(4, 128, 128 << 20);
  options.planner = PlannerOptions::None();
  auto reader = Reader::Open(*source, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
  const std::string d = (*source)->Describe();
  EXPECT_THAT(d, HasSubstr("registered 1 MiB buffers")) << d;
  EXPECT_EQ(d.find("(0 into registered buffers)"), std::string::npos) << d;
}

// Makes io_uring_setup fail with EPERM on the calling thread and the threads
// it starts from now on, as a container's seccomp profile does; the rest of
// the process is untouched. False when the kernel refuses the filter.
bool DenyIoUringOnThisThread() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Where io_uring is refused, the default engine falls back to the pread pool
// and says why; an explicit io_uring request fails naming file and cause.
TEST_F(LocalFileTest, IoUringRefusedFallsBackToPreadAndSaysSo) {
  std::string path = WriteFile("fallback.bin", 10'000);
  bool filtered = false;
  Result<std::shared_ptr<Source>> fallback = Status::Internal("not run");
  Result<std::shared_ptr<Source>> explicit_uring = Status::Internal("not run");
  std::thread denied([&] {
    filtered = DenyIoUringOnThisThread();
    if (!filtered) return;
    LocalFileOptions o;
    o.engine = LocalEngine::kAuto;
    o.direct = true;  // kAuto's engine for O_DIRECT files is io_uring
    fallback = OpenLocalFile(path, o);
    o.engine = LocalEngine::kUring;
    o.direct = false;
    explicit_uring = OpenLocalFile(path, o);
  });
  denied.join();
  if (!filtered) GTEST_SKIP() << "seccomp filters are not allowed here";
  if (!fallback.ok() &&
      fallback.status().code() == StatusCode::kInvalidArgument &&
      fallback.status().message().find("direct") != std::string::npos) {
    GTEST_SKIP() << "no O_DIRECT here: " << fallback.status().ToString();
  }

  ASSERT_FALSE(explicit_uring.ok());
  EXPECT_EQ(explicit_uring.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(explicit_uring.status().message(), HasSubstr(path));
  EXPECT_THAT(explicit_uring.status().message(), HasSubstr("io_uring"));

  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  const std::string d = (*fallback)->Describe();
  if (DefaultLocalEngine(true) == LocalEngine::kUring) {
    EXPECT_THAT(d, StartsWith("pread pool"));
    EXPECT_THAT(d, HasSubstr("io_uring unavailable"));
    EXPECT_THAT(d, HasSubstr("errno 1"));
  }
  Options options = LimitOptions(4);
  options.planner = PlannerOptions::None();
  auto reader = Reader::Open(*fallback, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const std::vector<ByteRange> ranges = {{9999, 1}, {0, 10'000}, {17, 4000}};
  auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
}

// Small direct reads of two streams (two readers, two consumer threads) on
// one io_uring source: their reads go to the ring a grant at a time
// (ReadMany) and come back in runs per stream (OnReadsDone), interleaved in
// one reaped batch. Every range arrives once with its bytes, and each
// limiter stays within its C and gets every permit back.
TEST_F(LocalFileTest, SmallDirectReadsOfTwoStreamsThroughIoUring) {
  constexpr size_t kSize = 4 << 20;
  std::string path = WriteFile("small.bin", kSize);
  auto source = OpenDirectUring(path, 16);
  if (!source.ok() && testing::IsDirectUnsupported(source.status())) {
    GTEST_SKIP() << source.status().ToString();
  }
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  // Block-aligned 4 KiB ranges, and odd ones (widened to aligned reads).
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 600; ++i) {
    ranges.push_back(i % 3 == 0 ? ByteRange{(i * 7919 % 1024) * 4096, 4096}
                                : ByteRange{i * 6151 % (kSize - 5000), 4999});
  }
  Options options = LimitOptions(8);
  options.planner = PlannerOptions::None();
  std::vector<std::shared_ptr<Limiter>> limiters;
  std::vector<testing::DrainResult> out(2);
  std::vector<std::thread> consumers;
  for (size_t k = 0; k < 2; ++k) {
    auto reader = Reader::Open(*source, options);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    limiters.push_back(reader->limiter());
    consumers.emplace_back([&, k, r = std::move(*reader)]() mutable {
      auto stream = r.ReadRanges(ranges, Delivery::kAsCompleted);
      ASSERT_TRUE(stream.ok()) << stream.status().ToString();
      out[k] = testing::Drain(*stream, ranges);
    });
  }
  for (std::thread& t : consumers) t.join();
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(out[k].status.ok()) << out[k].status.ToString();
    EXPECT_EQ(out[k].bad_bytes, 0u);
    std::vector<size_t> got = out[k].indexes;
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got.size(), ranges.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i);
    EXPECT_LE(limiters[k]->GetStats().peak_in_flight, 8u);
    ExpectLimiterDrains(*limiters[k]);
  }
}

// Small direct reads land in the registered arena of 4 KiB slots (4 per
// unit of queue depth) while it has free ones and in ordinary memory while
// the consumer holds them all; a held slice keeps its bytes while later
// reads reuse the slots that others released.
TEST_F(LocalFileTest, SmallDirectReadsUseTheRegisteredArenaAndFallBack) {
  constexpr size_t kSize = 4 << 20;
  std::string path = WriteFile("arena.bin", kSize);
  auto source = OpenDirectUring(path, 4);  // 16 arena slots
  if (!source.ok() && testing::IsDirectUnsupported(source.status())) {
    GTEST_SKIP() << source.status().ToString();
  }
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 100; ++i)
    ranges.push_back({i * 37 % 1024 * 4096, 4096});
  Options options = LimitOptions(4, 256, 256 * 4096);
  options.planner = PlannerOptions::None();
  auto reader = Reader::Open(*source, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto held_stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(held_stream.ok()) << held_stream.status().ToString();
  auto held = testing::Drain(*held_stream, ranges, nullptr, true);
  ASSERT_TRUE(held.status.ok()) << held.status.ToString();
  ASSERT_EQ(held.slices.size(), ranges.size());
  // Release every other result, then read again, releasing each at once.
  for (size_t i = 0; i < held.slices.size(); i += 2) held.slices[i].Reset();
  auto again = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto out = testing::Drain(*again, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
  for (size_t i = 1; i < held.slices.size(); i += 2) {
    const ByteRange& r = ranges[held.indexes[i]];
    EXPECT_TRUE(MatchesPattern(r, held.slices[i].span()))
        << "held result for offset " << r.offset << " changed";
  }
  const std::string d = (*source)->Describe();
  EXPECT_THAT(d, HasSubstr("and 16 of 4 KiB")) << d;
  EXPECT_EQ(d.find("(0 into registered buffers)"), std::string::npos) << d;
}

// The count in Describe()'s "(N into registered buffers)".
uint64_t RegisteredReads(Source& source) {
  const std::string d = source.Describe();
  const size_t end = d.find(" into registered buffers)");
  const size_t begin = d.rfind('(', end);
  if (end == std::string::npos || begin == std::string::npos) {
    ADD_FAILURE() << "no registered-buffer count in: " << d;
    return 0;
  }
  return std::stoull(d.substr(begin + 1, end - begin - 1));
}

// Arena slots come back whichever threads release them, while the ring
// takes others: slices handed to three threads that release them as the
// reads go on; then, every slice gone, a request that holds all 16 slots at
// once finds each of them free (none lost between threads).
TEST_F(LocalFileTest, ArenaSlotsReleasedOnOtherThreadsAllComeBack) {
  std::string path = WriteFile("arena-threads.bin", 4 << 20);
  auto source = OpenDirectUring(path, 4);  // 16 arena slots
  if (!source.ok() && testing::IsDirectUnsupported(source.status())) {
    GTEST_SKIP() << source.status().ToString();
  }
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Options options = LimitOptions(4, 16, 16 * 4096);
  options.planner = PlannerOptions::None();
  auto reader = Reader::Open(*source, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 3000; ++i) {
    ranges.push_back({i * 37 % 1024 * 4096, 4096});
  }
  constexpr size_t kReleasers = 3;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<Slice>> queues(kReleasers);
  bool done = false;
  std::vector<std::thread> releasers;
  for (size_t k = 0; k < kReleasers; ++k) {
    releasers.emplace_back([&, k] {
      std::vector<Slice> mine;
      std::unique_lock<std::mutex> lk(mu);
      for (;;) {
        cv.wait(lk, [&] { return done || !queues[k].empty(); });
        if (queues[k].empty()) return;
        mine.swap(queues[k]);
        lk.unlock();
        mine.clear();  // releases the slots, off the consumer's thread
        lk.lock();
      }
    });
  }
  size_t delivered = 0;
  {
    auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    for (;;) {
      auto r = stream->Next();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (!*r) break;
      EXPECT_TRUE(MatchesPattern(ranges[(*r)->index], (*r)->bytes.span()));
      {
        std::lock_guard<std::mutex> lk(mu);
        queues[delivered % kReleasers].push_back(std::move((*r)->bytes));
      }
      cv.notify_all();
      ++delivered;
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    done = true;
  }
  cv.notify_all();
  for (std::thread& t : releasers) t.join();
  EXPECT_EQ(delivered, ranges.size());
  const uint64_t before = RegisteredReads(**source);
  EXPECT_GT(before, 0u);
  const std::vector<ByteRange> all(ranges.begin(), ranges.begin() + 16);
  auto stream = reader->ReadRanges(all, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto held = testing::Drain(*stream, all, nullptr, true);
  ASSERT_TRUE(held.status.ok()) << held.status.ToString();
  EXPECT_EQ(held.bad_bytes, 0u);
  EXPECT_EQ(RegisteredReads(**source) - before, all.size())
      << (*source)->Describe();
}

// Slices of the 4 KiB arena outlive the source, its ring and the reader:
// the arena goes only when the last of them is released (ASan's leak check
// fails the run if it never goes).
TEST_F(LocalFileTest, ArenaSlicesOutliveTheirSource) {
  std::string path = WriteFile("outlive.bin", 1 << 20);
  auto source = OpenDirectUring(path, 2);
  if (!source.ok() && testing::IsDirectUnsupported(source.status())) {
    GTEST_SKIP() << source.status().ToString();
  }
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 6; ++i) ranges.push_back({i * 8192, 4096});
  std::vector<Slice> held;
  {
    Options options = LimitOptions(2, 8, 8 * 4096);
    options.planner = PlannerOptions::None();
    auto reader = Reader::Open(*source, options);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    auto out = testing::Drain(*stream, ranges, nullptr, true);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    ASSERT_EQ(out.indexes, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
    held = std::move(out.slices);
    EXPECT_THAT((*source)->Describe(),
                HasSubstr("(6 into registered buffers)"));
    source->reset();  // the reader's is the last: the ring ends with it
  }
  ASSERT_EQ(held.size(), ranges.size());
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(MatchesPattern(ranges[i], held[i].span()))
        << "slice of offset " << ranges[i].offset << " changed";
  }
  for (size_t i = 0; i < held.size(); i += 2) held[i].Reset();
  for (size_t i = 1; i < held.size(); i += 2) {
    EXPECT_TRUE(MatchesPattern(ranges[i], held[i].span()));
  }
}

// The no-disk engine of bench local (IORING_OP_NOP for every read) still
// goes through the whole path: each range is delivered once, with its
// length, within C, and every permit comes back.
TEST_F(LocalFileTest, NopRingDeliversEveryRangeOnce) {
  std::string path = WriteFile("nop.bin", 1 << 20);
  auto file = detail::OpenFileHandle(path, true);
  if (!file.ok() && testing::IsDirectUnsupported(file.status())) {
    GTEST_SKIP() << file.status().ToString();
  }
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  LocalFileOptions o;
  o.threads = 8;
  auto source = detail::MakeUringNopFile(*file, o);
  if (!source.ok()) GTEST_SKIP() << source.status().ToString();
  const auto ranges = testing::SpreadRanges(3000, 4096, 4096);
  std::vector<ByteRange> wrapped = ranges;
  for (ByteRange& r : wrapped) r.offset %= (1 << 20);
  Options options = LimitOptions(8);
  options.planner = PlannerOptions::None();
  auto reader = Reader::Open(*source, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto stream = reader->ReadRanges(wrapped, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto out = testing::Drain(*stream);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  std::vector<size_t> got = out.indexes;
  std::sort(got.begin(), got.end());
  ASSERT_EQ(got.size(), wrapped.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i);
  for (size_t size : out.sizes) ASSERT_EQ(size, 4096u);
  EXPECT_LE(reader->limiter()->GetStats().peak_in_flight, 8u);
  ExpectLimiterDrains(*reader->limiter());
  EXPECT_THAT((*source)->Describe(), HasSubstr("IORING_OP_NOP"));
}

// Opens the no-disk io_uring engine over a small O_DIRECT file, or says why
// not (the test then skips).
Result<std::shared_ptr<Source>> OpenNopRing(const std::string& path,
                                            uint32_t depth) {
  auto file = detail::OpenFileHandle(path, true);
  if (!file.ok()) return file.status();
  LocalFileOptions o;
  o.threads = depth;
  return detail::MakeUringNopFile(*file, o);
}

// A sink whose first completion holds the thread that delivers it until
// Release(): the test can keep the ring thread busy in a callback.
class HoldingSink final : public ReadSink {
 public:
  void OnReadDone(uint64_t tag, Result<Slice> bytes) override {
    (void)tag;
    (void)bytes;
    std::unique_lock<std::mutex> lock(mu_);
    thread_ = std::this_thread::get_id();
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, testing::kHangGuard, [&] { return entered_; });
  }
  std::thread::id thread() {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool released_ = false;
  std::thread::id thread_;
};

// A consumer that waits (Source::Assist) drives the io_uring ring itself:
// with the ring thread held in a callback, the consumer submits its queued
// read, reaps it and delivers it on its own thread, and says so. Assist
// completes no more than it is asked for.
TEST_F(LocalFileTest, WaitingConsumerDrivesTheRing) {
  std::string path = WriteFile("drive.bin", 1 << 20);
  HoldingSink hold;  // outlives the ring, which is released before it ends
  auto source = OpenNopRing(path, 8);
  if (!source.ok()) GTEST_SKIP() << source.status().ToString();
  struct Releaser {
    HoldingSink& sink;
    ~Releaser() { sink.Release(); }
  } releaser{hold};
  (*source)->Read({0, 4096}, &hold, 0);
  ASSERT_TRUE(hold.WaitEntered());
  ASSERT_NE(hold.thread(), std::this_thread::get_id());

  testing::CollectingSink sink;
  for (uint64_t i = 0; i < 3; ++i) {
    (*source)->Read({(i + 1) * 4096, 4096}, &sink, i);
  }
  EXPECT_EQ((*source)->Assist(0), 0u);
  EXPECT_EQ(sink.count(), 0u) << "the ring thread is held: nothing ran yet";
  EXPECT_EQ((*source)->Assist(2), 2u);
  EXPECT_EQ((*source)->Assist(2), 1u);
  ASSERT_EQ(sink.count(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    const auto done = sink.Get(i);
    EXPECT_EQ(done.thread, std::this_thread::get_id()) << "read " << i;
    ASSERT_TRUE(done.bytes.ok()) << done.bytes.status().ToString();
    EXPECT_EQ(done.bytes->size(), 4096u);
  }
  EXPECT_EQ(sink.duplicates(), 0u);
  EXPECT_THAT((*source)->Describe(),
              HasSubstr("3 delivered by waiting consumers"));
}

// A thread that drove the ring queues reads outside Assist without waking
// the ring thread (it would submit them at its next Assist). When it never
// comes back, the reads still go out: the ring thread's sleep is bounded
// while a consumer drives. Each round drives, lets another thread's read
// put the ring thread to sleep, then queues a read and only waits.
TEST_F(LocalFileTest, ReadsOfADriverThatDoesNotComeBackStillComplete) {
  std::string path = WriteFile("grace.bin", 1 << 20);
  auto source = OpenNopRing(path, 8);
  if (!source.ok()) GTEST_SKIP() << source.status().ToString();
  for (uint64_t round = 0; round < 200; ++round) {
    testing::CollectingSink other;
    testing::CollectingSink mine;
    (void)(*source)->Assist(8);
    std::thread([&] { (*source)->Read({0, 4096}, &other, 0); }).join();
    ASSERT_TRUE(other.WaitFor(1, testing::kHangGuard)) << "round " << round;
    (*source)->Read({4096, 4096}, &mine, 1);
    ASSERT_TRUE(mine.WaitFor(1, testing::kHangGuard)) << "round " << round;
    const auto done = mine.Get(1);
    ASSERT_TRUE(done.bytes.ok()) << done.bytes.status().ToString();
  }
}

// Many short streams over the pread pool (completions on several threads at
// once), each dropped, with its reader and limiter, as soon as it is
// drained. Before every completion held its stream (reader.cc), TSan and
// ASan reported a use-after-free of the stream or its limiter here within a
// few hundred rounds.
TEST_F(LocalFileTest, ReaderSurvivesConcurrentCompletions) {
  std::string path = WriteFile("tails.bin", 1 << 20);
  LocalFileOptions o;
  o.engine = LocalEngine::kPread;
  o.threads = 8;
  o.try_inline = false;  // every completion on a pool thread
  auto source = OpenLocalFile(path, o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const auto ranges = testing::SpreadRanges(16, 3000, 4096, 5);
  for (int round = 0; round < 2000; ++round) {
    auto reader = Reader::Open(*source, LimitOptions(8));
    ASSERT_TRUE(reader.ok());
    auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok());
    auto out = testing::Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  }
}

TEST(LocalEngineTest, NamesRoundTrip) {
  for (LocalEngine e :
       {LocalEngine::kAuto, LocalEngine::kPread, LocalEngine::kUring}) {
    auto parsed = ParseLocalEngine(LocalEngineName(e));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, e);
  }
  auto bad = ParseLocalEngine("aio");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'aio'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("auto, pread, uring"));
}

// Page-cache hits queued for helper threads (LocalFileOptions::hit_threads).
class LocalHitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "rangeio_hits_" +
            std::to_string(::getpid()) + ".bin";
    Status st = testing::WriteFileBytes(path_, testing::PatternBuffer(kSize));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  std::shared_ptr<Source> Open(uint32_t hit_threads) {
    LocalFileOptions o;
    o.engine = LocalEngine::kPread;
    o.threads = 4;
    o.hit_threads = hit_threads;
    auto source = OpenLocalFile(path_, o);
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    return source.ok() ? *source : nullptr;
  }

  static constexpr size_t kSize = 1 << 20;
  std::string path_;
};

// Reads given at once reach the helper together: it completes them in
// batches (OnReadsDone with more than one), each read exactly once with its
// bytes; a consumer's Assist runs at most what it is asked for.
TEST_F(LocalHitsTest, HelpersCompleteQueuedHitsInBatches) {
  auto source = Open(1);
  ASSERT_NE(source, nullptr);
  class BatchSink final : public ReadSink {
   public:
    void OnReadDone(uint64_t tag, Result<Slice> bytes) override {
      ReadCompletion c{tag, std::move(bytes)};
      OnReadsDone({&c, 1});
    }
    void OnReadsDone(std::span<ReadCompletion> done) override {
      std::lock_guard lk(mu);
      largest = std::max(largest, done.size());
      for (ReadCompletion& c : done)
        got.emplace_back(c.tag, std::move(c.bytes));
    }
    size_t count() {
      std::lock_guard lk(mu);
      return got.size();
    }
    std::mutex mu;
    size_t largest = 0;
    std::vector<std::pair<uint64_t, Result<Slice>>> got;
  } sink;
  constexpr size_t kReads = 64;
  std::vector<ReadRequest> reads;
  for (size_t i = 0; i < kReads; ++i) {
    reads.push_back({{i * 8192 + 100, 4000}, i});
  }
  // The file was just written: its pages are cached.
  source->ReadMany(reads, &sink);
  EXPECT_LE(source->Assist(3), 3u);
  ASSERT_TRUE(WaitUntil([&] { return sink.count() == kReads; }));
  std::vector<bool> seen(kReads);
  for (auto& [tag, bytes] : sink.got) {
    ASSERT_LT(tag, kReads);
    EXPECT_FALSE(seen[tag]) << "read " << tag << " completed twice";
    seen[tag] = true;
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_TRUE(MatchesPattern(reads[tag].range, bytes->span())) << tag;
  }
  EXPECT_GT(sink.largest, 1u) << "no read was completed in a batch";
  EXPECT_EQ(source->Assist(8), 0u) << "nothing is left queued";
}

// Through a Reader, with the consumer assisting: every range once with its
// bytes, within the bounds, in both delivery modes; also when the file has
// left the page cache (misses go on to the blocking pool).
TEST_F(LocalHitsTest, ReaderGetsEveryRangeOnceWithHelpers) {
  for (bool evict : {false, true}) {
    for (Delivery delivery : {Delivery::kOrdered, Delivery::kAsCompleted}) {
      auto source = Open(2);
      ASSERT_NE(source, nullptr);
      if (evict) {
        const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
        ASSERT_GE(fd, 0);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
      }
      Options o = LimitOptions(4);
      o.planner = PlannerOptions::None();
      auto reader = Reader::Open(source, o);
      ASSERT_TRUE(reader.ok());
      std::vector<ByteRange> ranges;
      for (uint64_t i = 0; i < 120; ++i) {
        ranges.push_back({(i * 7919 * 4096) % (kSize - 5000), 5000});
      }
      auto stream = reader->ReadRanges(ranges, delivery);
      ASSERT_TRUE(stream.ok());
      auto out = testing::Drain(*stream, ranges);
      EXPECT_TRUE(out.status.ok()) << out.status.ToString();
      EXPECT_EQ(out.bad_bytes, 0u);
      std::vector<size_t> idx = out.indexes;
      if (delivery == Delivery::kAsCompleted) std::sort(idx.begin(), idx.end());
      ASSERT_EQ(idx.size(), ranges.size());
      for (size_t i = 0; i < idx.size(); ++i) EXPECT_EQ(idx[i], i);
      // A completion hands its permit back, and counts its read, after the
      // consumer may already have taken the result: wait for the limiter
      // first.
      ExpectLimiterDrains(*reader->limiter());
      const Stats st = reader->limiter()->GetStats();
      EXPECT_LE(st.peak_in_flight, 4u);
      EXPECT_LE(st.peak_retained_count, 8u);
      EXPECT_EQ(st.physical_reads, ranges.size());
    }
  }
}

TEST(LocalFileOptionsTest, HitThreadsOutOfRangeIsRejected) {
  LocalFileOptions o;
  o.hit_threads = 5000;
  auto source = OpenLocalFile("/dev/null", o);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(source.status().message(), HasSubstr("hit_threads=5000"));
  EXPECT_THAT(source.status().message(), HasSubstr("/dev/null"));
  EXPECT_THAT(source.status().message(), HasSubstr("0..4096"));
}

}  // namespace
}  // namespace rangeio
