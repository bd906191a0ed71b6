#include "rangeio/completion_queue.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "util/mutex.h"

namespace rangeio {

struct CompletionQueue::State {
  detail::Mutex mu;
  detail::CondVar cv;
  std::deque<Completion> done GUARDED_BY(mu);
  bool closed GUARDED_BY(mu) = false;
};

CompletionQueue::CompletionQueue() : state_(std::make_unique<State>()) {}
CompletionQueue::~CompletionQueue() = default;

std::shared_ptr<CompletionQueue> CompletionQueue::Make() {
  return std::shared_ptr<CompletionQueue>(new CompletionQueue());
}

void CompletionQueue::Push(uint64_t tag, Result<Slice> result) {
  {
    detail::MutexLock lk(state_->mu);
    if (!state_->closed) {
      state_->done.push_back({tag, std::move(result)});
      state_->cv.NotifyOne();
      return;
    }
  }
  // Closed: `result` is released here, outside the lock.
}

std::function<void(Result<Slice>)> CompletionQueue::Callback(uint64_t tag) {
  return [self = shared_from_this(), tag](Result<Slice> r) {
    self->Push(tag, std::move(r));
  };
}

ReadOptions CompletionQueue::Options(uint64_t tag_base, uint64_t end_tag,
                                     ReadOptions options) {
  options.on_result = [self = shared_from_this(), tag_base](RangeResult r) {
    self->Push(tag_base + r.index, r.status.ok()
                                       ? Result<Slice>(std::move(r.bytes))
                                       : Result<Slice>(std::move(r.status)));
  };
  options.on_end = [self = shared_from_this(), end_tag](Status st) {
    if (!st.ok()) self->Push(end_tag, std::move(st));
  };
  return options;
}

std::vector<CompletionQueue::Completion> CompletionQueue::Wait(
    std::chrono::nanoseconds timeout, size_t max) {
  std::vector<Completion> out;
  detail::MutexLock lk(state_->mu);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (state_->done.empty() && !state_->closed) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return out;
    state_->cv.WaitFor(lk, deadline - now);
  }
  const size_t n = std::min(max, state_->done.size());
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(std::move(state_->done.front()));
    state_->done.pop_front();
  }
  return out;
}

std::vector<CompletionQueue::Completion> CompletionQueue::TryTake(size_t max) {
  return Wait(std::chrono::nanoseconds(0), max);
}

void CompletionQueue::Close() {
  std::deque<Completion> dropped;  // released outside the lock
  detail::MutexLock lk(state_->mu);
  state_->closed = true;
  dropped.swap(state_->done);
  state_->cv.NotifyAll();
}

bool CompletionQueue::closed() const {
  detail::MutexLock lk(state_->mu);
  return state_->closed;
}

size_t CompletionQueue::size() const {
  detail::MutexLock lk(state_->mu);
  return state_->done.size();
}

}  // namespace rangeio
