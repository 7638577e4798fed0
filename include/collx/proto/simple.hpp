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
#include <collx/proto/credit.hpp>
#include <collx/proto/ids.hpp>
#include <collx/proto/step_flags.hpp>
#include <collx/transport/fifo.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::proto {

struct simple {
  static constexpr proto_id id = proto_id::simple;
  static constexpr const char* name = "simple";
  // Traits for the cost model.
  static constexpr double payload_efficiency = 1.0;
  /// Synchronising transfers on a step's critical path: the payload, then the
  /// counter that publishes it (and the credit counter back).
  static constexpr int step_latency_transfers = 2;
  /// Payload bytes one worker moves per access (a 16-byte vector).
  static constexpr std::size_t grain_bytes = 16;

  /// Simple needs nothing beyond memory both sides can reach.
  template <class Transport>
  static constexpr bool usable_with = true;
  template <class Transport>
  static constexpr bool check_transport() {
    return true;
  }

  /// View: a transport's connection table, providing fifo(src, dst) and the
  /// FIFO geometry (fifo_slots(), fifo_slot_bytes()); see transport/shm.hpp.
  template <class Exec, class View>
  class engine {
   public:
    COLLX_HOST_DEVICE engine(const Exec& ex, const View& view, int rank)
        : ex_(ex), view_(view), rank_(rank) {}

    /// Largest element count one primitive call may move. Half the FIFO, so
    /// that a ring of ranks that all start with a send can never fill every
    /// FIFO at once (which would deadlock).
    template <class T>
    COLLX_HOST_DEVICE std::size_t max_chunk_elems() const {
      return view_.fifo_slot_bytes(id) / sizeof(T) * max_round_steps();
    }
    /// Steps (FIFO slots) a chunk may take: every call of at most one slot's
    /// elements takes one, however few elements it carries.
    COLLX_HOST_DEVICE std::size_t max_round_steps() const {
      return view_.fifo_slots(id) / 2 > 0 ? view_.fifo_slots(id) / 2 : 1;
    }

    template <unsigned F, class T, class Red>
    COLLX_HOST_DEVICE status run(int from, int to, const T* src, T* dst, std::size_t n, const Red& red) {
      constexpr bool R = has(F, recv_in), S = has(F, send_out), Src = has(F, src_in), Dst = has(F, dst_out);
      constexpr bool Reduce = has(F, reduce_in), Post = has(F, post_op);
      static_assert(R || S, "a step without a peer is a local copy, not a protocol step");
      static_assert(R || Src, "a step needs an input");
      static_assert(S || Dst, "a step needs an output");
      static_assert(!Reduce || (R && Src), "reduction combines received data with a local source");

      transport::fifo_ref in{}, out{};
      std::uint64_t rstep = 0, sstep = 0;
      if constexpr (R) {
        in = view_.fifo(from, rank_, id);
        rstep = detail::load_relaxed(&in.ctrl->head);  // this rank is its only writer
      }
      std::uint64_t head_seen = 0;
      if constexpr (S) {
        out = view_.fifo(rank_, to, id);
        sstep = detail::load_relaxed(&out.ctrl->tail);
        head_seen = detail::load_relaxed(&out.ctrl->head_seen);  // sender-owned, like tail
      }
      const std::size_t per_slot = (R ? in.slot_bytes : out.slot_bytes) / sizeof(T);
      const auto g = ex_.workers();

      for (std::size_t done = 0; done < n;) {
        const std::size_t k = n - done < per_slot ? n - done : per_slot;
        if constexpr (R) {
          const std::uint64_t want = rstep;
          const status st = ex_.wait([&] { return detail::load_acquire(&in.ctrl->tail) > want; });
          if (st != status::ok) return st;
        }
        if constexpr (S) {
          const status st = wait_credit(ex_, g, out, sstep, head_seen);
          if (st != status::ok) return st;
        }
        const T* rin = R ? reinterpret_cast<const T*>(in.slot(rstep)) : nullptr;
        T* sout = S ? reinterpret_cast<T*>(out.slot(sstep)) : nullptr;
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

        g.sync();
        ex_.fence_before_post();
        if (g.leader()) {
          if constexpr (R) detail::store_release(&in.ctrl->head, rstep + 1);
          if constexpr (S) detail::store_release(&out.ctrl->tail, sstep + 1);
          if constexpr (R) ex_.notify(from);
          if constexpr (S) ex_.notify(to);
        }
        if constexpr (R) ++rstep;
        if constexpr (S) ++sstep;
        done += k;
      }
      return status::ok;
    }

   private:
    Exec ex_;
    View view_;
    int rank_;
  };
};

}  // namespace collx::proto
