// RangeInvertedLists: posting lists as range reads (rangeio_faiss/
// range_inverted_lists.h). One mutex guards one table of lists shared by
// every search thread; the streams' callbacks file the lists into it.
//
// Lock rule: no read is started, no stream cancelled and no Slice released
// with the mutex held. Each can run a callback on this thread (a read that
// the released budget admits may complete inline), and callbacks take the
// mutex; hence the `drop` vectors, declared before the lock so that they
// are released after it.
#include "rangeio_faiss/range_inverted_lists.h"

#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/FaissException.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rangeio/planner.h"

namespace rangeio::integrations {

namespace {

// How often a thread waiting for a list checks whether the limiter is
// stuck (Limiter::Stalled): well under a network round trip, and rare
// enough not to load the limiter's lock.
constexpr auto kStuckCheck = std::chrono::milliseconds(2);

// Defaults of IvfOpenOptions::max_read_bytes and max_gap_bytes (the
// README says why).
constexpr uint64_t kDefaultMaxRead = 1 << 20;
constexpr uint64_t kDefaultMaxGap = 64 << 10;

// An 8-byte aligned empty list, for lists of size 0.
alignas(8) const uint8_t kEmpty[8] = {};

}  // namespace

// The scans one thread's last prefetch announced for a list.
struct ThreadUses {
  std::thread::id thread;
  std::vector<uint32_t> at;  // scan positions of its get_codes calls
  size_t used = 0;           // of `at`, released already
  bool InUse() const { return used < at.size(); }
};

// One list held (read ahead, being read, pinned) for every thread.
struct Entry {
  enum class State { kPending, kReady, kFailed, kEvicted };
  State state = State::kEvicted;
  Slice bytes;  // the list's range as requested: it ends with the ids
  Status error;
  uint64_t read = 0;     // the stream that will deliver it
  uint32_t pins = 0;     // get_codes/get_ids not yet released
  uint32_t waiters = 0;  // threads in Acquire for it
  std::vector<ThreadUses> uses;

  bool InUse() const {
    return std::any_of(uses.begin(), uses.end(),
                       [](const ThreadUses& u) { return u.InUse(); });
  }
  // The next announced scan of any thread: eviction drops the list needed
  // last (threads scan their slices at about the same pace).
  uint32_t NextUse() const {
    uint32_t next = UINT32_MAX;
    for (const ThreadUses& u : uses) {
      if (u.InUse()) next = std::min(next, u.at[u.used]);
    }
    return next;
  }
  bool Droppable() const { return pins == 0 && waiters == 0 && !InUse(); }
};

// One stream not yet ended: its range k is list lists[k].
struct ListRead {
  std::vector<size_t> lists;
  std::optional<RangeStream> stream;  // once ReadRanges has returned
};

// The callbacks hold `this`: the destructor cancels every stream (which
// waits for a running callback) before the Impl goes.
struct RangeInvertedLists::Impl {
  size_t code_size = 0;
  std::vector<Extent> lists;
  Reader reader;
  PlannerOptions planner;

  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<size_t, Entry> table;  // node-based: stable references
  // The lists each thread's last prefetch announced.
  std::unordered_map<std::thread::id, std::vector<size_t>> announced;
  std::unordered_map<uint64_t, ListRead> reads;
  uint64_t next_read = 1;
  ListStats stats;

  explicit Impl(Reader r) : reader(std::move(r)) {}

  // List i's bytes: its codes and ids, starting up to 7 bytes early so
  // that the ids sit 8-aligned when the buffer is.
  ByteRange RangeOf(size_t i) const {
    const Extent& e = lists[i];
    const uint64_t pad = (8 - (e.ids_offset - e.codes_offset) % 8) % 8;
    const uint64_t start = e.codes_offset - std::min(pad, e.codes_offset);
    return {start, e.ids_offset + e.size * 8 - start};
  }

  // The ranges of `ids`, in their order, without the pads that would
  // overlap another of them: overlapping ranges are one read for the
  // planner, whatever its cap.
  std::vector<ByteRange> RangesOf(const std::vector<size_t>& ids) const {
    std::vector<ByteRange> ranges;
    ranges.reserve(ids.size());
    for (size_t i : ids) ranges.push_back(RangeOf(i));
    std::vector<size_t> by_offset(ids.size());
    std::iota(by_offset.begin(), by_offset.end(), 0);
    std::sort(by_offset.begin(), by_offset.end(), [&](size_t a, size_t b) {
      return ranges[a].offset < ranges[b].offset;
    });
    for (size_t k = 1; k < by_offset.size(); ++k) {
      ByteRange& r = ranges[by_offset[k]];
      const uint64_t prev_end = ranges[by_offset[k - 1]].end();
      if (prev_end <= r.offset) continue;
      const uint64_t start =
          std::min(prev_end, lists[ids[by_offset[k]]].codes_offset);
      r = {start, r.end() - start};
    }
    return ranges;
  }

  std::string Describe(size_t i) const {
    return "FAISS list " + std::to_string(i) + " (bytes " +
           RangeOf(i).ToString() + " of '" + reader.source()->name() + "')";
  }
  // The file offset of list i's first byte held in e.
  uint64_t StartOf(size_t i, const Entry& e) const {
    return RangeOf(i).end() - e.bytes.size();
  }

  // Drops this thread's announced scans (its previous prefetch, scanned
  // already: FAISS prefetches right before it scans) and the lists nobody
  // needs any more.
  void ForgetUsesLocked(std::thread::id self, std::vector<Slice>* drop) {
    auto a = announced.find(self);
    if (a == announced.end()) return;
    for (size_t i : a->second) {
      auto it = table.find(i);
      if (it == table.end()) continue;
      std::vector<ThreadUses>& u = it->second.uses;
      u.erase(
          std::remove_if(u.begin(), u.end(),
                         [&](const ThreadUses& t) { return t.thread == self; }),
          u.end());
      if (it->second.Droppable()) {
        drop->push_back(std::move(it->second.bytes));
        table.erase(it);
      }
    }
    announced.erase(a);
  }

  // Marks `ids` as coming from a new stream; returns its id for StartRead.
  uint64_t BeginReadLocked(std::vector<size_t> ids) {
    const uint64_t id = next_read++;
    for (size_t i : ids) {
      table[i].state = Entry::State::kPending;
      table[i].read = id;
    }
    reads[id] = {std::move(ids), std::nullopt};
    return id;
  }

  void StartRead(uint64_t id, std::span<const ByteRange> ranges,
                 Priority priority) {
    ReadOptions o;
    o.delivery = Delivery::kAsCompleted;
    o.priority = priority;
    o.issue_order = IssueOrder::kRequest;
    o.planner = planner;
    o.per_range_errors = true;
    o.on_result = [this, id](RangeResult r) { OnResult(id, std::move(r)); };
    o.on_end = [this, id](const Status& st) { OnEnd(id, st); };
    Result<RangeStream> s = reader.ReadRanges(ranges, o);
    std::optional<RangeStream> ended;  // cancelled after the lock
    {
      std::lock_guard lk(mu);
      auto it = reads.find(id);
      if (!s.ok()) {
        if (it != reads.end()) EndLocked(it, s.status());
      } else if (it != reads.end()) {
        it->second.stream.emplace(std::move(*s));
      } else {
        ended.emplace(std::move(*s));  // it ended already
      }
    }
    cv.notify_all();
  }

  // A list's bytes or its own error, filed if the list still waits for it
  // (it may have been dropped meanwhile).
  void OnResult(uint64_t id, RangeResult r) {
    {
      std::lock_guard lk(mu);
      auto rd = reads.find(id);
      if (rd == reads.end()) return;
      const size_t i = rd->second.lists[r.index];
      auto it = table.find(i);
      if (it == table.end() || it->second.state != Entry::State::kPending) {
        return;  // r.bytes is released after the lock
      }
      Entry& e = it->second;
      if (r.status.ok()) {
        e.bytes = std::move(r.bytes);
        e.state = Entry::State::kReady;
      } else if (e.read == id) {
        e.state = Entry::State::kFailed;
        e.error = r.status.WithContext(Describe(i));
      }
    }
    cv.notify_all();
  }

  void OnEnd(uint64_t id, const Status& st) {
    std::optional<RangeStream> ended;  // this one: destroyed after the lock
    {
      std::lock_guard lk(mu);
      auto it = reads.find(id);
      if (it == reads.end()) return;
      ended = std::move(it->second.stream);
      EndLocked(it, st);
    }
    cv.notify_all();
  }

  // A stream ended: its lists still pending fail with its error (only a
  // stall past the response_stall_timeout ends one early).
  void EndLocked(std::unordered_map<uint64_t, ListRead>::iterator it,
                 const Status& st) {
    for (size_t i : it->second.lists) {
      auto e = table.find(i);
      if (!st.ok() && e != table.end() && e->second.read == it->first &&
          e->second.state == Entry::State::kPending) {
        e->second.state = Entry::State::kFailed;
        e->second.error = st.WithContext(Describe(i));
      }
    }
    reads.erase(it);
  }

  // Takes the list read ahead that is needed last (not pinned, not `keep`)
  // out of the table, so that releasing it lets the budget admit more. Any
  // thread's: whichever thread next needs it reads it again with priority.
  // Pinned lists are released by scans, which do not wait for the budget.
  bool EvictOneLocked(size_t keep, Slice* out) {
    Entry* victim = nullptr;
    for (auto& [id, e] : table) {
      if (id == keep || e.state != Entry::State::kReady || e.pins != 0 ||
          e.bytes.empty()) {
        continue;
      }
      if (victim == nullptr || e.NextUse() > victim->NextUse()) victim = &e;
    }
    if (victim == nullptr) return false;
    *out = std::exchange(victim->bytes, Slice());
    victim->state = Entry::State::kEvicted;
    ++stats.lists_evicted;
    return true;
  }

  const std::byte* Acquire(size_t i, uint64_t at);
  void AlignLocked(Entry& e, size_t i, std::vector<Slice>* drop);
  void Release(size_t i, const void* got, bool use);
};

// Waits until list i is ready, reading it at once with priority if it is
// not coming, and pins it: the address of file offset `at` in it. Throws
// on a failure (a later call reads the list again).
const std::byte* RangeInvertedLists::Impl::Acquire(size_t i, uint64_t at) {
  std::vector<Slice> drop;
  std::unique_lock lk(mu);
  Entry& e = table[i];  // waiters > 0 keeps it in the table
  ++e.waiters;
  for (;;) {
    switch (e.state) {
      case Entry::State::kReady:
        AlignLocked(e, i, &drop);
        ++e.pins;
        --e.waiters;
        return e.bytes.data() + (at - StartOf(i, e));
      case Entry::State::kFailed: {
        const std::string msg = e.error.ToString();
        e.state = Entry::State::kEvicted;
        --e.waiters;
        throw ::faiss::FaissException(msg);
      }
      case Entry::State::kEvicted: {
        ++stats.lists_on_demand;
        const std::vector<ByteRange> range = {RangeOf(i)};
        const uint64_t id = BeginReadLocked({i});
        lk.unlock();
        StartRead(id, range, Priority::kHigh);
        lk.lock();
        break;
      }
      case Entry::State::kPending: {
        Slice victim;
        if (reader.limiter()->Stalled() && EvictOneLocked(i, &victim)) {
          lk.unlock();
          victim.Reset();
          lk.lock();
          break;
        }
        cv.wait_for(lk, kStuckCheck,
                    [&] { return e.state != Entry::State::kPending; });
        break;
      }
    }
  }
}

// The ids must be int64-aligned: a buffer that leaves them unaligned (a
// read shared with lists of another alignment) is copied once.
void RangeInvertedLists::Impl::AlignLocked(Entry& e, size_t i,
                                           std::vector<Slice>* drop) {
  const uint64_t ids_at = lists[i].ids_offset - StartOf(i, e);
  if ((reinterpret_cast<uintptr_t>(e.bytes.data()) + ids_at) % 8 == 0) return;
  std::byte* w = nullptr;
  Slice copy = Slice::Allocate(e.bytes.size() + 8, &w);
  const size_t shift = (8 - (reinterpret_cast<uintptr_t>(w) + ids_at) % 8) % 8;
  std::memcpy(w + shift, e.bytes.data(), e.bytes.size());
  drop->push_back(std::exchange(e.bytes, copy.Sub(shift, e.bytes.size())));
  ++stats.aligned_copies;
}

// Unpins list i if `got` points into its bytes (what Acquire returned; any
// other pointer pinned nothing); a codes release counts as one of this
// thread's scans.
void RangeInvertedLists::Impl::Release(size_t i, const void* got, bool use) {
  Slice dropped;
  std::lock_guard lk(mu);
  auto it = table.find(i);
  if (it == table.end() || it->second.pins == 0) return;
  Entry& e = it->second;
  const auto p = reinterpret_cast<uintptr_t>(got);
  const auto start = reinterpret_cast<uintptr_t>(e.bytes.data());
  if (p < start || p >= start + e.bytes.size()) return;
  --e.pins;
  if (use) {
    const std::thread::id self = std::this_thread::get_id();
    for (ThreadUses& u : e.uses) {
      if (u.thread == self && u.InUse()) ++u.used;
    }
  }
  if (e.Droppable()) {
    dropped = std::move(e.bytes);
    table.erase(it);
  }
}

Result<std::unique_ptr<RangeInvertedLists>> RangeInvertedLists::Make(
    size_t code_size, std::vector<Extent> lists, Reader reader,
    uint64_t max_read_bytes, std::optional<uint64_t> max_gap_bytes) {
  const std::string& name = reader.source()->name();
  if (code_size == 0) {
    return Status::InvalidArgument(
        "FAISS index '" + name +
        "': code size 0 (not a list layout rangeio reads)");
  }
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, reader.source()->Size());
  for (size_t i = 0; i < lists.size(); ++i) {
    const Extent& e = lists[i];
    const bool overflow = e.size > (UINT64_MAX / 2) / (code_size + 8) ||
                          e.codes_offset > UINT64_MAX / 2 ||
                          e.ids_offset > UINT64_MAX / 2;
    if (overflow || e.ids_offset < e.codes_offset + e.size * code_size ||
        e.ids_offset + e.size * 8 > size) {
      return Status::InvalidArgument(
          "FAISS index '" + name + "': list " + std::to_string(i) + " of " +
          std::to_string(e.size) + " entries (codes at " +
          std::to_string(e.codes_offset) + ", ids at " +
          std::to_string(e.ids_offset) +
          ") does not fit in the data, which is " + std::to_string(size) +
          " bytes: a truncated or foreign file");
    }
  }
  auto impl = std::make_unique<Impl>(std::move(reader));
  impl->code_size = code_size;
  impl->lists = std::move(lists);
  // A pinned list holds its whole read, so each search thread may hold one
  // read: the cap leaves room for one read per thread plus one more.
  const uint64_t threads = std::max(omp_get_max_threads(), 1);
  const uint64_t budget = impl->reader.limiter()->response_budget_bytes();
  PlannerOptions& p = impl->planner;
  p.coalesce_gap = max_gap_bytes.value_or(kDefaultMaxGap);
  p.max_overread_ratio = PlannerOptions::kNoOverreadLimit;
  p.max_merged_bytes = std::max<uint64_t>(
      1, std::min(max_read_bytes == 0 ? kDefaultMaxRead : max_read_bytes,
                  budget / (threads + 1)));
  p.split_bytes = PlannerOptions::kNoSplit;
  const size_t nlist = impl->lists.size();
  return std::unique_ptr<RangeInvertedLists>(
      new RangeInvertedLists(nlist, code_size, std::move(impl)));
}

RangeInvertedLists::RangeInvertedLists(size_t n, size_t code_bytes,
                                       std::unique_ptr<Impl> impl)
    : ReadOnlyInvertedLists(n, code_bytes), impl_(std::move(impl)) {}

// Cancels the streams (each waits for its running callback, which takes
// the mutex: not held here), then releases the lists.
RangeInvertedLists::~RangeInvertedLists() {
  std::unordered_map<size_t, Entry> table;
  std::vector<RangeStream> streams;
  {
    std::lock_guard lk(impl_->mu);
    for (auto& [id, r] : impl_->reads) {
      if (r.stream) streams.push_back(std::move(*r.stream));
    }
    impl_->reads.clear();
    table.swap(impl_->table);
    impl_->announced.clear();
  }
  streams.clear();
}

size_t RangeInvertedLists::list_size(size_t list_no) const {
  FAISS_THROW_IF_NOT_FMT(list_no < nlist, "list %zu of %zu", list_no, nlist);
  return impl_->lists[list_no].size;
}

const uint8_t* RangeInvertedLists::get_codes(size_t list_no) const {
  if (list_size(list_no) == 0) return kEmpty;
  return reinterpret_cast<const uint8_t*>(
      impl_->Acquire(list_no, impl_->lists[list_no].codes_offset));
}

const RangeInvertedLists::idx_t* RangeInvertedLists::get_ids(
    size_t list_no) const {
  if (list_size(list_no) == 0) return reinterpret_cast<const idx_t*>(kEmpty);
  return reinterpret_cast<const idx_t*>(
      impl_->Acquire(list_no, impl_->lists[list_no].ids_offset));
}

void RangeInvertedLists::release_codes(size_t list_no,
                                       const uint8_t* codes) const {
  if (list_size(list_no) == 0) return;
  impl_->Release(list_no, codes, /*use=*/true);
}

void RangeInvertedLists::release_ids(size_t list_no, const idx_t* ids) const {
  if (list_size(list_no) == 0) return;
  impl_->Release(list_no, ids, /*use=*/false);
}

// FAISS 1.7.3 never releases a single code (IndexIVFFlat's and
// IndexIVFPQ's reconstruct_from_offset do not; ScopedCodes does): the code
// is copied out under a pin held for this call only, into a buffer of the
// calling thread, valid until its next get_single_code. A release_codes of
// that copy unpins nothing (it points into no list).
const uint8_t* RangeInvertedLists::get_single_code(size_t list_no,
                                                   size_t offset) const {
  FAISS_THROW_IF_NOT_FMT(offset < list_size(list_no),
                         "entry %zu of list %zu (%zu entries)", offset, list_no,
                         list_size(list_no));
  thread_local std::vector<uint8_t> code;
  code.resize(code_size);
  const std::byte* at = impl_->Acquire(
      list_no, impl_->lists[list_no].codes_offset + offset * code_size);
  std::memcpy(code.data(), at, code_size);
  impl_->Release(list_no, at, /*use=*/false);
  return code.data();
}

// Deduplicates the lists (first use first), announces this thread's scans
// of them, and reads those no thread holds or is reading as one request in
// scan order. Never throws (FAISS calls it inside an OpenMP region): a
// failure is filed on the lists and thrown by get_codes.
void RangeInvertedLists::prefetch_lists(const idx_t* list_nos, int n) const {
  std::vector<Slice> drop;
  std::vector<ByteRange> ranges;
  uint64_t id = 0;
  {
    std::lock_guard lk(impl_->mu);
    const std::thread::id self = std::this_thread::get_id();
    impl_->ForgetUsesLocked(self, &drop);
    std::unordered_map<size_t, std::vector<uint32_t>> uses;
    std::vector<size_t> order;
    for (int k = 0; k < n; ++k) {
      const idx_t l = list_nos[k];
      if (l < 0 || static_cast<size_t>(l) >= nlist) continue;
      if (impl_->lists[l].size == 0) continue;
      std::vector<uint32_t>& u = uses[l];
      if (u.empty()) order.push_back(static_cast<size_t>(l));
      u.push_back(static_cast<uint32_t>(k));
    }
    std::vector<size_t> to_read;
    for (size_t l : order) {
      Entry& e = impl_->table[l];
      e.uses.push_back({self, std::move(uses[l]), 0});
      if (e.state == Entry::State::kReady ||
          e.state == Entry::State::kPending) {
        ++impl_->stats.lists_already_held;
      } else {
        to_read.push_back(l);
      }
    }
    impl_->announced[self] = std::move(order);
    ++impl_->stats.prefetch_calls;
    impl_->stats.lists_prefetched += to_read.size();
    if (to_read.empty()) return;
    ranges = impl_->RangesOf(to_read);
    Result<Plan> plan = PlanReads(ranges, impl_->planner);
    impl_->stats.prefetch_reads += plan.ok() ? plan->reads.size() : 0;
    id = impl_->BeginReadLocked(std::move(to_read));
  }
  impl_->StartRead(id, ranges, Priority::kNormal);
}

ListStats RangeInvertedLists::GetListStats() const {
  std::lock_guard lk(impl_->mu);
  return impl_->stats;
}

const Reader& RangeInvertedLists::reader() const { return impl_->reader; }

}  // namespace rangeio::integrations
