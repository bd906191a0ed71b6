// RangeInvertedLists: a small FAISS IVF index read through rangeio returns
// exactly the labels of the same index in memory (both layouts, IVF-Flat and
// IVF-PQ, batches and one-query calls, a budget far below the index), and
// bad files and failed reads give errors naming what failed.
#include "rangeio_faiss/range_inverted_lists.h"

#include <faiss/IVFlib.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_io.h>
#include <faiss/invlists/OnDiskInvertedLists.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "rangeio_faiss/list_read_plan.h"
#include "support/gated_source.h"
#include "support/http_servers.h"
#include "support/test_util.h"

namespace rangeio::integrations {
namespace {

using rangeio::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr int kDim = 32;
constexpr int kBase = 4000;
constexpr int kQueries = 120;
constexpr int kLists = 16;
constexpr int kK = 10;

// Points around kLists random centres (fixed seed): clustered like real
// embeddings, so lists differ in size.
std::vector<float> Clustered(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centres(kLists * kDim);
  for (float& c : centres) c = 4.0f * g(rng);
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng() % kLists);
    for (int j = 0; j < kDim; ++j)
      x[i * kDim + j] = centres[c * kDim + j] + g(rng);
  }
  return x;
}

struct Fixture {
  std::vector<float> base = Clustered(kBase, 1);
  std::vector<float> queries = Clustered(kQueries, 2);
};
const Fixture& Data() {
  static const Fixture* f = new Fixture();
  return *f;
}

std::vector<faiss::Index::idx_t> Search(faiss::Index& index, int nprobe, int n,
                                        const float* q) {
  dynamic_cast<faiss::IndexIVF&>(*faiss::ivflib::extract_index_ivf(&index))
      .nprobe = nprobe;
  std::vector<float> d(static_cast<size_t>(n) * kK);
  std::vector<faiss::Index::idx_t> l(static_cast<size_t>(n) * kK);
  index.search(n, q, kK, d.data(), l.data());
  return l;
}

// Builds `kind` ("flat" or "pq"), saves it as `path` and returns it.
std::unique_ptr<faiss::IndexIVF> Build(const std::string& kind,
                                       const std::string& path) {
  auto* quantizer = new faiss::IndexFlatL2(kDim);
  std::unique_ptr<faiss::IndexIVF> ivf;
  if (kind == "flat") {
    ivf = std::make_unique<faiss::IndexIVFFlat>(quantizer, kDim, kLists);
  } else {
    // 4 x 6 bits: 3-byte codes, so lists do not keep one alignment.
    auto pq =
        std::make_unique<faiss::IndexIVFPQ>(quantizer, kDim, kLists, 4, 6);
    pq->pq.cp.niter = 10;  // a test index: quality does not matter
    ivf = std::move(pq);
  }
  ivf->cp.niter = 10;
  ivf->own_fields = true;
  ivf->verbose = false;
  ivf->train(kBase, Data().base.data());
  ivf->add(kBase, Data().base.data());
  faiss::write_index(ivf.get(), path.c_str());
  return ivf;
}

void ExpectSameLabels(faiss::Index& memory, faiss::Index& ranged) {
  const float* q = Data().queries.data();
  for (int nprobe : {1, 4, kLists}) {
    SCOPED_TRACE("nprobe " + std::to_string(nprobe));
    EXPECT_EQ(Search(memory, nprobe, kQueries, q),
              Search(ranged, nprobe, kQueries, q));
  }
}

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
  std::unique_ptr<faiss::Index> copy(faiss::read_index(plain.c_str()));
  auto* ivf = dynamic_cast<faiss::IndexIVF*>(copy.get());
  ASSERT_NE(ivf, nullptr);
  // Written elsewhere, then found beside the index by its file name.
  const std::string data = dir.path() + "/lists.ivfdata";
  auto* od =
      new faiss::OnDiskInvertedLists(ivf->nlist, ivf->code_size, data.c_str());
  od->merge_from_1(ivf->invlists);
  od->filename = "/elsewhere/lists.ivfdata";
  ivf->replace_invlists(od, true);
  const std::string path = dir.path() + "/ondisk.index";
  faiss::write_index(ivf, path.c_str());
  copy.reset();

  auto ranged = OpenIvfIndex(path);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  ExpectSameLabels(*memory, **ranged);
  std::filesystem::remove(path);
  std::filesystem::remove(data);
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

INSTANTIATE_TEST_SUITE_P(Kinds, LayoutTest, ::testing::Values("flat", "pq"));

TEST(OpenIvfIndexTest, RejectsFilesItDoesNotUnderstand) {
  ScratchDir dir;
  {
    const std::string junk = dir.WriteFile("junk.index", 4096);
    auto r = OpenIvfIndex(junk);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().ToString(), HasSubstr("not a FAISS index"));
    EXPECT_THAT(r.status().ToString(), HasSubstr("junk.index"));
  }
  {
    const std::string flat = dir.path() + "/flat.index";
    faiss::IndexFlatL2 index(kDim);
    index.add(100, Data().base.data());
    faiss::write_index(&index, flat.c_str());
    auto r = OpenIvfIndex(flat);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().ToString(), HasSubstr("not an IVF one"));
    std::filesystem::remove(flat);
  }
  {
    const std::string path = dir.path() + "/cut.index";
    Build("flat", path);
    std::filesystem::resize_file(path,
                                 std::filesystem::file_size(path) * 3 / 5);
    auto r = OpenIvfIndex(path);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().ToString(), HasSubstr("does not fit in the data"));
    EXPECT_THAT(r.status().ToString(), HasSubstr("cut.index"));
    std::filesystem::remove(path);
  }
  {
    auto r = OpenIvfIndex(dir.path() + "/missing.index");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().ToString(), HasSubstr("missing.index"));
  }
}

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

// The plan of one prefetch: lists sorted by offset, touching or overlapping
// ones (the alignment pad) merged up to the cap, never across a gap, and
// the reads ordered by their lists' first scan.
TEST(PlanListReadsTest, MergesByOffsetAndOrdersByFirstUse) {
  const std::vector<ListToRead> lists = {
      {7, {200, 100}, 5},   {1, {400, 100}, 1},   {5, {0, 100}, 3},
      {9, {500, 1000}, 2},  {2, {100, 100}, 0},   {4, {1497, 103}, 6},
      {3, {2000, 100}, 7},  {6, {2096, 54}, 4},   {8, {3000, 100}, 8},
      {10, {3100, 250}, 9}, {11, {4000, 10}, 10},
  };
  const std::vector<PlannedRead> plan = PlanListReads(lists, 300, 0);
  ASSERT_EQ(plan.size(), 8u);
  auto expect = [&](size_t k, ByteRange range, std::vector<size_t> ids,
                    uint32_t first_use) {
    SCOPED_TRACE("read " + std::to_string(k));
    EXPECT_EQ(plan[k].range, range);
    EXPECT_EQ(plan[k].lists, ids);
    EXPECT_EQ(plan[k].first_use, first_use);
  };
  expect(0, {0, 300}, {5, 2, 7}, 0);  // touching, exactly the cap
  expect(1, {400, 100}, {1}, 1);      // a gap before it: alone
  expect(2, {500, 1000}, {9}, 2);     // larger than the cap: alone
  expect(3, {2000, 150}, {3, 6}, 4);  // overlapping by 4 bytes
  expect(4, {1497, 103}, {4}, 6);     // would exceed the cap with 9
  expect(5, {3000, 100}, {8}, 8);     // 8 + 10 would be 350 bytes
  expect(6, {3100, 250}, {10}, 9);
  expect(7, {4000, 10}, {11}, 10);
  // A cap of one byte: every list a read of its own, in scan order.
  const std::vector<PlannedRead> apart = PlanListReads(lists, 1, 0);
  ASSERT_EQ(apart.size(), lists.size());
  for (size_t k = 0; k < apart.size(); ++k) {
    EXPECT_EQ(apart[k].first_use, k);
    EXPECT_EQ(apart[k].lists.size(), 1u);
  }
  // A gap of up to 100 bytes is read through: 1 joins 5, 2 and 7 (reads
  // [300, 400) that nobody needs), 3 and 6 stay apart from 4 (400 bytes).
  const std::vector<PlannedRead> spanned = PlanListReads(lists, 500, 100);
  ASSERT_EQ(spanned.size(), 6u);
  EXPECT_EQ(spanned[0].range, (ByteRange{0, 500}));
  EXPECT_EQ(spanned[0].lists, (std::vector<size_t>{5, 2, 7, 1}));
  EXPECT_EQ(spanned[1].range, (ByteRange{500, 1000}));
  EXPECT_EQ(spanned[2].range, (ByteRange{2000, 150}));
  EXPECT_EQ(spanned[3].range, (ByteRange{1497, 103}));
  EXPECT_EQ(spanned[4].range, (ByteRange{3000, 350}));
  EXPECT_EQ(spanned[4].lists, (std::vector<size_t>{8, 10}));
  EXPECT_EQ(spanned[5].range, (ByteRange{4000, 10}));
  EXPECT_TRUE(PlanListReads({}, 300, 0).empty());
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

}  // namespace
}  // namespace rangeio::integrations
