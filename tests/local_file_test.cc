// The local-file backend beyond what every engine must do (that is in
// local_conformance_test.cc and source_conformance_test.cc): Reader::OpenFile
// and the default engine, the fall-back when io_uring is refused, engine
// names, the no-disk ring, the waiting consumer that drives the ring, and the
// pread pool's page-cache helpers (hit_threads). io_uring with O_DIRECT
// (registered buffers, the 4 KiB arena): uring_direct_test.cc.
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
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "local/local_read.h"
#include "local/uring/uring_file.h"
#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"
#include "support/gated_source.h"
#include "support/source_conformance.h"
#include "support/test_util.h"

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

TEST_F(LocalFileTest, ReaderOpenUrlUsesTheDefaultEngine) {
  std::string path = WriteFile("open.bin", 10'000);
  auto reader = Reader::OpenUrl(path, LimitOptions(4));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->source()->name(), path);
  EXPECT_THAT(reader->source()->Info().description,
              StartsWith(DefaultLocalEngine(false) == LocalEngine::kUring
                             ? "io_uring, queue depth 4"
                             : "pread pool, up to 4 threads"));
  const std::vector<ByteRange> ranges = {{0, 10'000}};
  auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);

  auto missing = Reader::OpenUrl(dir_ + "/missing.bin");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto dir = Reader::OpenUrl(dir_);
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  auto bad = Reader::OpenUrl(path, LimitOptions(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("io-concurrency"));
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
  const std::string d = (*fallback)->Info().description;
  if (DefaultLocalEngine(true) == LocalEngine::kUring) {
    EXPECT_THAT(d, StartsWith("pread pool"));
    EXPECT_THAT(d, HasSubstr("io_uring unavailable"));
    EXPECT_THAT(d, HasSubstr("errno 1"));
  }
  Options options = LimitOptions(4);
  options.reader.planner = PlannerOptions::None();
  auto reader = Reader::Open(*fallback, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const std::vector<ByteRange> ranges = {{9999, 1}, {0, 10'000}, {17, 4000}};
  auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
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
  options.reader.planner = PlannerOptions::None();
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
  EXPECT_THAT((*source)->Info().description, HasSubstr("IORING_OP_NOP"));
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
  EXPECT_THAT((*source)->Info().description,
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
      o.reader.planner = PlannerOptions::None();
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
