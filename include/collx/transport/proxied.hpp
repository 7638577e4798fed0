// collx/transport/proxied.hpp — the transport of ranks on different hosts:
// private FIFOs whose steps a per-communicator proxy moves over the network
// (TCP sockets, net/proxy.hpp, or InfiniBand verbs, net/ib_proxy.hpp).
// Traits and view; which proxy runs is chosen when the communicator is made
// (the capabilities below hold for both, so one transport type serves both
// and a program chooses the network at run time, COLLX_NET).
//
// For ranks on different hosts. Each rank keeps every FIFO it uses in its
// own private memory, laid out as the shm transport lays out a segment
// (transport/shm.hpp): the send FIFO rank→q and the receive FIFO q→rank of
// every peer q, its counters, its record and its abort word. Protocols see
// these local FIFOs exactly as they see shared ones; a progress thread per
// communicator, the proxy (net/proxy.hpp), moves bytes between hosts:
//
//   sender:   the rank writes a slot, stores the step's byte count
//             (posted(), relaxed) and publishes tail (release); the proxy
//             loads tail (acquire) and sends the step's bytes.
//   receiver: the proxy writes arriving bytes into the slot, then publishes
//             tail (release); the rank reads the slot and publishes head;
//             the proxy loads head (acquire) and sends it back as a credit,
//             which the sender's proxy stores into the send FIFO's head
//             (release), where the protocol's credit check reads it.
//
// Peers on this rank's host (net.hpp decides which) skip the proxy: every
// rank's FIFO memory is then a POSIX shm object that the ranks of its host
// map, a receiver reads the connection src→self in the sender's memory
// (slots and tail as the sender publishes them; it stores head there, where
// the sender's credit check reads it), exactly as on the shm transport, and
// the ranks of a host sleep on one doorbell array (the lowest such rank's),
// so a publisher rings its same-host peer directly. The proxy leaves those
// connections alone; it still carries their aborts, goodbyes, call records
// and deaths (the connection that closes), as for every peer.
//
// Capabilities: bytes are moved by a proxy (needs_proxy), so a peer's FIFO is
// not load/store-able (no direct_load_store), but every step arrives whole
// before its tail is published (delivers_whole_steps): Simple runs, and so
// does LL, whose reader waits for that tail before it checks its lines'
// flags (a host mate's lines it polls as they land, whole_steps_from());
// LL128 is refused by the composition gate (no in-order 128-byte lines
// across hosts); no peer buffers, no user-buffer access, no switch channel
// (nvls is refused). Call records: the proxy forwards each
// call this rank publishes to the next rank and stores the previous rank's
// into its local copy of that record, so the end-of-call comparison with the
// previous rank (comm/watch.hpp) works across hosts. A peer of this host
// is read in its own memory instead (record()), so the slow waits' periodic
// check compares it and probes its pid, as on the shm transport; other
// remote records stay empty here and no remote pid is probed (a dead remote
// rank is seen by its connection instead).
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/transport/fifo.hpp>
#include <collx/transport/shm.hpp>
#include <collx/transport/shm_join.hpp>

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace collx::transport {

/// Non-owning, trivially copyable view of one rank's socket transport state.
struct proxied_view {
  shm_view local{};  // this rank's private FIFOs, counters, records, abort word
  int self = 0;      // this rank
  /// Bytes of each posted step: [(dst · nchannels + channel) · slots + step % slots].
  std::uint32_t* step_bytes = nullptr;
  /// The proxy's account of a failure that rank `rank` caused, or "".
  const void* proxy = nullptr;
  std::string (*failure_text)(const void* proxy, int rank) = nullptr;
  /// Sends what is posted from the calling thread unless the proxy thread is
  /// working (net::proxy::try_progress); false: it was.
  bool (*progress)(const void* proxy) = nullptr;
  /// Non-zero while the proxy sleeps (or is about to); its eventfd wakes it.
  std::uint32_t* proxy_idle = nullptr;
  int proxy_wake_fd = -1;
  /// Per rank: non-zero once it said goodbye on every stream (closed its
  /// communicator), stored (release) after every step it sent was published.
  const std::uint32_t* peer_left = nullptr;
  /// Fails the communicator: this rank waits for step `step` of channel ch
  /// from rank `rank`, which left without sending it (net::proxy::departed).
  void (*on_departed)(const void* proxy, int rank, int ch, std::uint64_t step) = nullptr;
  /// Receives what has arrived from the calling thread unless the proxy
  /// thread is working (a rank waiting for a step drives the network itself:
  /// no hand-off to the proxy thread on a receive's path).
  bool (*receive)(const void* proxy) = nullptr;
  /// Per rank: its FIFO memory mapped here when it shares this rank's host
  /// (base null: reached over the network, or this rank). Null: no peer
  /// shares memory.
  const shm_view* on_host = nullptr;
  /// The doorbells the ranks of this host sleep on, indexed by rank (null:
  /// this rank's own memory's).
  struct doorbell* bells = nullptr;
  /// Non-zero while the proxy defers a credit or call record (null: never).
  const std::uint32_t* net_deferred = nullptr;
  /// Ranks per host where the communicator's ranks fill >= 2 hosts of
  /// >= 2 ranks each, numbered host by host; else 0
  /// (schedule_args::node_ranks: the tree's all_reduce crosses hosts on the
  /// fewest links). From the host ids, whichever way host mates' steps go.
  int node_ranks = 0;

  COLLX_HOST_DEVICE shm_header* header() const { return local.header(); }
  COLLX_HOST_DEVICE std::uint32_t* abort_word() const { return local.abort_word(); }
  /// Rank r's call record: in its own memory where it shares this host (it
  /// publishes there before moving data, so the end-of-call comparison sees
  /// it as on the shm transport), else the local copy the proxy keeps.
  COLLX_HOST_DEVICE rank_record* record(int r) const {
    return r != self && through_memory(r) ? on_host[r].record(r) : local.record(r);
  }
  COLLX_HOST_DEVICE int nranks() const { return local.nranks(); }
  COLLX_HOST_DEVICE std::uint32_t fifo_slots(int ch) const { return local.fifo_slots(ch); }
  COLLX_HOST_DEVICE std::uint32_t fifo_slot_bytes(int ch) const { return local.fifo_slot_bytes(ch); }
  /// Channel ch's FIFO of src→dst; one of them is this rank (the others are
  /// never asked for: every schedule only uses its own connections).
  /// One stripe only: the proxy moves stripe 0's steps (a call is not split into stripes here).
  /// A same-host sender's connection to this rank is in the sender's memory.
  COLLX_HOST_DEVICE fifo_ref fifo(int src, int dst, int ch, int stripe = 0) const {
    if (src != self && through_memory(src)) return on_host[src].fifo(src, dst, ch, stripe);
    return local.fifo(src, dst, ch, stripe);
  }
  /// Whether steps from rank q arrive whole behind their tail: a proxy
  /// writes them with plain stores and then publishes the tail, so a line
  /// protocol (LL) waits for the tail before it reads the lines. False for a
  /// peer of this host, whose lines land here as it stores them.
  COLLX_HOST_DEVICE bool whole_steps_from(int q) const { return !through_memory(q); }
  /// Whether steps from and to rank q go through shared memory (q shares this host).
  COLLX_HOST_DEVICE bool through_memory(int q) const {
    return on_host != nullptr && on_host[q].base != nullptr;
  }
  COLLX_HOST_DEVICE struct doorbell* doorbell(int r) const {
    return bells != nullptr ? bells + r : local.doorbell(r);
  }
  /// This rank's scratch buffer (rabenseifner's reduce works in it). Only
  /// `self`'s is meaningful: peer_buffer_access is false, so no schedule that
  /// composes here touches another rank's.
  COLLX_HOST_DEVICE std::byte* peer_buffer(int r) const { return local.peer_buffer(r); }
  COLLX_HOST_DEVICE std::size_t peer_buffer_bytes() const { return local.peer_buffer_bytes(); }
  /// No single copy across hosts.
  COLLX_HOST_DEVICE std::uint64_t user_buffer_min_bytes() const { return ~std::uint64_t{0}; }

  /// The bytes per step of a primitive call of `call_bytes` over slots of
  /// `slot_bytes` (Simple asks; at most `max_steps` steps per call keeps its
  /// half-FIFO rule). A proxy sends a step only once it is posted whole and
  /// the receiver reads it only once it arrived whole, so a call in one step
  /// (256 KiB in a 512 KiB slot) does its copy in, transfer and reduction
  /// one after the other: a call shorter than a slot is cut into up to 4
  /// steps of at least 64 KiB, which overlap (all_reduce over veth: 128 KiB
  /// 1.9x, 256 KiB 1.35x faster; calls of a slot or more keep whole slots,
  /// where more steps cost 5-8 %: bench/results/net_pipelined_steps.md). A
  /// multiple of 64 bytes (every element size divides it).
  COLLX_HOST_DEVICE static std::size_t pipelined_step_bytes(std::size_t call_bytes, std::size_t slot_bytes,
                                                            std::size_t max_steps) {
    constexpr std::size_t min_step = 64 * 1024, depth = 4;
    const std::size_t d = max_steps < depth ? max_steps : depth;
    if (d <= 1 || call_bytes <= min_step || call_bytes >= slot_bytes) return slot_bytes;
    std::size_t step = (call_bytes + d - 1) / d;
    step = (step + 63) / 64 * 64;
    if (step < min_step) step = min_step;
    return step < slot_bytes ? step : slot_bytes;
  }

  /// The protocol's note, before it publishes step `step` of src→dst on
  /// channel ch, that the step holds `bytes` bytes: the proxy sends only
  /// those. Ordered before the proxy's read by the tail's release/acquire.
  COLLX_HOST_DEVICE void posted(int src, int dst, int ch, std::uint64_t step, std::uint32_t bytes) const {
    (void)src;
    const std::uint32_t slots = local.layout.fifo[ch].slots;
    const std::size_t i =
        (std::size_t(dst) * local.layout.nchannels + std::size_t(ch)) * slots + step % slots;
    detail::store_relaxed(&step_bytes[i], bytes);
  }

  /// After the rank published a counter (a step's tail to rank `to`, a
  /// consumed head from rank `from`; -1: none): wakes the proxy if it is
  /// about to sleep or sleeps. The proxy sets *proxy_idle, then (seq_cst
  /// fence) looks at the counters once more before it sleeps; this fence
  /// orders the rank's counter store before its load of the flag, so one of
  /// the two sees the other's store. Counters shared with host mates only
  /// are none of the proxy's business (it never reads them): no fence, no
  /// attempt to send.
  void published(int from, int to) const {
    if ((from < 0 || through_memory(from)) && (to < 0 || through_memory(to))) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (progress != nullptr && progress(proxy)) return;  // sent from this thread
    if (detail::load_relaxed(proxy_idle) == 0) return;
    std::uint32_t one = 1;
    if (detail::compare_exchange(proxy_idle, one, 0u)) {
      const std::uint64_t n = 1;
      (void)!::write(proxy_wake_fd, &n, sizeof n);
    }
  }

  /// Called by a rank while it waits for rank q (a step from it, or a
  /// credit for a step to it): lets the network progress from this thread
  /// (net::proxy::try_receive, which also sends the credits its proxy
  /// deferred); for a peer on this host (its counters are in memory) only
  /// when credits are deferred.
  void drive(int q) const {
    if (receive == nullptr) return;
    // A peer of this host needs no network, unless the proxy holds back a
    // credit that a peer across it may be waiting for.
    if (!through_memory(q) || (net_deferred != nullptr && detail::load_relaxed(net_deferred) != 0))
      receive(proxy);
  }

  /// Whether rank q closed its communicator (then its tails are final).
  bool has_left(int q) const { return peer_left != nullptr && detail::load_acquire(&peer_left[q]) != 0; }
  /// Rank q left while this rank waits for its step `step` of channel ch:
  /// raises the abort word naming q; the caller fails with the cause.
  status departed(int q, int ch, std::uint64_t step) const {
    if (on_departed != nullptr) on_departed(proxy, q, ch, step);
    return status::aborted;
  }

  /// What the proxy knows about a failure rank `rank` caused (a closed
  /// connection, a refused frame), or "" where it knows nothing.
  std::string transport_failure(int rank) const {
    return failure_text != nullptr ? failure_text(proxy, rank) : std::string();
  }
};

/// Writes this rank's process identity into its (local) record.
inline void publish_identity(const proxied_view& v, int rank) { publish_identity(v.local, rank); }

/// Compile-time capabilities (collx/concepts.hpp), read by collx/composition.hpp.
struct proxied {
  static constexpr const char* name = "proxied (socket or ib)";
  static constexpr bool direct_load_store = false;    // a proxy writes the peer's FIFO
  static constexpr bool delivers_whole_steps = true;  // ... a step whole, then its tail (release)
  static constexpr bool in_order_128b_lines = false;
  static constexpr bool peer_buffer_access = false;
  static constexpr bool user_buffer_access = false;
  static constexpr bool multicast = false;
  static constexpr bool needs_proxy = true;
  using view = proxied_view;
};

}  // namespace collx::transport
