// collx/proto/simple.hpp — the Simple protocol: payload-only slots, credit
// flow control through the connection's head/tail step counters.
//
// Sender: wait until head + slots > tail (a free slot; see credit.hpp), write
// the payload with plain stores, then publish with a
// release store of tail + 1. Receiver: wait
// until tail (acquire) > head, read the slot, then hand it back with a release
// store of head + 1. 100 % payload, one counter round trip of latency per slot.
// Counters are the connection's own and persist across calls.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/error.hpp>
#include <collx/proto/arrival.hpp>
#include <collx/proto/channel.hpp>
#include <collx/proto/conn_cache.hpp>
#include <collx/proto/credit.hpp>
#include <collx/proto/ids.hpp>
#include <collx/proto/step_flags.hpp>
#include <collx/transport/fifo.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace collx::proto {

struct simple {
  static constexpr proto_id id = proto_id::simple;
  static constexpr const char* name = "simple";
  /// Payload bytes per byte moved through the FIFO.
  static constexpr double payload_efficiency = 1.0;
  /// 8 slots × 64 KiB by default keeps a ring's working set in L2 while
  /// giving each primitive call 4 slots to pipeline (collx-perf all_reduce,
  /// 2 processes). Slots are whole 128-byte lines so that every slot starts
  /// on its own cache-line pair.
  static constexpr channel_spec channel{name, 128, 64 * 1024, "COLLX_BUFFSIZE"};
  /// A receiver sees a slot only once its sender has written all of it and
  /// posted it (LL and LL128 flag every line instead): a message shorter
  /// than a slot is stored and then forwarded, not pipelined (the tuner's
  /// fill term, tune/model.hpp).
  static constexpr bool posts_whole_slots = true;

  // Simple needs nothing beyond memory both sides can reach: no needs_* traits
  // (collx/composition.hpp).

  /// View: a transport's connection table, providing fifo(src, dst) and the
  /// FIFO geometry (fifo_slots(), fifo_slot_bytes()); see transport/shm.hpp.
  /// The engine belongs to one primitives object, which owns the executor
  /// and the view it refers to, and caches its connections' step counters
  /// (conn_cache.hpp): call finish() once the object is done.
  template <class Exec, class View, std::size_t Connections = default_connections>
  class engine {
    using group = decltype(std::declval<const Exec&>().workers());

   public:
    /// `ch`: the number of this protocol's FIFO in every connection (proto/list.hpp).
    COLLX_HOST_DEVICE engine(const Exec& ex, const View& view, int rank, int ch, int stripe = 0)
        : ex_(ex), view_(view), rank_(rank), channel_(ch), stripe_(stripe) {}
    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;

    /// Largest element count one primitive call may move. Half the FIFO, so
    /// that a ring of ranks that all start with a send can never fill every
    /// FIFO at once (which would deadlock).
    template <class T>
    COLLX_HOST_DEVICE std::size_t max_chunk_elems() const {
      return view_.fifo_slot_bytes(channel_) / sizeof(T) * max_round_steps();
    }
    /// Steps (FIFO slots) a chunk may take: every call of at most one slot's
    /// elements takes one, however few elements it carries.
    COLLX_HOST_DEVICE std::size_t max_round_steps() const {
      return view_.fifo_slots(channel_) / 2 > 0 ? view_.fifo_slots(channel_) / 2 : 1;
    }

    /// FIFO steps one call of n elements takes (at least 1). A view whose
    /// proxy stores and forwards steps may cut a call shorter than a slot
    /// into several (pipelined_step_bytes), so a schedule that counts steps
    /// must ask.
    template <class T>
    COLLX_HOST_DEVICE std::size_t steps_of_elems(std::size_t n) const {
      std::size_t per_slot = view_.fifo_slot_bytes(channel_) / sizeof(T);
      if constexpr (requires { view_.pipelined_step_bytes(std::size_t{}, std::size_t{}, std::size_t{}); })
        per_slot =
            view_.pipelined_step_bytes(n * sizeof(T), per_slot * sizeof(T), max_round_steps()) / sizeof(T);
      return n <= per_slot ? 1 : (n + per_slot - 1) / per_slot;
    }

    /// Ends this engine's use of its connections (a group sync if it used any).
    COLLX_HOST_DEVICE void finish() { conns_.finish(ex_.workers()); }

    template <unsigned F, class T, class Red>
    COLLX_HOST_DEVICE status run(int from, int to, const T* src, T* dst, std::size_t n, const Red& red) {
      constexpr bool R = has(F, recv_in), S = has(F, send_out), Src = has(F, src_in), Dst = has(F, dst_out);
      constexpr bool Reduce = has(F, reduce_in), Post = has(F, post_op);
      static_assert(R || S, "a step without a peer is a local copy, not a protocol step");
      static_assert(R || Src, "a step needs an input");
      static_assert(S || Dst, "a step needs an output");
      static_assert(!Reduce || (R && Src), "reduction combines received data with a local source");

      const auto g = ex_.workers();
      recv_conn* in = nullptr;
      send_conn* out = nullptr;
      if constexpr (R)
        in = &conns_.recv(g, from, [&](int q) { return view_.fifo(q, rank_, channel_, stripe_); });
      if constexpr (S)
        out = &conns_.send(g, to, [&](int q) { return view_.fifo(rank_, q, channel_, stripe_); });
      std::size_t per_slot = (R ? in->fifo.slot_bytes : out->fifo.slot_bytes) / sizeof(T);
      // A transport whose steps a proxy stores and forwards (proxied.hpp)
      // may cut a call into smaller steps, so that copy, transfer and
      // reduction overlap; both ends compute the same cut from n.
      if constexpr (requires { view_.pipelined_step_bytes(std::size_t{}, std::size_t{}, std::size_t{}); })
        per_slot =
            view_.pipelined_step_bytes(n * sizeof(T), per_slot * sizeof(T), max_round_steps()) / sizeof(T);

      for (std::size_t done = 0; done < n;) {
        const std::size_t k = n - done < per_slot ? n - done : per_slot;
        if constexpr (R) {
          // On a proxied view the rank receives from the network itself
          // while it waits, and a peer that left fails the wait (arrival.hpp).
          const std::uint64_t want = in->step;
          const std::uint64_t* tail = in->fifo.tail;
          const status st = wait_arrival(ex_, view_, from, channel_, want,
                                         [&] { return detail::load_polled(tail) > want; });
          if (st != status::ok) return st;
        }
        if constexpr (S) {
          const status st = wait_credit_on(ex_, g, *out, view_, to);
          if (st != status::ok) return st;
        }
        const T* rin = R ? reinterpret_cast<const T*>(in->fifo.slot(in->step)) : nullptr;
        T* sout = S ? reinterpret_cast<T*>(out->fifo.slot(out->step)) : nullptr;
        const T* s = Src ? src + done : nullptr;
        T* d = Dst ? dst + done : nullptr;

        if constexpr (R && Reduce) {
          if constexpr (S && Dst) detail::reduce_copy<true, Post, 2>(g, rin, s, d, sout, k, red);
          else if constexpr (S) detail::reduce_copy<true, Post, 1>(g, rin, s, sout, nullptr, k, red);
          else detail::reduce_copy<true, Post, 1>(g, rin, s, d, nullptr, k, red);
        } else if constexpr (R) {
          if constexpr (S && Dst) detail::reduce_copy<false, Post, 2>(g, rin, nullptr, d, sout, k, red);
          else if constexpr (S) detail::reduce_copy<false, Post, 1>(g, rin, nullptr, sout, nullptr, k, red);
          else detail::reduce_copy<false, Post, 1>(g, rin, nullptr, d, nullptr, k, red);
        } else {  // local source only: send (and copy unless in place)
          if constexpr (S && Dst) {
            if (d != s) detail::reduce_copy<false, Post, 2>(g, s, nullptr, d, sout, k, red);
            else detail::reduce_copy<false, Post, 1>(g, s, nullptr, sout, nullptr, k, red);
          } else if constexpr (S) {
            detail::reduce_copy<false, Post, 1>(g, s, nullptr, sout, nullptr, k, red);
          } else {
            detail::reduce_copy<false, Post, 1>(g, s, nullptr, d, nullptr, k, red);
          }
        }

        // Every worker's slot accesses, then the leader's release store.
        g.sync();
        ex_.fence_before_post();
        if (g.leader()) {
          if constexpr (R) post_head(ex_, in->fifo.head, in->step + 1);
          // A transport whose proxy moves the slot (transport/proxied.hpp)
          // learns how many of its bytes this step filled.
          if constexpr (S && requires { view_.posted(0, 0, 0, std::uint64_t{}, std::uint32_t{}); })
            view_.posted(rank_, to, channel_, out->step, static_cast<std::uint32_t>(k * sizeof(T)));
          if constexpr (S) post_tail(ex_, out->fifo.tail, out->step + 1);
          // ... and wakes the proxy if it sleeps: a counter moved.
          if constexpr (requires { view_.published(0, 0); }) view_.published(R ? from : -1, S ? to : -1);
          if constexpr (R) ex_.notify(from);
          if constexpr (S) ex_.notify(to);
        }
        if constexpr (R) ++in->step;
        if constexpr (S) ++out->step;
        done += k;
      }
      return status::ok;
    }

   private:
    const Exec& ex_;
    const View& view_;
    int rank_;
    int channel_;
    int stripe_;
    conn_cache<group, Connections> conns_;
  };
};

}  // namespace collx::proto
