// collx/prims.hpp — the primitives: the whole vocabulary an algorithm speaks.
//
// An algorithm never touches flags or FIFOs; it calls these on a prims object
// bound to a protocol engine (which owns the wire format), an executor (which
// owns waiting and the worker group) and a reducer. Peers are named per call,
// so algorithms that change peer every step (RHD, Bruck) use the same object.
//
//   send(to, src, n)                          to ← src
//   recv(from, dst, n)                        dst ← from
//   recv_reduce_send(from, to, src, n)        to ← from ⊕ src
//   recv_reduce_copy(from, src, dst, n)       dst ← post(from ⊕ src)
//   recv_reduce(from, src, dst, n)            dst ← from ⊕ src   (no post: a partial result)
//   recv_reduce_copy_send(from, to, src, dst, n)   dst, to ← post(from ⊕ src)
//   recv_copy_send(from, to, dst, n)          dst, to ← from
//   copy_send(to, src, dst, n)                dst, to ← src   (no copy if dst == src)
//   local_copy(src, dst, n, finish)           dst ← src, post() applied if finish
//   recv_reduce_copy(from, src, dst, n, finish)    dst ← from ⊕ src, post() only if finish
//                                             (partial results that are reduced further)
//
// Peer memory, for transports whose ranks load and store each other's memory
// (Transport::peer_buffer_access; the View provides peer_buffer and the barrier
// words: barrier_word, barrier_seen, barrier_post):
//   buffer(q), buffer_elems()                 rank q's registered buffer (every rank
//                                             may load/store it); buffer(rank) doubles
//                                             as this rank's scratch between barriers
//   local_reduce(a, b, dst, n, finish)        dst ← a ⊕ b (post() if finish), local
//   local_reduce_many(src, k, dst, n, finish) dst ← src[0] ⊕ … ⊕ src[k-1], all loaded first
//   barrier()                                 every rank's earlier loads/stores of peer
//                                             buffers happen before any rank's later ones
// A call split into stripes (collx/stripes.hpp) gives each stripe its own
// share of every buffer, its own barrier lines and its own published user
// buffers, so a stripe's peer-memory accesses never meet another's and its
// barriers synchronise the same stripe of every rank only.
//
// Switch channel (Transport::multicast; the View provides switch_channel):
//   mc_load_reduce(off, dst, n, finish)       dst ← ⊕ over ranks q of buffer(q)[off, off + n)
//   mc_store(off, src, n)                     buffer(q)[off, off + n) ← src for every q
//
// Peer user buffers (single copy; Transport::user_buffer_access, host only):
//   single_copy_min_bytes()                   calls from this size use the ones below
//   publish_user_buffers(send, recv, count)   store this call's addresses, then barrier()
//   user_buffer(q, recv_side)                 q's buffer if loadable here (same process)
//   read_user(q, recv_side, off, dst, n)      dst ← q's buffer [off, off + n), one copy
//   user_in_place(q)                          whether q's call is in place (send == recv)
//   single_copy_one_shot_bytes()              all_reduce up to this size: one-shot (where
//                                             the view sets it: GPU windows)
//   can_write_user()                          whether write_user may be used (same on all ranks)
//   write_user(q, off, src, n)                q's recv buffer [off, off + n) ← src, one copy
//   read_peer(q, addr, dst, n)                dst ← n elements at address addr of q's address
//                                             space (an address q sent in a message), one copy
//   user_multicast(recv_side)                 the side's buffers are one multicast range
//   mc_user_load_reduce(off, dst, n, finish)  dst ← ⊕ over ranks q of q's send [off, off + n)
//   mc_user_store(off, src, n)                q's recv [off, off + n) ← src for every q
//
// Workers: every call is made by every worker of the executor's group with the
// same arguments; the group splits the elements and its leader posts.
//
// Calls with n == 0 move nothing and touch no counter, so both sides of a
// connection must agree on n (they do: schedules derive it from the same
// arguments). Every call returns status::ok or the first failure (timeout,
// aborted); after a failure the connection state is undefined and the
// communicator must be torn down.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/error.hpp>
#include <collx/proto/conn_cache.hpp>
#include <collx/proto/list.hpp>
#include <collx/proto/step_flags.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace collx {

/// Connections: how many connections per direction the protocol engine
/// caches (its algorithm's Algo::connections, through run_stripe).
template <class Proto, class Exec, class View, class T, class Red,
          std::size_t Connections = proto::default_connections>
class prims {
 public:
  using value_type = T;
  using engine_type = proto::engine_for<Proto, Exec, View, Connections>;

  /// One primitives object serves one call of one rank (one worker group):
  /// it holds the call's executor (so the call has one deadline) and view,
  /// and the protocol engine caches the connections' step counters for the
  /// object's lifetime. The destructor ends that use with a group sync, so
  /// every worker of the group must construct and destroy it together.
  COLLX_HOST_DEVICE prims(const Exec& ex, const View& view, int rank, const Red& red)
      : prims(ex, view, rank, red, proto::channel_of<Proto>) {}
  /// The same on channel `channel`: for proto::runtime<Ps...> (proto/runtime.hpp),
  /// the channel of the protocol chosen for this call.
  /// `stripe` of `nstripes`: a call split into stripes runs one primitives object
  /// per stripe (collx/stripes.hpp), on that stripe's FIFOs of every connection and
  /// with that stripe's share of the rank's scratch buffer.
  COLLX_HOST_DEVICE prims(const Exec& ex, const View& view, int rank, const Red& red, int channel,
                          int stripe = 0, int nstripes = 1)
      : ex_(ex),
        view_(view),
        engine_(ex_, view_, rank, channel, stripe),
        red_(red),
        rank_(rank),
        stripe_(stripe),
        nstripes_(nstripes) {}
  COLLX_HOST_DEVICE ~prims() { engine_.finish(); }
  prims(const prims&) = delete;
  prims& operator=(const prims&) = delete;

  /// The executor every wait of this call goes through.
  COLLX_HOST_DEVICE const Exec& executor() const { return ex_; }

  /// Largest n one call may carry in a schedule where every rank sends before
  /// it receives (a ring): larger calls could fill every FIFO and deadlock.
  COLLX_HOST_DEVICE std::size_t max_chunk() const { return engine_.template max_chunk_elems<T>(); }
  /// FIFO steps one chunk may occupy (max_chunk() in full steps): a schedule
  /// that cuts a chunk into several calls must count each call's steps.
  COLLX_HOST_DEVICE std::size_t max_round_steps() const { return engine_.max_round_steps(); }
  /// FIFO steps one call of n elements takes (at least 1): a call shorter
  /// than a step may take several where the transport cuts it (a proxy's
  /// pipelining), so a schedule that counts steps asks here.
  COLLX_HOST_DEVICE std::size_t steps_of(std::size_t n) const {
    if constexpr (requires { engine_.template steps_of_elems<T>(n); })
      return engine_.template steps_of_elems<T>(n);
    else {
      const std::size_t step = max_round_steps() > 0 ? max_chunk() / max_round_steps() : 1;
      return step == 0 || n <= step ? 1 : (n + step - 1) / step;
    }
  }

  COLLX_HOST_DEVICE status send(int to, const T* src, std::size_t n) {
    using namespace proto;
    return engine_.template run<send_out | src_in>(-1, to, src, no_dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv(int from, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | dst_out>(from, -1, no_src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_reduce_send(int from, int to, const T* src, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | src_in | reduce_in | send_out>(from, to, src, no_dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_reduce_copy(int from, const T* src, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | src_in | reduce_in | dst_out | post_op>(from, -1, src, dst, n,
                                                                                  red_);
  }
  COLLX_HOST_DEVICE status recv_reduce(int from, const T* src, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | src_in | reduce_in | dst_out>(from, -1, src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_reduce_copy(int from, const T* src, T* dst, std::size_t n, bool finish) {
    using namespace proto;
    if (finish) return recv_reduce_copy(from, src, dst, n);
    return engine_.template run<recv_in | src_in | reduce_in | dst_out>(from, -1, src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_reduce_copy_send(int from, int to, const T* src, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | src_in | reduce_in | dst_out | send_out | post_op>(from, to, src,
                                                                                             dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_copy_send(int from, int to, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | dst_out | send_out>(from, to, no_src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status copy_send(int to, const T* src, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<src_in | dst_out | send_out>(-1, to, src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status local_copy(const T* src, T* dst, std::size_t n, bool finish) {
    const auto g = ex_.workers();
    if (finish && Red::has_post) detail::reduce_copy<false, true, 1>(g, src, nullptr, dst, nullptr, n, red_);
    else if (src != dst) detail::reduce_copy<false, false, 1>(g, src, nullptr, dst, nullptr, n, red_);
    g.sync();
    return status::ok;
  }

  // ---- peer memory ----------------------------------------------------------------
  // A stripe's share of each buffer (256-byte aligned), at the same place in
  // every rank's buffer, so stripes never meet in a buffer.
  COLLX_HOST_DEVICE std::size_t stripe_buffer_bytes() const {
    return view_.peer_buffer_bytes() / static_cast<std::size_t>(nstripes_) / 256 * 256;
  }
  COLLX_HOST_DEVICE T* buffer(int rank) const {
    return reinterpret_cast<T*>(view_.peer_buffer(rank) +
                                static_cast<std::size_t>(stripe_) * stripe_buffer_bytes());
  }
  COLLX_HOST_DEVICE std::size_t buffer_elems() const { return stripe_buffer_bytes() / sizeof(T); }
  /// Where this stripe's share starts, in elements of T from a buffer's start.
  COLLX_HOST_DEVICE std::size_t stripe_elems() const {
    return static_cast<std::size_t>(stripe_) * stripe_buffer_bytes() / sizeof(T);
  }

  COLLX_HOST_DEVICE status local_reduce(const T* a, const T* b, T* dst, std::size_t n, bool finish) {
    const auto g = ex_.workers();
    if (finish && Red::has_post) detail::reduce_copy<true, true, 1>(g, a, b, dst, nullptr, n, red_);
    else detail::reduce_copy<true, false, 1>(g, a, b, dst, nullptr, n, red_);
    g.sync();
    return status::ok;
  }

  /// dst[0, n) ← src[0] ⊕ src[1] ⊕ … ⊕ src[nsrc-1] (left to right: the bits of
  /// a chain of local_reduce calls; post() if finish), local or peers' loadable
  /// memory; 1 <= nsrc <= reduce_many_max. Every source of an element
  /// is loaded before any is combined. dst may alias src[0] only. Another
  /// count: status::invalid_argument, nothing written.
  static constexpr int reduce_many_max = detail::reduce_many_max;
  COLLX_HOST_DEVICE status local_reduce_many(const T* const* src, int nsrc, T* dst, std::size_t n,
                                             bool finish) {
    if (nsrc < 1 || nsrc > reduce_many_max) return status::invalid_argument;  // the loop takes at most 8
    const auto g = ex_.workers();
    if (finish && Red::has_post) detail::reduce_many<true>(g, src, nsrc, dst, n, red_);
    else detail::reduce_many<false>(g, src, nsrc, dst, n, red_);
    g.sync();
    return status::ok;
  }

  // ---- switch channel (multicast) ---------------------------------------------------
  // Where the transport offers one (Transport::multicast; the View provides
  // switch_channel(rank)): the two operations of an NVSwitch multicast
  // address over every rank's registered buffer. Offsets are elements of T
  // from each buffer's start; like every peer-memory access, they belong
  // between barriers.
  static constexpr bool multicast = requires(const View& v) { v.switch_channel(0); };

  /// dst[0, n) ← ⊕ over ranks of their buffer [off, off + n), post() if
  /// finish; this rank's copy first, then rank+1, … (a fixed order). dst may
  /// be this rank's own buffer at off.
  COLLX_HOST_DEVICE status mc_load_reduce(std::size_t off, T* dst, std::size_t n,
                                          bool finish) requires multicast {
    view_.switch_channel(rank_).load_reduce(ex_.workers(), stripe_elems() + off, dst, n, red_, finish);
    return status::ok;
  }
  /// Whether mc_store writes every rank's buffer with one store per pack (a
  /// multicast address: the switch copies it; emulated on the host) rather
  /// than one store per rank.
  COLLX_HOST_DEVICE bool mc_store_fans_out() const {
    if constexpr (requires { view_.multicast; }) return view_.multicast != nullptr;
    else return false;
  }
  /// Every rank's buffer [off, off + n) ← src[0, n).
  COLLX_HOST_DEVICE status mc_store(std::size_t off, const T* src, std::size_t n) requires multicast {
    view_.switch_channel(rank_).store(ex_.workers(), stripe_elems() + off, src, n, red_);
    return status::ok;
  }

  /// Each rank bumps its own counter (release; the view's barrier_post: one
  /// store where ranks share the words, a store into every rank's memory
  /// where each polls its own) and waits until every rank's counter, where
  /// this rank sees it (barrier_seen), has reached the same value (acquire).
  /// Counters only grow, so a rank already in the next barrier still
  /// satisfies this one.
  COLLX_HOST_DEVICE status barrier() {
    const auto g = ex_.workers();
    const std::uint64_t want = detail::load_relaxed(view_.barrier_word(rank_, stripe_)) + 1;
    if constexpr (requires { view_.alias_fence(); }) view_.alias_fence();
    g.sync();
    ex_.fence_before_post();
    if (g.leader()) {
      view_.barrier_post(rank_, stripe_, want);
      for (int q = 0; q < view_.nranks(); ++q)
        if (q != rank_) ex_.notify(q);
    }
    for (int q = 0; q < view_.nranks(); ++q) {
      const std::uint64_t* w = view_.barrier_seen(rank_, q, stripe_);
      COLLX_TRY(ex_.wait([&] { return detail::load_polled(w) >= want; }));
    }
    g.sync();
    if constexpr (requires { view_.alias_fence(); }) view_.alias_fence();
    return status::ok;
  }

  // ---- peer user buffers (single copy) ---------------------------------------------
  // Where the transport lets ranks read each other's user buffers
  // (Transport::user_buffer_access; the View provides the calls used below).
  // Absent otherwise, so schedules test for them with a requires-expression.
  static constexpr bool user_buffers = requires(const View& v) { v.user_buffer_min_bytes(); };

  /// Smallest call (in bytes) from which schedules read peers' user buffers
  /// directly, or UINT64_MAX where they may not. The same on every rank.
  COLLX_HOST_DEVICE std::uint64_t single_copy_min_bytes() const requires user_buffers {
    return view_.user_buffer_min_bytes();
  }
  /// Publishes this call's send and recv addresses, then barrier(): after it,
  /// every rank may read every rank's buffers until the call's last barrier.
  COLLX_HOST_DEVICE status publish_user_buffers(const T* send, const T* recv,
                                                std::size_t count) requires user_buffers {
    if (ex_.workers().leader())
      view_.publish_user_buffers(rank_, send, recv, std::uint64_t(count) * sizeof(T), stripe_);
    COLLX_TRY(barrier());
    // Peers' buffers are loaded only while their owners are in the call
    // with the same bytes (the view's may_load_peers).
    return view_.may_load_peers(rank_, std::uint64_t(count) * sizeof(T), stripe_);
  }
  /// Registered buffers bound to a multicast address (the View's
  /// user_switch_of; mesh windows of a GPU group on NVSwitch).
  static constexpr bool user_multicast_ops = requires(const View& v) { v.user_switch_of(0, false, 0); };
  /// After publish_user_buffers: whether this call's send (or recv) range is
  /// one range of a multicast address on every rank (same window, same
  /// offset). The same answer on every rank.
  COLLX_HOST_DEVICE bool user_multicast(bool recv_side) const requires user_multicast_ops {
    return view_.user_multicast(rank_, recv_side, stripe_) != nullptr;
  }
  /// dst[0, n) ← ⊕ over ranks of their send [off, off + n), post() if
  /// finish, through the switch (user_multicast(false)); dst may be this
  /// rank's own send at off.
  COLLX_HOST_DEVICE status mc_user_load_reduce(std::size_t off, T* dst, std::size_t n,
                                               bool finish) requires user_multicast_ops {
    view_.user_switch_of(rank_, false, stripe_).load_reduce(ex_.workers(), off, dst, n, red_, finish);
    return status::ok;
  }
  /// Every rank's recv [off, off + n) ← src[0, n), through the switch
  /// (user_multicast(true)).
  COLLX_HOST_DEVICE status mc_user_store(std::size_t off, const T* src,
                                         std::size_t n) requires user_multicast_ops {
    view_.user_switch_of(rank_, true, stripe_).store(ex_.workers(), off, src, n, red_);
    return status::ok;
  }
  /// Rank q's published send (or recv) buffer when it can be loaded directly
  /// (q runs in this process), else nullptr: read it with read_user().
  COLLX_HOST_DEVICE const T* user_buffer(int q, bool recv_side) const requires user_buffers {
    return static_cast<const T*>(view_.loadable_user_buffer(rank_, q, recv_side, stripe_));
  }
  /// dst[0, n) ← rank q's published send (or recv) buffer [off, off + n): one
  /// copy (a load through the pointer, or one read by the transport).
  COLLX_HOST_DEVICE status read_user(int q, bool recv_side, std::size_t off, T* dst,
                                     std::size_t n) requires user_buffers {
    if (n == 0) return status::ok;
    if (const T* src = user_buffer(q, recv_side)) return local_copy(src + off, dst, n, false);
    return split_read(dst, n, [&](std::size_t lo, T* d, std::size_t m) {
      return view_.read_user_buffer(q, recv_side, (off + lo) * sizeof(T), d, m * sizeof(T), stripe_);
    });
  }
  /// Whether read_peer() may be used (the view reads addresses peers hand over).
  static constexpr bool peer_address_reads = requires(const View& v, void* d) {
    v.read_peer_address(0, std::uint64_t{}, d, std::size_t{});
  };
  /// dst[0, n) ← the n elements at address `addr` of rank q's address space,
  /// an address q handed over in a message of this call and keeps valid until
  /// it learns the read is done: one copy (a load through the pointer where
  /// q runs in this process, else one read by the transport).
  COLLX_HOST_DEVICE status read_peer(int q, std::uint64_t addr, T* dst,
                                     std::size_t n) requires peer_address_reads {
    if (n == 0) return status::ok;
    if (const void* src = view_.loadable_peer_address(rank_, q, addr)) {
      COLLX_TRY(view_.may_load_peers(rank_, ~std::uint64_t{0}));  // q is still in the call
      return local_copy(static_cast<const T*>(src), dst, n, false);
    }
    return split_read(dst, n, [&](std::size_t lo, T* d, std::size_t m) {
      return view_.read_peer_address(q, addr + lo * sizeof(T), d, m * sizeof(T));
    });
  }
  /// Largest all_reduce (bytes per rank) that single copy runs one-shot
  /// (algo::nvls); only where the view sets one (GPU windows). Same on every rank.
  COLLX_HOST_DEVICE std::uint64_t single_copy_one_shot_bytes() const requires requires(const View& v) {
    v.user_one_shot_bytes();
  }
  { return view_.user_one_shot_bytes(); }
  /// Whether rank q published one buffer as its send and recv (an in-place call).
  COLLX_HOST_DEVICE bool user_in_place(int q) const requires user_buffers {
    return view_.user_buffers_alias(rank_, q, stripe_);
  }
  /// Whether write_user may be used; the same on every rank.
  COLLX_HOST_DEVICE bool can_write_user() const requires user_buffers {
    return view_.user_buffers_writable();
  }
  /// Rank q's published recv buffer [off, off + n) ← src[0, n): one copy (a
  /// store through the pointer, or one write by the transport). Only into
  /// bytes q itself neither reads nor writes before the call's next barrier.
  /// There is no write into a peer's send buffer: that rank passed it as const.
  COLLX_HOST_DEVICE status write_user(int q, std::size_t off, const T* src,
                                      std::size_t n) requires user_buffers {
    if (n == 0) return status::ok;
    if (void* dst = view_.storable_user_recv(rank_, q, stripe_))
      return local_copy(src, static_cast<T*>(dst) + off, n, false);
    return view_.write_user_recv(q, off * sizeof(T), src, n * sizeof(T), stripe_);
  }

 private:
  /// A transport read of n elements into dst, each worker reading its share
  /// (read(lo, dst + lo, m)); fails on every worker if it failed on any.
  template <class Read>
  COLLX_HOST_DEVICE status split_read(T* dst, std::size_t n, Read read) {
    const auto g = ex_.workers();
    const std::size_t W = static_cast<std::size_t>(g.size()), i = static_cast<std::size_t>(g.index());
    const std::size_t lo = n * i / W, hi = n * (i + 1) / W;
    const status st = hi > lo ? read(lo, dst + lo, hi - lo) : status::ok;
    if (W == 1) return st;
    return g.any(st != status::ok) ? (st != status::ok ? st : status::system_error) : status::ok;
  }

  static constexpr const T* no_src = nullptr;
  static constexpr T* no_dst = nullptr;
  /// Views up to this size are copied in; larger ones (the mesh's, with a
  /// region pointer per rank) are referred to, since the caller's outlives
  /// the call. A copy is indexed by peer at run time, so on a GPU it lived in
  /// local memory: 784 of the 1.9–2.1 KB stack frame of every
  /// gpu::collective_kernel, reserved for every thread the GPU can hold. The
  /// kernel takes its view as a __grid_constant__ parameter, so the
  /// reference reads the parameter itself.
  static constexpr std::size_t view_copied_bytes = 256;
  using view_holder = std::conditional_t<(sizeof(View) <= view_copied_bytes), View, const View&>;
  Exec ex_;
  view_holder view_;
  engine_type engine_;  // refers to ex_ and view_: declared after them
  Red red_;
  int rank_;
  int stripe_ = 0, nstripes_ = 1;
};

}  // namespace collx
