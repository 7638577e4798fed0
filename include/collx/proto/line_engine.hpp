// collx/proto/line_engine.hpp — the protocol engine of LL and LL128: one
// implementation of run<Flags>() over a line format (see lines.hpp).
//
// Per step (one FIFO slot): the sender waits for credit (credit.hpp), then
// writes its lines with the step's flag; the receiver waits line by line for
// the flag, uses the payload, and when the whole slot is consumed hands it
// back with a release store of head + 1. The sender's tail is its own step
// count (nobody waits on it), except where a proxy moves the step
// (transport/proxied.hpp): there the sender notes the step's bytes and
// releases its tail, the proxy sends the lines, and the receiver waits for
// the tail the proxy publishes once the step is whole before it reads the
// lines (their flags still checked); lines from a peer of its own host are
// polled as they land. A team of workers owns a line (one host thread;
// on the device one thread for LL, eight lanes for LL128); host teams take
// batches of lines so that the reduction runs once per batch, not per line.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/error.hpp>
#include <collx/proto/arrival.hpp>
#include <collx/proto/conn_cache.hpp>
#include <collx/proto/credit.hpp>
#include <collx/proto/lines.hpp>
#include <collx/proto/step_flags.hpp>
#include <collx/transport/fifo.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace collx::proto {

template <class Line, class Exec, class View, std::size_t Connections = default_connections>
class line_engine {
  using group = decltype(std::declval<const Exec&>().workers());
  using io = line_io<Line, group>;
  static constexpr std::size_t payload = Line::payload_bytes;
  // Bytes of payload one team member holds per batch.
  static constexpr std::size_t member_bytes =
      io::batch_lines * (io::team_size() == 1 ? payload : io::piece_end(0) - io::piece_begin(0));
  static_assert(io::team_size() == 1 || io::batch_lines == 1,
                "a member's bytes of a batch must be contiguous");

  // One worker reducing its own piece.
  struct solo {
    COLLX_HOST_DEVICE static constexpr int size() { return 1; }
    COLLX_HOST_DEVICE static constexpr int index() { return 0; }
  };

 public:
  /// The engine belongs to one primitives object, which owns the executor
  /// and the view it refers to, and caches its connections' step counters
  /// (conn_cache.hpp): call finish() once the object is done.
  /// `channel`: the number of this protocol's FIFO in every connection (proto/list.hpp);
  /// `stripe`: which of the connection's stripes (transport/shm.hpp).
  COLLX_HOST_DEVICE line_engine(const Exec& ex, const View& view, int rank, int channel, int stripe = 0)
      : ex_(ex), view_(view), rank_(rank), channel_(channel), stripe_(stripe) {}
  line_engine(const line_engine&) = delete;
  line_engine& operator=(const line_engine&) = delete;

  /// Ends this engine's use of its connections (a group sync if it used any).
  COLLX_HOST_DEVICE void finish() { conns_.finish(ex_.workers()); }

  /// Elements of one slot.
  template <class T>
  COLLX_HOST_DEVICE std::size_t step_elems() const {
    return view_.fifo_slot_bytes(channel_) / Line::line_bytes * payload / sizeof(T);
  }
  /// Half the FIFO, as for Simple: a ring whose ranks all send first cannot fill every FIFO.
  template <class T>
  COLLX_HOST_DEVICE std::size_t max_chunk_elems() const {
    return step_elems<T>() * max_round_steps();
  }
  /// Steps (FIFO slots) a chunk may take: every call of at most one step's
  /// elements takes one, however few elements it carries.
  COLLX_HOST_DEVICE std::size_t max_round_steps() const {
    return view_.fifo_slots(channel_) / 2 > 0 ? view_.fifo_slots(channel_) / 2 : 1;
  }
  /// FIFO steps one call of n elements takes (at least 1).
  template <class T>
  COLLX_HOST_DEVICE std::size_t steps_of_elems(std::size_t n) const {
    const std::size_t step = step_elems<T>() > 0 ? step_elems<T>() : 1;
    return n <= step ? 1 : (n + step - 1) / step;
  }

  template <unsigned F, class T, class Red>
  COLLX_HOST_DEVICE status run(int from, int to, const T* src, T* dst, std::size_t n, const Red& red) {
    constexpr bool R = has(F, recv_in), S = has(F, send_out), Src = has(F, src_in), Dst = has(F, dst_out);
    constexpr bool Reduce = has(F, reduce_in), Post = has(F, post_op);
    static_assert(R || S, "a step without a peer is a local copy, not a protocol step");
    static_assert(R || Src, "a step needs an input");
    static_assert(S || Dst, "a step needs an output");
    static_assert(!Reduce || (R && Src), "reduction combines received data with a local source");
    static_assert(8 % sizeof(T) == 0, "line payloads hold whole elements of at most 8 bytes");

    const auto g = ex_.workers();
    recv_conn* in = nullptr;
    send_conn* out = nullptr;
    if constexpr (R)
      in = &conns_.recv(g, from, [&](int q) { return view_.fifo(q, rank_, channel_, stripe_); });
    if constexpr (S)
      out = &conns_.send(g, to, [&](int q) { return view_.fifo(rank_, q, channel_, stripe_); });
    const std::size_t slot_lines = (R ? in->fifo.slot_bytes : out->fifo.slot_bytes) / Line::line_bytes;
    const std::size_t per_step = slot_lines * payload / sizeof(T);
    constexpr int ts = io::team_size();
    // A team's lanes must all exist: a partial team would duplicate another's
    // lines and vote with lanes that are not there. The same on every worker.
    if (g.size() % ts != 0) return status::invalid_argument;
    const auto tile = g.template tile<ts>();
    const int member = g.index() % ts;
    const std::size_t team = static_cast<std::size_t>(g.index() / ts);
    const std::size_t teams = static_cast<std::size_t>(g.size() / ts > 0 ? g.size() / ts : 1);
    const std::size_t pb = io::piece_begin(member), pe = io::piece_end(member);

    for (std::size_t done = 0; done < n;) {
      const std::size_t k = n - done < per_step ? n - done : per_step;
      const std::size_t bytes = k * sizeof(T), nlines = (bytes + payload - 1) / payload;
      if constexpr (S) COLLX_TRY(wait_credit_on(ex_, g, *out, view_, to));
      const std::uint64_t rstep = R ? in->step : 0, sstep = S ? out->step : 0;
      // A cleaning step rewrites the whole slot; the extra lines carry no payload.
      const std::size_t lines = S && Line::clean_step(sstep, S ? out->fifo.slots : 1) ? slot_lines : nlines;
      const auto rflag = Line::flag(rstep), sflag = Line::flag(sstep);
      const std::byte* rslot = R ? in->fifo.slot(rstep) : nullptr;
      std::byte* sslot = S ? out->fifo.slot(sstep) : nullptr;
      const T* s = Src ? src + done : nullptr;
      T* d = Dst ? dst + done : nullptr;
      if constexpr (R && requires { view_.whole_steps_from(0); }) {
        // A proxy writes the slot with plain stores (a socket's recv, an
        // RDMA write), which a reader polling lines could see in pieces:
        // from such a peer, take the slot once its tail says it is whole.
        // The lines' flags are still checked below.
        if (view_.whole_steps_from(from)) {
          const std::uint64_t* tail = in->fifo.tail;
          COLLX_TRY(wait_arrival(ex_, view_, from, channel_, rstep,
                                 [&] { return detail::load_polled(tail) > rstep; }));
        }
      }

      status st = status::ok;
      for (std::size_t l0 = team * io::batch_lines; l0 < lines && st == status::ok;
           l0 += teams * io::batch_lines) {
        const std::size_t nb = lines - l0 < io::batch_lines ? lines - l0 : io::batch_lines;
        // This member's bytes of the batch: [lo, hi) of the step's payload.
        const std::size_t lo = clip(l0 * payload + pb, bytes), hi = clip((l0 + nb - 1) * payload + pe, bytes);
        const std::size_t e0 = lo / sizeof(T), m = (hi - lo) / sizeof(T);
        alignas(16) std::byte rbuf[R ? member_bytes : 1];
        alignas(16) std::byte sbuf[S ? member_bytes : 1];

        if constexpr (R) {
          auto load = [&](std::size_t j) {
            const std::size_t b = (l0 + j) * payload + pb;
            const std::byte* l = rslot + (l0 + j) * Line::line_bytes;
            std::byte* out_at = rbuf + (b - l0 * payload - pb);
            const std::size_t valid = clip(b + pe - pb, bytes) - clip(b, bytes);
            if constexpr (departing_view<View>) {
              // A peer whose lines land in this rank's memory as it writes
              // them (a host mate): poll them, driving the network meanwhile.
              static_assert(io::team_size() == 1, "a proxied view's lines are read by one host thread");
              return wait_arrival(ex_, view_, from, channel_, rstep,
                                  [&] { return io::try_load(l, out_at, valid, rflag); });
            } else {
              return io::wait_load(ex_, tile, l, member, out_at, valid, rflag);
            }
          };
          // Wait on the batch's last line first: polling line by line right
          // behind the writer moves each cache line between the cores several
          // times. The earlier lines are then usually there; each is still
          // checked for its own flag.
          const std::size_t nr = nlines > l0 ? (nlines - l0 < nb ? nlines - l0 : nb) : 0;
          if (nr > 0) st = load(nr - 1);
          if constexpr (group::sequential) {
            // The batch's lines are written by now (x86 makes a core's stores
            // visible in order; elsewhere a prefetch may only come early, and
            // every line's flag is still checked): fetch them all at once.
            const std::byte* first = rslot + l0 * Line::line_bytes;
            for (std::size_t b = 0; b + detail::prefetch_line < nr * Line::line_bytes;
                 b += detail::prefetch_line)
              detail::prefetch_for_read(first + b);
          }
          for (std::size_t j = 0; j + 1 < nr && st == status::ok; ++j) st = load(j);
          if (st != status::ok) break;
        }
        const T* a = R ? reinterpret_cast<const T*>(rbuf) : s + e0;
        const std::byte* sendp = reinterpret_cast<const std::byte*>(a);
        if constexpr (!Reduce && !Post) {
          if constexpr (Dst)
            detail::reduce_copy<false, false, 1>(solo{}, a, nullptr, d + e0, nullptr, m, red);
        } else {
          T* sb = reinterpret_cast<T*>(sbuf);
          const T* b = Reduce ? s + e0 : nullptr;
          if constexpr (S && Dst) detail::reduce_copy<Reduce, Post, 2>(solo{}, a, b, d + e0, sb, m, red);
          else if constexpr (S) detail::reduce_copy<Reduce, Post, 1>(solo{}, a, b, sb, nullptr, m, red);
          else detail::reduce_copy<Reduce, Post, 1>(solo{}, a, b, d + e0, nullptr, m, red);
          sendp = sbuf;
        }
        if constexpr (S) {
          if constexpr (group::sequential) {
            // Ask for every line of the batch before the first store: stores
            // commit in order, so each line the reader still holds would
            // otherwise hold back the next (one line: nothing to overlap).
            std::byte* first = sslot + l0 * Line::line_bytes;
            if (nb * Line::line_bytes > detail::prefetch_line)
              for (std::size_t b = 0; b < nb * Line::line_bytes; b += detail::prefetch_line)
                detail::prefetch_for_write(first + b);
          }
          for (std::size_t j = 0; j < nb; ++j) {
            const std::size_t b = (l0 + j) * payload + pb;
            io::store(tile, sslot + (l0 + j) * Line::line_bytes, member, sendp + (b - l0 * payload - pb),
                      clip(b + pe - pb, bytes) - clip(b, bytes), sflag);
          }
          // The lines are the signal: whoever wrote a batch wakes the reader
          // (a worker's lines may land after the leader's; notify costs a
          // load while nobody sleeps).
          ex_.notify(to);
        }
      }
      COLLX_TRY(ex_.agree(st));  // the whole group leaves together, with the first failure
      ex_.fence_before_post();
      if (g.leader()) {
        if constexpr (R) post_head(ex_, in->fifo.head, rstep + 1);
        if constexpr (S && requires { view_.posted(0, 0, 0, std::uint64_t{}, std::uint32_t{}); }) {
          // A proxy moves this step (transport/proxied.hpp): it sends the
          // lines written, once the tail, released after them, says so.
          view_.posted(rank_, to, channel_, sstep, static_cast<std::uint32_t>(lines * Line::line_bytes));
          detail::store_release(out->fifo.tail, sstep + 1);
        } else if constexpr (S) {
          detail::store_relaxed(out->fifo.tail, sstep + 1);  // the lines are the signal; nobody waits on it
        }
        if constexpr (requires { view_.published(0, 0); }) view_.published(R ? from : -1, S ? to : -1);
        if constexpr (R) ex_.notify(from);
      }
      if constexpr (R) ++in->step;
      if constexpr (S) ++out->step;
      done += k;
    }
    return status::ok;
  }

 private:
  COLLX_HOST_DEVICE static constexpr std::size_t clip(std::size_t v, std::size_t limit) {
    return v < limit ? v : limit;
  }

  const Exec& ex_;
  const View& view_;
  int rank_;
  int channel_;
  int stripe_;
  conn_cache<group, Connections> conns_;
};

}  // namespace collx::proto
