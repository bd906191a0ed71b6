// The io_uring engine's Source: a Ring (ring.h) per open file, and what a
// Source adds to it: reads of empty ranges, buffered reads that may complete
// on the caller's thread (preadv2 RWF_NOWAIT), Info().
#include "local/uring/uring_file.h"

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "local/uring/ring.h"
#include "rangeio/planner.h"

namespace rangeio::detail {
namespace {

class UringFile final : public Source {
 public:
  UringFile(std::shared_ptr<Ring> ring, bool try_inline)
      : ring_(std::move(ring)),
        try_inline_(try_inline && !ring_->file().direct()) {}
  ~UringFile() override { ring_->Shutdown(); }

  const std::string& name() const override { return ring_->file().path(); }
  Result<uint64_t> Size() override { return ring_->file().size(); }
  SourceInfo Info() const override {
    return {name(), PlannerOptions::Local(), ring_->Describe(try_inline_)};
  }

  // With try_inline, a page-cache hit completes on the calling thread;
  // only a miss goes to the ring. Not on a thread that drives the ring: there
  // the read goes out in the next io_uring_enter with the others (a cached
  // read completes inside it), which costs less than a preadv2 call of its
  // own, and a miss would cost that call for nothing.
  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    if (range.length == 0) {
      sink->OnReadDone(tag, Slice());
      return;
    }
    // Direct reads get their buffer from whoever submits them, which may
    // give them a registered one.
    if (ring_->file().direct()) {
      ring_->Submit(PlanLocalRead(ring_->file(), range, sink, tag));
      return;
    }
    LocalRead r = StartLocalRead(ring_->file(), range, sink, tag);
    if (try_inline_ && !ring_->Driving() && TryReadInline(ring_->file(), r)) {
      return;
    }
    ring_->Submit(std::move(r));
  }

  // Direct reads go to the ring under one lock; buffered ones read by
  // Read() (each may complete inline first).
  void ReadMany(std::span<const ReadRequest> reads, ReadSink* sink) override {
    const bool empty_range =
        std::any_of(reads.begin(), reads.end(),
                    [](const ReadRequest& r) { return r.range.length == 0; });
    if (!ring_->file().direct() || empty_range) {
      Source::ReadMany(reads, sink);
      return;
    }
    ring_->SubmitDirect(reads, sink);
  }

  void Cancel(ReadSink* sink, uint64_t tag) override {
    ring_->Cancel(sink, tag);
  }

  size_t Assist(size_t max_reads) override { return ring_->Assist(max_reads); }

 private:
  const std::shared_ptr<Ring> ring_;
  const bool try_inline_;
};

}  // namespace

namespace {

Result<std::shared_ptr<Source>> MakeRing(std::shared_ptr<const FileHandle> file,
                                         const LocalFileOptions& options,
                                         bool nop) {
  auto ring =
      std::make_shared<Ring>(std::move(file), options.ThreadsOrDefault(), nop);
  RANGEIO_RETURN_NOT_OK(ring->Start());
  return std::shared_ptr<Source>(
      std::make_shared<UringFile>(std::move(ring), options.try_inline));
}

}  // namespace

Result<std::shared_ptr<Source>> MakeUringFile(
    std::shared_ptr<const FileHandle> file, const LocalFileOptions& options) {
  return MakeRing(std::move(file), options, false);
}

Result<std::shared_ptr<Source>> MakeUringNopFile(
    std::shared_ptr<const FileHandle> file, const LocalFileOptions& options) {
  return MakeRing(std::move(file), options, true);
}

}  // namespace rangeio::detail