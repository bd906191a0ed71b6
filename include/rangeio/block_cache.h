// rangeio/block_cache.h — a shared cache of aligned blocks in front of any
// Source.
//
// Readers of small scattered ranges (index pages, footers, scalar lookups)
// read the same bytes again and again. A BlockCache keeps aligned blocks of
// `block_bytes` of any number of sources, keyed by source identity and block
// index, within a byte budget, and evicts the least recently used block
// first. LRU because the workloads it serves (index pages re-read by
// consecutive queries) have strong recency; it is also what Paimon's and
// Arrow's caches use, and a scan that could flush it is kept out by
// max_cached_read_bytes instead of a more elaborate policy.
//
// MakeCachedSource() puts a cache in front of a source. Through a Reader:
//   - a range whose blocks are all cached is a hit: ReadRanges hands it out
//     before any read is admitted, so a hit never takes an I/O permit, never
//     waits behind slow reads and holds no response budget (its bytes are the
//     cache's own blocks; a range inside one block is a zero-copy slice of it);
//   - a miss reads the blocks it touches (widened to block bounds, once per
//     block however many readers miss it at the same time: later ones wait
//     for the first one's read) and fills the cache;
//   - reads longer than max_cached_read_bytes bypass the cache, and so do
//     reads of at most small_read_bytes unless small_read_ahead is on (a 16 B
//     lookup is not worth a 64 KiB read unless the caller says so); both are
//     still served from the cache when their blocks are there.
// A block handed out stays alive while any slice of it does, even if the
// cache has evicted it meanwhile; the budget counts the blocks the cache
// holds.
//
// Thread-safety: BlockCache and cached sources are thread-safe; one cache may
// be shared by any number of sources, readers and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rangeio/export.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio {

struct RANGEIO_EXPORT BlockCacheOptions {
  // Bytes of cached blocks at most. Valid block_bytes..1 TiB. 256 MiB: room
  // for the index pages and footers of a few hundred large files.
  uint64_t capacity_bytes = 256ull << 20;
  // The cache's unit, aligned in the source. A power of two, 512 B..16 MiB.
  // 64 KiB: the object-store block of Lance and of Paimon's block cache, and
  // the read size below which an object store's latency dominates.
  uint64_t block_bytes = 64 << 10;
  // Reads of at most small_read_bytes fetch their whole block and fill the
  // cache when this is on (Paimon's read-ahead for scalar reads); when off,
  // they read just their bytes. Off by default: it multiplies the bytes of
  // such a read by up to block_bytes / small_read_bytes.
  bool small_read_ahead = false;
  // Valid 1..block_bytes. 64 B, as in the issue that asked for it.
  uint64_t small_read_bytes = 64;
  // Reads longer than this bypass the cache. Valid block_bytes..
  // capacity_bytes. 4 MiB: a scan's large reads would otherwise evict the
  // small hot blocks the cache is for.
  uint64_t max_cached_read_bytes = 4 << 20;

  // InvalidArgument naming the field, its value and the valid range.
  Status Validate() const;
};

struct RANGEIO_EXPORT BlockCacheStats {
  uint64_t hits = 0;       // reads served from cached blocks alone
  uint64_t misses = 0;     // reads that needed a block read
  uint64_t evictions = 0;  // blocks dropped to stay within capacity_bytes
  uint64_t bytes_cached = 0;
  uint64_t blocks_cached = 0;
  // Backend reads avoided: hits, plus misses that only waited for blocks
  // another reader was already fetching.
  uint64_t reads_saved = 0;
  uint64_t block_reads = 0;  // backend reads issued to fill blocks
  uint64_t bypassed = 0;     // reads sent to the source uncached

  std::string ToString() const;
};

class RANGEIO_EXPORT BlockCache {
 public:
  static Result<std::shared_ptr<BlockCache>> Make(
      const BlockCacheOptions& options = {});
  virtual ~BlockCache() = default;
  virtual BlockCacheStats GetStats() const = 0;
  virtual const BlockCacheOptions& options() const = 0;
  // Drops every cached block (blocks being read stay until they complete).
  virtual void Clear() = 0;
};

// `inner` read through `cache`. Sources with the same `identity` share
// cache entries (it defaults to inner->CacheIdentity(): the path, or the
// URL with the endpoint and a hash of the credentials, so that a reader
// with other credentials or another endpoint never gets these bytes); give
// distinct identities to distinct objects that share one. Fails when
// inner's size cannot be found.
RANGEIO_EXPORT Result<std::shared_ptr<Source>> MakeCachedSource(
    std::shared_ptr<Source> inner, std::shared_ptr<BlockCache> cache,
    std::string identity = "");

}  // namespace rangeio
