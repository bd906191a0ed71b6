// ring.h (internal) — the io_uring engine's ring (uring_file.cc wraps it in a
// Source): one ring and one ring thread per open file, and the consumers
// that wait for its reads drive the ring too.
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
//   completions do not wake it; so too, with reads in flight, when it finds
//   that a consumer drove meanwhile and has completions to reap (else the
//   two threads take turns at every read: each of the consumer's submits
//   wakes the one waiting on the ring).
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
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "local/local_read.h"
#include "local/uring/fixed_buffers.h"
#include "rangeio/source.h"
#include "rangeio/status.h"
#include "util/mutex.h"

namespace rangeio::detail {

// See the top of the file.
//
// Thread-safety: every public method may be called from any thread.
class Ring : public std::enable_shared_from_this<Ring> {
 public:
  // A ring of queue depth `depth` for `file`; `nop` submits IORING_OP_NOP
  // instead of each read call (MakeUringNopFile). Start() sets it up.
  Ring(std::shared_ptr<const FileHandle> file, uint32_t depth, bool nop);
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring();

  // Starts the ring thread and waits until it has set the ring up; the
  // kernel's refusal, naming the file, otherwise (the thread has ended).
  Status Start();

  // Queues `r`; the ring thread submits it with whatever else is queued.
  void Submit(LocalRead r) EXCLUDES(mu_);

  // Queues direct reads of non-empty ranges, under one lock (their buffers
  // are chosen on the ring thread).
  void SubmitDirect(std::span<const ReadRequest> reads, ReadSink* sink)
      EXCLUDES(mu_);

  // Source::Cancel: a read still queued for a slot is dropped and completed
  // with Cancelled; one already in the kernel completes as usual (a local
  // read is over in microseconds: its result is dropped by the caller).
  void Cancel(ReadSink* sink, uint64_t tag) EXCLUDES(mu_);

  // Stops the ring thread once every queued and in-flight read has
  // completed. Call once.
  void Shutdown() EXCLUDES(mu_);

  const FileHandle& file() const { return *file_; }
  // True on the ring thread, or on a consumer's thread inside Assist: a
  // read queued there goes out with that driver's next submit.
  bool Driving() const {
    return std::this_thread::get_id() == ring_thread_ || t_driving == id_;
  }

  // See Source::Describe; `inline_first` when Read() tries preadv2 first.
  std::string Describe(bool inline_first) const;

  // Source::Assist: see the top of the file. Returns how many reads it
  // delivered, at most `max_reads`.
  size_t Assist(size_t max_reads) EXCLUDES(mu_, drive_mu_);

 private:
  struct Finished {
    LocalRead read;
    Status status;
  };

  enum class Next { kWait, kSleep, kStop };

  // The ring thread: Setup(), its result to `started`, then Loop().
  void Run(std::promise<Status>* started);

  // Sets up the ring, registers the file (and, for direct reads, the
  // buffers' table) where the kernel allows, and the eventfd.
  Status Setup();

  // The ring thread's loop: Prepare, then wait on the ring, reap and
  // deliver, until Shutdown() and nothing is in flight.
  void Loop() EXCLUDES(mu_, drive_mu_);

  // The ring thread's turn at the ring: submits the queued reads and, with
  // reads in flight, arms the eventfd read (kWait: wait on the ring). With
  // nothing in flight it polls the queue (kPolls), then says kSleep (or
  // kStop once Shutdown() was called); kSleep too, bounded, when a consumer
  // drives and has completions to reap, unless `woken` (a consumer woke
  // this thread to wait on the ring for it).
  Next Prepare(std::vector<uint32_t>* issue, bool woken)
      EXCLUDES(mu_, drive_mu_);

  // Sleeps off the ring (Prepare said kSleep) until a Read() or a consumer
  // needs the ring thread, or Shutdown(). While consumers drive the ring
  // (one did within the last kDriverGrace), the sleep is bounded and
  // renewed: the ring thread comes back for what they left only once they
  // have stopped.
  // True when it ended on a wake-up (not a timeout or Shutdown()).
  bool SleepIdle() EXCLUDES(mu_);

  // Hands the finished reads to their sinks, a run of reads of one sink in
  // one OnReadsDone (the scheduler takes its lock once per call). With
  // `eager` (the ring thread), submits what the callbacks queued every
  // kEagerSubmitEvery reads; a consumer in Assist submits once after.
  void Deliver(std::vector<Finished>* finished, std::vector<uint32_t>* issue,
               bool eager) EXCLUDES(drive_mu_);

  // Submits, without waiting, the reads queued so far (by completion
  // callbacks) and the re-queued short reads in `issue`.
  void SubmitQueuedLocked(std::vector<uint32_t>* issue) REQUIRES(drive_mu_)
      EXCLUDES(mu_);

  // Prepares a read call for each slot in `issue` (emptied).
  void SubmitSlots(std::vector<uint32_t>* issue) REQUIRES(drive_mu_);

  // Moves queued reads into free slots, to be submitted.
  void TakePendingLocked(std::vector<uint32_t>* issue) REQUIRES(drive_mu_, mu_);

  // Takes the completions, up to `max` finished reads: re-queues short
  // reads and -EAGAIN into `issue` and moves finished reads, with their
  // status, to `finished` (their slots are free again).
  void Reap(std::vector<uint32_t>* issue, std::vector<Finished>* finished,
            size_t max) REQUIRES(drive_mu_);

  // A free submission queue entry. The queue has room for every slot plus
  // the eventfd read; should a failed io_uring_enter have left entries
  // behind, they are submitted first.
  io_uring_sqe* GetSqe() REQUIRES(drive_mu_);

  // The read call (or no-op) for the read in `slot`, its buffer chosen
  // first when it has none.
  void PrepRead(uint32_t slot) REQUIRES(drive_mu_);

  // A registered buffer for a read that fits one, else ordinary memory.
  void ChooseBuffer(uint32_t slot) REQUIRES(drive_mu_);

  // After queueing: true when the eventfd must be written (outside the
  // lock) to wake the ring thread from io_uring_enter; notifies it at once
  // when it sleeps off the ring. No wake-up from a thread driving the ring
  // (it submits next), nor, while the ring thread's sleep is bounded, from a
  // consumer that drove the ring (it submits at its next Assist).
  bool WakeNeededLocked() REQUIRES(mu_);

  // Arms the eventfd read that a Wake() completes.
  void PrepWake() REQUIRES(drive_mu_);

  // Writes the eventfd: the ring thread returns from io_uring_enter.
  void Wake();

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

}  // namespace rangeio::detail
