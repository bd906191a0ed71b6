// rangeio_faiss/range_inverted_lists.h — FAISS IVF posting lists read
// through rangeio, from any URL rangeio opens (optional integration).
//
// OpenIvfIndex reads a FAISS IVF index's header (quantizer, codebooks, list
// table) from a local file, http(s):// or s3:// URL, and gives the index a
// RangeInvertedLists that reads each posting list as one byte range when
// the search needs it. Two layouts: a normally saved index (fourcc "ilar":
// the lists back to back after their sizes vector) and an index whose lists
// are OnDiskInvertedLists (fourcc "ilod": a {size, capacity, offset} table;
// codes at offset, int64 ids at offset + capacity * code_size in the
// .ivfdata file named in the index).
//
// How a search reads: IndexIVF::search calls prefetch_lists on each of its
// threads with that thread's probed lists. RangeInvertedLists keeps ONE
// table of lists for all threads, so a list another thread holds or is
// reading is not read again. The rest go out as ONE ReadRanges request, a
// range per list in scan order: the core planner merges lists up to
// max_gap_bytes apart into reads of up to max_read_bytes (never splitting
// a list) and issues the reads in scan order (IssueOrder::kRequest). The
// stream's callbacks file each list as it arrives, while the search scans.
// get_codes waits for its list and returns a pointer into the read's buffer
// (no copy); release unpins (a release of a pointer that is not into the
// list's buffer unpins nothing). get_single_code (reconstruct) copies the
// one code into a buffer of the calling thread, valid until its next call,
// under a pin held for that call only: FAISS 1.7.3 never releases it. A
// list no thread prefetched (an evicted list, a get_codes without a
// prefetch) is read at once with Priority::kHigh, ahead of queued
// prefetches. A failed read of several lists is read again
// list by list (ReadOptions::per_range_errors), so only a list whose own
// range fails throws faiss::FaissException, naming the list and its bytes.
//
// Alignment: a list's range starts up to 7 bytes before its codes so that
// its ids are 8-aligned in a read of its own; the pad is left out where it
// would overlap another list of the same request (overlapping ranges are
// one read for the planner, however long). A list whose ids still land
// unaligned (in a read it shares) is copied once (aligned_copies).
//
// Memory: every list held (read ahead and not yet scanned, or pinned by a
// scan) holds the limiter's response budget (LimiterOptions::
// response_budget_bytes and _count), so the budget bounds the lists'
// memory whatever the batch.
// When a thread waits for a list that cannot be admitted because the budget
// is all held by lists read ahead (Limiter::Stalled), it evicts such lists
// (not pinned ones); they are read again, with priority, when scanned. A
// batch completes with any budget that holds one read per search thread
// plus one more (a pinned list holds its whole read; the merge cap is at
// most budget / (search threads + 1), and a list larger than the cap is a
// read of its own). The destructor cancels the reads still in flight.
//
// Thread-safety: as FAISS requires (concurrent reads from any threads).
#pragma once

#include <faiss/Index.h>
#include <faiss/invlists/InvertedLists.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rangeio/open_source.h"
#include "rangeio/options.h"
#include "rangeio/reader.h"
#include "rangeio/status.h"

namespace rangeio::integrations {

// A decorator for the sources an index is read from (a BlockCache; the
// benchmarks' chunk barrier): given each opened source, returns what to
// read instead.
using SourceDecorator =
    std::function<std::shared_ptr<Source>(std::shared_ptr<Source>)>;

struct IvfOpenOptions {
  SourceOptions source;  // backend options of the index (and data) URLs
  // io_concurrency, response budget = lists' memory. Its planner is not
  // used for the lists: max_read_bytes and max_gap_bytes plan them.
  Options reader;
  // An "ilod" index: URL of its .ivfdata file. Empty: the file name stored
  // in the index, taken beside the index URL (as IO_FLAG_ONDISK_SAME_DIR).
  std::string data_url;
  SourceDecorator decorate;  // empty: the sources as opened
  // Largest read that merges lists (0: 1 MiB; at most the response budget /
  // (search threads + 1)). 1 reads each list on its own.
  uint64_t max_read_bytes = 0;
  // Largest gap (lists not needed) a merged read spans (unset: 64 KiB; 0:
  // only lists that touch).
  std::optional<uint64_t> max_gap_bytes;
};

// Figures of one RangeInvertedLists since it was opened.
struct ListStats {
  uint64_t prefetch_calls = 0;
  uint64_t lists_prefetched = 0;  // distinct lists read by prefetches
  uint64_t prefetch_reads = 0;    // reads the planner made of those lists
  // Lists a prefetch named that some thread held or was reading already.
  uint64_t lists_already_held = 0;
  uint64_t lists_on_demand = 0;  // lists read by get_codes at once
  uint64_t lists_evicted = 0;    // read ahead, dropped for budget
  uint64_t aligned_copies = 0;   // lists copied to align their ids
};

class RangeInvertedLists final : public ::faiss::ReadOnlyInvertedLists {
 public:
  // Where list i lies in the data source: size entries, codes at
  // codes_offset (size * code_size bytes), ids at ids_offset (size int64).
  struct Extent {
    uint64_t codes_offset = 0;
    uint64_t ids_offset = 0;
    uint64_t size = 0;
  };

  // Checks every extent against the source's size and code_size; the
  // error names the list, its bytes and the source.
  static Result<std::unique_ptr<RangeInvertedLists>> Make(
      size_t code_size, std::vector<Extent> lists, Reader reader,
      uint64_t max_read_bytes = 0,
      std::optional<uint64_t> max_gap_bytes = std::nullopt);
  ~RangeInvertedLists() override;

  size_t list_size(size_t list_no) const override;
  const uint8_t* get_codes(size_t list_no) const override;
  const idx_t* get_ids(size_t list_no) const override;
  void release_codes(size_t list_no, const uint8_t* codes) const override;
  void release_ids(size_t list_no, const idx_t* ids) const override;
  const uint8_t* get_single_code(size_t list_no, size_t offset) const override;
  void prefetch_lists(const idx_t* list_nos, int nlist) const override;

  ListStats GetListStats() const;
  const Reader& reader() const;

  struct Impl;

 private:
  RangeInvertedLists(size_t n, size_t code_bytes, std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Opens the FAISS IVF index at `url_or_path` (header read through rangeio,
// lists served by a RangeInvertedLists on a reader sharing `limiter`, or a
// limiter of its own from options.reader when null). InvalidArgument naming
// the URL for a file that is empty or not a FAISS IVF index in one of the
// two layouts, whose list section holds counts the file cannot (checked
// before FAISS allocates from them), or whose list table does not match
// its data ("ilar" sizes that do not add up to the lists' bytes; an "ilod"
// list whose capacity runs past the .ivfdata file).
Result<std::unique_ptr<::faiss::Index>> OpenIvfIndex(
    std::string_view url_or_path, const IvfOpenOptions& options = {},
    std::shared_ptr<Limiter> limiter = nullptr);

// The RangeInvertedLists of an index OpenIvfIndex returned (null if none).
RangeInvertedLists* RangeListsOf(::faiss::Index* index);

}  // namespace rangeio::integrations
