// collx/proto/conn_cache.hpp — a primitives object's copy of its connections'
// step counters, shared by every protocol engine.
//
// A connection's step counters live in the transport's memory: `tail` (steps
// the sender published) and `head` (steps the receiver consumed). Only the
// worker group's leader stores them, once per step, because they are signals
// a peer waits on. If every worker re-read them at each primitive call, a
// worker could read the counter before the leader's store of the previous
// call reached it, write its share of the next step into the slot the peer is
// still reading, or read the previous step's slot (on a GPU a block's
// threads would do exactly that: nothing orders the leader's store before the
// other threads' next load). So, as NCCL's primitives do, every worker loads
// a connection's counters once, the first time the primitives object uses it,
// and then counts steps in its own copy; the shared counters are only
// written. Every worker holds the same values, so the group always takes the
// same branches.
//
// Ordering: a load happens either at the object's first use of the connection
// (the previous primitives object ended with finish(): a group sync after the
// leader's last store) or after an eviction, which syncs the group first. The
// cache holds `Capacity` connections per direction; schedules that talk to
// more peers in one call (direct all_to_all) evict round-robin.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/transport/fifo.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::proto {

/// Connections a primitives object caches per direction where its algorithm
/// does not say (Algo::connections, read by run_stripe): enough for the
/// direct exchange among the 8 GPUs of a node without evictions.
inline constexpr std::size_t default_connections = 8;

/// The receiving side of connection from → this rank.
struct recv_conn {
  int peer = -1;
  transport::fifo_ref fifo{};
  std::uint64_t step = 0;  // next step to consume (== the shared head)
};

/// The sending side of connection this rank → to.
struct send_conn {
  int peer = -1;
  transport::fifo_ref fifo{};
  std::uint64_t step = 0;       // next step to publish (== the shared tail)
  std::uint64_t head_seen = 0;  // the receiver's head as last loaded (credit.hpp)
};

template <class Group, std::size_t Capacity = default_connections>
class conn_cache {
  static_assert(Capacity >= 1, "a connection cache holds at least one connection per direction");

 public:
  /// The receiving side of from → rank, loading it on first use.
  /// `fifo_of(from)` returns the connection's fifo_ref.
  template <class FifoOf>
  COLLX_HOST_DEVICE recv_conn& recv(const Group& g, int from, FifoOf&& fifo_of) {
    return find_or_load(g, recv_.at, nrecv_, next_recv_, from, fifo_of, [](recv_conn& c) {
      c.step = detail::load_relaxed(c.fifo.head);  // this rank is its only writer
    });
  }

  /// The sending side of rank → to, loading it on first use.
  template <class FifoOf>
  COLLX_HOST_DEVICE send_conn& send(const Group& g, int to, FifoOf&& fifo_of) {
    return find_or_load(g, send_.at, nsend_, next_send_, to, fifo_of, [](send_conn& c) {
      c.step = detail::load_relaxed(c.fifo.tail);  // this rank is its only writer
      c.head_seen = detail::load_relaxed(c.fifo.head_seen);
    });
  }

  /// Ends the object's use of its connections: the leader's stores of the
  /// counters happen before any worker's load by a later primitives object.
  COLLX_HOST_DEVICE void finish(const Group& g) {
    if (used_) g.sync();
    used_ = false;
  }

 private:
  template <class Conn, class FifoOf, class Load>
  COLLX_HOST_DEVICE Conn& find_or_load(const Group& g, Conn* conns, std::size_t& n, std::size_t& next,
                                       int peer, FifoOf& fifo_of, Load load) {
    for (std::size_t i = 0; i < n; ++i)
      if (conns[i].peer == peer) return conns[i];
    Conn& c = slot(g, conns, n, next);
    c.peer = peer;
    c.fifo = fifo_of(peer);
    load(c);
    used_ = true;
    return c;
  }

  template <class Conn>
  COLLX_HOST_DEVICE static Conn& slot(const Group& g, Conn* conns, std::size_t& n, std::size_t& next) {
    if (n < Capacity) return conns[n++];
    // Full: reuse the oldest. Its counters may be loaded again later, so the
    // leader's stores to them must reach every worker first.
    g.sync();
    Conn& c = conns[next];
    next = (next + 1) % Capacity;
    return c;
  }

  // Entries are written whole before first use (find_or_load), so the arrays
  // are left uninitialised: a primitives object is built per call, and
  // clearing 16 entries would cost a small call a measurable part of its time.
  template <class Conn>
  union entries {
    COLLX_HOST_DEVICE entries() {}
    Conn at[Capacity];
  };
  entries<recv_conn> recv_;
  entries<send_conn> send_;
  std::size_t nrecv_ = 0, nsend_ = 0, next_recv_ = 0, next_send_ = 0;
  bool used_ = false;
};

namespace conn_detail {
template <class P, class Exec, class View, std::size_t N>
struct engine_of {
  using type = typename P::template engine<Exec, View>;
};
template <class P, class Exec, class View, std::size_t N>
  requires requires { typename P::template engine<Exec, View, N>; }
struct engine_of<P, Exec, View, N> {
  using type = typename P::template engine<Exec, View, N>;
};
}  // namespace conn_detail

/// Protocol P's engine caching N connections per direction, where P's engine
/// takes that number (its third parameter); otherwise P's engine as it is.
template <class P, class Exec, class View, std::size_t N>
using engine_for = typename conn_detail::engine_of<P, Exec, View, N>::type;

}  // namespace collx::proto
