// ring.cc — the io_uring engine's ring: see ring.h.
#include "local/uring/ring.h"

#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <utility>

#include "util/thread_name.h"

namespace rangeio::detail {
namespace {

// user_data of the eventfd read; reads use their slot index.
constexpr uint64_t kWakeTag = UINT64_MAX;

// One read call asks for at most this much: io_uring_prep_read takes a
// 32-bit length, and Linux caps a read at 2 GiB - 4 KiB (MAX_RW_COUNT)
// anyway. 1 GiB is a multiple of every direct-I/O alignment; a longer range
// continues as a short read does.
constexpr uint64_t kMaxReadCall = uint64_t{1} << 30;

// The ring thread submits the reads that completion callbacks queue after
// every this many reads delivered (a run of one sink's reads in one
// OnReadsDone is at most this long), instead of once after all the
// callbacks of a reaped batch: a read that completed first in a batch no
// longer waits for the callbacks of the rest before its successor reaches
// the device. 4 did best against 1 and a whole batch at the same CPU per
// read (bench local, 4 KiB O_DIRECT rows).
constexpr size_t kEagerSubmitEvery = 4;

// With nothing in flight, the ring thread polls for new reads (yielding its
// core) this many times before it sleeps: a Read() that follows soon costs
// no wake-up. Few: while a consumer drives the ring, every poll is a core
// taken from nothing (bench local's no-disk row doubled at 256).
constexpr int kPolls = 16;

// Once a consumer has driven the ring, the ring thread's idle sleep lasts
// at most this long (renewed while consumers keep driving), and reads that
// consumer queues outside Assist (when it releases results) wake nothing:
// it submits them at its next Assist, or the ring thread does one or two
// of these after it stopped. Long enough that a consumer taking its results
// comes back first, short against a disk read's latency.
constexpr std::chrono::microseconds kDriverGrace{100};

// Rounds of submit, reap and deliver in one Assist while reads complete at
// once; each round delivers what the last one's callbacks admitted.
constexpr int kAssistRounds = 8;

// Distinguishes rings for the thread-local record of the ring a thread
// drives (a freed ring's address may be reused).
std::atomic<uint64_t> next_ring_id{1};

}  // namespace

thread_local uint64_t Ring::t_driving = 0;
thread_local uint64_t Ring::t_drove = 0;

Ring::Ring(std::shared_ptr<const FileHandle> file, uint32_t depth, bool nop)
    : file_(std::move(file)),
      depth_(depth),
      nop_(nop),
      id_(next_ring_id.fetch_add(1, std::memory_order_relaxed)),
      slots_(depth),
      slot_buffer_(depth, -1) {
  free_.reserve(depth);
  for (uint32_t s = depth; s > 0; --s) free_.push_back(s - 1);
}

Ring::~Ring() {
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (event_fd_ >= 0) ::close(event_fd_);
}

Status Ring::Start() {
  std::promise<Status> started;
  std::future<Status> result = started.get_future();
  thread_ = std::thread(
      [self = shared_from_this(), &started] { self->Run(&started); });
  Status st = result.get();
  if (!st.ok()) thread_.join();
  return st;
}

void Ring::Submit(LocalRead r) {
  bool wake = false;
  {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    pending_.push_back(std::move(r));
    wake = WakeNeededLocked();
  }
  if (wake) Wake();
}

void Ring::SubmitDirect(std::span<const ReadRequest> reads, ReadSink* sink) {
  bool wake = false;
  {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    for (const ReadRequest& r : reads) {
      pending_.push_back(PlanLocalRead(*file_, r.range, sink, r.tag));
    }
    wake = WakeNeededLocked();
  }
  if (wake) Wake();
}

void Ring::Cancel(ReadSink* sink, uint64_t tag) {
  std::vector<LocalRead> dropped;
  {
    MutexLock lk(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      const bool match =
          it->sink == sink && (tag == Source::kAllReads || it->tag == tag);
      if (!match) {
        ++it;
        continue;
      }
      dropped.push_back(std::move(*it));
      it = pending_.erase(it);
      if (tag != Source::kAllReads) break;
    }
  }
  for (LocalRead& r : dropped) {
    r.buffer.Reset();
    sink->OnReadDone(r.tag, Status::Cancelled("io_uring read of '" +
                                              file_->path() + "' cancelled"));
  }
}

void Ring::Shutdown() {
  {
    MutexLock lk(mu_);
    stop_ = true;
    idle_cv_.NotifyOne();
  }
  Wake();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // a callback dropped the source: the loop ends it
  } else {
    thread_.join();
  }
}

std::string Ring::Describe(bool inline_first) const {
  std::string d = "io_uring, queue depth " + std::to_string(depth_) + ", " +
                  file_->Describe();
  if (inline_first) d += ", inline preadv2(RWF_NOWAIT) first";
  if (fixed_file_) d += ", registered file";
  if (fixed_buffers_) {
    d += ", up to " + std::to_string(fixed_buffers_->max_slots()) +
         " registered 1 MiB buffers and " +
         std::to_string(small_buffers_->slots()) + " of 4 KiB";
  }
  if (nop_) d += ", IORING_OP_NOP instead of reads (no disk)";
  return d + "; " +
         std::to_string(reads_submitted_.load(std::memory_order_relaxed)) +
         " read calls" +
         (fixed_buffers_ ? " (" +
                               std::to_string(fixed_buffers_->taken() +
                                              small_buffers_->taken()) +
                               " into registered buffers)"
                         : std::string()) +
         " in " + std::to_string(enters_.load(std::memory_order_relaxed)) +
         " io_uring_enter calls, " +
         std::to_string(assisted_.load(std::memory_order_relaxed)) +
         " delivered by waiting consumers";
}

void Ring::Run(std::promise<Status>* started) {
  ring_thread_ = std::this_thread::get_id();
  NameThisThread("rio-uring");
  Status st = Setup();
  const bool ok = st.ok();
  started->set_value(std::move(st));  // `started` dies with Start()
  if (ok) Loop();
}

Status Ring::Setup() {
  io_uring_params p{};
  // Any thread may drive the ring, so no SINGLE_ISSUER/DEFER_TASKRUN, and
  // no COOP_TASKRUN: a read's completion work goes to the thread that
  // submitted it, which must be interrupted to run it even when it sleeps
  // elsewhere, or the ring thread would wait on that read for ever.
  p.flags = IORING_SETUP_SUBMIT_ALL;
  // One SQE per read slot plus the eventfd read; the completion queue
  // (twice the entries by default) can never overflow.
  int ret = io_uring_queue_init_params(depth_ + 1, &ring_, &p);
  if (ret == -EINVAL) {  // kernel before 5.18: no SUBMIT_ALL
    p = {};
    ret = io_uring_queue_init_params(depth_ + 1, &ring_, &p);
  }
  if (ret < 0) {
    return Status::FromErrno(-ret, "io_uring_queue_init for '" + file_->path() +
                                       "' (queue depth " +
                                       std::to_string(depth_) + ")");
  }
  ring_ready_ = true;
  const int fd = file_->fd();
  fixed_file_ = io_uring_register_files(&ring_, &fd, 1) == 0;
  // A table entry per 1 MiB slot, and the last for the 4 KiB arena.
  if (file_->direct() &&
      io_uring_register_buffers_sparse(&ring_, depth_ + 1) == 0) {
    fixed_buffers_ = std::make_shared<FixedBuffers>(depth_);
    small_buffers_.reset(new SmallBuffers(depth_, depth_));
  }
  event_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (event_fd_ < 0) {
    return Status::FromErrno(
        errno, "eventfd for the io_uring ring of '" + file_->path() + "'");
  }
  return Status::OK();
}

void Ring::Loop() {
  std::vector<uint32_t> issue;  // slots to submit a read call for
  std::vector<Finished> finished;
  issue.reserve(depth_);
  finished.reserve(depth_);
  bool woken = false;  // the last sleep ended on a wake-up
  for (;;) {
    const Next next = Prepare(&issue, woken);
    woken = false;
    switch (next) {
      case Next::kStop:
        return;
      case Next::kSleep:
        woken = SleepIdle();
        continue;
      case Next::kWait:
        break;
    }
    // Sleeps until a completion (a read, or the eventfd a Read() from
    // another thread writes), without drive_mu_: a consumer may drive
    // meanwhile. A bare system call, as it reads nothing of the ring that
    // the driver writes. Errors are transient (EINTR): the loop comes
    // round again.
    (void)::syscall(__NR_io_uring_enter, ring_.ring_fd, 0, 1,
                    IORING_ENTER_GETEVENTS, nullptr, 0);
    enters_.fetch_add(1, std::memory_order_relaxed);
    {
      MutexLock lk(mu_, MutexLock::Spin::kYes);
      waiting_ = Waiting::kAwake;
      wake_sent_ = false;
    }
    {
      MutexLock drive(drive_mu_, MutexLock::Spin::kYes);
      Reap(&issue, &finished, SIZE_MAX);
    }
    Deliver(&finished, &issue, true);
    finished.clear();
  }
}

Ring::Next Ring::Prepare(std::vector<uint32_t>* issue, bool woken) {
  MutexLock drive(drive_mu_, MutexLock::Spin::kYes);
  bool leave = false;  // to the consumer that drives
  {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    TakePendingLocked(issue);
    if (issue->empty() && free_.size() == depth_) {
      for (int i = 0; i < kPolls && pending_.empty() && !stop_; ++i) {
        lk.Unlock();
        drive.Unlock();
        std::this_thread::yield();
        drive.Lock();
        lk.Lock();
      }
      TakePendingLocked(issue);
      if (issue->empty() && free_.size() == depth_) {
        if (stop_) return Next::kStop;
        // Asleep from here on for Read()s (see WakeNeededLocked).
        waiting_ = Waiting::kIdle;
        idle_bounded_ = consumer_drove_;
        consumer_drove_ = false;
        return Next::kSleep;
      }
    }
    // A consumer drove since this thread last waited on the ring and reads
    // have completed for it to reap: waiting on the ring now would wake this
    // thread for each completion the consumer's own submits post, and the
    // two would take turns at every read. Unless a consumer woke this
    // thread to wait for it, sleep as when idle (bounded: the consumer's
    // completions are this thread's again once it stops driving).
    leave = !woken && consumer_drove_ && io_uring_cq_ready(&ring_) > 0;
    consumer_drove_ = false;
    if (leave) {
      waiting_ = Waiting::kIdle;
      idle_bounded_ = true;
    } else {
      waiting_ = Waiting::kInRing;
    }
  }
  SubmitSlots(issue);
  if (!leave && !wake_armed_) PrepWake();
  if (!leave || io_uring_sq_ready(&ring_) > 0) {
    (void)io_uring_submit(&ring_);  // failures: see the wait in Loop
    enters_.fetch_add(1, std::memory_order_relaxed);
  }
  return leave ? Next::kSleep : Next::kWait;
}

bool Ring::SleepIdle() {
  MutexLock lk(mu_, MutexLock::Spin::kYes);
  while (!wake_sent_ && !stop_) {
    if (!idle_bounded_) {
      idle_cv_.Wait(lk);
    } else if (!idle_cv_.WaitFor(lk, kDriverGrace)) {
      if (!consumer_drove_) break;  // no consumer drove for a while
      consumer_drove_ = false;
    }
  }
  const bool woken = wake_sent_;
  waiting_ = Waiting::kAwake;
  wake_sent_ = false;
  idle_bounded_ = false;
  return woken;
}

size_t Ring::Assist(size_t max_reads) {
  if (Driving() || max_reads == 0) return 0;
  if (!drive_mu_.TryLock()) return 0;  // another thread drives
  t_driving = id_;
  t_drove = id_;
  std::vector<Finished> done;
  size_t delivered = 0;
  {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    consumer_drove_ = true;
  }
  for (int round = 0; round < kAssistRounds && delivered < max_reads; ++round) {
    SubmitQueuedLocked(&assist_issue_);
    Reap(&assist_issue_, &done, max_reads - delivered);
    if (done.empty()) break;
    drive_mu_.Unlock();
    Deliver(&done, nullptr, false);
    delivered += done.size();
    done.clear();
    drive_mu_.LockSpinning();
  }
  SubmitQueuedLocked(&assist_issue_);
  const bool in_flight = free_.size() != depth_;
  const bool completed = io_uring_cq_ready(&ring_) > 0;
  drive_mu_.Unlock();
  t_driving = 0;
  assisted_.fetch_add(delivered, std::memory_order_relaxed);
  if (in_flight) {
    // Reads still to complete (a disk's) are the ring thread's to wait
    // for; completed ones wait for this consumer's next Assist, or for
    // the ring thread's bounded sleep.
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    if (waiting_ == Waiting::kIdle && !wake_sent_ &&
        (!completed || !idle_bounded_)) {
      wake_sent_ = true;
      idle_cv_.NotifyOne();
    }
  }
  return delivered;
}

void Ring::Deliver(std::vector<Finished>* finished,
                   std::vector<uint32_t>* issue, bool eager) {
  std::array<ReadCompletion, kEagerSubmitEvery> batch;
  const size_t n = finished->size();
  size_t since_submit = 0;  // reads delivered since the last submit
  size_t i = 0;
  while (i < n) {
    ReadSink* sink = (*finished)[i].read.sink;
    size_t k = 0;
    for (; i < n && k < batch.size() && (*finished)[i].read.sink == sink;
         ++i, ++k) {
      Finished& f = (*finished)[i];
      batch[k].tag = f.read.tag;
      batch[k].bytes = TakeResult(f.read, std::move(f.status));
    }
    sink->OnReadsDone({batch.data(), k});
    // A result the sink did not take (its stream ended) frees its buffer
    // now, not when the batch's entry is next reused.
    for (size_t j = 0; j < k; ++j) batch[j].bytes = Slice();
    since_submit += k;
    if (eager && since_submit >= kEagerSubmitEvery && i < n) {
      since_submit = 0;
      MutexLock drive(drive_mu_, MutexLock::Spin::kYes);
      SubmitQueuedLocked(issue);
    }
  }
}

void Ring::SubmitQueuedLocked(std::vector<uint32_t>* issue) {
  {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    TakePendingLocked(issue);
  }
  if (issue->empty()) return;
  SubmitSlots(issue);
  (void)io_uring_submit(&ring_);  // failures: the next submit retries
  enters_.fetch_add(1, std::memory_order_relaxed);
}

void Ring::SubmitSlots(std::vector<uint32_t>* issue) {
  for (uint32_t s : *issue) PrepRead(s);
  reads_submitted_.fetch_add(issue->size(), std::memory_order_relaxed);
  issue->clear();
}

void Ring::TakePendingLocked(std::vector<uint32_t>* issue) {
  while (!free_.empty() && !pending_.empty()) {
    const uint32_t s = free_.back();
    free_.pop_back();
    slots_[s] = std::move(pending_.front());
    pending_.pop_front();
    issue->push_back(s);
  }
}

void Ring::Reap(std::vector<uint32_t>* issue, std::vector<Finished>* finished,
                size_t max) {
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    if (finished->size() >= max) break;
    ++seen;
    const uint64_t tag = io_uring_cqe_get_data64(cqe);
    if (tag == kWakeTag) {
      wake_armed_ = false;
      continue;
    }
    LocalRead& r = slots_[tag];
    // A no-op "reads" what it was asked for (its buffer is left as is).
    const int64_t res =
        nop_ ? static_cast<int64_t>(std::min(r.remaining(), kMaxReadCall))
             : cqe->res;
    Status error;
    switch (Advance(*file_, r, res, "io_uring read", &error)) {
      case ReadStep::kMore:
        issue->push_back(static_cast<uint32_t>(tag));
        break;
      case ReadStep::kDone:
        finished->push_back({std::move(r), Status::OK()});
        free_.push_back(static_cast<uint32_t>(tag));
        break;
      case ReadStep::kFailed:
        finished->push_back({std::move(r), std::move(error)});
        free_.push_back(static_cast<uint32_t>(tag));
        break;
    }
  }
  io_uring_cq_advance(&ring_, seen);
}

io_uring_sqe* Ring::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    (void)io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void Ring::PrepRead(uint32_t slot) {
  LocalRead& r = slots_[slot];
  if (r.dst == nullptr) ChooseBuffer(slot);
  io_uring_sqe* sqe = GetSqe();
  const unsigned length =
      static_cast<unsigned>(std::min(r.remaining(), kMaxReadCall));
  const int fd = fixed_file_ ? 0 : file_->fd();
  if (nop_) {
    io_uring_prep_nop(sqe);
  } else if (slot_buffer_[slot] >= 0) {
    io_uring_prep_read_fixed(sqe, fd, r.next_dst(), length, r.next_offset(),
                             slot_buffer_[slot]);
  } else {
    io_uring_prep_read(sqe, fd, r.next_dst(), length, r.next_offset());
  }
  if (fixed_file_) io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
  io_uring_sqe_set_data64(sqe, slot);
}

void Ring::ChooseBuffer(uint32_t slot) {
  LocalRead& r = slots_[slot];
  slot_buffer_[slot] = -1;
  if (fixed_buffers_ && FixedBuffers::Fits(r.want)) {
    slot_buffer_[slot] = fixed_buffers_->Take(&ring_, r);
  } else if (small_buffers_ &&
             SmallBuffers::Fits(r.want, file_->memory_align())) {
    slot_buffer_[slot] = small_buffers_->Take(&ring_, r);
  }
  if (slot_buffer_[slot] < 0) AllocateBuffer(*file_, r);
}

bool Ring::WakeNeededLocked() {
  if (wake_sent_ || t_driving == id_) return false;
  if (waiting_ == Waiting::kInRing) {
    wake_sent_ = true;
    return true;
  }
  if (waiting_ == Waiting::kIdle && !(idle_bounded_ && t_drove == id_)) {
    wake_sent_ = true;
    idle_cv_.NotifyOne();
  }
  return false;
}

void Ring::PrepWake() {
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_read(sqe, event_fd_, &wake_value_, sizeof wake_value_, 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
  wake_armed_ = true;
}

void Ring::Wake() {
  const uint64_t one = 1;
  // Cannot fail short of a counter overflow (2^64 - 1 wake-ups).
  (void)!::write(event_fd_, &one, sizeof one);
}

}  // namespace rangeio::detail
