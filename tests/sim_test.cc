// The simulated object store: content, latency model validation, and the
// model's lower bounds and ordering (never an upper bound on speed). What
// every Source must do: source_conformance_test.cc.
#include "rangeio/sim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"

namespace rangeio {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using testing::CollectingSink;

std::shared_ptr<Source> MakeSim(uint64_t size, LatencyModel model,
                                std::string name = "sim://bucket/object") {
  auto s = MakeSimulatedSource(std::move(name), size, model);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : nullptr;
}

TEST(SimulatedBytesTest, FillMatchesByteAt) {
  for (uint64_t start : {uint64_t{0}, uint64_t{1}, uint64_t{4095},
                         uint64_t{1} << 33, (uint64_t{1} << 62) + 7}) {
    std::vector<std::byte> buf(1000);
    FillSimulatedBytes(start, buf);
    for (size_t i = 0; i < buf.size(); ++i) {
      ASSERT_EQ(buf[i], SimulatedByteAt(start + i)) << start << "+" << i;
    }
  }
  FillSimulatedBytes(5, {});  // empty span is fine
}

TEST(SimulatedBytesTest, ContentVariesWithOffset) {
  std::set<std::byte> seen;
  size_t equal_neighbours = 0;
  for (uint64_t i = 0; i < 4096; ++i) {
    seen.insert(SimulatedByteAt(i));
    if (SimulatedByteAt(i) == SimulatedByteAt(i + 1)) ++equal_neighbours;
  }
  EXPECT_GE(seen.size(), 64u) << "content too uniform to catch misplaced bytes";
  EXPECT_LT(equal_neighbours, 4096u / 8);
  // Offsets a power of two apart differ somewhere (catches truncation).
  size_t differ = 0;
  for (uint64_t i = 0; i < 256; ++i) {
    if (SimulatedByteAt(i) != SimulatedByteAt(i + (uint64_t{1} << 32)))
      ++differ;
  }
  EXPECT_GT(differ, 0u);
}

TEST(LatencyModelTest, FactoriesSetFields) {
  auto f = LatencyModel::Fixed(microseconds(300));
  EXPECT_EQ(f.kind, LatencyModel::Kind::kFixed);
  EXPECT_EQ(f.base, microseconds(300));

  auto k = LatencyModel::EveryKth(milliseconds(1), milliseconds(10), 64);
  EXPECT_EQ(k.kind, LatencyModel::Kind::kEveryKth);
  EXPECT_EQ(k.base, milliseconds(1));
  EXPECT_EQ(k.slow, milliseconds(10));
  EXPECT_EQ(k.every, 64u);

  auto p = LatencyModel::Probability(milliseconds(1), milliseconds(9), 0.25);
  EXPECT_EQ(p.kind, LatencyModel::Kind::kProbability);
  EXPECT_EQ(p.slow, milliseconds(9));
  EXPECT_DOUBLE_EQ(p.p, 0.25);

  auto l = LatencyModel::Lognormal(milliseconds(2), 0.7);
  EXPECT_EQ(l.kind, LatencyModel::Kind::kLognormal);
  EXPECT_EQ(l.base, milliseconds(2));
  EXPECT_DOUBLE_EQ(l.sigma, 0.7);

  for (const LatencyModel& m : {f, k, p, l, LatencyModel{}}) {
    EXPECT_TRUE(m.Validate().ok()) << m.Validate().ToString();
  }
  EXPECT_TRUE(LatencyModel::Probability(milliseconds(1), milliseconds(2), 0.0)
                  .Validate()
                  .ok());
  EXPECT_TRUE(LatencyModel::Probability(milliseconds(1), milliseconds(2), 1.0)
                  .Validate()
                  .ok());
  EXPECT_TRUE(LatencyModel::EveryKth(milliseconds(1), milliseconds(2), 1)
                  .Validate()
                  .ok());
}

TEST(LatencyModelTest, ValidateRejectsBadModels) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<LatencyModel> bad = {
      LatencyModel::Fixed(nanoseconds(-1)),
      LatencyModel::EveryKth(milliseconds(1), milliseconds(10), 0),
      LatencyModel::EveryKth(milliseconds(1), nanoseconds(-5), 4),
      LatencyModel::EveryKth(milliseconds(-1), milliseconds(10), 4),
      LatencyModel::Probability(milliseconds(1), milliseconds(10), -0.1),
      LatencyModel::Probability(milliseconds(1), milliseconds(10), 1.5),
      LatencyModel::Probability(milliseconds(1), milliseconds(10), nan),
      LatencyModel::Probability(milliseconds(1), nanoseconds(-1), 0.5),
      LatencyModel::Lognormal(milliseconds(1), -0.5),
      LatencyModel::Lognormal(milliseconds(1), nan),
      LatencyModel::Lognormal(milliseconds(1), inf),
      LatencyModel::Lognormal(nanoseconds(-1), 0.5),
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    Status s = bad[i].Validate();
    EXPECT_FALSE(s.ok()) << "model " << i << " accepted";
    if (s.ok()) continue;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << i;
    auto src = MakeSimulatedSource("sim", 100, bad[i]);
    ASSERT_FALSE(src.ok()) << "MakeSimulatedSource accepted model " << i;
    EXPECT_EQ(src.status().code(), StatusCode::kInvalidArgument);
  }
}

// A read never completes before its modelled latency (a lower bound only).
TEST(SimulatedSourceTest, FixedLatencyIsALowerBound) {
  auto src = MakeSim(4096, LatencyModel::Fixed(milliseconds(3)));
  CollectingSink sink;
  auto start = std::chrono::steady_clock::now();
  src->Read({0, 16}, &sink, 1);
  ASSERT_TRUE(sink.WaitFor(1));
  EXPECT_GE(sink.Get(1).at - start, milliseconds(3));
}

TEST(SimulatedSourceTest, EveryKthSlowReadsCompleteLast) {
  // Reads 1 and 3 (n % 2 == 1) take 30 ms, reads 0 and 2 take 0.5 ms: the
  // timer completes in deadline order, so 0 and 2 come first.
  auto src = MakeSim(
      4096, LatencyModel::EveryKth(microseconds(500), milliseconds(30), 2));
  CollectingSink sink;
  std::vector<std::chrono::steady_clock::time_point> submitted;
  for (uint64_t i = 0; i < 4; ++i) {
    submitted.push_back(std::chrono::steady_clock::now());
    src->Read({i * 100, 10}, &sink, i);
  }
  ASSERT_TRUE(sink.WaitFor(4));
  auto order = sink.order();
  ASSERT_EQ(order.size(), 4u);
  EXPECT_THAT(std::vector<uint64_t>(order.begin(), order.begin() + 2),
              ::testing::UnorderedElementsAre(0u, 2u));
  EXPECT_THAT(std::vector<uint64_t>(order.begin() + 2, order.end()),
              ::testing::UnorderedElementsAre(1u, 3u));
  for (uint64_t i : {1u, 3u}) {
    EXPECT_GE(sink.Get(i).at - submitted[i], milliseconds(30)) << i;
  }
  for (uint64_t i : {0u, 2u}) {
    EXPECT_GE(sink.Get(i).at - submitted[i], microseconds(500)) << i;
  }
}

TEST(SimulatedSourceTest, ProbabilityOneMakesEveryReadSlow) {
  auto src = MakeSim(
      4096, LatencyModel::Probability(microseconds(100), milliseconds(4), 1.0));
  CollectingSink sink;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < 5; ++i) src->Read({i, 1}, &sink, i);
  ASSERT_TRUE(sink.WaitFor(5));
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_GE(sink.Get(i).at - start, milliseconds(4)) << i;
  }
}

TEST(SimulatedSourceTest, BandwidthAddsTransferTime) {
  LatencyModel m = LatencyModel::Fixed(microseconds(100));
  m.bytes_per_second = 10'000'000;  // 100 KB -> 10 ms
  auto src = MakeSim(1 << 20, m);
  CollectingSink sink;
  auto start = std::chrono::steady_clock::now();
  src->Read({0, 100'000}, &sink, 1);
  ASSERT_TRUE(sink.WaitFor(1));
  EXPECT_GE(sink.Get(1).at - start, milliseconds(10));
  EXPECT_TRUE(sink.Get(1).bytes.ok());
}

TEST(SimulatedSourceTest, LognormalReadsComplete) {
  auto src = MakeSim(1 << 16, LatencyModel::Lognormal(microseconds(200), 0.5));
  CollectingSink sink;
  for (uint64_t i = 0; i < 50; ++i) src->Read({i * 64, 64}, &sink, i);
  ASSERT_TRUE(sink.WaitFor(50));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (uint64_t i = 0; i < 50; ++i) {
    auto d = sink.Get(i);
    ASSERT_TRUE(d.bytes.ok());
    EXPECT_EQ(d.bytes->data()[0], SimulatedByteAt(i * 64));
  }
}

int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// One timer thread per source, not a sleeping thread per read.
TEST(SimulatedSourceTest, PendingReadsDoNotEachTakeAThread) {
  auto src = MakeSim(1 << 20, LatencyModel::Fixed(milliseconds(100)));
  const int before = ThreadCount();
  ASSERT_GT(before, 0);
  CollectingSink sink;
  for (uint64_t i = 0; i < 200; ++i) src->Read({i * 16, 16}, &sink, i);
  const int during = ThreadCount();  // reads pending for 100 ms
  ASSERT_TRUE(sink.WaitFor(200));
  EXPECT_LE(during, before + 2) << "threads grew with pending reads";
  EXPECT_EQ(sink.duplicates(), 0u);
}

}  // namespace
}  // namespace rangeio
