// chunk_barrier.h — the chunk barrier the Paimon fix removed, as a Source
// decorator on the public API (rangeio/source.h's SourceWrapper): reads
// go to the source C at a time, and the next C wait until the slowest of
// the previous C has completed.
//
// Read through a Reader whose io_concurrency is C, this is exactly the old
// scheduler: the limiter lets C reads out, the decorator passes a chunk of
// C to the source, and the reads a completion admits wait here until the
// whole chunk is back. The benchmarks' "chunked" rows (bench straggler,
// bench url --compare, bench vindex) read through it; nothing in
// librangeio knows of it.
//
// Thread-safety: as Source.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rangeio/source.h"

namespace rangeio::bench {

class ChunkBarrierSource final : public SourceWrapper, public ReadSink {
 public:
  ChunkBarrierSource(std::shared_ptr<Source> target, uint32_t chunk)
      : SourceWrapper(std::move(target)), chunk_(chunk) {}

  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = next_id_++;
      reads_.emplace(id, Caller{sink, tag});
      if (!open_ || !queued_.empty()) {
        queued_.push_back({range, id});
        return;
      }
      open_ = ++in_chunk_ < chunk_;
    }
    target()->Read(range, this, id);
  }

  // A queued read of `sink` completes at once with Cancelled; one at the
  // source is cancelled there.
  void Cancel(ReadSink* sink, uint64_t tag) override {
    std::vector<std::pair<uint64_t, Caller>> dropped;
    std::vector<uint64_t> at_source;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [id, c] : reads_) {
        if (c.sink != sink || (tag != kAllReads && c.tag != tag)) continue;
        auto q = std::find_if(
            queued_.begin(), queued_.end(),
            [id = id](const ReadRequest& r) { return r.tag == id; });
        if (q == queued_.end()) {
          at_source.push_back(id);
          continue;
        }
        queued_.erase(q);
        dropped.emplace_back(id, c);
      }
      for (const auto& d : dropped) reads_.erase(d.first);
    }
    for (const auto& [id, c] : dropped) {
      c.sink->OnReadDone(c.tag, Status::Cancelled("chunked read cancelled"));
    }
    for (uint64_t id : at_source) target()->Cancel(this, id);
  }

  // ReadSink: a read of the chunk is back.
  void OnReadDone(uint64_t id, Result<Slice> bytes) override {
    Caller caller;
    std::vector<ReadRequest> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      caller = reads_.at(id);
      reads_.erase(id);
      open_ = false;  // a chunk takes no read once one of it is back
      if (--in_chunk_ == 0) {
        while (!queued_.empty() && next.size() < chunk_) {
          next.push_back(queued_.front());
          queued_.pop_front();
        }
        in_chunk_ = next.size();
        open_ = in_chunk_ < chunk_;
      }
    }
    caller.sink->OnReadDone(caller.tag, std::move(bytes));
    for (const ReadRequest& r : next) target()->Read(r.range, this, r.tag);
  }

 private:
  struct Caller {
    ReadSink* sink = nullptr;
    uint64_t tag = 0;
  };

  const uint32_t chunk_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Caller> reads_;  // by our id, until done
  std::deque<ReadRequest> queued_;  // waiting for the chunk; tag: our id
  uint64_t in_chunk_ = 0;           // of the current chunk, at the source
  bool open_ = true;  // the current chunk still takes reads (none is back)
  uint64_t next_id_ = 0;
};

// `source` behind a chunk barrier of `chunk` reads.
inline std::shared_ptr<Source> WithChunkBarrier(std::shared_ptr<Source> source,
                                                uint32_t chunk) {
  return std::make_shared<ChunkBarrierSource>(std::move(source), chunk);
}

}  // namespace rangeio::bench
