#include "support/test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "support/gated_source.h"

namespace rangeio::testing {

bool WaitUntil(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

void GiveThreadsAChance(std::chrono::milliseconds ms) {
  std::this_thread::sleep_for(ms);
}

std::vector<ByteRange> SpreadRanges(size_t n, uint64_t length, uint64_t stride,
                                    uint64_t first_offset) {
  std::vector<ByteRange> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(ByteRange{first_offset + i * stride, length});
  }
  return out;
}

Options LimitOptions(uint32_t c, uint32_t budget_count, uint64_t budget_bytes) {
  Options o;
  o.limiter.io_concurrency = c;
  o.limiter.response_budget_count = budget_count;
  o.limiter.response_budget_bytes = budget_bytes;
  return o;
}

Slice PatternBuffer(size_t size) {
  auto buf = std::make_shared<std::vector<std::byte>>(size);
  for (size_t i = 0; i < size; ++i) (*buf)[i] = PatternByteAt(i);
  const std::byte* data = buf->data();
  return Slice(std::shared_ptr<const void>(buf), data, size);
}

Status WriteFileBytes(const std::string& path, const Slice& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IoError("cannot create " + path);
  const size_t n =
      bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  if (std::fclose(f) != 0 || n != bytes.size()) {
    return Status::IoError("cannot write " + path);
  }
  return Status::OK();
}

ScratchDir::ScratchDir() {
  std::string tmpl = ::testing::TempDir() + "rangeio_local_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "cannot create " << tmpl;
    return;
  }
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  for (const std::string& f : files_) ::unlink(f.c_str());
  if (!path_.empty()) ::rmdir(path_.c_str());
}

std::string ScratchDir::WriteFile(const std::string& name, size_t size) {
  std::string path = path_ + "/" + name;
  files_.push_back(path);
  Status st = WriteFileBytes(path, PatternBuffer(size));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

std::vector<std::byte> Bytes(const Slice& slice) {
  return {slice.span().begin(), slice.span().end()};
}

bool MatchesBytes(ByteRange range, std::span<const std::byte> bytes,
                  ByteAtFn byte_at) {
  if (bytes.size() != range.length) return false;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != byte_at(range.offset + i)) return false;
  }
  return true;
}

DrainResult Drain(RangeStream& stream, std::span<const ByteRange> ranges,
                  ByteAtFn byte_at, bool keep_slices) {
  if (byte_at == nullptr) byte_at = PatternByteAt;
  DrainResult out;
  while (true) {
    auto next = stream.Next();
    if (!next.ok()) {
      out.status = next.status();
      return out;
    }
    if (!next->has_value()) return out;
    RangeResult& r = **next;
    if (!ranges.empty() &&
        (r.index >= ranges.size() ||
         !MatchesBytes(ranges[r.index], r.bytes.span(), byte_at))) {
      ++out.bad_bytes;
    }
    out.indexes.push_back(r.index);
    out.sizes.push_back(r.bytes.size());
    if (keep_slices) out.slices.push_back(std::move(r.bytes));
  }
}

void ExpectLimiterDrains(const Limiter& l) {
  EXPECT_TRUE(WaitUntil([&] {
    Stats s = l.GetStats();
    return s.in_flight == 0 && s.retained_count == 0 && s.retained_bytes == 0;
  })) << l.GetStats().ToString();
  EXPECT_EQ(l.GetStats().waiting_streams, 0u);
}

Reader OpenReader(std::shared_ptr<Source> source, const Options& o,
                  std::shared_ptr<Limiter> limiter) {
  auto r = Reader::Open(std::move(source), o, std::move(limiter));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

std::vector<size_t> Iota(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

void ExpectEachIndexOnce(std::vector<size_t> idx, size_t n) {
  std::sort(idx.begin(), idx.end());
  EXPECT_EQ(idx, Iota(n));
}

Plan MustPlan(const std::vector<ByteRange>& ranges, const PlannerOptions& o) {
  Result<Plan> plan = PlanReads(ranges, o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *std::move(plan) : Plan();
}

ScopedThread::~ScopedThread() {
  if (!thread_.joinable()) return;
  GatedSource::PassAllLiveGates();
  thread_.join();
}

StreamConsumer::StreamConsumer(RangeStream stream,
                               std::vector<ByteRange> ranges, bool hold_slices,
                               ByteAtFn byte_at)
    : stream_(std::move(stream)),
      ranges_(std::move(ranges)),
      byte_at_(byte_at != nullptr ? byte_at : PatternByteAt),
      hold_(hold_slices) {
  thread_ = std::thread([this] { Run(); });
}

StreamConsumer::~StreamConsumer() {
  if (!done()) {
    // The test is ending with the stream unfinished: it failed an ASSERT
    // early, or forgot to drain. Let everything go so the failure is
    // reported rather than turned into a hang.
    if (!::testing::Test::HasFailure()) {
      ADD_FAILURE() << "StreamConsumer destroyed before its stream finished";
    }
    ReleaseSlices(/*stop_holding=*/true);
    GatedSource::PassAllLiveGates();
  }
  if (!WaitForDone()) {
    std::fprintf(stderr,
                 "StreamConsumer: stream did not finish within the hang guard "
                 "(%zu results so far)\n",
                 count());
    std::abort();
  }
  thread_.join();
}

void StreamConsumer::Run() {
  while (true) {
    auto next = stream_.Next();
    std::lock_guard<std::mutex> lock(mu_);
    if (!next.ok()) {
      final_status_ = next.status();
      done_ = true;
      break;
    }
    if (!next->has_value()) {
      done_ = true;
      break;
    }
    RangeResult& r = **next;
    if (!ranges_.empty()) {
      if (r.index >= ranges_.size() ||
          !MatchesBytes(ranges_[r.index], r.bytes.span(), byte_at_)) {
        ++bad_bytes_;
      }
    }
    indexes_.push_back(r.index);
    if (hold_) held_.push_back(std::move(r.bytes));
    cv_.notify_all();
    // r.bytes (if not held) is released at the end of this iteration.
  }
  cv_.notify_all();
}

bool StreamConsumer::WaitForCount(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    return indexes_.size() >= n || done_;
  }) && indexes_.size() >= n;
}

bool StreamConsumer::WaitForDone(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return done_; });
}

size_t StreamConsumer::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return indexes_.size();
}
bool StreamConsumer::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}
std::vector<size_t> StreamConsumer::indexes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return indexes_;
}
size_t StreamConsumer::bad_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bad_bytes_;
}
size_t StreamConsumer::held_slices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}
Status StreamConsumer::final_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return final_status_;
}
void StreamConsumer::ReleaseSlices(bool stop_holding) {
  std::vector<Slice> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop.swap(held_);
    if (stop_holding) hold_ = false;
  }
  // `drop` is destroyed here, outside the lock: releasing budget may admit
  // reads that complete inline.
}

}  // namespace rangeio::testing
