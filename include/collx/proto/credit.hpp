// collx/proto/credit.hpp — the sender's side of a FIFO's flow control,
// shared by every protocol.
//
// A sender may fill slot `step` once the receiver has consumed step − slots,
// i.e. once head + slots > step. The sender keeps the last head it loaded
// (head_seen, in its connection cache and, for the next call, in its own
// line) and loads the receiver's line, a cross-core miss, only when that
// value says the FIFO is full.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/error.hpp>
#include <collx/proto/arrival.hpp>
#include <collx/proto/conn_cache.hpp>
#include <collx/transport/fifo.hpp>

#include <cstdint>

namespace collx::proto {

/// Waits until slot `c.step` of connection `c` is free. Every worker of the
/// group calls this with the same cached values and leaves with the same
/// result: the leader loads the receiver's head and the group shares that one
/// value (a worker loading it itself could see a newer head than another and
/// take a different branch at the next step).
/// `poll` runs at every look while the slot is not free (a proxied
/// transport's rank drives its network there).
struct no_poll {
  COLLX_HOST_DEVICE void operator()() const {}
};
template <class Exec, class Group, class Poll = no_poll>
COLLX_HOST_DEVICE status wait_credit(const Exec& ex, const Group& g, send_conn& c, const Poll& poll = {}) {
  const std::uint64_t slots = c.fifo.slots, step = c.step;
  if (c.head_seen + slots > step) return status::ok;
  const std::uint64_t* head_word = c.fifo.head;
  const status st = ex.wait([&] {
    if (detail::load_polled(head_word) + slots > step) return true;
    poll();
    return detail::load_polled(head_word) + slots > step;
  });
  if (st != status::ok) return st;
  std::uint64_t head = 0;
  if (g.leader()) {
    head = detail::load_acquire(head_word);
    detail::store_relaxed(c.fifo.head_seen, head);  // kept for the next primitives object
  }
  c.head_seen = g.broadcast(head);
  return status::ok;
}

/// The receiver's post that frees its slots up to `head` (the sender waits on
/// it before overwriting them), by the leader after the group's last access
/// to the slot and the group barrier: a release store, unless the executor
/// offers its own (exec::cuda::post_freed: a plain store where the block
/// barrier is trusted to order the reads, as NCCL's receivers post).
template <class Exec, class Word>
COLLX_HOST_DEVICE void post_head(const Exec& ex, Word* head, Word value) {
  if constexpr (requires { ex.post_freed(head, value); }) ex.post_freed(head, value);
  else detail::store_release(head, value);
}

/// The sender's post that publishes its slot up to `tail` (the receiver
/// waits on it before reading), by the leader after the group barrier: a
/// release store, at the executor's memory scope where it chooses one
/// (exec::cuda::post: GPU scope for a group on one GPU).
template <class Exec, class Word>
COLLX_HOST_DEVICE void post_tail(const Exec& ex, Word* tail, Word value) {
  if constexpr (requires { ex.post(tail, value); }) ex.post(tail, value);
  else detail::store_release(tail, value);
}

/// wait_credit for a connection to rank `to` of `view`: on a departing view
/// (arrival.hpp) the rank reads the network itself while it waits and sends
/// the credits its proxy deferred (the peer may be waiting for them).
template <class Exec, class Group, class View>
COLLX_HOST_DEVICE status wait_credit_on(const Exec& ex, const Group& g, send_conn& c, const View& view,
                                        int to) {
  if constexpr (departing_view<View>) return wait_credit(ex, g, c, [&] { view.drive(to); });
  else return (void)view, (void)to, wait_credit(ex, g, c);
}

}  // namespace collx::proto
