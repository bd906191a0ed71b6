// RangeInvertedLists: posting lists as range reads (rangeio_faiss/
// range_inverted_lists.h). One mutex guards one table of lists shared by
// every search thread; pump threads drain the prefetch streams into it.
#include "rangeio_faiss/range_inverted_lists.h"

#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/FaissException.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "rangeio_faiss/list_read_plan.h"

namespace rangeio::integrations {

namespace {

// How often a thread waiting for a list checks whether the limiter is
// stuck (nothing in flight, a stream waiting): 2 ms, well under a network
// round trip, so a stuck budget costs little, and rare enough not to load
// the limiter's lock.
constexpr auto kStuckCheck = std::chrono::milliseconds(2);

// Largest read of touching lists, unless IvfOpenOptions::max_read_bytes
// says otherwise: 1 MiB (see the README's measurement): a 1,000-query batch
// of bench vindex's IVF-Flat (99 MiB) is still ~100 reads, many in flight.
constexpr uint64_t kDefaultMaxRead = 1 << 20;
// Largest gap a read spans between two lists it merges, unless
// IvfOpenOptions::max_gap_bytes says otherwise: 64 KiB (see the README's
// measurement): a few ms of transfer at worst, against a read's slot for a
// round trip.
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
  Slice bytes;  // the list's range: codes at codes_at, ids 8-aligned
  Status error;
  uint64_t pump = 0;     // the read that will deliver it
  uint32_t pins = 0;     // get_codes/get_ids not yet released
  uint32_t waiters = 0;  // threads in AcquireLocked for it
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

struct RangeInvertedLists::Impl
    : public std::enable_shared_from_this<RangeInvertedLists::Impl> {
  size_t code_size = 0;
  std::vector<Extent> lists;
  Reader reader;
  uint64_t max_read = 0;  // PlanListReads's cap
  uint64_t max_gap = 0;   // and the gap it reads through

  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<size_t, Entry> table;  // node-based: stable references
  // The lists each thread's last prefetch announced.
  std::unordered_map<std::thread::id, std::vector<size_t>> announced;
  uint64_t next_pump = 1;
  int active_pumps = 0;
  bool closing = false;
  ListStats stats;

  explicit Impl(Reader r) : reader(std::move(r)) {}

  // The bytes read for list i: its codes and ids, starting up to 7 bytes
  // early so that the ids sit 8-aligned when the buffer is.
  uint64_t PadOf(size_t i) const {
    const Extent& e = lists[i];
    const uint64_t pad = (8 - (e.ids_offset - e.codes_offset) % 8) % 8;
    return e.codes_offset >= pad ? pad : 0;
  }
  ByteRange RangeOf(size_t i) const {
    const Extent& e = lists[i];
    const uint64_t start = e.codes_offset - PadOf(i);
    return {start, e.ids_offset + e.size * 8 - start};
  }
  std::string Describe(size_t i) const {
    return "FAISS list " + std::to_string(i) + " (bytes " +
           RangeOf(i).ToString() + " of '" + reader.source()->name() + "')";
  }

  // Drops this thread's announced scans (its previous prefetch, scanned
  // already: FAISS prefetches right before it scans) and the lists nobody
  // needs any more.
  void ForgetUsesLocked(std::thread::id self) {
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
      if (it->second.Droppable()) table.erase(it);
    }
    announced.erase(a);
  }

  // Reads `plan` (its lists already kPending with pump `pump`) as one
  // request and starts a thread that files each list as it arrives. Called
  // with mu held: rangeio never calls back into this object from
  // ReadRanges.
  void StartPumpLocked(std::vector<PlannedRead> plan, uint64_t pump,
                       Priority priority) {
    if (plan.empty()) return;
    std::vector<ByteRange> ranges;
    ranges.reserve(plan.size());
    for (const PlannedRead& r : plan) ranges.push_back(r.range);
    Result<RangeStream> stream =
        reader.ReadRanges(ranges, Delivery::kAsCompleted, priority);
    if (!stream.ok()) {
      for (const PlannedRead& r : plan)
        FailLocked(r.lists, pump, stream.status());
      return;
    }
    ++active_pumps;
    std::thread([self = shared_from_this(), plan = std::move(plan), pump,
                 s = std::move(*stream)]() mutable {
      self->Drain(plan, pump, std::move(s));
    }).detach();
  }

  void Drain(const std::vector<PlannedRead>& plan, uint64_t pump,
             RangeStream owned) {
    std::optional<RangeStream> stream(std::move(owned));
    const bool lone = plan.size() == 1 && plan[0].lists.size() == 1;
    for (;;) {
      Result<std::optional<RangeResult>> next = stream->Next();
      Slice dropped;  // released after the lock
      std::unique_lock lk(mu);
      if (!next.ok()) {
        // The error ends the whole stream: a lone list failed; the lists
        // of a prefetch are read again one by one when scanned, so that
        // the error is thrown for the list that failed and only for it.
        for (const PlannedRead& r : plan) {
          if (lone) {
            FailLocked(r.lists, pump, next.status());
          } else {
            ForgetLocked(r.lists, pump);
          }
        }
        break;
      }
      if (!*next) break;
      const PlannedRead& r = plan[(*next)->index];
      for (size_t i : r.lists) {
        auto it = table.find(i);
        if (it != table.end() && it->second.state == Entry::State::kPending) {
          const ByteRange lr = RangeOf(i);
          it->second.bytes =
              (*next)->bytes.Sub(lr.offset - r.range.offset, lr.length);
          it->second.state = Entry::State::kReady;
        }  // else dropped meanwhile
      }
      dropped = std::move((*next)->bytes);
      if (closing) break;
      lk.unlock();
      cv.notify_all();
    }
    stream.reset();  // cancels what is left, before the owner may go
    std::lock_guard lk(mu);
    --active_pumps;
    cv.notify_all();
  }

  void ForgetLocked(const std::vector<size_t>& ids, uint64_t pump) {
    for (size_t i : ids) {
      auto it = table.find(i);
      if (it != table.end() && it->second.pump == pump &&
          it->second.state == Entry::State::kPending) {
        it->second.state = Entry::State::kEvicted;
      }
    }
    cv.notify_all();
  }

  void FailLocked(const std::vector<size_t>& ids, uint64_t pump,
                  const Status& cause) {
    for (size_t i : ids) {
      auto it = table.find(i);
      if (it == table.end() || it->second.pump != pump ||
          it->second.state != Entry::State::kPending) {
        continue;
      }
      it->second.state = Entry::State::kFailed;
      it->second.error = cause.WithContext(Describe(i));
    }
    cv.notify_all();
  }

  // True when the limiter can admit nothing until a response is released.
  bool Stuck() const { return reader.limiter()->Stalled(); }

  // Drops the list read ahead that is needed last (not pinned, not `keep`),
  // so that the budget admits more. Any thread's: a list shared by several
  // threads is theirs alike, and whichever thread next needs it reads it
  // again with priority. Pinned lists are released by scans, which do not
  // wait for the budget.
  bool EvictOneLocked(size_t keep) {
    Entry* victim = nullptr;
    for (auto& [id, e] : table) {
      if (id == keep || e.state != Entry::State::kReady || e.pins != 0 ||
          e.bytes.empty()) {
        continue;
      }
      if (victim == nullptr || e.NextUse() > victim->NextUse()) victim = &e;
    }
    if (victim == nullptr) return false;
    victim->bytes.Reset();
    victim->state = Entry::State::kEvicted;
    ++stats.lists_evicted;
    return true;
  }

  // Waits until list i is ready, reading it at once with priority if it
  // is not coming; pins it. Throws on a failure.
  Entry& AcquireLocked(std::unique_lock<std::mutex>& lk, size_t i) {
    Entry& e = table[i];
    ++e.waiters;
    for (;;) {
      switch (e.state) {
        case Entry::State::kReady:
          AlignLocked(e, i);
          ++e.pins;
          --e.waiters;
          return e;
        case Entry::State::kFailed: {
          const std::string msg = e.error.ToString();
          e.state = Entry::State::kEvicted;  // a later call reads again
          --e.waiters;
          throw ::faiss::FaissException(msg);
        }
        case Entry::State::kEvicted: {
          e.state = Entry::State::kPending;
          e.pump = next_pump++;
          ++stats.lists_on_demand;
          StartPumpLocked({PlannedRead{RangeOf(i), {i}, 0}}, e.pump,
                          Priority::kHigh);
          break;
        }
        case Entry::State::kPending:
          if (Stuck() && EvictOneLocked(i)) break;
          cv.wait_for(lk, kStuckCheck,
                      [&] { return e.state != Entry::State::kPending; });
          break;
      }
    }
  }

  // The ids must be int64-aligned: a buffer that leaves them unaligned
  // (a layout whose lists do not keep one alignment) is copied once.
  void AlignLocked(Entry& e, size_t i) {
    const uint64_t ids_at = lists[i].ids_offset - RangeOf(i).offset;
    if ((reinterpret_cast<uintptr_t>(e.bytes.data()) + ids_at) % 8 == 0) return;
    std::byte* w = nullptr;
    Slice copy = Slice::Allocate(e.bytes.size() + 8, &w);
    const size_t shift =
        (8 - (reinterpret_cast<uintptr_t>(w) + ids_at) % 8) % 8;
    std::memcpy(w + shift, e.bytes.data(), e.bytes.size());
    e.bytes = copy.Sub(shift, e.bytes.size());
    ++stats.aligned_copies;
  }

  // Unpins list i; a codes release counts as one of this thread's scans.
  void ReleaseLocked(size_t i, bool use) {
    auto it = table.find(i);
    if (it == table.end() || it->second.pins == 0) return;
    Entry& e = it->second;
    --e.pins;
    if (use) {
      const std::thread::id self = std::this_thread::get_id();
      for (ThreadUses& u : e.uses) {
        if (u.thread == self && u.InUse()) ++u.used;
      }
    }
    if (e.Droppable()) table.erase(it);
  }
};

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
  auto impl = std::make_shared<Impl>(std::move(reader));
  impl->code_size = code_size;
  impl->lists = std::move(lists);
  // A pinned list holds its whole read, so each search thread may hold one
  // read: the cap leaves room for one read per thread plus one more.
  const uint64_t threads = std::max(omp_get_max_threads(), 1);
  const uint64_t budget = impl->reader.limiter()->response_budget_bytes();
  impl->max_read =
      std::min(max_read_bytes == 0 ? kDefaultMaxRead : max_read_bytes,
               budget / (threads + 1));
  impl->max_gap = max_gap_bytes.value_or(kDefaultMaxGap);
  const size_t nlist = impl->lists.size();
  return std::unique_ptr<RangeInvertedLists>(
      new RangeInvertedLists(nlist, code_size, std::move(impl)));
}

RangeInvertedLists::RangeInvertedLists(size_t n, size_t code_bytes,
                                       std::shared_ptr<Impl> impl)
    : ReadOnlyInvertedLists(n, code_bytes), impl_(std::move(impl)) {}

// Drops every held list (their budget lets blocked pumps finish), stops the
// pumps at their next result and waits for them.
RangeInvertedLists::~RangeInvertedLists() {
  std::unordered_map<size_t, Entry> table;
  std::unique_lock lk(impl_->mu);
  impl_->closing = true;
  table.swap(impl_->table);
  impl_->announced.clear();
  for (auto& [i, e] : table) e.bytes.Reset();
  impl_->cv.wait(lk, [&] { return impl_->active_pumps == 0; });
}

size_t RangeInvertedLists::list_size(size_t list_no) const {
  FAISS_THROW_IF_NOT_FMT(list_no < nlist, "list %zu of %zu", list_no, nlist);
  return impl_->lists[list_no].size;
}

const uint8_t* RangeInvertedLists::get_codes(size_t list_no) const {
  if (list_size(list_no) == 0) return kEmpty;
  std::unique_lock lk(impl_->mu);
  Entry& e = impl_->AcquireLocked(lk, list_no);
  return reinterpret_cast<const uint8_t*>(e.bytes.data()) +
         impl_->PadOf(list_no);
}

const RangeInvertedLists::idx_t* RangeInvertedLists::get_ids(
    size_t list_no) const {
  if (list_size(list_no) == 0) return reinterpret_cast<const idx_t*>(kEmpty);
  std::unique_lock lk(impl_->mu);
  Entry& e = impl_->AcquireLocked(lk, list_no);
  const uint64_t ids_at =
      impl_->lists[list_no].ids_offset - impl_->RangeOf(list_no).offset;
  return reinterpret_cast<const idx_t*>(e.bytes.data() + ids_at);
}

void RangeInvertedLists::release_codes(size_t list_no,
                                       const uint8_t* /*codes*/) const {
  if (list_size(list_no) == 0) return;
  std::lock_guard lk(impl_->mu);
  impl_->ReleaseLocked(list_no, /*use=*/true);
}

void RangeInvertedLists::release_ids(size_t list_no,
                                     const idx_t* /*ids*/) const {
  if (list_size(list_no) == 0) return;
  std::lock_guard lk(impl_->mu);
  impl_->ReleaseLocked(list_no, /*use=*/false);
}

const uint8_t* RangeInvertedLists::get_single_code(size_t list_no,
                                                   size_t offset) const {
  FAISS_THROW_IF_NOT_FMT(offset < list_size(list_no),
                         "entry %zu of list %zu (%zu entries)", offset, list_no,
                         list_size(list_no));
  return get_codes(list_no) + offset * code_size;
}

// Deduplicates the lists (first use first), announces this thread's scans
// of them, and reads those no thread holds or is reading as one request,
// planned by offset (PlanListReads). Never throws (FAISS calls it inside
// an OpenMP region): a failure is filed on the lists and thrown by
// get_codes.
void RangeInvertedLists::prefetch_lists(const idx_t* list_nos, int n) const {
  std::lock_guard lk(impl_->mu);
  if (impl_->closing) return;
  const std::thread::id self = std::this_thread::get_id();
  impl_->ForgetUsesLocked(self);
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
  const uint64_t pump = impl_->next_pump++;
  std::vector<ListToRead> to_read;
  for (size_t l : order) {
    Entry& e = impl_->table[l];
    const uint32_t first_use = uses[l].front();
    e.uses.push_back({self, std::move(uses[l]), 0});
    if (e.state == Entry::State::kReady || e.state == Entry::State::kPending) {
      ++impl_->stats.lists_already_held;
      continue;
    }
    e.state = Entry::State::kPending;
    e.pump = pump;
    to_read.push_back({l, impl_->RangeOf(l), first_use});
  }
  impl_->announced[self] = std::move(order);
  ++impl_->stats.prefetch_calls;
  impl_->stats.lists_prefetched += to_read.size();
  std::vector<PlannedRead> plan =
      PlanListReads(std::move(to_read), impl_->max_read, impl_->max_gap);
  impl_->stats.prefetch_reads += plan.size();
  impl_->StartPumpLocked(std::move(plan), pump, Priority::kNormal);
}

ListStats RangeInvertedLists::GetListStats() const {
  std::lock_guard lk(impl_->mu);
  return impl_->stats;
}

const Reader& RangeInvertedLists::reader() const { return impl_->reader; }

}  // namespace rangeio::integrations
