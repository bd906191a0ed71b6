#include "support/gated_source.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace rangeio::testing {
namespace {
// Never destroyed: the last reference to a GatedSource may be dropped on its
// (detached) completion thread while the process is exiting.
std::mutex& LiveMu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::set<GatedSource*>& Live() {
  static auto* live = new std::set<GatedSource*>;
  return *live;
}
}  // namespace

std::byte PatternByteAt(uint64_t offset) {
  uint64_t x = (offset + 0x1234567) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<std::byte>(x >> 56);
}

bool MatchesPattern(ByteRange range, std::span<const std::byte> bytes) {
  if (bytes.size() != range.length) return false;
  for (uint64_t i = 0; i < range.length; ++i) {
    if (bytes[i] != PatternByteAt(range.offset + i)) return false;
  }
  return true;
}

void GatedSource::PassAllLiveGates() {
  std::lock_guard<std::mutex> lock(LiveMu());
  for (GatedSource* g : Live()) g->SetMode(Mode::kPassAsync);
}

GatedSource::GatedSource(std::string name, uint64_t size, Mode mode)
    : name_(std::move(name)), size_(size), st_(std::make_shared<State>()) {
  st_->mode = mode;
  completer_ = std::thread([st = st_] { CompletionLoop(st); });
  std::lock_guard<std::mutex> lock(LiveMu());
  Live().insert(this);
}

GatedSource::~GatedSource() {
  {
    std::lock_guard<std::mutex> live(LiveMu());
    Live().erase(this);
  }
  size_t held = 0;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->stopping = true;
    held = st_->held.size();
  }
  st_->changed.notify_all();
  if (completer_.get_id() == std::this_thread::get_id()) {
    completer_.detach();  // destroyed from a completion: the loop owns st_
  } else {
    completer_.join();
  }
  // A held read here means the scheduler let go of its source while a read
  // was in flight (the contract says it must not), or a test forgot to
  // release: either way a bug worth a loud message.
  if (held != 0) {
    std::fprintf(stderr, "GatedSource %s destroyed with %zu held reads\n",
                 name_.c_str(), held);
    std::abort();
  }
}

Result<uint64_t> GatedSource::Size() {
  std::lock_guard<std::mutex> lock(st_->mu);
  if (!st_->size_status.ok()) return st_->size_status;
  return size_;
}

void GatedSource::Read(ByteRange range, ReadSink* sink, uint64_t tag) {
  Pending p{range, sink, tag};
  bool inline_now = false;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    ++st_->reads_started;
    ++st_->outstanding;
    st_->peak_outstanding = std::max(st_->peak_outstanding, st_->outstanding);
    st_->started.push_back(range);
    switch (st_->mode) {
      case Mode::kHold:
        st_->held.push_back(p);
        break;
      case Mode::kPassAsync:
        st_->async_queue.push_back(p);
        break;
      case Mode::kPassInline:
        inline_now = true;
        break;
    }
  }
  st_->changed.notify_all();
  if (inline_now) Complete(*st_, p);
}

void GatedSource::Complete(State& st, const Pending& p) {
  Result<Slice> result = Finish(st, p);
  st.changed.notify_all();
  p.sink->OnReadDone(p.tag, std::move(result));
  st.changed.notify_all();
}

Result<Slice> GatedSource::Finish(State& st, const Pending& p) {
  Result<Slice> result = Status::Internal("unset");
  bool fail;
  std::string cause;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    fail = st.fail_offsets.count(p.range.offset) != 0;
    cause = st.fail_cause;
  }
  if (fail) {
    result = Status::IoError(cause);
  } else if (p.range.length == 0) {
    result = Slice();
  } else {
    auto buf = std::make_shared<std::vector<std::byte>>(p.range.length);
    for (uint64_t i = 0; i < p.range.length; ++i) {
      (*buf)[i] = PatternByteAt(p.range.offset + i);
    }
    const std::byte* data = buf->data();
    result = Slice(std::shared_ptr<const void>(buf), data, p.range.length);
  }
  {
    std::lock_guard<std::mutex> lock(st.mu);
    --st.outstanding;
    ++st.reads_completed;
    if (fail) {
      ++st.reads_failed;
    } else {
      st.bytes_returned += p.range.length;
    }
  }
  return result;
}

void GatedSource::CompletionLoop(std::shared_ptr<State> st) {
  std::unique_lock<std::mutex> lock(st->mu);
  while (true) {
    st->changed.wait(lock,
                     [&] { return st->stopping || !st->async_queue.empty(); });
    if (st->async_queue.empty()) return;  // stopping, nothing left
    Pending p = st->async_queue.front();
    st->async_queue.pop_front();
    lock.unlock();
    Complete(*st, p);
    lock.lock();
  }
}

void GatedSource::SetMode(Mode mode) {
  std::deque<Pending> now;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->mode = mode;
    if (mode == Mode::kPassAsync) {
      while (!st_->held.empty()) {
        st_->async_queue.push_back(st_->held.front());
        st_->held.pop_front();
      }
    }
    if (mode == Mode::kPassInline) now.swap(st_->held);
  }
  st_->changed.notify_all();
  for (const Pending& p : now) Complete(*st_, p);
}

bool GatedSource::ReleaseWhere(
    const std::function<long(const std::deque<Pending>&)>& pick) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    const long i = pick(st_->held);
    if (i < 0) return false;
    p = st_->held[i];
    st_->held.erase(st_->held.begin() + i);
  }
  Complete(*st_, p);
  return true;
}

size_t GatedSource::ReleaseOldest(size_t n) {
  size_t done = 0;
  while (done < n && ReleaseWhere([](const std::deque<Pending>& h) {
           return h.empty() ? -1L : 0L;
         })) {
    ++done;
  }
  return done;
}

size_t GatedSource::ReleaseOldestTogether(size_t n) {
  std::vector<Pending> taken;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    while (taken.size() < n && !st_->held.empty()) {
      taken.push_back(st_->held.front());
      st_->held.pop_front();
    }
  }
  std::vector<ReadCompletion> done;
  for (size_t i = 0; i < taken.size(); ++i) {
    done.push_back({taken[i].tag, Finish(*st_, taken[i])});
    if (i + 1 == taken.size() || taken[i + 1].sink != taken[i].sink) {
      st_->changed.notify_all();
      taken[i].sink->OnReadsDone(done);
      done.clear();
    }
  }
  st_->changed.notify_all();
  return taken.size();
}

bool GatedSource::ReleaseNewest() {
  return ReleaseWhere([](const std::deque<Pending>& h) {
    return static_cast<long>(h.size()) - 1;
  });
}

bool GatedSource::ReleaseOffset(uint64_t offset) {
  return ReleaseWhere([offset](const std::deque<Pending>& h) {
    for (size_t i = 0; i < h.size(); ++i) {
      if (h[i].range.offset == offset) return static_cast<long>(i);
    }
    return -1L;
  });
}

void GatedSource::Cancel(ReadSink* sink, uint64_t tag) {
  std::vector<Pending> dropped;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    for (auto it = st_->held.begin(); it != st_->held.end();) {
      if (it->sink != sink || (tag != kAllReads && it->tag != tag)) {
        ++it;
        continue;
      }
      dropped.push_back(*it);
      it = st_->held.erase(it);
      ++st_->cancelled;
      --st_->outstanding;
      ++st_->reads_completed;
      if (tag != kAllReads) break;
    }
  }
  if (dropped.empty()) return;
  st_->changed.notify_all();
  for (const Pending& p : dropped) {
    sink->OnReadDone(p.tag, Status::Cancelled("gated read cancelled"));
  }
  st_->changed.notify_all();
}

uint64_t GatedSource::cancelled() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->cancelled;
}

bool GatedSource::ReleaseTag(uint64_t tag) {
  return ReleaseWhere([tag](const std::deque<Pending>& h) {
    for (size_t i = 0; i < h.size(); ++i) {
      if (h[i].tag == tag) return static_cast<long>(i);
    }
    return -1L;
  });
}

size_t GatedSource::ReleaseAll() {
  std::deque<Pending> now;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    now.swap(st_->held);
  }
  for (const Pending& p : now) Complete(*st_, p);
  return now.size();
}

void GatedSource::FailOffset(uint64_t offset, std::string cause) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->fail_offsets.insert(offset);
  st_->fail_cause = std::move(cause);
}

void GatedSource::FailSize(Status status) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->size_status = std::move(status);
}

size_t GatedSource::outstanding() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->outstanding;
}
size_t GatedSource::peak_outstanding() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->peak_outstanding;
}
size_t GatedSource::held() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->held.size();
}
uint64_t GatedSource::reads_started() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->reads_started;
}
uint64_t GatedSource::reads_completed() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->reads_completed;
}
uint64_t GatedSource::reads_failed() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->reads_failed;
}
uint64_t GatedSource::bytes_returned() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->bytes_returned;
}
void GatedSource::ClearStarted() {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->started.clear();
}

std::vector<ByteRange> GatedSource::started_ranges() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->started;
}
std::vector<ByteRange> GatedSource::held_ranges() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  std::vector<ByteRange> out;
  for (const Pending& p : st_->held) out.push_back(p.range);
  return out;
}
std::vector<uint64_t> GatedSource::held_tags() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  std::vector<uint64_t> out;
  for (const Pending& p : st_->held) out.push_back(p.tag);
  return out;
}

bool GatedSource::WaitFor(const std::function<bool(const GatedSource&)>& pred,
                          std::chrono::milliseconds timeout) {
  // The predicate calls the public (locking) accessors, so poll it without
  // the lock held, waking on every gate event and at least every millisecond.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred(*this)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::unique_lock<std::mutex> lock(st_->mu);
    st_->changed.wait_for(lock, std::chrono::milliseconds(1));
  }
}

bool GatedSource::WaitForOutstanding(size_t n,
                                     std::chrono::milliseconds timeout) {
  return WaitFor([n](const GatedSource& g) { return g.outstanding() == n; },
                 timeout);
}

bool GatedSource::WaitForHeld(size_t n, std::chrono::milliseconds timeout) {
  return WaitFor([n](const GatedSource& g) { return g.held() == n; }, timeout);
}

bool GatedSource::WaitForStarted(uint64_t n,
                                 std::chrono::milliseconds timeout) {
  return WaitFor([n](const GatedSource& g) { return g.reads_started() >= n; },
                 timeout);
}

}  // namespace rangeio::testing
