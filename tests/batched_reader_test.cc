// BatchedReader: cross-caller batches dispatched without waiting for earlier
// batches' I/O, per-caller results, errors isolated to their callers, packed
// blobs, and many threads on one handle; the same for a handle spanning
// several sources (batches planned per source, read as one unit).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "rangeio/batch.h"
#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::GatedSource;
using testing::PatternByteAt;

// Collects asynchronous results.
struct Results {
  std::mutex mu;
  std::map<int, Result<Slice>> got;
  std::function<void(Result<Slice>)> For(int id) {
    return [this, id](Result<Slice> r) {
      std::lock_guard lk(mu);
      EXPECT_TRUE(got.emplace(id, std::move(r)).second) << "twice: " << id;
    };
  }
  size_t size() {
    std::lock_guard lk(mu);
    return got.size();
  }
  bool WaitFor(size_t n) {
    return testing::WaitUntil([&] { return size() >= n; });
  }
};

bool Matches(const Result<Slice>& r, ByteRange range) {
  return r.ok() && r->size() == range.length &&
         testing::MatchesPattern(range, r->span());
}

std::shared_ptr<BatchedReader> Open(std::shared_ptr<Source> s,
                                    BatchOptions bo = {},
                                    Options o = testing::LimitOptions(8)) {
  auto reader = Reader::Open(std::move(s), o);
  EXPECT_TRUE(reader.ok());
  auto b = BatchedReader::Open(*reader, bo);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return *b;
}

TEST(BatchedReaderTest, ABatchIsDispatchedWhileAnEarlierOneIsInFlight) {
  auto gated = GatedSource::Make("g", 1 << 20);  // holds every read
  auto batched = Open(gated);
  Results res;
  const ByteRange r1{0, 100}, r2{10000, 100}, r3{20000, 100};
  batched->ReadAsync(r1, res.For(1));
  ASSERT_TRUE(gated->WaitForHeld(1));
  batched->ReadAsync(r2, res.For(2));
  batched->ReadAsync(r3, res.For(3));
  // r2 and r3 reach the source while r1's batch is still in flight.
  ASSERT_TRUE(gated->WaitForHeld(3));
  EXPECT_EQ(res.size(), 0u);
  gated->ReleaseAll();
  ASSERT_TRUE(res.WaitFor(3));
  EXPECT_TRUE(Matches(res.got.at(1), r1));
  EXPECT_TRUE(Matches(res.got.at(2), r2));
  EXPECT_TRUE(Matches(res.got.at(3), r3));
}

TEST(BatchedReaderTest, QueuedCallersArePlannedTogether) {
  auto gated = GatedSource::Make("g", 1 << 20);
  BatchOptions bo;
  bo.max_batches = 1;  // later callers queue behind the first batch
  Options o = testing::LimitOptions(8);
  o.reader.planner = PlannerOptions::ObjectStore();
  auto batched = Open(gated, bo, o);
  Results res;
  batched->ReadAsync({500000, 100}, res.For(0));
  ASSERT_TRUE(gated->WaitForHeld(1));
  // Three callers' neighbouring ranges arrive while the one batch allowed
  // is in progress.
  batched->ReadAsync({0, 100}, res.For(1));
  batched->ReadAsync({200, 100}, res.For(2));
  batched->ReadAsync({400, 100}, res.For(3));
  gated->SetMode(GatedSource::Mode::kPassInline);
  ASSERT_TRUE(res.WaitFor(4));
  EXPECT_EQ(gated->started_ranges(),
            (std::vector<ByteRange>{{500000, 100}, {0, 500}}));
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(Matches(res.got.at(i), {uint64_t(200 * (i - 1)), 100})) << i;
  }
  EXPECT_EQ(batched->GetStats().largest_batch, 3u);
}

TEST(BatchedReaderTest, AnErrorReachesOnlyItsCaller) {
  auto gated = GatedSource::Make("g", 1 << 20);
  gated->FailOffset(10000, "bad block");
  BatchOptions bo;
  bo.max_batches = 1;
  auto batched = Open(gated, bo);
  Results res;
  batched->ReadAsync({900000, 10}, res.For(0));
  ASSERT_TRUE(gated->WaitForHeld(1));
  batched->ReadAsync({0, 100}, res.For(1));
  batched->ReadAsync({10000, 100}, res.For(2));
  batched->ReadAsync({20000, 100}, res.For(3));
  gated->SetMode(GatedSource::Mode::kPassInline);
  ASSERT_TRUE(res.WaitFor(4));
  EXPECT_TRUE(Matches(res.got.at(1), {0, 100}));
  EXPECT_TRUE(Matches(res.got.at(3), {20000, 100}));
  ASSERT_FALSE(res.got.at(2).ok());
  const std::string msg = res.got.at(2).status().ToString();
  EXPECT_NE(msg.find("bad block"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[10000, 10100)"), std::string::npos) << msg;
  // Each range was its own read (no planner): nothing to read again.
  EXPECT_EQ(batched->reader().GetStats().ranges_retried, 0u);
  const Stats ls = batched->reader().limiter()->GetStats();
  EXPECT_EQ(ls.in_flight, 0u);
}

// One batch at a time, planned for an object store: queued callers' nearby
// ranges become one coalesced read.
std::shared_ptr<BatchedReader> OpenOneCoalescingBatch(
    std::shared_ptr<Source> s) {
  BatchOptions bo;
  bo.max_batches = 1;
  Options o = testing::LimitOptions(8);
  o.reader.planner = PlannerOptions::ObjectStore();
  return Open(std::move(s), bo, o);
}

// Callers' ranges coalesced into one read that fails: the core reads each
// range again alone (per-range errors), so only the caller whose range is
// bad gets an error, and no range is read one by one on a single thread.
TEST(BatchedReaderTest, AFailedCoalescedReadIsRetriedRangeByRange) {
  auto gated = GatedSource::Make("g", 1 << 20);
  gated->FailOffset(0, "bad block");  // reads that start at 0 fail
  auto batched = OpenOneCoalescingBatch(gated);
  Results res;
  batched->ReadAsync({900000, 10}, res.For(0));
  ASSERT_TRUE(gated->WaitForHeld(1));
  batched->ReadAsync({0, 100}, res.For(1));
  batched->ReadAsync({200, 100}, res.For(2));
  batched->ReadAsync({400, 100}, res.For(3));
  gated->SetMode(GatedSource::Mode::kPassInline);
  ASSERT_TRUE(res.WaitFor(4));
  ASSERT_FALSE(res.got.at(1).ok());
  EXPECT_NE(res.got.at(1).status().ToString().find("[0, 100)"),
            std::string::npos)
      << res.got.at(1).status().ToString();
  EXPECT_TRUE(Matches(res.got.at(2), {200, 100}));
  EXPECT_TRUE(Matches(res.got.at(3), {400, 100}));
  // {0, 500} failed; then {0, 100}, {200, 100} and {400, 100} alone.
  EXPECT_EQ(gated->started_ranges(),
            (std::vector<ByteRange>{
                {900000, 10}, {0, 500}, {0, 100}, {200, 100}, {400, 100}}));
  EXPECT_EQ(batched->reader().GetStats().ranges_retried, 3u);
  EXPECT_EQ(batched->reader().limiter()->GetStats().in_flight, 0u);
}

// The ranges of a failed coalesced read are read again side by side, not
// one after another on one thread: the one bad range costs its own retry,
// and the other callers' re-reads are all in flight at once.
TEST(BatchedReaderTest, TheRangesOfAFailedReadAreReadAgainTogether) {
  auto gated = GatedSource::Make("g", 1 << 20);  // holds every read
  gated->FailOffset(0, "bad block");
  auto batched = OpenOneCoalescingBatch(gated);
  Results res;
  batched->ReadAsync({900000, 10}, res.For(0));
  ASSERT_TRUE(gated->WaitForHeld(1));
  constexpr int kCallers = 6;  // one batch, one coalesced read [0, 1100)
  for (int i = 1; i <= kCallers; ++i) {
    batched->ReadAsync({(i - 1) * 200ULL, 100}, res.For(i));
  }
  ASSERT_EQ(gated->ReleaseAll(), 1u);
  ASSERT_TRUE(gated->WaitForHeld(1));
  EXPECT_EQ(gated->held_ranges(), (std::vector<ByteRange>{{0, 1100}}));
  ASSERT_EQ(gated->ReleaseAll(), 1u);  // fails: it starts at 0
  // Every caller's range is in flight again before any of them completes.
  const bool together = gated->WaitForHeld(kCallers);
  const size_t held = gated->held();
  gated->SetMode(GatedSource::Mode::kPassInline);
  gated->ReleaseAll();
  EXPECT_TRUE(together) << held << " held";
  ASSERT_TRUE(res.WaitFor(kCallers + 1));
  EXPECT_FALSE(res.got.at(1).ok());
  for (int i = 2; i <= kCallers; ++i) {
    EXPECT_TRUE(Matches(res.got.at(i), {(i - 1) * 200ULL, 100})) << i;
  }
  EXPECT_EQ(batched->reader().GetStats().ranges_retried, uint64_t{kCallers});
  EXPECT_EQ(batched->reader().limiter()->GetStats().in_flight, 0u);
}

TEST(BatchedReaderTest, BadRangesAreRefusedBeforeAnyIo) {
  auto gated = GatedSource::Make("g", 1000, GatedSource::Mode::kPassInline);
  auto batched = Open(gated);
  auto past = batched->Read({990, 20});
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(past.status().ToString().find("'g'"), std::string::npos);
  auto overflow = batched->Read({UINT64_MAX, 2});
  EXPECT_EQ(overflow.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gated->reads_started(), 0u);
  EXPECT_EQ(batched->GetStats().rejected, 2u);
  BatchOptions bad;
  bad.max_batch_requests = 0;
  EXPECT_FALSE(BatchedReader::Open(*Reader::Open(gated), bad).ok());
}

TEST(BatchedReaderTest, PackedBlobsShareTheObjectsBatching) {
  auto gated = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassInline);
  auto batched = Open(gated);
  auto a = batched->Blob(1000, 500);
  auto b = batched->Blob(4096, 100);
  ASSERT_TRUE(a.ok() && b.ok());
  auto ra = a->Read({10, 50});
  ASSERT_TRUE(ra.ok());
  EXPECT_TRUE(Matches(ra, {1010, 50}));
  auto rb = b->Read({0, 100});
  EXPECT_TRUE(Matches(rb, {4096, 100}));
  auto past = a->Read({490, 20});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().ToString().find("blob [1000, 1500)"),
            std::string::npos)
      << past.status().ToString();
  EXPECT_FALSE(batched->Blob((1 << 20) - 10, 11).ok());
  EXPECT_EQ(batched->GetStats().requests, 2u);  // both went to the object
}

// 16 threads making 200 reads each through `batched`: every
// `blob_every`-th through `blob` (a quarter of the object at its middle),
// the others from a random one of its `sources` sources of `size` bytes,
// all holding the test pattern. Returns the reads whose bytes were wrong.
int Hammer(BatchedReader& batched, const BlobHandle& blob, uint64_t size,
           size_t sources, int blob_every) {
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 200; ++i) {
        const uint64_t len = 1 + rng() % 5000;
        if (i % blob_every == 0) {
          const ByteRange r{rng() % (size / 4 - len), len};
          if (!Matches(blob.Read(r), {size / 2 + r.offset, len})) ++bad;
        } else {
          const ByteRange r{rng() % (size - len), len};
          const size_t source = sources > 1 ? rng() % sources : 0;
          if (!Matches(batched.Read(source, r), r)) ++bad;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return bad.load();
}

TEST(BatchedReaderTest, ManyThreadsHammerOneHandle) {
  constexpr uint64_t kSize = 1 << 20;
  auto source = MakeMemorySource("mem", testing::PatternBuffer(kSize), false);
  Options o = testing::LimitOptions(4);
  o.reader.planner = PlannerOptions::ObjectStore();
  auto batched = Open(source, {}, o);
  auto blob = *batched->Blob(kSize / 2, kSize / 4);
  EXPECT_EQ(Hammer(*batched, blob, kSize, 1, 3), 0);
  EXPECT_EQ(batched->GetStats().requests, 16u * 200u);
  const Stats ls = batched->reader().limiter()->GetStats();
  EXPECT_LE(ls.peak_in_flight, 4u);
  EXPECT_EQ(ls.retained_count, 0u);
}

TEST(BatchedReaderTest, MultipleSourcesShareOneLimiter) {
  auto g1 = GatedSource::Make("one", 1 << 20, GatedSource::Mode::kPassAsync);
  auto g2 = GatedSource::Make("two", 1 << 20, GatedSource::Mode::kPassAsync);
  auto limiter = *Limiter::Make(testing::LimitOptions(2));
  auto b1 = *BatchedReader::Open(*Reader::Open(g1, ReaderOptions(), limiter));
  auto b2 = *BatchedReader::Open(*Reader::Open(g2, ReaderOptions(), limiter));
  // Each result is checked and released at once: held slices would keep
  // the shared budget (4 responses) and stall both readers.
  std::atomic<int> good{0}, done{0};
  for (int i = 0; i < 50; ++i) {
    const ByteRange r{uint64_t(i) * 1000, 100};
    (i % 2 ? b1 : b2)->ReadAsync(r, [&, r](Result<Slice> got) {
      if (Matches(got, r)) ++good;
      ++done;
    });
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return done.load() == 50; }));
  EXPECT_EQ(good.load(), 50);
  EXPECT_LE(limiter->GetStats().peak_in_flight, 2u);
}

TEST(BatchedReaderTest, DroppingTheHandleStillAnswersEveryCaller) {
  auto gated = GatedSource::Make("g", 1 << 20);
  Results res;
  {
    auto batched = Open(gated);
    for (int i = 0; i < 10; ++i) {
      batched->ReadAsync({uint64_t(i) * 5000, 10}, res.For(i));
    }
    ASSERT_TRUE(
        gated->WaitFor([](const GatedSource& g) { return g.held() >= 1; }));
    gated->SetMode(GatedSource::Mode::kPassAsync);
  }  // waits for every caller's answer
  EXPECT_EQ(res.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(Matches(res.got.at(i), {uint64_t(i) * 5000, 10})) << i;
  }
}

// A handle over several gated sources sharing one limiter.
struct MultiSource {
  std::vector<std::shared_ptr<GatedSource>> gates;
  std::shared_ptr<BatchedReader> batched;
};
MultiSource OpenMulti(int n, BatchOptions bo = {},
                      Options o = testing::LimitOptions(8),
                      GatedSource::Mode mode = GatedSource::Mode::kHold) {
  MultiSource m;
  auto limiter = *Limiter::Make(o);
  std::vector<Reader> readers;
  for (int i = 0; i < n; ++i) {
    m.gates.push_back(
        GatedSource::Make(std::string(1, char('a' + i)), 1 << 20, mode));
    readers.push_back(*Reader::Open(m.gates.back(), o.reader, limiter));
  }
  auto b = BatchedReader::Open(std::move(readers), bo);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  m.batched = *b;
  return m;
}

TEST(BatchedReaderMultiSourceTest, RequestsForOtherSourcesGoOutDuringABatch) {
  MultiSource m = OpenMulti(3);
  auto ga = m.gates[0], gb = m.gates[1], gc = m.gates[2];
  Results res;
  const ByteRange r1{0, 100}, r2{10000, 100}, r3{20000, 100}, r4{30000, 100};
  m.batched->ReadAsync(0, r1, res.For(1));
  ASSERT_TRUE(ga->WaitForHeld(1));
  m.batched->ReadAsync(1, r2, res.For(2));
  m.batched->ReadAsync(2, r3, res.For(3));
  m.batched->ReadAsync(0, r4, res.For(4));
  // Every later request reaches its source while r1's batch is in flight.
  ASSERT_TRUE(gb->WaitForHeld(1));
  ASSERT_TRUE(gc->WaitForHeld(1));
  ASSERT_TRUE(ga->WaitForHeld(2));
  EXPECT_EQ(res.size(), 0u);
  for (auto& g : m.gates) g->ReleaseAll();
  ASSERT_TRUE(res.WaitFor(4));
  EXPECT_TRUE(Matches(res.got.at(1), r1));
  EXPECT_TRUE(Matches(res.got.at(2), r2));
  EXPECT_TRUE(Matches(res.got.at(3), r3));
  EXPECT_TRUE(Matches(res.got.at(4), r4));
  EXPECT_EQ(m.batched->source_count(), 3u);
}

TEST(BatchedReaderMultiSourceTest, ABatchIsPlannedPerSourceAndReadAsOneUnit) {
  BatchOptions bo;
  bo.max_batches = 1;  // later callers queue behind the first batch
  Options o = testing::LimitOptions(8);
  o.reader.planner = PlannerOptions::ObjectStore();
  MultiSource m = OpenMulti(3, bo, o);
  auto ga = m.gates[0], gb = m.gates[1], gc = m.gates[2];
  Results res;
  m.batched->ReadAsync(0, {500000, 100}, res.For(0));
  ASSERT_TRUE(ga->WaitForHeld(1));
  // Callers' ranges for three sources arrive while the first batch reads;
  // the same offsets on different objects must not be coalesced together.
  m.batched->ReadAsync(0, {0, 100}, res.For(1));
  m.batched->ReadAsync(1, {0, 100}, res.For(2));
  m.batched->ReadAsync(0, {200, 100}, res.For(3));
  m.batched->ReadAsync(2, {1000, 100}, res.For(4));
  ga->ReleaseOldest(1);
  ASSERT_TRUE(res.WaitFor(1));
  // The next batch starts every source's reads at once...
  ASSERT_TRUE(ga->WaitForHeld(1));
  ASSERT_TRUE(gb->WaitForHeld(1));
  ASSERT_TRUE(gc->WaitForHeld(1));
  // ...and hands each back as it completes, whichever source it is from.
  ASSERT_TRUE(gc->ReleaseOffset(1000));
  ASSERT_TRUE(res.WaitFor(2));
  EXPECT_TRUE(Matches(res.got.at(4), {1000, 100}));
  EXPECT_EQ(res.got.count(1) + res.got.count(2) + res.got.count(3), 0u);
  ASSERT_TRUE(gb->ReleaseOffset(0));
  ASSERT_TRUE(res.WaitFor(3));
  EXPECT_TRUE(Matches(res.got.at(2), {0, 100}));
  ga->ReleaseAll();
  ASSERT_TRUE(res.WaitFor(5));
  EXPECT_EQ(ga->started_ranges(),
            (std::vector<ByteRange>{{500000, 100}, {0, 300}}));
  EXPECT_EQ(gb->started_ranges(), (std::vector<ByteRange>{{0, 100}}));
  EXPECT_EQ(gc->started_ranges(), (std::vector<ByteRange>{{1000, 100}}));
  EXPECT_TRUE(Matches(res.got.at(1), {0, 100}));
  EXPECT_TRUE(Matches(res.got.at(3), {200, 100}));
  const BatchStats st = m.batched->GetStats();
  EXPECT_EQ(st.batches, 2u);
  EXPECT_EQ(st.largest_batch, 4u);
  EXPECT_EQ(st.most_sources, 3u);
}

TEST(BatchedReaderMultiSourceTest, AnErrorInOneSourceReachesOnlyItsCaller) {
  BatchOptions bo;
  bo.max_batches = 1;
  MultiSource m = OpenMulti(3, bo);
  auto ga = m.gates[0], gb = m.gates[1], gc = m.gates[2];
  gb->FailOffset(10000, "bad block");
  Results res;
  m.batched->ReadAsync(0, {900000, 10}, res.For(0));
  ASSERT_TRUE(ga->WaitForHeld(1));
  m.batched->ReadAsync(1, {0, 100}, res.For(1));
  m.batched->ReadAsync(1, {10000, 100}, res.For(2));
  m.batched->ReadAsync(1, {20000, 100}, res.For(3));
  m.batched->ReadAsync(0, {10000, 100}, res.For(4));
  m.batched->ReadAsync(2, {10000, 100}, res.For(5));
  for (auto& g : m.gates) g->SetMode(GatedSource::Mode::kPassInline);
  ASSERT_TRUE(res.WaitFor(6));
  EXPECT_TRUE(Matches(res.got.at(1), {0, 100}));
  EXPECT_TRUE(Matches(res.got.at(3), {20000, 100}));
  EXPECT_TRUE(Matches(res.got.at(4), {10000, 100}));
  EXPECT_TRUE(Matches(res.got.at(5), {10000, 100}));
  ASSERT_FALSE(res.got.at(2).ok());
  const std::string msg = res.got.at(2).status().ToString();
  EXPECT_NE(msg.find("bad block"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[10000, 10100)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'b'"), std::string::npos) << msg;
  EXPECT_EQ(m.batched->reader(1).limiter()->GetStats().in_flight, 0u);
}

TEST(BatchedReaderMultiSourceTest, BadSourcesAreRefusedBeforeAnyIo) {
  MultiSource m = OpenMulti(2, {}, testing::LimitOptions(8),
                            GatedSource::Mode::kPassInline);
  auto r = m.batched->Read(2, {0, 10});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().ToString().find("source index 2"), std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(m.batched->Blob(2, 0, 10).ok());
  auto past = m.batched->Read(1, {(1 << 20) - 5, 10});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().ToString().find("'b'"), std::string::npos);
  EXPECT_EQ(m.gates[0]->reads_started() + m.gates[1]->reads_started(), 0u);
  EXPECT_EQ(m.batched->GetStats().rejected, 2u);
  EXPECT_FALSE(BatchedReader::Open(std::vector<Reader>{}).ok());
  auto blob = m.batched->Blob(1, 4096, 100);
  ASSERT_TRUE(blob.ok());
  EXPECT_TRUE(Matches(blob->Read({0, 100}), {4096, 100}));
}

TEST(BatchedReaderMultiSourceTest, ManyThreadsHammerOneMultiSourceHandle) {
  constexpr uint64_t kSize = 1 << 20;
  Options o = testing::LimitOptions(4);
  o.reader.planner = PlannerOptions::ObjectStore();
  auto limiter = *Limiter::Make(o);
  // An inline source and two completing on other threads.
  std::vector<std::shared_ptr<Source>> sources = {
      MakeMemorySource("mem", testing::PatternBuffer(kSize), false),
      GatedSource::Make("g1", kSize, GatedSource::Mode::kPassAsync),
      GatedSource::Make("g2", kSize, GatedSource::Mode::kPassAsync)};
  std::vector<Reader> readers;
  for (auto& s : sources)
    readers.push_back(*Reader::Open(s, o.reader, limiter));
  auto batched = *BatchedReader::Open(std::move(readers));
  auto blob = *batched->Blob(2, kSize / 2, kSize / 4);
  EXPECT_EQ(Hammer(*batched, blob, kSize, 3, 4), 0);
  EXPECT_EQ(batched->GetStats().requests, 16u * 200u);
  const Stats ls = limiter->GetStats();
  EXPECT_LE(ls.peak_in_flight, 4u);
  EXPECT_EQ(ls.retained_count, 0u);
}

}  // namespace
}  // namespace rangeio
