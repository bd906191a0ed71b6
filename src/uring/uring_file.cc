// The io_uring engine: one ring and one ring thread per open file, and the
// consumers that wait for its reads drive the ring too.
//
// Read() (any thread) puts the read on a queue, ReadMany() a grant's direct
// reads under one lock. Whoever drives the ring (holds drive_mu_) moves
// queued reads into free request slots (at most the queue depth in the
// kernel at once), submits them, reaps every completion and hands runs of
// one sink's reads to it in one OnReadsDone (one lock of the stream, one
// return of permits per run); the Reader admits the next reads from inside
// that callback.
//
// Two threads drive:
// - A consumer that waits for a result (Source::Assist): it submits what is
//   queued, reaps what has completed and delivers it on its own thread,
//   round after round while reads complete at once (no-ops, cached data,
//   tmpfs), then submits what its callbacks queued. One thread then does
//   all the work of a read, with no handoff between cores, which is most of
//   a read's cost when the device is fast (bench local, no-disk rows).
// - The ring thread, for everything else: reads that complete later (a
//   disk's), reads queued by threads that do not wait, callers that never
//   wait (callbacks only). It waits for completions in io_uring_enter and
//   submits what completion callbacks queue every kEagerSubmitEvery reads
//   delivered. With nothing in flight it polls the queue briefly (kPolls),
//   then sleeps on idle_cv_, off the ring, so that a consumer's own
//   completions do not wake it.
//
// Waking the ring thread: the ring always has a read of an eventfd in
// flight while the ring thread waits on the ring; a Read() from another
// thread then writes the eventfd once (later Read()s see that a wake-up is
// on its way). Asleep on idle_cv_, it is notified instead, except by a
// consumer that drives the ring and will submit its reads itself at its
// next Assist: then the ring thread's sleep is bounded (kDriverGrace), so
// that reads such a consumer queued and did not come back for still go
// out. A consumer that leaves reads in flight that have not completed (a
// disk's) wakes the ring thread to wait for them.
//
// Buffers: a buffered read gets its buffer from Slice::Allocate on the
// caller's thread, and may complete right there (preadv2 RWF_NOWAIT, when
// asked and not on a thread that drives the ring). A direct read gets its
// buffer from whoever submits it: a registered one when one is free
// (FixedBuffers for 64 KiB..1 MiB, SmallBuffers up to 4 KiB), else aligned
// memory from Slice::Allocate.
//
// Short reads and -EAGAIN are re-queued at once from where they stopped
// (local_read.h's Advance decides; every engine reports the same errors).
// No lock is held while a callback runs: callbacks re-enter Read().
//
// The ring is a plain one (IORING_SETUP_SUBMIT_ALL where the kernel has
// it): SINGLE_ISSUER and DEFER_TASKRUN would tie it to the ring thread.
// The file is registered with the ring (IOSQE_FIXED_FILE) when the kernel
// allows.
//
// Thread-safety: the Source is thread-safe. Inside, drive_mu_ guards the
// ring's queues, its slots, the free-slot list and the registered buffers'
// choice; mu_ guards the queue of reads and the ring thread's sleep and
// wake flags. Lock order: drive_mu_, then mu_.
// Lifetime: the ring thread holds a shared_ptr to the Ring. When a callback
// drops the last reference to the source on the ring thread, Shutdown()
// detaches instead of joining itself, and the thread frees the ring once it
// has nothing in flight. A consumer's Assist runs through a stream that
// holds the source.
#include "uring/uring_file.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mutex.h"
#include "rangeio/planner.h"
#include "thread_name.h"
#include "uring/fixed_buffers.h"

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

class Ring : public std::enable_shared_from_this<Ring> {
 public:
  Ring(std::shared_ptr<const FileHandle> file, uint32_t depth, bool nop)
      : file_(std::move(file)),
        depth_(depth),
        nop_(nop),
        id_(next_ring_id.fetch_add(1, std::memory_order_relaxed)),
        slots_(depth),
        slot_buffer_(depth, -1) {
    free_.reserve(depth);
    for (uint32_t s = depth; s > 0; --s) free_.push_back(s - 1);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring() {
    if (ring_ready_) io_uring_queue_exit(&ring_);
    if (event_fd_ >= 0) ::close(event_fd_);
  }

  // Starts the ring thread and waits until it has set the ring up; the
  // kernel's refusal, naming the file, otherwise (the thread has ended).
  Status Start() {
    std::promise<Status> started;
    std::future<Status> result = started.get_future();
    thread_ = std::thread(
        [self = shared_from_this(), &started] { self->Run(&started); });
    Status st = result.get();
    if (!st.ok()) thread_.join();
    return st;
  }

  // Queues `r`; the ring thread submits it with whatever else is queued.
  void Submit(LocalRead r) EXCLUDES(mu_) {
    bool wake = false;
    {
      MutexLock lk(mu_, MutexLock::Spin::kYes);
      pending_.push_back(std::move(r));
      wake = WakeNeededLocked();
    }
    if (wake) Wake();
  }

  // Queues direct reads of non-empty ranges, under one lock (their buffers
  // are chosen on the ring thread).
  void SubmitDirect(std::span<const ReadRequest> reads, ReadSink* sink)
      EXCLUDES(mu_) {
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

  // Source::Cancel: a read still queued for a slot is dropped and completed
  // with Cancelled; one already in the kernel completes as usual (a local
  // read is over in microseconds: its result is dropped by the caller).
  void Cancel(ReadSink* sink, uint64_t tag) EXCLUDES(mu_) {
    LocalRead r;
    {
      MutexLock lk(mu_);
      auto it = std::find_if(
          pending_.begin(), pending_.end(),
          [&](const LocalRead& p) { return p.sink == sink && p.tag == tag; });
      if (it == pending_.end()) return;
      r = std::move(*it);
      pending_.erase(it);
    }
    r.buffer.Reset();
    sink->OnReadDone(tag, Status::Cancelled("io_uring read of '" +
                                            file_->path() + "' cancelled"));
  }

  // Stops the ring thread once every queued and in-flight read has
  // completed. Call once.
  void Shutdown() EXCLUDES(mu_) {
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

  const FileHandle& file() const { return *file_; }
  // True on the ring thread, or on a consumer's thread inside Assist: a
  // read queued there goes out with that driver's next submit.
  bool Driving() const {
    return std::this_thread::get_id() == ring_thread_ || t_driving == id_;
  }

  // See Source::Describe; `inline_first` when Read() tries preadv2 first.
  std::string Describe(bool inline_first) const {
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

 private:
  struct Finished {
    LocalRead read;
    Status status;
  };

  void Run(std::promise<Status>* started) {
    ring_thread_ = std::this_thread::get_id();
    NameThisThread("rio-uring");
    Status st = Setup();
    const bool ok = st.ok();
    started->set_value(std::move(st));  // `started` dies with Start()
    if (ok) Loop();
  }

  Status Setup() {
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
      return Status::FromErrno(-ret, "io_uring_queue_init for '" +
                                         file_->path() + "' (queue depth " +
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

  void Loop() EXCLUDES(mu_, drive_mu_) {
    std::vector<uint32_t> issue;  // slots to submit a read call for
    std::vector<Finished> finished;
    issue.reserve(depth_);
    finished.reserve(depth_);
    for (;;) {
      switch (Prepare(&issue)) {
        case Next::kStop:
          return;
        case Next::kSleep:
          SleepIdle();
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

  enum class Next { kWait, kSleep, kStop };

  // The ring thread's turn at the ring: submits the queued reads and, with
  // reads in flight, arms the eventfd read (kWait: wait on the ring). With
  // nothing in flight it polls the queue (kPolls), then says kSleep (or
  // kStop once Shutdown() was called).
  Next Prepare(std::vector<uint32_t>* issue) EXCLUDES(mu_, drive_mu_) {
    MutexLock drive(drive_mu_, MutexLock::Spin::kYes);
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
      waiting_ = Waiting::kInRing;
    }
    SubmitSlots(issue);
    if (!wake_armed_) PrepWake();
    (void)io_uring_submit(&ring_);  // failures: see the wait in Loop
    enters_.fetch_add(1, std::memory_order_relaxed);
    return Next::kWait;
  }

  // Sleeps off the ring (Prepare said kSleep) until a Read() or a consumer
  // needs the ring thread, or Shutdown(). While consumers drive the ring
  // (one did within the last kDriverGrace), the sleep is bounded and
  // renewed: the ring thread comes back for what they left only once they
  // have stopped.
  void SleepIdle() EXCLUDES(mu_) {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    while (!wake_sent_ && !stop_) {
      if (!idle_bounded_) {
        idle_cv_.Wait(lk);
      } else if (!idle_cv_.WaitFor(lk, kDriverGrace)) {
        if (!consumer_drove_) break;  // no consumer drove for a while
        consumer_drove_ = false;
      }
    }
    waiting_ = Waiting::kAwake;
    wake_sent_ = false;
    idle_bounded_ = false;
  }

 public:
  // Source::Assist: see the top of the file. Returns how many reads it
  // delivered, at most `max_reads`.
  size_t Assist(size_t max_reads) EXCLUDES(mu_, drive_mu_) {
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
    for (int round = 0; round < kAssistRounds && delivered < max_reads;
         ++round) {
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

 private:
  // Hands the finished reads to their sinks, a run of reads of one sink in
  // one OnReadsDone (the scheduler takes its lock once per call). With
  // `eager` (the ring thread), submits what the callbacks queued every
  // kEagerSubmitEvery reads; a consumer in Assist submits once after.
  void Deliver(std::vector<Finished>* finished, std::vector<uint32_t>* issue,
               bool eager) EXCLUDES(drive_mu_) {
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

  // Submits, without waiting, the reads queued so far (by completion
  // callbacks) and the re-queued short reads in `issue`.
  void SubmitQueuedLocked(std::vector<uint32_t>* issue) REQUIRES(drive_mu_)
      EXCLUDES(mu_) {
    {
      MutexLock lk(mu_, MutexLock::Spin::kYes);
      TakePendingLocked(issue);
    }
    if (issue->empty()) return;
    SubmitSlots(issue);
    (void)io_uring_submit(&ring_);  // failures: the next submit retries
    enters_.fetch_add(1, std::memory_order_relaxed);
  }

  // Prepares a read call for each slot in `issue` (emptied).
  void SubmitSlots(std::vector<uint32_t>* issue) REQUIRES(drive_mu_) {
    for (uint32_t s : *issue) PrepRead(s);
    reads_submitted_.fetch_add(issue->size(), std::memory_order_relaxed);
    issue->clear();
  }

  // Moves queued reads into free slots, to be submitted.
  void TakePendingLocked(std::vector<uint32_t>* issue)
      REQUIRES(drive_mu_, mu_) {
    while (!free_.empty() && !pending_.empty()) {
      const uint32_t s = free_.back();
      free_.pop_back();
      slots_[s] = std::move(pending_.front());
      pending_.pop_front();
      issue->push_back(s);
    }
  }

  // Takes the completions, up to `max` finished reads: re-queues short
  // reads and -EAGAIN into `issue` and moves finished reads, with their
  // status, to `finished` (their slots are free again).
  void Reap(std::vector<uint32_t>* issue, std::vector<Finished>* finished,
            size_t max) REQUIRES(drive_mu_) {
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

  // A free submission queue entry. The queue has room for every slot plus
  // the eventfd read; should a failed io_uring_enter have left entries
  // behind, they are submitted first.
  io_uring_sqe* GetSqe() REQUIRES(drive_mu_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {
      (void)io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  void PrepRead(uint32_t slot) REQUIRES(drive_mu_) {
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

  // A registered buffer for a read that fits one, else ordinary memory.
  void ChooseBuffer(uint32_t slot) REQUIRES(drive_mu_) {
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

  // After queueing: true when the eventfd must be written (outside the
  // lock) to wake the ring thread from io_uring_enter; notifies it at once
  // when it sleeps off the ring. No wake-up from a thread driving the ring
  // (it submits next), nor, while the ring thread's sleep is bounded, from a
  // consumer that drove the ring (it submits at its next Assist).
  bool WakeNeededLocked() REQUIRES(mu_) {
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

  void PrepWake() REQUIRES(drive_mu_) {
    io_uring_sqe* sqe = GetSqe();
    io_uring_prep_read(sqe, event_fd_, &wake_value_, sizeof wake_value_, 0);
    io_uring_sqe_set_data64(sqe, kWakeTag);
    wake_armed_ = true;
  }

  void Wake() {
    const uint64_t one = 1;
    // Cannot fail short of a counter overflow (2^64 - 1 wake-ups).
    (void)!::write(event_fd_, &one, sizeof one);
  }

  const std::shared_ptr<const FileHandle> file_;
  const uint32_t depth_;
  const bool nop_;  // MakeUringNopFile: no-ops instead of reads
  const uint64_t id_;
  std::thread thread_;

  // Set up by the ring thread before Start() returns; then read-only.
  io_uring ring_{};
  bool ring_ready_ = false;
  bool fixed_file_ = false;
  int event_fd_ = -1;
  std::thread::id ring_thread_;

  std::shared_ptr<FixedBuffers> fixed_buffers_;  // direct files only
  SmallBuffers::Handle small_buffers_;           // with fixed_buffers_

  // The ring itself (its queues) is drive_mu_'s too.
  Mutex drive_mu_;
  std::vector<LocalRead> slots_ GUARDED_BY(drive_mu_);  // read per slot
  // Each slot's registered buffer index, or -1.
  std::vector<int> slot_buffer_ GUARDED_BY(drive_mu_);
  std::vector<uint32_t> free_ GUARDED_BY(drive_mu_);  // free slots
  // The eventfd read is in flight.
  bool wake_armed_ GUARDED_BY(drive_mu_) = false;
  uint64_t wake_value_ = 0;  // the eventfd read's destination (the kernel's)
  // Short reads an Assist re-queued, for its next submit.
  std::vector<uint32_t> assist_issue_ GUARDED_BY(drive_mu_);

  std::atomic<uint64_t> reads_submitted_{0};
  std::atomic<uint64_t> enters_{0};
  std::atomic<uint64_t> assisted_{0};  // reads delivered in Assist

  Mutex mu_;
  std::deque<LocalRead> pending_ GUARDED_BY(mu_);
  enum class Waiting { kAwake, kInRing, kIdle };
  // Where the ring thread sleeps: in io_uring_enter, or on idle_cv_.
  Waiting waiting_ GUARDED_BY(mu_) = Waiting::kAwake;
  bool wake_sent_ GUARDED_BY(mu_) = false;  // woken since it went to sleep
  // A consumer drove the ring since the ring thread last slept on idle_cv_;
  // that sleep is then bounded (kDriverGrace).
  bool consumer_drove_ GUARDED_BY(mu_) = false;
  bool idle_bounded_ GUARDED_BY(mu_) = false;
  CondVar idle_cv_;
  bool stop_ GUARDED_BY(mu_) = false;

  // The ring (id_) this thread drives in Assist now, and the one it drove
  // last; 0 for none.
  static thread_local uint64_t t_driving;
  static thread_local uint64_t t_drove;
};

thread_local uint64_t Ring::t_driving = 0;
thread_local uint64_t Ring::t_drove = 0;

class UringFile final : public Source {
 public:
  UringFile(std::shared_ptr<Ring> ring, bool try_inline)
      : ring_(std::move(ring)),
        try_inline_(try_inline && !ring_->file().direct()) {}
  ~UringFile() override { ring_->Shutdown(); }

  const std::string& name() const override { return ring_->file().path(); }
  Result<uint64_t> Size() override { return ring_->file().size(); }
  PlannerOptions DefaultPlannerOptions() const override {
    return PlannerOptions::Local();
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

  std::string Describe() const override { return ring_->Describe(try_inline_); }

 private:
  const std::shared_ptr<Ring> ring_;
  const bool try_inline_;
};

}  // namespace

namespace {

Result<std::shared_ptr<Source>> MakeRing(std::shared_ptr<const FileHandle> file,
                                         const LocalFileOptions& options,
                                         bool nop) {
  auto ring = std::make_shared<Ring>(std::move(file), options.threads, nop);
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
