// BlockCache and the cached Source (see rangeio/block_cache.h).
//
// One mutex guards the block map and the LRU list; it is held only for map
// and list operations, never across a read, a copy of a range or a
// completion callback. A block is either cached (bytes set, on the LRU
// list) or being read (waiters listed); a read that needs a block being read
// waits for it instead of reading it again.
#include "rangeio/block_cache.h"

#include <algorithm>
#include <cstring>
#include <list>
#include <unordered_map>
#include <vector>

#include "rangeio/planner.h"
#include "util/mutex.h"

namespace rangeio {
namespace {

using detail::MutexLock;

constexpr uint64_t kMaxCapacity = 1ull << 40;

Status Invalid(const std::string& field, uint64_t v, const std::string& valid) {
  return Status::InvalidArgument("BlockCacheOptions." + field + "=" +
                                 std::to_string(v) + " is invalid: valid " +
                                 valid);
}

struct BlockKey {
  uint64_t source;
  uint64_t block;
  bool operator==(const BlockKey&) const = default;
};
struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const {
    return std::hash<uint64_t>()(k.source * 0x9E3779B97F4A7C15ull ^ k.block);
  }
};

// A read of a cached source waiting for blocks being read. Completed once,
// when its last block arrives or one of them fails.
struct PendingRead {
  ByteRange range;
  ReadSink* sink;
  uint64_t tag;
  uint64_t first_block;
  std::vector<Slice> blocks;  // guarded by the cache mutex until complete
  uint64_t missing = 0;       // guarded by the cache mutex
  bool failed = false;        // guarded by the cache mutex
};

// The bytes of `range` from its blocks: a zero-copy slice when it lies in
// one block, else one copy.
Slice Assemble(const ByteRange& range, uint64_t block_bytes,
               uint64_t first_block, const std::vector<Slice>& blocks) {
  const uint64_t off = range.offset - first_block * block_bytes;
  if (blocks.size() == 1) return blocks[0].Sub(off, range.length);
  std::byte* dst = nullptr;
  Slice out = Slice::Allocate(range.length, &dst);
  uint64_t done = 0;
  for (size_t b = 0; b < blocks.size() && done < range.length; ++b) {
    const uint64_t from = b == 0 ? off : 0;
    const uint64_t n =
        std::min<uint64_t>(blocks[b].size() - from, range.length - done);
    std::memcpy(dst + done, blocks[b].data() + from, n);
    done += n;
  }
  return out;
}

class BlockCacheImpl final : public BlockCache {
 public:
  explicit BlockCacheImpl(const BlockCacheOptions& o) : options_(o) {}

  BlockCacheStats GetStats() const override EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return stats_;
  }
  const BlockCacheOptions& options() const override { return options_; }
  void Clear() override EXCLUDES(mu_) {
    MutexLock lk(mu_);
    for (const BlockKey& k : lru_) map_.erase(k);
    lru_.clear();
    stats_.bytes_cached = 0;
    stats_.blocks_cached = 0;
  }

  uint64_t Intern(std::string identity) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    auto [it, added] = ids_.try_emplace(std::move(identity), ids_.size());
    return it->second;
  }

  // The blocks of `range` if all are cached (marking them recently used).
  std::optional<Slice> Lookup(uint64_t source, const ByteRange& range)
      EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return LookupLocked(source, range);
  }

  std::optional<Slice> LookupLocked(uint64_t source, const ByteRange& range)
      REQUIRES(mu_) {
    const uint64_t b0 = range.offset / options_.block_bytes;
    const uint64_t b1 = (range.end() - 1) / options_.block_bytes;
    std::vector<Slice> blocks;
    blocks.reserve(b1 - b0 + 1);
    for (uint64_t b = b0; b <= b1; ++b) {
      auto it = map_.find({source, b});
      if (it == map_.end() || it->second.reading) return std::nullopt;
      blocks.push_back(it->second.bytes);
    }
    for (uint64_t b = b0; b <= b1; ++b) Touch(map_.find({source, b})->second);
    ++stats_.hits;
    ++stats_.reads_saved;
    return Assemble(range, options_.block_bytes, b0, blocks);
  }

  // What a miss on `range` must do: the runs of blocks it must read itself
  // (marked as being read), after registering `p` as a waiter on every
  // block it lacks. Returns std::nullopt instead when every block is cached
  // (then `hit` holds the bytes).
  struct Fetch {
    uint64_t first_block;
    uint64_t blocks;
  };
  std::vector<Fetch> Claim(uint64_t source,
                           const std::shared_ptr<PendingRead>& p,
                           std::optional<Slice>* hit) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    if ((*hit = LookupLocked(source, p->range))) return {};
    const uint64_t b0 = p->first_block;
    const uint64_t b1 = (p->range.end() - 1) / options_.block_bytes;
    p->blocks.resize(b1 - b0 + 1);
    std::vector<Fetch> fetches;
    for (uint64_t b = b0; b <= b1; ++b) {
      auto [it, added] = map_.try_emplace({source, b});
      Entry& e = it->second;
      if (!added && !e.reading) {
        p->blocks[b - b0] = e.bytes;
        Touch(e);
        continue;
      }
      ++p->missing;
      if (added) {
        e.reading = true;
        if (!fetches.empty() &&
            fetches.back().first_block + fetches.back().blocks == b) {
          ++fetches.back().blocks;
        } else {
          fetches.push_back({b, 1});
        }
      }
      e.waiters.push_back(p);
    }
    ++stats_.misses;
    if (fetches.empty()) {
      ++stats_.reads_saved;
    } else {
      stats_.block_reads += fetches.size();
    }
    return fetches;
  }

  // A block read finished: `bytes` holds blocks [first, first + n) (the last
  // one possibly short at the end of the source), or the read failed.
  // Returns the pending reads now complete or failed, to finish outside the
  // lock.
  std::vector<std::shared_ptr<PendingRead>> Fill(uint64_t source,
                                                 uint64_t first, uint64_t n,
                                                 const Result<Slice>& bytes)
      EXCLUDES(mu_) {
    // One buffer per block, so that the byte budget counts what is held.
    std::vector<Slice> copies;
    if (bytes.ok()) {
      for (uint64_t k = 0; k < n; ++k) {
        const uint64_t off = k * options_.block_bytes;
        const uint64_t len =
            std::min<uint64_t>(options_.block_bytes, bytes->size() - off);
        copies.push_back(
            n == 1 ? *bytes : Slice::CopyOf(bytes->span().subspan(off, len)));
      }
    }
    std::vector<std::shared_ptr<PendingRead>> done;
    MutexLock lk(mu_);
    for (uint64_t k = 0; k < n; ++k) {
      auto it = map_.find({source, first + k});
      std::vector<std::shared_ptr<PendingRead>> waiters =
          std::move(it->second.waiters);
      if (bytes.ok()) {
        Entry& e = it->second;
        e.reading = false;
        e.bytes = copies[k];
        lru_.push_front(it->first);
        e.lru = lru_.begin();
        stats_.bytes_cached += e.bytes.size();
        ++stats_.blocks_cached;
      } else {
        map_.erase(it);  // the next reader tries again
      }
      for (std::shared_ptr<PendingRead>& p : waiters) {
        if (p->failed) continue;
        if (!bytes.ok()) {
          p->failed = true;
          done.push_back(std::move(p));
          continue;
        }
        p->blocks[first + k - p->first_block] = copies[k];
        if (--p->missing == 0) done.push_back(std::move(p));
      }
    }
    EvictLocked();
    return done;
  }

  void CountBypass() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    ++stats_.bypassed;
  }

 private:
  struct Entry {
    Slice bytes;
    bool reading = false;
    std::list<BlockKey>::iterator lru;
    std::vector<std::shared_ptr<PendingRead>> waiters;
  };

  void Touch(Entry& e) REQUIRES(mu_) { lru_.splice(lru_.begin(), lru_, e.lru); }

  void EvictLocked() REQUIRES(mu_) {
    while (stats_.bytes_cached > options_.capacity_bytes && !lru_.empty()) {
      auto it = map_.find(lru_.back());
      stats_.bytes_cached -= it->second.bytes.size();
      --stats_.blocks_cached;
      ++stats_.evictions;
      map_.erase(it);
      lru_.pop_back();
    }
  }

  const BlockCacheOptions options_;
  mutable detail::Mutex mu_;
  std::unordered_map<BlockKey, Entry, BlockKeyHash> map_ GUARDED_BY(mu_);
  std::list<BlockKey> lru_ GUARDED_BY(mu_);  // most recent first
  std::unordered_map<std::string, uint64_t> ids_ GUARDED_BY(mu_);
  BlockCacheStats stats_ GUARDED_BY(mu_);
};

class CachedSource;

// Completes one block read of a cached source.
class FillSink final : public ReadSink {
 public:
  FillSink(std::shared_ptr<BlockCacheImpl> cache, std::shared_ptr<Source> inner,
           uint64_t source, ByteRange range, uint64_t first, uint64_t n,
           uint64_t block_bytes)
      : cache_(std::move(cache)),
        inner_(std::move(inner)),
        source_(source),
        range_(range),
        first_(first),
        n_(n),
        block_bytes_(block_bytes) {}

  void OnReadDone(uint64_t, Result<Slice> bytes) override {
    std::unique_ptr<FillSink> self(this);  // one read, one completion
    if (bytes.ok() && bytes->size() != range_.length) {
      bytes = Status::IoError("block read " + range_.ToString() + " returned " +
                              std::to_string(bytes->size()) + " bytes");
    } else if (!bytes.ok()) {
      bytes =
          bytes.status().WithContext("cache block read " + range_.ToString());
    }
    std::vector<std::shared_ptr<PendingRead>> done =
        cache_->Fill(source_, first_, n_, bytes);
    for (const std::shared_ptr<PendingRead>& p : done) {
      if (p->failed) {
        p->sink->OnReadDone(p->tag, bytes.status());
      } else {
        p->sink->OnReadDone(p->tag, Assemble(p->range, block_bytes_,
                                             p->first_block, p->blocks));
      }
    }
  }

 private:
  const std::shared_ptr<BlockCacheImpl> cache_;
  const std::shared_ptr<Source> inner_;  // alive until its read completes
  const uint64_t source_;
  const ByteRange range_;
  const uint64_t first_;
  const uint64_t n_;
  const uint64_t block_bytes_;
};

// A decorator on the forwarding base: name, identity, planner preset,
// cancels and Assist are the inner source's.
class CachedSource final : public SourceWrapper {
 public:
  CachedSource(std::shared_ptr<Source> inner,
               std::shared_ptr<BlockCacheImpl> cache, uint64_t id,
               uint64_t size)
      : SourceWrapper(inner),
        inner_(std::move(inner)),
        cache_(std::move(cache)),
        id_(id),
        size_(size),
        o_(cache_->options()) {}

  Result<uint64_t> Size() override { return size_; }
  // A miss waits for a block read already out (Claim): a hedge's second
  // copy would join the first copy's read, so readers do not hedge.
  SourceInfo Info() const override {
    SourceInfo info = inner_->Info();
    info.description =
        "block cache of " + std::to_string(o_.block_bytes) +
        "-byte blocks (reads not hedged: a second copy joins the block read) "
        "over " +
        (info.description.empty() ? std::string("'") + name() + "'"
                                  : info.description);
    info.joins_concurrent_reads = true;
    return info;
  }

  size_t ReadCached(std::span<const ByteRange> ranges,
                    std::vector<std::optional<Slice>>* out) override {
    size_t n = 0;
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (ranges[i].length == 0 ||
          ranges[i].length > o_.max_cached_read_bytes) {
        continue;
      }
      std::optional<Slice> hit = cache_->Lookup(id_, ranges[i]);
      if (!hit) continue;
      if (out->empty()) out->resize(ranges.size());
      (*out)[i] = std::move(hit);
      ++n;
    }
    return n;
  }

  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    if (range.length == 0) {
      sink->OnReadDone(tag, Slice());
      return;
    }
    const bool small = range.length <= o_.small_read_bytes;
    if (range.length > o_.max_cached_read_bytes ||
        (small && !o_.small_read_ahead)) {
      if (std::optional<Slice> hit = cache_->Lookup(id_, range)) {
        sink->OnReadDone(tag, std::move(*hit));
        return;
      }
      cache_->CountBypass();
      inner_->Read(range, sink, tag);
      return;
    }
    auto p = std::make_shared<PendingRead>();
    p->range = range;
    p->sink = sink;
    p->tag = tag;
    p->first_block = range.offset / o_.block_bytes;
    std::optional<Slice> hit;
    const std::vector<BlockCacheImpl::Fetch> fetches =
        cache_->Claim(id_, p, &hit);
    if (hit) {
      sink->OnReadDone(tag, std::move(*hit));
      return;
    }
    for (const BlockCacheImpl::Fetch& f : fetches) {
      const uint64_t off = f.first_block * o_.block_bytes;
      const uint64_t len =
          std::min<uint64_t>(f.blocks * o_.block_bytes, size_ - off);
      inner_->Read({off, len},
                   new FillSink(cache_, inner_, id_, {off, len}, f.first_block,
                                f.blocks, o_.block_bytes),
                   0);
    }
  }

 private:
  const std::shared_ptr<Source> inner_;
  const std::shared_ptr<BlockCacheImpl> cache_;
  const uint64_t id_;
  const uint64_t size_;
  const BlockCacheOptions o_;
};

}  // namespace

Status BlockCacheOptions::Validate() const {
  if (block_bytes < 512 || block_bytes > (16u << 20) ||
      (block_bytes & (block_bytes - 1)) != 0) {
    return Invalid("block_bytes", block_bytes, "a power of two 512..16777216");
  }
  if (capacity_bytes < block_bytes || capacity_bytes > kMaxCapacity) {
    return Invalid("capacity_bytes", capacity_bytes,
                   "block_bytes (" + std::to_string(block_bytes) + ")..2^40");
  }
  if (small_read_bytes < 1 || small_read_bytes > block_bytes) {
    return Invalid("small_read_bytes", small_read_bytes,
                   "1..block_bytes (" + std::to_string(block_bytes) + ")");
  }
  if (max_cached_read_bytes < block_bytes ||
      max_cached_read_bytes > capacity_bytes) {
    return Invalid("max_cached_read_bytes", max_cached_read_bytes,
                   "block_bytes..capacity_bytes (" +
                       std::to_string(block_bytes) + ".." +
                       std::to_string(capacity_bytes) + ")");
  }
  return Status::OK();
}

std::string BlockCacheStats::ToString() const {
  return "hits=" + std::to_string(hits) + " misses=" + std::to_string(misses) +
         " evictions=" + std::to_string(evictions) +
         " bytes_cached=" + std::to_string(bytes_cached) +
         " blocks_cached=" + std::to_string(blocks_cached) +
         " reads_saved=" + std::to_string(reads_saved) +
         " block_reads=" + std::to_string(block_reads) +
         " bypassed=" + std::to_string(bypassed);
}

Result<std::shared_ptr<BlockCache>> BlockCache::Make(
    const BlockCacheOptions& options) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  return std::shared_ptr<BlockCache>(std::make_shared<BlockCacheImpl>(options));
}

Result<std::shared_ptr<Source>> MakeCachedSource(
    std::shared_ptr<Source> inner, std::shared_ptr<BlockCache> cache,
    std::string identity) {
  if (!inner)
    return Status::InvalidArgument("MakeCachedSource: source is null");
  if (!cache) return Status::InvalidArgument("MakeCachedSource: cache is null");
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, inner->Size());
  auto impl = std::static_pointer_cast<BlockCacheImpl>(std::move(cache));
  if (identity.empty()) identity = inner->Info().cache_identity;
  const uint64_t id = impl->Intern(std::move(identity));
  return std::shared_ptr<Source>(std::make_shared<CachedSource>(
      std::move(inner), std::move(impl), id, size));
}

}  // namespace rangeio
