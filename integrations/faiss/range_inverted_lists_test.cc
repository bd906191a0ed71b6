// RangeInvertedLists: a small FAISS IVF index read through rangeio returns
// exactly the labels of the same index in memory (both layouts, IVF-Flat and
// IVF-PQ, batches and one-query calls, reconstruct, a budget far below the
// index), and failed reads give errors naming what failed.
#include "rangeio_faiss/range_inverted_lists.h"

#include <faiss/IVFlib.h>
#include <faiss/impl/FaissException.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <thread>

#include "support/gated_source.h"
#include "support/http_servers.h"
#include "support/test_util.h"
#include "test_index.h"

namespace rangeio::integrations {
namespace {

using rangeio::testing::Build;
using rangeio::testing::Data;
using rangeio::testing::ExpectSameLabels;
using rangeio::testing::kBase;
using rangeio::testing::kDim;
using rangeio::testing::kK;
using rangeio::testing::kLists;
using rangeio::testing::kQueries;
using rangeio::testing::SaveOnDisk;
using rangeio::testing::ScratchDir;
using rangeio::testing::Search;
using ::testing::HasSubstr;

class LayoutTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutTest, NormalLayoutGivesLabelsOfMemoryIndex) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ivf.index";
  auto memory = Build(GetParam(), path);
  auto ranged = OpenIvfIndex(path);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  ExpectSameLabels(*memory, **ranged);
  RangeInvertedLists* lists = RangeListsOf(ranged->get());
  ASSERT_NE(lists, nullptr);
  const ListStats s = lists->GetListStats();
  EXPECT_GT(s.prefetch_calls, 0u);
  EXPECT_GT(s.lists_prefetched, 0u);
  // Every list a batch scans was prefetched (by its thread or another).
  EXPECT_EQ(s.lists_on_demand, 0u);
  std::filesystem::remove(path);
}

TEST_P(LayoutTest, OnDiskLayoutGivesLabelsOfMemoryIndex) {
  ScratchDir dir;
  const std::string plain = dir.path() + "/plain.index";
  auto memory = Build(GetParam(), plain);
  const std::string path = SaveOnDisk(plain, dir.path());
  ASSERT_FALSE(path.empty());
  auto ranged = OpenIvfIndex(path);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  ExpectSameLabels(*memory, **ranged);
  std::filesystem::remove(path);
  std::filesystem::remove(dir.path() + "/lists.ivfdata");
  std::filesystem::remove(plain);
}

// The same index served by nginx: read with ranged GETs.
TEST_P(LayoutTest, HttpUrlGivesLabelsOfMemoryIndex) {
  RANGEIO_NEED_SERVERS(servers);
  const std::string name =
      "faiss-" + GetParam() + "-" + std::to_string(::getpid()) + ".index";
  const std::string path = servers.nginx_root + "/" + name;
  auto memory = Build(GetParam(), path);
  auto ranged = OpenIvfIndex(servers.nginx + "/" + name);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  ExpectSameLabels(*memory, **ranged);
  std::filesystem::remove(path);
}

// One query per call from several threads, which share the lists they hold.
TEST_P(LayoutTest, OneQueryCallsFromThreadsGiveLabelsOfMemoryIndex) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ivf.index";
  auto memory = Build(GetParam(), path);
  auto ranged = OpenIvfIndex(path);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  const std::vector<faiss::Index::idx_t> want =
      Search(*memory, 4, kQueries, Data().queries.data());
  std::vector<faiss::Index::idx_t> got(want.size());
  faiss::ivflib::extract_index_ivf(ranged->get())->nprobe = 4;
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      omp_set_num_threads(1);
      for (int i = t; i < kQueries; i += 4) {
        std::vector<float> d(kK);
        (*ranged)->search(1, Data().queries.data() + i * kDim, kK, d.data(),
                          got.data() + i * kK);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(want, got);
  std::filesystem::remove(path);
}

// A response budget of a few lists, far below what a batch prefetches: the
// batch still completes with the same labels and the lists' memory never
// exceeds the budget. With 8 lists' worth, the read cap (budget / (search
// threads + 1)) merges touching lists, whose reads a pinned list holds
// whole.
TEST_P(LayoutTest, BudgetBelowBatchBoundsMemoryAndKeepsLabels) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ivf.index";
  auto memory = Build(GetParam(), path);
  size_t largest = 0;
  for (int i = 0; i < kLists; ++i) {
    largest = std::max(largest, memory->invlists->list_size(i));
  }
  for (const uint64_t budget_lists : {4, 8}) {
    SCOPED_TRACE("budget of " + std::to_string(budget_lists) + " lists");
    IvfOpenOptions o;
    o.reader.limiter.io_concurrency = 2;
    o.reader.limiter.response_budget_count = 4;
    o.reader.limiter.response_budget_bytes =
        budget_lists * (largest * (memory->code_size + 8) + 8);
    auto ranged = OpenIvfIndex(path, o);
    ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
    ExpectSameLabels(*memory, **ranged);
    RangeInvertedLists* lists = RangeListsOf(ranged->get());
    const Stats s = lists->reader().limiter()->GetStats();
    EXPECT_LE(s.peak_retained_bytes, o.reader.limiter.response_budget_bytes);
    EXPECT_LE(s.peak_retained_count, 4u);
    EXPECT_LE(s.peak_in_flight, 2u);
  }
  std::filesystem::remove(path);
}

// reconstruct and reconstruct_n keep no list pinned past their call (FAISS
// 1.7.3 never releases what get_single_code returns): over every vector,
// with a budget of four lists (far below the index), they give the vectors
// of the index in memory, a search after them its labels, and the whole
// budget comes back.
TEST_P(LayoutTest, ReconstructLeavesNoListPinned) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ivf.index";
  auto memory = Build(GetParam(), path);
  size_t largest = 0;
  for (int i = 0; i < kLists; ++i) {
    largest = std::max(largest, memory->invlists->list_size(i));
  }
  IvfOpenOptions o;
  o.reader.limiter.response_budget_bytes =
      4 * (largest * (memory->code_size + 8) + 8);
  ASSERT_LT(o.reader.limiter.response_budget_bytes,
            memory->ntotal * (memory->code_size + 8));
  auto ranged = OpenIvfIndex(path, o);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  std::vector<float> want(static_cast<size_t>(kBase) * kDim);
  std::vector<float> got(want.size());
  memory->reconstruct_n(0, kBase, want.data());
  ASSERT_NO_THROW((*ranged)->reconstruct_n(0, kBase, got.data()));
  EXPECT_EQ(want, got);
  // One vector at a time, through a direct map.
  faiss::IndexIVF* ivf = faiss::ivflib::extract_index_ivf(ranged->get());
  ASSERT_NO_THROW(ivf->make_direct_map(true));
  for (faiss::Index::idx_t key = 0; key < kBase; key += 7) {
    std::vector<float> one(kDim);
    ASSERT_NO_THROW((*ranged)->reconstruct(key, one.data())) << key;
    EXPECT_TRUE(std::equal(one.begin(), one.end(), want.begin() + key * kDim))
        << key;
  }
  ExpectSameLabels(*memory, **ranged);
  const std::shared_ptr<Limiter>& limiter =
      RangeListsOf(ranged->get())->reader().limiter();
  EXPECT_TRUE(rangeio::testing::WaitUntil([&] {
    const Stats s = limiter->GetStats();
    return s.retained_count == 0 && s.retained_bytes == 0;
  })) << limiter->GetStats().ToString();
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Kinds, LayoutTest, ::testing::Values("flat", "pq"));

// A failed read surfaces from get_codes as a FaissException naming the list
// and its bytes; the other lists of the same prefetch are still served.
TEST(RangeInvertedListsTest, ReadErrorNamesListAndRange) {
  auto gate = rangeio::testing::GatedSource::Make(
      "gate", 1 << 20, rangeio::testing::GatedSource::Mode::kPassAsync);
  gate->FailOffset(3000, "injected failure");
  auto reader = Reader::Open(gate);
  ASSERT_TRUE(reader.ok());
  std::vector<RangeInvertedLists::Extent> extents;
  for (uint64_t i = 0; i < 4; ++i)
    extents.push_back({i * 1000, i * 1000 + 80, 10});
  // No gap read through: list 3's read is the one that starts at 3000.
  auto lists = RangeInvertedLists::Make(8, extents, *reader, 0, 0);
  ASSERT_TRUE(lists.ok()) << lists.status().ToString();
  const faiss::Index::idx_t probe[] = {3, 1, -1, 3};
  (*lists)->prefetch_lists(probe, 4);
  const uint8_t* codes = (*lists)->get_codes(1);
  EXPECT_TRUE(rangeio::testing::MatchesPattern(
      {1000, 80}, {reinterpret_cast<const std::byte*>(codes), 80}));
  (*lists)->release_codes(1, codes);
  try {
    (*lists)->get_codes(3);
    ADD_FAILURE() << "no exception";
  } catch (const faiss::FaissException& e) {
    EXPECT_THAT(e.what(), HasSubstr("FAISS list 3"));
    EXPECT_THAT(e.what(), HasSubstr("[3000, 3160)"));
    EXPECT_THAT(e.what(), HasSubstr("injected failure"));
  }
  // Extents past the source are refused before any read.
  extents.push_back({1 << 20, (1 << 20) + 80, 10});
  auto bad = RangeInvertedLists::Make(8, extents, *reader);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().ToString(), HasSubstr("list 4"));
}

// Two search threads whose prefetches overlap read each list once: the
// second finds the shared lists held or coming, and both scan every list
// with the right bytes. Apart lists: one read each; touching lists: merged.
TEST(RangeInvertedListsTest, ThreadsSharePrefetchedLists) {
  for (const bool touching : {false, true}) {
    SCOPED_TRACE(touching ? "touching lists" : "lists apart");
    auto gate = rangeio::testing::GatedSource::Make(
        "gate", 1 << 20, rangeio::testing::GatedSource::Mode::kPassAsync);
    auto reader = Reader::Open(gate);
    ASSERT_TRUE(reader.ok());
    const uint64_t stride = touching ? 160 : 1000;
    std::vector<RangeInvertedLists::Extent> extents;
    for (uint64_t i = 0; i < 6; ++i)
      extents.push_back({i * stride, i * stride + 80, 10});
    // No gap read through: lists apart stay apart.
    auto made = RangeInvertedLists::Make(8, extents, *reader, 0, 0);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    const RangeInvertedLists& lists = **made;
    std::promise<void> a_prefetched;
    std::promise<void> b_prefetched;
    std::shared_future<void> b_done = b_prefetched.get_future().share();
    auto scan = [&](const std::vector<faiss::Index::idx_t>& probe) {
      for (const faiss::Index::idx_t l : probe) {
        const auto i = static_cast<uint64_t>(l);
        const uint8_t* codes = lists.get_codes(i);
        const auto* ids = lists.get_ids(i);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(ids) % 8, 0u);
        EXPECT_TRUE(rangeio::testing::MatchesPattern(
            {i * stride, 160},
            {reinterpret_cast<const std::byte*>(codes), 160}));
        lists.release_ids(i, ids);
        lists.release_codes(i, codes);
      }
    };
    const std::vector<faiss::Index::idx_t> pa = {0, 1, 2, 3};
    const std::vector<faiss::Index::idx_t> pb = {3, 2, 4, -1, 5};
    std::thread a([&] {
      lists.prefetch_lists(pa.data(), static_cast<int>(pa.size()));
      a_prefetched.set_value();
      b_done.wait();
      scan(pa);
    });
    a_prefetched.get_future().wait();
    std::thread b([&] {
      lists.prefetch_lists(pb.data(), static_cast<int>(pb.size()));
      b_prefetched.set_value();
      scan({3, 2, 4, 5});
    });
    a.join();
    b.join();
    const ListStats s = lists.GetListStats();
    EXPECT_EQ(s.prefetch_calls, 2u);
    EXPECT_EQ(s.lists_prefetched, 6u);
    EXPECT_EQ(s.lists_already_held, 2u);
    EXPECT_EQ(s.lists_on_demand, 0u);
    EXPECT_EQ(s.lists_evicted, 0u);
    // Apart: one read per list; touching: 0-3, then 4-5.
    EXPECT_EQ(s.prefetch_reads, touching ? 2u : 6u);
    EXPECT_EQ(lists.reader().limiter()->GetStats().physical_bytes, 6u * 160);
  }
}

using Extent = RangeInvertedLists::Extent;
using rangeio::testing::GatedSource;

// Extents of 10 entries of 8-byte codes (160 bytes a list) at `at`.
std::vector<Extent> ListsAt(const std::vector<uint64_t>& at) {
  std::vector<Extent> extents;
  extents.reserve(at.size());
  for (const uint64_t a : at) extents.push_back({a, a + 80, 10});
  return extents;
}

// Scans list i once: its codes and ids are the source's bytes, the ids
// 8-aligned.
void ExpectList(const RangeInvertedLists& lists, size_t i, const Extent& e) {
  SCOPED_TRACE("list " + std::to_string(i));
  const uint8_t* codes = lists.get_codes(i);
  const auto* ids = lists.get_ids(i);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ids) % 8, 0u);
  EXPECT_TRUE(rangeio::testing::MatchesPattern(
      {e.codes_offset, e.size * lists.code_size},
      {reinterpret_cast<const std::byte*>(codes), e.size * lists.code_size}));
  EXPECT_TRUE(rangeio::testing::MatchesPattern(
      {e.ids_offset, e.size * 8},
      {reinterpret_cast<const std::byte*>(ids), e.size * 8}));
  lists.release_ids(i, ids);
  lists.release_codes(i, codes);
}

// One prefetch's physical reads: lists that touch share a read, and the
// reads go out in scan order (by the first scan of any list they hold),
// not by offset; with max_read_bytes = 1 each list is a read of its own.
TEST(RangeInvertedListsTest, ReadsFollowScanOrderAndCoalesce) {
  // Lists 0-2 touch, 3-4 touch, 5 is alone, 6-7 touch.
  const std::vector<Extent> extents =
      ListsAt({0, 160, 320, 10000, 10160, 20000, 30000, 30160});
  const std::vector<faiss::Index::idx_t> probe = {5, 4, 0, 7, 2, 5, 3, 1, 6};
  struct Case {
    uint64_t max_read;
    std::vector<ByteRange> reads;  // in issue order
  };
  const std::vector<Case> cases = {
      {0, {{20000, 160}, {10000, 320}, {0, 480}, {30000, 320}}},
      {1,
       {{20000, 160},
        {10160, 160},
        {0, 160},
        {30160, 160},
        {320, 160},
        {10000, 160},
        {160, 160},
        {30000, 160}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("max_read_bytes " + std::to_string(c.max_read));
    auto gate = GatedSource::Make("gate", 1 << 20, GatedSource::Mode::kHold);
    Options o;
    o.limiter.io_concurrency = 16;
    auto reader = Reader::Open(gate, o);
    ASSERT_TRUE(reader.ok());
    auto lists = RangeInvertedLists::Make(8, extents, *reader, c.max_read, 0);
    ASSERT_TRUE(lists.ok()) << lists.status().ToString();
    (*lists)->prefetch_lists(probe.data(), static_cast<int>(probe.size()));
    ASSERT_TRUE(gate->WaitForStarted(c.reads.size()));
    EXPECT_EQ(gate->started_ranges(), c.reads);
    gate->SetMode(GatedSource::Mode::kPassAsync);
    for (size_t i = 0; i < extents.size(); ++i) {
      ExpectList(**lists, i, extents[i]);
    }
    const ListStats s = (*lists)->GetListStats();
    EXPECT_EQ(s.lists_prefetched, extents.size());
    EXPECT_EQ(s.prefetch_reads, c.reads.size());
    EXPECT_EQ(s.lists_on_demand, 0u);
    EXPECT_EQ(gate->reads_started(), c.reads.size());
  }
}

// Lists whose codes leave their ids unaligned (3-byte codes, back to
// back): each range's alignment pad would overlap the list before, which
// would make the whole run one read; the pads are left out between lists
// of a request, so the cap holds. A list read alone keeps its pad.
TEST(RangeInvertedListsTest, AlignmentPadsKeepReadsUnderTheCap) {
  std::vector<Extent> extents;
  for (uint64_t i = 0; i < 8; ++i) {
    extents.push_back({8 + i * 55, 8 + i * 55 + 15, 5});  // 15 + 40 bytes
  }
  auto gate = GatedSource::Make("gate", 1 << 20, GatedSource::Mode::kPassAsync);
  auto reader = Reader::Open(gate);
  ASSERT_TRUE(reader.ok());
  auto lists = RangeInvertedLists::Make(3, extents, *reader, 120, 0);
  ASSERT_TRUE(lists.ok()) << lists.status().ToString();
  const std::vector<faiss::Index::idx_t> probe = {0, 1, 2, 3, 4, 5, 6, 7};
  (*lists)->prefetch_lists(probe.data(), static_cast<int>(probe.size()));
  for (size_t i = 0; i < extents.size(); ++i) {
    const uint8_t* codes = (*lists)->get_codes(i);
    const auto* ids = (*lists)->get_ids(i);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ids) % 8, 0u);
    EXPECT_TRUE(rangeio::testing::MatchesPattern(
        {extents[i].codes_offset, 55},
        {reinterpret_cast<const std::byte*>(codes), 55}));
    (*lists)->release_ids(i, ids);
    (*lists)->release_codes(i, codes);
  }
  const std::vector<ByteRange> reads = gate->started_ranges();
  EXPECT_GE(reads.size(), 4u);  // 440 bytes in reads of at most 120
  for (const ByteRange& r : reads) EXPECT_LE(r.length, 120u) << r.ToString();
  // Read alone (on demand), list 3 starts at its pad: aligned, no copy.
  gate->ClearStarted();
  const ListStats before = (*lists)->GetListStats();
  ExpectList(**lists, 3, extents[3]);
  EXPECT_EQ(gate->started_ranges(), (std::vector<ByteRange>{{172, 56}}));
  const ListStats after = (*lists)->GetListStats();
  EXPECT_EQ(after.lists_on_demand, before.lists_on_demand + 1);
  EXPECT_EQ(after.aligned_copies, before.aligned_copies);
}

// A coalesced read that fails is read again list by list by the core:
// only the list whose own range fails throws, and a later call reads it
// again.
TEST(RangeInvertedListsTest, FailedSharedReadFailsOnlyItsList) {
  auto gate = GatedSource::Make("gate", 1 << 20, GatedSource::Mode::kPassAsync);
  gate->FailOffset(0, "injected failure");  // the shared read and list 0's
  auto reader = Reader::Open(gate);
  ASSERT_TRUE(reader.ok());
  const std::vector<Extent> extents = ListsAt({0, 160, 320, 480});
  auto lists = RangeInvertedLists::Make(8, extents, *reader, 0, 0);
  ASSERT_TRUE(lists.ok()) << lists.status().ToString();
  const std::vector<faiss::Index::idx_t> probe = {2, 0, 1, 3};
  (*lists)->prefetch_lists(probe.data(), static_cast<int>(probe.size()));
  for (const size_t i : {2, 1, 3}) ExpectList(**lists, i, extents[i]);
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      (*lists)->get_codes(0);
      ADD_FAILURE() << "no exception";
    } catch (const faiss::FaissException& e) {
      EXPECT_THAT(e.what(), HasSubstr("FAISS list 0"));
      EXPECT_THAT(e.what(), HasSubstr("[0, 160)"));
      EXPECT_THAT(e.what(), HasSubstr("injected failure"));
    }
  }
  const ListStats s = (*lists)->GetListStats();
  EXPECT_EQ(s.prefetch_reads, 1u);
  EXPECT_EQ(s.lists_on_demand, 1u);  // the second attempt
  // The shared read, its four lists alone, list 0 again on demand.
  const std::vector<ByteRange> reads = gate->started_ranges();
  ASSERT_EQ(reads.size(), 6u);
  EXPECT_EQ(reads.front(), (ByteRange{0, 640}));
  EXPECT_EQ(reads.back(), (ByteRange{0, 160}));
  EXPECT_EQ(gate->reads_failed(), 3u);
  EXPECT_EQ((*lists)->reader().limiter()->GetStats().ranges_retried, 4u);
}

// Destroying the lists with reads held in the backend and more queued
// returns at once: the streams are cancelled, their reads' permits and the
// lists' budget come back.
TEST(RangeInvertedListsTest, DestructorCancelsReadsInFlight) {
  auto gate = GatedSource::Make("gate", 1 << 20, GatedSource::Mode::kHold);
  Options o;
  o.limiter.io_concurrency = 3;
  auto reader = Reader::Open(gate, o);
  ASSERT_TRUE(reader.ok());
  auto lists = RangeInvertedLists::Make(
      8, ListsAt({0, 1000, 2000, 3000, 4000, 5000, 6000, 7000}), *reader, 0, 0);
  ASSERT_TRUE(lists.ok()) << lists.status().ToString();
  const std::vector<faiss::Index::idx_t> mine = {0, 1, 2, 3};
  const std::vector<faiss::Index::idx_t> theirs = {4, 5, 6, 7};
  std::thread other([&] { (*lists)->prefetch_lists(theirs.data(), 4); });
  other.join();
  (*lists)->prefetch_lists(mine.data(), 4);
  ASSERT_TRUE(gate->WaitForHeld(3));
  // One list arrives and is held in the table; the next read takes its
  // permit.
  ASSERT_TRUE(gate->ReleaseOldest(1) == 1);
  ASSERT_TRUE(gate->WaitForHeld(3));
  auto destroyed = std::async(std::launch::async, [&] { lists->reset(); });
  if (destroyed.wait_for(std::chrono::seconds(10)) !=
      std::future_status::ready) {
    GatedSource::PassAllLiveGates();
    destroyed.wait();
    FAIL() << "the destructor waited for reads held in the backend";
  }
  EXPECT_EQ(gate->held(), 0u);
  // The three held, and any queued read a cancel's permits admitted before
  // its own stream was cancelled.
  EXPECT_GE(gate->cancelled(), 3u);
  const std::shared_ptr<Limiter>& limiter = reader->limiter();
  EXPECT_TRUE(rangeio::testing::WaitUntil([&] {
    const Stats s = limiter->GetStats();
    return s.in_flight == 0 && s.retained_count == 0 && s.retained_bytes == 0;
  })) << limiter->GetStats().ToString();
}

}  // namespace
}  // namespace rangeio::integrations
