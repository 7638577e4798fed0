// collx/algo/direct.hpp — direct (pairwise) exchange: every rank talks to every
// peer itself, no forwarding.
//
// * all_to_all, all_to_allv, send_recv: rank-rotated rounds. Each (rank, peer)
//   direction is a stream of calls (for all_to_allv and send_recv a 128-byte
//   header call per message: its count, and the data itself where it fits in
//   the other 112 bytes; else the data follows cut into chunks of at most
//   p.max_chunk() elements, or, from the single-copy threshold where peers'
//   memory is readable, the receiver reads it from the sender's buffer: see
//   "message streams" below). In round j rank r makes call j of its stream to (r+k)%P for
//   k = 0..P-1, then call j of its stream from (r-k+P)%P: the pairwise schedule
//   with the steps of a round issued back to back, so a round costs one latency
//   instead of P-1 and no peer is the target of every rank at once.
// * all_reduce: one-shot (every rank sends its whole vector to every peer and
//   reduces all P inputs itself) or two-shot (reduce-scatter then all-gather,
//   both by direct exchange). Inputs are combined in fixed rank order 0..P-1,
//   so every rank computes bitwise identical results; the rank's own input
//   goes through its loopback FIFO, which also makes in-place calls safe.
//   `direct` picks one-shot when the vector fits one chunk (one round), two-shot
//   otherwise; `direct_one_shot` / `direct_two_shot` force one.
// * all_gather, reduce_scatter: the two halves of two-shot on their own.
// * barrier: dissemination; in round d rank r sends a token to r+2^d and waits
//   for one from r-2^d, so nobody leaves before everyone has entered.
//
// Deadlock freedom with bounded FIFOs: every call moves at most half a FIFO
// and both ends of a connection make the same calls in the same rounds. A rank
// in round j has finished receiving round j-1, so when it sends call j the
// receiver has consumed call j-2 and two calls fit; the ranks in the lowest
// round therefore always progress. Written only against the primitives; runs
// on host threads and in CUDA blocks.
#pragma once

#include <collx/algo/cost.hpp>
#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/prims.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::algo {

/// How the direct algorithm runs all_reduce.
enum class shot : std::uint8_t { automatic, one, two };

template <shot Shot>
struct basic_direct {
  static constexpr algo_id id = Shot == shot::one   ? algo_id::direct_one_shot
                                : Shot == shot::two ? algo_id::direct_two_shot
                                                    : algo_id::direct;
  static constexpr const char* name = collx::name(id);

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) {
    return c == coll::all_reduce || c == coll::all_gather || c == coll::reduce_scatter ||
           c == coll::all_to_all || c == coll::all_to_allv || c == coll::send_recv || c == coll::barrier;
  }

  /// Bytes of the call that opens every message of an all_to_allv or
  /// send_recv stream: 16 bytes of count header, then the message itself when
  /// it fits in the rest (inline_bytes), which then takes no call of its own.
  /// The call has one size whatever the count, so that two ranks that disagree
  /// on a count still exchange equal calls and the receiver reports the
  /// mismatch before it reads any data.
  static constexpr std::size_t header_call_bytes = 128;
  static constexpr std::size_t inline_bytes = header_call_bytes - 16;
  static constexpr double header_bytes = header_call_bytes;
  /// Bytes of the token a rank sends each peer whose messages it read in
  /// place (single copy), so that the peer may return.
  static constexpr std::size_t token_bytes = 16;

  /// α-β-γ terms on the critical path for `bytes` (the collective's size as
  /// nccl-tests counts it) on P ranks: steps, bytes sent per rank, bytes
  /// reduced (see algo/cost.hpp). A round of calls to different peers is one
  /// step; the block a rank sends itself goes through its loopback FIFO and is
  /// a local copy, not a sent byte or a step. One rank only copies locally.
  /// all_reduce: the automatic form is one-shot when the vector fits one chunk
  /// of the protocol's FIFO (x.chunk_bytes), as run() decides from the same
  /// geometry (p.max_chunk()).
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes,
                                                     const cost_context& x = {}) {
    if (P <= 1) return {0, 0, 0};
    const double p = P, f = (p - 1) / p;
    // Across nodes each rank sends to its P − L peers on other nodes what it
    // sends to every peer: node_bytes = L · (P − L) / (P − 1) · bytes_sent.
    // local: the own block through the loopback FIFO (twice, in and out).
    // all_gather and all_to_all copy it into place piece by piece while the
    // peers write (not counted).
    auto across = [&](cost_terms t, double local) {
      if (placed_in_nodes(P, x)) t.node_bytes = x.node_ranks * (p - x.node_ranks) / (p - 1) * t.bytes_sent;
      t.local_bytes = local;
      return t;
    };
    switch (c) {
      case coll::all_reduce: {
        const bool one = Shot == shot::one || (Shot == shot::automatic && bytes <= x.chunk_bytes);
        return one ? across({1, (p - 1) * bytes, (p - 1) * bytes}, 2 * bytes)
                   : across({2, 2 * f * bytes, f * bytes}, 2 * bytes / p);
      }
      case coll::all_gather: return across({1, f * bytes, 0}, 0);
      case coll::reduce_scatter: return across({1, f * bytes, f * bytes}, 2 * bytes / p);
      case coll::all_to_all: return across({1, f * bytes, 0}, 0);
      // Equal blocks: a round of header calls, then (if there is data that
      // did not ride in them) a round of data calls, which each rank sends
      // after it received the headers of its own round.
      // With single copy (x.single_copy: every block is at least the
      // threshold) the data round becomes the receivers' reads of the
      // senders' buffers (peer bytes), and a round of tokens follows.
      case coll::all_to_allv: {
        const bool in_header = bytes / p <= double(inline_bytes);
        // The own block is copied into place after the first sends, while
        // the peers' headers travel (not counted, cost.hpp's local_bytes).
        if (!in_header && x.single_copy) {
          cost_terms t{2, (p - 1) * (header_bytes + token_bytes), 0};
          t.peer_bytes = f * bytes;
          return t;
        }
        cost_terms t{in_header ? 1.0 : 2.0, (in_header ? 0 : f * bytes) + (p - 1) * header_bytes, 0};
        // Each block that rode in a header is copied out of it, but all
        // those before the last receive overlap the peers' writes: one
        // block counts.
        t.local_bytes = in_header ? bytes / p : 0;
        return t;
      }
      // The benchmark's pattern: one message of `bytes` to one peer and one
      // from another, header round then data round (or the header alone).
      case coll::send_recv: {
        if (bytes > double(inline_bytes) && x.single_copy) {
          cost_terms t{2, header_bytes + token_bytes, 0};
          t.peer_bytes = bytes;
          return t;
        }
        if (bytes > double(inline_bytes)) return {2, bytes + header_bytes, 0};
        cost_terms t{1, header_bytes, 0};
        t.local_bytes = bytes;  // copied out of the header call
        return t;
      }
      case coll::barrier: {  // one 1-byte token per round
        double rounds = 0;
        for (int d = 1; d < P; d *= 2) ++rounds;
        return {rounds, rounds, 0};
      }
      case coll::broadcast:  // not implemented by direct
      case coll::reduce: break;
    }
    return {0, 0, 0};
  }

  /// Blocked collectives address blocks by a.block() and split into stripes;
  /// message streams (all_to_allv, send_recv) and the barrier run whole on one stripe.
  COLLX_HOST_DEVICE static constexpr bool stripe_split(coll c) {
    return c == coll::all_reduce || c == coll::all_gather || c == coll::reduce_scatter ||
           c == coll::all_to_all;
  }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    static_assert(implements(C), "algo::direct does not implement this collective (see C above)");
    if constexpr (C == coll::all_reduce) {
      if (Shot == shot::one || (Shot == shot::automatic && a.count <= p.max_chunk())) return one_shot(p, a);
      return two_shot(p, a);
    } else if constexpr (C == coll::all_gather) {
      return all_gather(p, a);
    } else if constexpr (C == coll::reduce_scatter) {
      return reduce_scatter(p, a);
    } else if constexpr (C == coll::all_to_all) {
      return all_to_all(p, a);
    } else if constexpr (C == coll::all_to_allv) {
      return all_to_allv(p, a);
    } else if constexpr (C == coll::send_recv) {
      return send_recv(p, a);
    } else if constexpr (C == coll::barrier) {
      return barrier(p, a);
    }
  }

 private:
  COLLX_HOST_DEVICE static constexpr std::size_t min(std::size_t x, std::size_t y) { return x < y ? x : y; }
  COLLX_HOST_DEVICE static constexpr std::size_t at(int j, std::size_t n) {
    return static_cast<std::size_t>(j) * n;
  }
  /// Start of block j when n elements are split as evenly as possible over P.
  COLLX_HOST_DEVICE static constexpr std::size_t split(std::size_t n, int j, int P) {
    return n / static_cast<std::size_t>(P) * static_cast<std::size_t>(j) +
           min(static_cast<std::size_t>(j), n % static_cast<std::size_t>(P));
  }

  /// Receives chunk [off, off+n) of the reduction of the P inputs that peer q
  /// sent for this rank, combining them in rank order 0..P-1 into dst.
  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce_in_order(Prims& p, int P, T* dst, std::size_t n) {
    COLLX_TRY(p.recv(0, dst, n));
    for (int q = 1; q < P; ++q) {
      if (q < P - 1) COLLX_TRY(p.recv_reduce(q, dst, dst, n));
      else COLLX_TRY(p.recv_reduce_copy(q, dst, dst, n));  // the last input finishes (avg)
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status one_shot(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    if (P == 1) return p.local_copy(a.send, a.recv, a.count, true);
    const std::size_t chunk = p.max_chunk();
    for (std::size_t off = 0; off < a.count; off += chunk) {
      const std::size_t n = min(chunk, a.count - off);
      for (int k = 0; k < P; ++k) COLLX_TRY(p.send((r + k) % P, a.send + off, n));  // k = 0: loopback
      COLLX_TRY(reduce_in_order(p, P, a.recv + off, n));
    }
    return status::ok;
  }

  /// Reduce-scatter by direct exchange: block j of the input is
  /// send[begin(j), begin(j)+len(j)) and goes to rank j; this rank's reduced
  /// block is written to out. Blocks may differ in length (split()).
  template <class Prims, class T, class Begin, class Len>
  COLLX_HOST_DEVICE static status rs_phase(Prims& p, const schedule_args<T>& a, Begin begin, Len len, T* out,
                                           std::size_t longest) {
    const int P = a.nranks, r = a.rank;
    const std::size_t chunk = p.max_chunk();
    const std::size_t mine = len(r);
    for (std::size_t off = 0; off < longest; off += chunk) {
      for (int k = 0; k < P; ++k) {
        const int j = (r + k) % P;
        const std::size_t lj = len(j), n = off < lj ? min(chunk, lj - off) : 0;
        COLLX_TRY(p.send(j, a.send + begin(j) + off, n));
      }
      if (off < mine) COLLX_TRY(reduce_in_order(p, P, out + off, min(chunk, mine - off)));
    }
    return status::ok;
  }

  /// All-gather by direct exchange: this rank's block `own` goes to every peer;
  /// block q arrives at recv + begin(q). The own block is already in place,
  /// or, with `place`, is copied there piece by piece between the sends and
  /// the receives (the copy then overlaps the wait for the peers).
  template <class Prims, class T, class Begin, class Len>
  COLLX_HOST_DEVICE static status ag_phase(Prims& p, const schedule_args<T>& a, Begin begin, Len len,
                                           const T* own, std::size_t longest, T* place = nullptr) {
    const int P = a.nranks, r = a.rank;
    const std::size_t chunk = p.max_chunk();
    const std::size_t mine = len(r);
    for (std::size_t off = 0; off < longest; off += chunk) {
      if (off < mine) {
        const std::size_t n = min(chunk, mine - off);
        for (int k = 1; k < P; ++k) COLLX_TRY(p.send((r + k) % P, own + off, n));
        // The own block's piece into place, while the peers write what comes next.
        if (place != nullptr) COLLX_TRY(p.local_copy(own + off, place + off, n, false));
      }
      for (int k = 1; k < P; ++k) {
        const int q = (r - k + P) % P;
        const std::size_t lq = len(q);
        if (off < lq) COLLX_TRY(p.recv(q, a.recv + begin(q) + off, min(chunk, lq - off)));
      }
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status two_shot(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t n = a.count;
    if (P == 1) return p.local_copy(a.send, a.recv, n, true);
    auto begin = [&](int j) { return split(n, j, P); };
    auto len = [&](int j) { return split(n, j + 1, P) - split(n, j, P); };
    const std::size_t longest = len(0);
    COLLX_TRY(rs_phase(p, a, begin, len, a.recv + begin(r), longest));
    return ag_phase(p, a, begin, len, a.recv + begin(r), longest);
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce_scatter(Prims& p, const schedule_args<T>& a) {
    const std::size_t c = a.count;
    if (a.nranks == 1) return p.local_copy(a.send, a.recv, c, true);
    auto begin = [&](int j) { return at(j, a.block()); };
    auto len = [&](int) { return c; };
    return rs_phase(p, a, begin, len, a.recv, c);
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_gather(Prims& p, const schedule_args<T>& a) {
    const std::size_t c = a.count;
    const std::size_t s = a.block();
    T* mine = a.recv + at(a.rank, s);
    if (a.nranks == 1) return c > 0 ? p.local_copy(a.send, mine, c, false) : status::ok;
    auto begin = [&](int j) { return at(j, s); };
    auto len = [&](int) { return c; };
    return ag_phase(p, a, begin, len, a.send, c,
                    a.send == mine ? nullptr : mine);  // in place: nothing to copy
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_to_all(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count, s = a.block(), chunk = p.max_chunk();
    if (P == 1) return c > 0 ? p.local_copy(a.send, a.recv, c, false) : status::ok;
    for (std::size_t off = 0; off < c; off += chunk) {
      const std::size_t n = min(chunk, c - off);
      for (int k = 1; k < P; ++k) {
        const int q = (r + k) % P;
        COLLX_TRY(p.send(q, a.send + at(q, s) + off, n));
      }
      // The own block's piece, while the peers write what comes next.
      COLLX_TRY(p.local_copy(a.send + at(r, s) + off, a.recv + at(r, s) + off, n, false));
      for (int k = 1; k < P; ++k) {
        const int q = (r - k + P) % P;
        COLLX_TRY(p.recv(q, a.recv + at(q, s) + off, n));
      }
    }
    return status::ok;
  }

  // ---- message streams (all_to_allv, send_recv) ---------------------------------
  //
  // Message i of a stream is a header call {count, messages in the stream}
  // followed by ceil(count / chunk) data calls. The receiver compares the
  // header with what it posted and stops with status::mismatch, filling
  // a.report, before it reads any data of a message that disagrees.
  //
  // Single copy: where peers' memory is readable (prims::read_peer; process
  // ranks by cross-memory attach), a message to another rank of at least
  // schedule_args::read_in_place_bytes takes no data calls: its header
  // carries the address of the sender's buffer (and a flag, so that ends
  // whose thresholds differ report a mismatch instead of waiting for calls
  // that never come) and the receiver reads it from there,
  // one copy instead of two through the FIFO, while the sender needs no
  // CPU. After its last call of the stream a rank sends one
  // token to every peer it read from; a sender returns only when every peer
  // it let read has sent it, so its buffers stay valid while they are read.
  // Both ends know which messages go so from the counts they agreed on.

  struct call {
    enum kind_t : std::uint8_t { none, header, data } kind = none;
    std::uint32_t msg = 0;
    std::size_t off = 0, n = 0;
  };

  /// Call j of a stream of nmsgs messages; a message of at most in_header
  /// elements rides in its header call, one of at least read_in_place
  /// elements is read by the receiver from the sender's buffer (the header
  /// carries its address) and also takes no data calls.
  template <class Count>
  COLLX_HOST_DEVICE static call locate(std::uint32_t nmsgs, Count count, std::size_t j, std::size_t chunk,
                                       std::size_t in_header, std::size_t read_in_place) {
    for (std::uint32_t i = 0; i < nmsgs; ++i) {
      const std::size_t c = count(i);
      const std::size_t calls = c <= in_header || c >= read_in_place ? 1 : 1 + (c + chunk - 1) / chunk;
      if (j < calls) {
        if (j == 0) return call{call::header, i, 0, 0};
        const std::size_t off = (j - 1) * chunk;
        return call{call::data, i, off, min(chunk, c - off)};
      }
      j -= calls;
    }
    return call{};
  }

  /// Streams of an all_to_allv: one message per peer, from the layout.
  template <class T>
  struct layout_streams {
    const schedule_args<T>& a;
    COLLX_HOST_DEVICE std::uint32_t out_n(int) const { return 1; }
    COLLX_HOST_DEVICE std::uint32_t in_n(int) const { return 1; }
    COLLX_HOST_DEVICE std::size_t out_count(int q, std::uint32_t) const { return a.layout->send_counts[q]; }
    COLLX_HOST_DEVICE std::size_t in_count(int q, std::uint32_t) const { return a.layout->recv_counts[q]; }
    COLLX_HOST_DEVICE const T* out_buf(int q, std::uint32_t) const {
      return a.send + a.layout->send_displs[q];
    }
    COLLX_HOST_DEVICE T* in_buf(int q, std::uint32_t) const { return a.recv + a.layout->recv_displs[q]; }
  };

  /// Streams of a send_recv group, from the plan.
  template <class T>
  struct plan_streams {
    const p2p_plan& g;
    COLLX_HOST_DEVICE std::uint32_t out_n(int q) const { return g.send_begin[q + 1] - g.send_begin[q]; }
    COLLX_HOST_DEVICE std::uint32_t in_n(int q) const { return g.recv_begin[q + 1] - g.recv_begin[q]; }
    COLLX_HOST_DEVICE std::size_t out_count(int q, std::uint32_t i) const {
      return g.sends[g.send_begin[q] + i].count;
    }
    COLLX_HOST_DEVICE std::size_t in_count(int q, std::uint32_t i) const {
      return g.recvs[g.recv_begin[q] + i].count;
    }
    COLLX_HOST_DEVICE const T* out_buf(int q, std::uint32_t i) const {
      return static_cast<const T*>(g.sends[g.send_begin[q] + i].buf);
    }
    COLLX_HOST_DEVICE T* in_buf(int q, std::uint32_t i) const {
      return static_cast<T*>(g.recvs[g.recv_begin[q] + i].buf);
    }
  };

  /// Runs the streams s; own() once, after the first round's sends, so that
  /// a copy it makes overlaps the wait for the peers' first calls.
  template <class Prims, class T, class S, class Own>
  COLLX_HOST_DEVICE static status run_streams(Prims& p, const schedule_args<T>& a, const S& s, int first_k,
                                              Own own) {
    static_assert(16 % sizeof(T) == 0, "count headers are 16 bytes of the schedule's value type");
    constexpr std::size_t H = header_call_bytes / sizeof(T), in_header = inline_bytes / sizeof(T);
    constexpr std::size_t words = header_call_bytes / 8;
    static_assert(sizeof(mismatch_report::header[0]) == header_call_bytes,
                  "a header buffer holds one header call");
    const int P = a.nranks, r = a.rank;
    const std::size_t chunk = p.max_chunk();
    mismatch_report* rep = a.report;
    if (rep == nullptr) return status::invalid_argument;
    const std::size_t single = read_in_place_elems<T>(p, a.read_in_place_bytes);
    // Messages a rank sends itself go through its loopback FIFO.
    auto read_in_place = [&](int q) { return q == r ? no_limit : single; };
    std::uint32_t headers = 0;  // received so far: picks the header buffer
    for (std::size_t j = 0;; ++j) {
      bool any = false;
      for (int k = first_k; k < P; ++k) {
        const int q = (r + k) % P;
        const call c = locate(
            s.out_n(q), [&](std::uint32_t i) { return s.out_count(q, i); }, j, chunk, in_header,
            read_in_place(q));
        if (c.kind == call::none) continue;
        any = true;
        if (c.kind == call::header) {
          std::uint64_t h[words] = {s.out_count(q, c.msg), s.out_n(q)};
          const std::size_t n = s.out_count(q, c.msg);
          if (n <= in_header) {  // the message rides in its header call
            const T* src = s.out_buf(q, c.msg);
            T* dst = reinterpret_cast<T*>(h + 2);
            for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
          } else if (n >= read_in_place(q)) {  // q reads it from here
            h[2] = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(s.out_buf(q, c.msg)));
            h[3] = 1;
          }
          COLLX_TRY(p.send(q, reinterpret_cast<const T*>(h), H));
        } else {
          COLLX_TRY(p.send(q, s.out_buf(q, c.msg) + c.off, c.n));
        }
      }
      if (j == 0) COLLX_TRY(own());
      for (int k = first_k; k < P; ++k) {
        const int q = (r - k + P) % P;
        const call c = locate(
            s.in_n(q), [&](std::uint32_t i) { return s.in_count(q, i); }, j, chunk, in_header,
            read_in_place(q));
        if (c.kind == call::none) continue;
        any = true;
        if (c.kind == call::header) {
          std::uint64_t* h = rep->header[headers++ & 1];
          COLLX_TRY(p.recv(q, reinterpret_cast<T*>(h), H));
          const std::uint64_t want = s.in_count(q, c.msg), nmsgs = s.in_n(q);
          if (h[1] != nmsgs || h[0] != want) {
            // Every worker of the group writes the same values.
            rep->peer = q;
            rep->message = static_cast<int>(c.msg);
            rep->messages = h[1] != nmsgs;
            rep->expected = rep->messages ? nmsgs : want;
            rep->got = rep->messages ? h[1] : h[0];
            return status::mismatch;
          }
          const bool in_place = want > in_header && want >= read_in_place(q);
          if (want > in_header && (h[3] != 0) != in_place) {
            rep->peer = q;
            rep->message = static_cast<int>(c.msg);
            rep->messages = false;
            rep->read_in_place = true;
            rep->expected = in_place;
            rep->got = h[3];
            return status::mismatch;
          }
          if (want > 0 && want <= in_header)
            COLLX_TRY(p.local_copy(reinterpret_cast<const T*>(h + 2), s.in_buf(q, c.msg), want, false));
          else if (in_place) COLLX_TRY(read_peer(p, q, h[2], s.in_buf(q, c.msg), want));
        } else {
          COLLX_TRY(p.recv(q, s.in_buf(q, c.msg) + c.off, c.n));
        }
      }
      if (!any) break;
    }
    if (single == no_limit) return status::ok;
    // The tokens: to every peer this rank read from, then from every peer
    // that read from it (a round of its own, after the stream's last call).
    auto reads_in_place = [&](int q, std::uint32_t nmsgs, auto count) {
      for (std::uint32_t i = 0; i < nmsgs; ++i)
        if (count(i) >= read_in_place(q)) return true;
      return false;
    };
    constexpr std::size_t token_n = token_bytes / sizeof(T);
    const T token[token_n] = {};
    T got[token_n];
    for (int k = first_k; k < P; ++k) {
      const int q = (r - k + P) % P;
      if (reads_in_place(q, s.in_n(q), [&](std::uint32_t i) { return s.in_count(q, i); }))
        COLLX_TRY(p.send(q, token, token_n));
    }
    for (int k = first_k; k < P; ++k) {
      const int q = (r + k) % P;
      if (reads_in_place(q, s.out_n(q), [&](std::uint32_t i) { return s.out_count(q, i); }))
        COLLX_TRY(p.recv(q, got, token_n));
    }
    return status::ok;
  }

  static constexpr std::size_t no_limit = ~std::size_t{0};

  /// Elements from which a message to another rank is read in place
  /// (single copy), or no_limit where the primitives cannot: above what
  /// rides in a header, from schedule_args::read_in_place_bytes.
  template <class T, class Prims>
  COLLX_HOST_DEVICE static std::size_t read_in_place_elems(const Prims& p, std::uint64_t bytes) {
    (void)p;
    if constexpr (requires(Prims & m, T * d) { m.read_peer(0, std::uint64_t{}, d, std::size_t{}); }) {
      if (bytes == ~std::uint64_t{0}) return no_limit;
      const std::size_t n = static_cast<std::size_t>((bytes + sizeof(T) - 1) / sizeof(T));
      constexpr std::size_t above_header = inline_bytes / sizeof(T) + 1;
      return n > above_header ? n : above_header;
    } else {
      (void)bytes;
      return no_limit;
    }
  }
  template <class Prims, class T>
  COLLX_HOST_DEVICE static status read_peer(Prims& p, int q, std::uint64_t addr, T* dst, std::size_t n) {
    if constexpr (requires { p.read_peer(q, addr, dst, n); }) return p.read_peer(q, addr, dst, n);
    else return (void)p, (void)q, (void)addr, (void)dst, (void)n, status::not_supported;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_to_allv(Prims& p, const schedule_args<T>& a) {
    const int r = a.rank;
    if (a.layout == nullptr || a.report == nullptr) return status::invalid_argument;
    const peer_layout& l = *a.layout;
    // The own block needs no header: both counts are this rank's.
    if (l.send_counts[r] != l.recv_counts[r]) {
      a.report->peer = r;
      a.report->expected = l.recv_counts[r];
      a.report->got = l.send_counts[r];
      a.report->messages = false;
      return status::mismatch;
    }
    // The own block into place while the peers' headers are on their way.
    auto own = [&] {
      const std::size_t n = l.send_counts[r];
      return n > 0 ? p.local_copy(a.send + l.send_displs[r], a.recv + l.recv_displs[r], n, false)
                   : status::ok;
    };
    return run_streams(p, a, layout_streams<T>{a}, 1, own);
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status send_recv(Prims& p, const schedule_args<T>& a) {
    if (a.plan == nullptr) return status::invalid_argument;
    // k = 0: messages to self use the loopback.
    return run_streams(p, a, plan_streams<T>{*a.plan}, 0, [] { return status::ok; });
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status barrier(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const T token{};
    T in{};
    for (int d = 1; d < P; d *= 2) {
      COLLX_TRY(p.send((r + d) % P, &token, 1));
      COLLX_TRY(p.recv((r - d % P + P) % P, &in, 1));
    }
    return status::ok;
  }
};

/// The direct algorithm as registered: all_reduce one-shot while the vector fits
/// one chunk, two-shot beyond.
using direct = basic_direct<shot::automatic>;
/// Explicit all_reduce flavours for composition (`all_reduce<algo::direct_one_shot, ...>`).
using direct_one_shot = basic_direct<shot::one>;
using direct_two_shot = basic_direct<shot::two>;

}  // namespace collx::algo
