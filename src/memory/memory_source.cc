// An in-memory Source: reads complete inline on the calling thread.
#include "rangeio/memory_source.h"

#include <cstring>
#include <string>

#include "rangeio/source.h"

namespace rangeio {
namespace {

class MemorySource final : public Source {
 public:
  MemorySource(std::string name, Slice data, bool zero_copy)
      : name_(std::move(name)), data_(std::move(data)), zero_copy_(zero_copy) {}

  const std::string& name() const override { return name_; }
  Result<uint64_t> Size() override { return uint64_t{data_.size()}; }

  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    if (range.end() > data_.size()) {
      sink->OnReadDone(tag, range.CheckWithin(data_.size(), name_));
      return;
    }
    // Each Slice made here costs an atomic increment of the shared buffer's
    // count and a decrement later: a copy takes its bytes without one.
    if (zero_copy_) {
      sink->OnReadDone(tag, data_.Sub(range.offset, range.length));
    } else {
      sink->OnReadDone(
          tag, Slice::CopyOf(data_.span().subspan(range.offset, range.length)));
    }
  }

  // Copying, starts fetching each read's first bytes while the one before
  // is copied.
  void ReadMany(std::span<const ReadRequest> reads, ReadSink* sink) override {
    for (size_t i = 0; i < reads.size(); ++i) {
      if (!zero_copy_ && i + 1 < reads.size()) {
        const ByteRange& next = reads[i + 1].range;
        if (next.length > 0 && next.end() <= data_.size()) {
          __builtin_prefetch(data_.data() + next.offset);
        }
      }
      Read(reads[i].range, sink, reads[i].tag);
    }
  }

 private:
  const std::string name_;
  const Slice data_;
  const bool zero_copy_;
};

}  // namespace

std::shared_ptr<Source> MakeMemorySource(std::string name, Slice data,
                                         bool zero_copy) {
  return std::make_shared<MemorySource>(std::move(name), std::move(data),
                                        zero_copy);
}

}  // namespace rangeio
