// endpoint_gate.h (internal) — the attempts the HTTP engine holds back for
// their endpoint's adaptive limit (endpoint_limit.h), first come first
// served per endpoint.
//
// An attempt of a target with an adaptive limit takes one of its slots
// before it is sent and hands it back when it ends; past the limit it waits
// here, marked waiting and gated, until a slot frees or its read's deadline
// passes (ExpireLate: the deadline covers this wait, however long the
// attempts holding the slots take). It keeps its Limiter permit while it
// waits, so nothing is cancelled when the limit shrinks below what is in
// flight.
//
// Thread-safety: the engine's loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <vector>

#include "http/endpoint_limit.h"
#include "http/transfer.h"

namespace rangeio::detail {

class EndpointGate {
 public:
  // True: `t` may start its attempt now (it holds a slot, or its target
  // has no adaptive limit). False: it waits here from `now`.
  bool Enter(Transfer* t, uint64_t now) {
    EndpointLimit* e = t->target->endpoint.get();
    if (e == nullptr || t->holds_slot) return true;
    if (e->TryAcquire()) {
      t->holds_slot = true;
      return true;
    }
    t->waiting = true;
    t->gated = true;
    t->gated_since_ns = now;
    queues_[e].push_back(t);
    return false;
  }

  // The attempt of `t` ended: its slot goes back, with what its answer
  // says about the endpoint.
  static void Leave(Transfer* t, EndpointLimit::Outcome outcome,
                    uint64_t ttfb_ns, uint64_t now) {
    if (!t->holds_slot) return;
    t->holds_slot = false;
    t->target->endpoint->Release(outcome, t->attempt_start_ns, ttfb_ns, now);
  }

  // Takes a waiting `t` out (it is being cancelled).
  void Remove(Transfer* t) {
    if (!t->gated) return;
    auto it = queues_.find(t->target->endpoint.get());
    std::erase(it->second, t);
    if (it->second.empty()) queues_.erase(it);
    t->gated = false;
  }

  // Takes out every waiting attempt whose read's deadline has passed by
  // `now`, and then calls expire(t) for each (which ends its read).
  template <typename Expire>
  void ExpireLate(uint64_t now, Expire expire) {
    std::vector<Transfer*> late;
    for (auto it = queues_.begin(); it != queues_.end();) {
      std::erase_if(it->second, [&](Transfer* t) {
        if (now < t->deadline_ns) return false;
        t->gated = false;
        late.push_back(t);
        return true;
      });
      it = it->second.empty() ? queues_.erase(it) : std::next(it);
    }
    for (Transfer* t : late) expire(t);
  }

  // Calls launch(t) for each waiting attempt that now gets a slot.
  template <typename Launch>
  void AdmitReady(Launch launch) {
    for (auto it = queues_.begin(); it != queues_.end();) {
      std::deque<Transfer*>& q = it->second;
      while (!q.empty() && it->first->TryAcquire()) {
        Transfer* t = q.front();
        q.pop_front();
        t->holds_slot = true;
        t->gated = false;
        launch(t);
      }
      it = q.empty() ? queues_.erase(it) : std::next(it);
    }
  }

 private:
  std::map<EndpointLimit*, std::deque<Transfer*>> queues_;
};

}  // namespace rangeio::detail
