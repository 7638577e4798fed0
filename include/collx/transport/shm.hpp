// collx/transport/shm.hpp — the shared-memory transport: layout and traits.
//
// All ranks of a node map one segment. It holds a header (with the
// communicator-wide abort word), one record per rank (process identity and
// the last calls it issued, read by peers to detect dead ranks and mismatched
// calls), a P×P mesh of connection control blocks and the FIFO buffers of
// every directed pair, page-aligned. Pages of pairs an
// algorithm never uses are never touched, so the mesh costs address space, not
// memory. The same layout serves thread ranks (one anonymous mapping) and
// process ranks (a POSIX shm object); see shm_segment.hpp for creation.
//
// After the FIFOs come one barrier line per rank and stripe (a counter and
// the addresses of the rank's current user buffers, for single-copy reads;
// stripe s's lines follow stripe s-1's, so stripe 0's are where a layout
// without stripes has them, and only stripe 0's line carries the
// communicator's words: mapping, left_call, in_group) and one
// registered buffer per rank (peer_buffer_bytes(), at least 1 MiB and at least
// one FIFO): every rank may load and store every rank's buffer, which is what
// the peer-memory primitives and the NVLS-style algorithm build on; a rank's
// own buffer is also its scratch memory.
//
// Stripes (NCCL's channels): a call may be split into `nstripes` independent
// slices, each run by its own worker group (a CUDA block on a GPU) with its
// own FIFOs. Every directed pair then has nstripes copies of its channel block;
// stripe 0 is the whole of it when nstripes == 1, so layouts without stripes are
// unchanged.
//
// Capabilities (compile-time): ranks load and store the FIFO memory directly;
// 128-byte lines arrive in order when the flag word is written with release
// and read with acquire; every rank can load/store every peer's FIFO; no proxy;
// host ranks may read peers' user buffers (single copy).
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/doorbell.hpp>
#include <collx/error.hpp>
#include <collx/transport/fifo.hpp>
#include <collx/transport/switch_channel.hpp>
#if !COLLX_DEVICE_CODE
#include <collx/transport/peer_read.hpp>
#include <collx/transport/symmetric.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#endif

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace collx::transport {

/// Slots × slot bytes of one FIFO. Each connection has one FIFO per compiled
/// protocol (a channel), so lines of one protocol never sit where another
/// protocol's reader could mistake them for its own. The transport knows
/// channels by number only: which protocol owns which is the compiled list's
/// business (proto/list.hpp).
struct fifo_geometry {
  std::uint32_t slots = 0;
  std::uint32_t slot_bytes = 0;
  COLLX_HOST_DEVICE constexpr std::size_t bytes() const { return std::size_t(slots) * slot_bytes; }
  friend constexpr bool operator==(const fifo_geometry&, const fifo_geometry&) = default;
};

/// Most channels a connection may have (the segment header has room for this many).
inline constexpr int max_channels = 8;

struct shm_header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t nranks;
  std::uint32_t nchannels;
  fifo_geometry fifo[max_channels];
  std::uint32_t nstripes;
  std::uint32_t reserved0;
  std::uint64_t step_origin;  // value every step counter started from
  std::uint64_t total_bytes;
  alignas(cache_line) std::uint32_t abort;  // non-zero: every wait returns status::aborted
  std::uint32_t reserved;
  /// Why the abort word was raised: set once, by the first failure, before
  /// the word (see detail/watchdog.hpp for the packing). Zero until then.
  std::uint64_t abort_cause;
  /// Non-zero when some rank may not read some peer's user buffers (the OS
  /// refused cross-memory attach at creation, or single copy was switched
  /// off): single-copy schedules then stage through the registered buffers.
  /// Written only while the communicator is created, before any collective.
  std::uint32_t single_copy_denied;
  /// Non-zero when some rank may not write into some peer's user buffers
  /// (cross-memory attach writes refused at creation): single-copy schedules
  /// then only read. Written only while the communicator is created.
  std::uint32_t single_copy_write_denied;
  /// Calls of at least this many bytes use single-copy schedules where the
  /// algorithm has one (comm_options::single_copy_min_for, equal on all ranks).
  std::uint64_t single_copy_min;
};

/// Calls remembered per rank: the window of the call check (comm/watch.hpp).
/// A rank whose previous rank lags behind compares each call once that rank
/// has published it, and a rank never runs this many calls ahead of the
/// comparisons that need its entries. Eight times a FIFO's default slots, so
/// a root running ahead through its credits does not meet it; 16 made small
/// broadcasts slower (bench/results/call_window_2026-12-05.md). 4 KiB per rank.
inline constexpr std::size_t call_history = 64;

/// Contention decisions rank 0 keeps for the others (comm/contention.hpp).
inline constexpr std::size_t contention_history = 4;

/// One rank's public record, written only by that rank. Identity fields are
/// written once when the rank joins; calls[s % call_history] describes the
/// rank's call number s (its `seq` field is stored last, with release). Each
/// call entry has its own 64-byte line: a peer that checks call s (every call
/// does, at its end) must not contend with this rank already writing call s + 1.
struct alignas(cache_line) rank_record {
  std::int32_t pid;  // 0 until the rank has joined
  std::uint32_t reserved;
  std::uint64_t start_time;  // /proc/<pid>/stat starttime: tells a reused pid apart
  std::uint64_t pid_ns;      // inode of the rank's pid namespace: pids compare only within one
  struct alignas(64) call {
    std::uint64_t seq, signature, count;
  } calls[call_history];
  /// The call check's progress: every call of this rank up to `checked` has
  /// been compared with the previous rank's; ~0 on a rank that does not
  /// check. Stored with release by this rank, loaded by the previous rank
  /// before it overwrites an entry this rank may still need.
  struct alignas(64) check_line {
    std::uint64_t checked;
  } check;
  /// How contended the CPUs are, agreed at decision points (comm/contention.hpp):
  /// rank 0 writes its decisions into `decision` (point << 16 | share in ‰,
  /// entry point % contention_history); every rank writes the share it last
  /// measured and the last decision point it took.
  struct alignas(64) contention_line {
    std::uint64_t decision[contention_history];
    std::uint64_t taken;
    std::uint32_t measured_pm;
    std::uint32_t reserved;
  } contention;
};
static_assert(sizeof(rank_record) % cache_line == 0);

inline constexpr std::uint64_t shm_magic = 0x636f6c6c78736d31ull;  // "collxsm1"
inline constexpr std::uint32_t shm_version = 9;
inline constexpr std::size_t shm_page = 4096;

COLLX_HOST_DEVICE constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

/// Most stripes a call may be split into (a GPU rank's blocks; see the header comment).
inline constexpr int max_stripes = 64;

/// Byte offsets of the parts of a segment for a given geometry. Per directed
/// pair and stripe: nchannels control blocks, then one page-aligned buffer per
/// channel.
/// Make one with make(): it also stores the offsets a FIFO lookup needs, so
/// that shm_view::fifo() (a few times per call) is a multiply-add.
struct shm_layout {
  std::uint32_t nranks = 0;
  std::uint32_t nchannels = 0;
  std::uint32_t nstripes = 1;
  fifo_geometry fifo[max_channels]{};

  /// What shm_view::fifo() reads: ctrl_offset(), buffers_offset(),
  /// pair_bytes() and channel_offset(c), computed once by make().
  struct lookup {
    std::uint64_t ctrl = 0, buffers = 0, pair = 0;
    std::uint64_t channel[max_channels]{};
  } at{};

  /// Every channel with `slots` slots; slot_bytes[c] bytes per slot of
  /// channel c; `nstripes` stripes (clamped to [1, max_stripes]).
  static constexpr shm_layout make(std::uint32_t nranks, std::uint32_t slots, const std::uint32_t* slot_bytes,
                                   int nchannels, int nstripes = 1) {
    shm_layout l;
    l.nranks = nranks;
    l.nstripes = static_cast<std::uint32_t>(nstripes < 1             ? 1
                                            : nstripes > max_stripes ? max_stripes
                                                                     : nstripes);
    l.nchannels = static_cast<std::uint32_t>(nchannels < max_channels ? nchannels : max_channels);
    for (std::uint32_t c = 0; c < l.nchannels; ++c) l.fifo[c] = {slots, slot_bytes[c]};
    l.at.ctrl = l.ctrl_offset();
    l.at.buffers = l.buffers_offset();
    l.at.pair = l.pair_bytes();
    for (std::uint32_t c = 0; c < l.nchannels; ++c) l.at.channel[c] = l.channel_offset(static_cast<int>(c));
    return l;
  }
  static constexpr shm_layout make(std::uint32_t nranks, std::uint32_t slots,
                                   std::initializer_list<std::uint32_t> slot_bytes, int nstripes = 1) {
    return make(nranks, slots, slot_bytes.begin(), static_cast<int>(slot_bytes.size()), nstripes);
  }

  COLLX_HOST_DEVICE constexpr std::size_t records_offset() const {
    return align_up(sizeof(shm_header), cache_line);
  }
  COLLX_HOST_DEVICE constexpr std::size_t ctrl_offset() const {
    return align_up(records_offset() + std::size_t(nranks) * sizeof(rank_record), shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t pairs() const { return std::size_t(nranks) * nranks; }
  /// FIFO blocks: one per directed pair and stripe.
  COLLX_HOST_DEVICE constexpr std::size_t pair_stripes() const { return pairs() * nstripes; }
  /// Offset of channel ch's buffer inside one pair's buffer block.
  COLLX_HOST_DEVICE constexpr std::size_t channel_offset(int ch) const {
    std::size_t off = 0;
    for (int c = 0; c < ch; ++c) off += align_up(fifo[c].bytes(), shm_page);
    return off;
  }
  COLLX_HOST_DEVICE constexpr std::size_t pair_bytes() const {
    return channel_offset(static_cast<int>(nchannels));
  }
  COLLX_HOST_DEVICE constexpr std::size_t buffers_offset() const {
    return align_up(ctrl_offset() + pair_stripes() * nchannels * sizeof(fifo_ctrl), shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t barrier_offset() const {
    return buffers_offset() + pair_stripes() * pair_bytes();
  }
  /// Bytes of each rank's registered buffer: derived from the FIFO geometry, so
  /// ranks that agree on FIFOs agree on it.
  COLLX_HOST_DEVICE constexpr std::size_t peer_buffer_bytes() const {
    std::size_t b = std::size_t(1) << 20;
    for (std::uint32_t c = 0; c < nchannels; ++c) b = fifo[c].bytes() > b ? fifo[c].bytes() : b;
    return align_up(b, shm_page);
  }
  /// One doorbell line per rank, after the barrier lines (one per rank and stripe).
  COLLX_HOST_DEVICE constexpr std::size_t doorbell_offset() const {
    return barrier_offset() + std::size_t(nranks) * nstripes * cache_line;
  }
  COLLX_HOST_DEVICE constexpr std::size_t peer_buffers_offset() const {
    return align_up(doorbell_offset() + std::size_t(nranks) * cache_line, shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t total_bytes() const {
    return peer_buffers_offset() + std::size_t(nranks) * peer_buffer_bytes();
  }
};

/// Where a host rank sleeps when its ranks outnumber the CPUs: one
/// detail::doorbell per rank (see detail/doorbell.hpp), rung by every rank
/// that publishes something the sleeper may wait for.
using detail::doorbell;
static_assert(sizeof(doorbell) == cache_line);

/// Non-owning, trivially copyable view of a mapped segment from one rank.
class symmetric_table;

struct shm_view {
  std::byte* base = nullptr;
  shm_layout layout{};
  /// Peers' symmetric shares this rank has mapped (transport/symmetric.hpp),
  /// or nullptr: cross-memory-attach reads and writes of a peer's address go
  /// through the mapping where the whole range lies in one. Host only.
  const symmetric_table* symmetric = nullptr;

  COLLX_HOST_DEVICE shm_header* header() const { return reinterpret_cast<shm_header*>(base); }
  COLLX_HOST_DEVICE std::uint32_t* abort_word() const { return &header()->abort; }
  COLLX_HOST_DEVICE rank_record* record(int rank) const {
    return reinterpret_cast<rank_record*>(base + layout.records_offset()) + rank;
  }
  COLLX_HOST_DEVICE int nranks() const { return static_cast<int>(layout.nranks); }
  /// FIFO geometry of channel ch, the same for every connection.
  COLLX_HOST_DEVICE std::uint32_t fifo_slots(int ch) const { return layout.fifo[ch].slots; }
  COLLX_HOST_DEVICE std::uint32_t fifo_slot_bytes(int ch) const { return layout.fifo[ch].slot_bytes; }

  COLLX_HOST_DEVICE int nstripes() const { return static_cast<int>(layout.nstripes); }

  /// Channel ch's FIFO of the connection carrying stripe `stripe`'s data from
  /// rank src to rank dst.
  COLLX_HOST_DEVICE fifo_ref fifo(int src, int dst, int ch, int stripe = 0) const {
    const std::size_t pair =
        (std::size_t(src) * layout.nranks + std::size_t(dst)) * layout.nstripes + std::size_t(stripe);
    fifo_ref f;
    fifo_ctrl* c = reinterpret_cast<fifo_ctrl*>(base + layout.at.ctrl) + pair * layout.nchannels + ch;
    f.tail = &c->tail;
    f.head = &c->head;
    f.head_seen = &c->head_seen;
    f.buffer = base + layout.at.buffers + pair * layout.at.pair + layout.at.channel[ch];
    f.slots = layout.fifo[ch].slots;
    f.slot_bytes = layout.fifo[ch].slot_bytes;
    return f;
  }

  /// Sets every counter of every channel to `origin` (all zero in a fresh
  /// segment). Only before any rank runs a collective; tests start near a
  /// flag's wrap point with it.
  void reset_counters(std::uint64_t origin) const {
    auto* c = reinterpret_cast<fifo_ctrl*>(base + layout.ctrl_offset());
    for (std::size_t i = 0; i < layout.pair_stripes() * layout.nchannels; ++i)
      c[i].tail = c[i].head_seen = c[i].head = origin;
    header()->step_origin = origin;
  }

  /// Rank r's registered buffer and barrier counter (see the header comment).
  COLLX_HOST_DEVICE std::byte* peer_buffer(int r) const {
    return base + layout.peer_buffers_offset() + std::size_t(r) * layout.peer_buffer_bytes();
  }
  COLLX_HOST_DEVICE std::size_t peer_buffer_bytes() const { return layout.peer_buffer_bytes(); }
  /// The switch channel over the registered buffers, as rank `rank` uses it:
  /// multicast load-reduce and store by P loads / P stores (switch_channel.hpp).
  COLLX_HOST_DEVICE peer_switch_channel<shm_view> switch_channel(int rank) const { return {*this, rank}; }
  /// Rank r's barrier counter of stripe s (each stripe of a split peer-memory
  /// schedule synchronises on its own line).
  COLLX_HOST_DEVICE std::uint64_t* barrier_word(int r, int s = 0) const {
    return reinterpret_cast<std::uint64_t*>(base + layout.barrier_offset() +
                                            (std::size_t(s) * layout.nranks + std::size_t(r)) * cache_line);
  }
  /// Where any rank reads rank q's counter of stripe s: the one word.
  COLLX_HOST_DEVICE const std::uint64_t* barrier_seen(int, int q, int s = 0) const {
    return barrier_word(q, s);
  }
  /// Rank r has reached count v of stripe s (a release store).
  COLLX_HOST_DEVICE void barrier_post(int r, int s, std::uint64_t v) const {
    detail::store_release(barrier_word(r, s), v);
  }
  COLLX_HOST_DEVICE struct doorbell* doorbell(int r) const {
    return reinterpret_cast<struct doorbell*>(base + layout.doorbell_offset()) + r;
  }
  /// Words of rank r's barrier line after the counter, written only by rank r:
  /// [user_send], [user_recv] — the addresses (in rank r's address space) of
  /// the buffers of its current call, stored before a barrier that publishes
  /// them; [mapping] — where rank r mapped this segment (for the probe);
  /// [user_bytes] — the bytes per rank of the call whose buffers it published;
  /// [left_call] — the last call rank r has left, [in_group] — 1 while rank r
  /// is inside a send/recv group (host ranks that load each other's buffers:
  /// comm::leave_call).
  enum line_word : int {
    user_send = 1,
    user_recv = 2,
    mapping = 3,
    user_bytes = 4,
    left_call = 5,
    in_group = 6
  };
  /// Word w of rank r's line of stripe s (user_send, user_recv and user_bytes
  /// per stripe; the others only in stripe 0's).
  COLLX_HOST_DEVICE std::uint64_t* line(int r, line_word w, int s = 0) const {
    return barrier_word(r, s) + w;
  }

  // ---- peer user buffers (single copy) -------------------------------------------
  // Host ranks read a peer's user buffer in place: thread ranks through the
  // pointer, process ranks through their mapping of the peer's symmetric
  // memory where the buffer lies in it, else by cross-memory attach, if the
  // OS allowed it when the communicator was created
  // (header()->single_copy_denied). Device code:
  // never (a GPU would need the buffers registered; not provided).

  /// Smallest call in bytes from which ranks read peers' user buffers, or
  /// UINT64_MAX where they may not. The same on every rank.
  COLLX_HOST_DEVICE std::uint64_t user_buffer_min_bytes() const {
#if COLLX_DEVICE_CODE
    return ~std::uint64_t{0};
#else
    return detail::load_relaxed(&header()->single_copy_denied) != 0
               ? ~std::uint64_t{0}
               : detail::load_relaxed(&header()->single_copy_min);
#endif
  }
  /// Stores rank r's current send and recv addresses and the call's bytes
  /// per rank; a barrier publishes them.
  /// `stripe`: the stripe whose slice these are (its own line; likewise below).
  COLLX_HOST_DEVICE void publish_user_buffers(int r, const void* send, const void* recv, std::uint64_t bytes,
                                              int stripe = 0) const {
    detail::store_relaxed(line(r, user_send, stripe),
                          static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(send)));
    detail::store_relaxed(line(r, user_recv, stripe),
                          static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(recv)));
    detail::store_relaxed(line(r, user_bytes, stripe), bytes);
  }
  /// Whether rank `self` may now load the buffers that the ranks of its own
  /// process published (after the barrier that publishes them, before the
  /// first load; `bytes` as published, or UINT64_MAX to skip that check).
  /// A load of a peer's buffer is safe only while that peer is in the call:
  /// - status::mismatch where such a peer published other bytes per rank: its
  ///   buffers do not span what this rank would load (the call check finds the
  ///   mismatch only after the loads);
  /// - status::aborted where the communicator is aborting: a peer that failed
  ///   may have left the call and freed its buffers. The fence pairs with the
  ///   one a failing rank runs between raising the abort word and looking for
  ///   ranks still in a call or group (comm::wait_for_loaders): either it
  ///   sees this rank inside and waits for it to leave, or this rank sees
  ///   the word.
  /// Other ranks are read by the transport, which fails cleanly on a bad address.
  COLLX_HOST_DEVICE status may_load_peers(int self, std::uint64_t bytes, int stripe = 0) const {
#if COLLX_DEVICE_CODE
    (void)self, (void)bytes, (void)stripe;
    return status::ok;
#else
    bool loads = false;
    for (int q = 0; q < nranks(); ++q) {
      if (q == self || !same_process(self, q)) continue;
      loads = true;
      if (bytes != ~std::uint64_t{0} && detail::load_relaxed(line(q, user_bytes, stripe)) != bytes)
        return status::mismatch;
    }
    if (loads) {
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (detail::load_relaxed(abort_word()) != 0) return status::aborted;
    }
    return status::ok;
#endif
  }
#if !COLLX_DEVICE_CODE
  /// Whether rank `self` loads rank q's buffers (both run in one process).
  bool loads_from(int self, int q) const { return same_process(self, q); }
#endif
  /// Rank q's published buffer if rank `self` can load it directly (both run
  /// in one process), else nullptr.
  COLLX_HOST_DEVICE const void* loadable_user_buffer(int self, int q, bool recv_side, int stripe = 0) const {
#if COLLX_DEVICE_CODE
    (void)self, (void)q, (void)recv_side, (void)stripe;
    return nullptr;
#else
    return same_process(self, q) ? reinterpret_cast<const void*>(published_address(q, recv_side, stripe))
                                 : nullptr;
#endif
  }
  /// Rank q's published recv buffer if rank `self` can store to it directly
  /// (both run in one process), else nullptr. A peer's send buffer is never
  /// writable: that rank passed it as const.
  COLLX_HOST_DEVICE void* storable_user_recv(int self, int q, int stripe = 0) const {
#if COLLX_DEVICE_CODE
    (void)self, (void)q, (void)stripe;
    return nullptr;
#else
    return same_process(self, q) ? reinterpret_cast<void*>(published_address(q, true, stripe)) : nullptr;
#endif
  }
  /// Whether rank q published the same address as its send and recv buffer
  /// (an in-place call).
  COLLX_HOST_DEVICE bool user_buffers_alias(int, int q, int stripe = 0) const {
    return detail::load_relaxed(line(q, user_send, stripe)) ==
           detail::load_relaxed(line(q, user_recv, stripe));
  }
  /// Whether ranks may also write into peers' published buffers (one copy
  /// pushed instead of pulled). The same on every rank.
  COLLX_HOST_DEVICE bool user_buffers_writable() const {
#if COLLX_DEVICE_CODE
    return false;
#else
    return detail::load_relaxed(&header()->single_copy_write_denied) == 0;
#endif
  }
  /// Bytes [off, off + n) of rank q's published recv buffer ← src: a copy
  /// through the mapping where they lie in a symmetric share of q (see
  /// `symmetric`), else one cross-memory-attach write (q runs in another
  /// process; a thread rank stores through storable_user_recv instead). On failure:
  /// status::system_error, and last_peer_read_failure names q, its pid and errno.
  COLLX_HOST_DEVICE status write_user_recv(int q, std::size_t off, const void* src, std::size_t n,
                                           int stripe = 0) const {
#if COLLX_DEVICE_CODE
    (void)q, (void)off, (void)src, (void)n, (void)stripe;
    return status::not_supported;
#else
    const std::uintptr_t addr = published_address(q, true, stripe) + off;
    if (std::byte* mapped = symmetric_address(q, addr, n)) {
      std::memcpy(mapped, src, n);
      symmetric_counters.bytes_written.fetch_add(n, std::memory_order_relaxed);
      return status::ok;
    }
    const int pid = detail::load_relaxed(&record(q)->pid);
    return counted(q, pid, write_peer_memory(pid, addr, src, n), n, true);
#endif
  }
  /// dst ← bytes [off, off + n) of rank q's published buffer, as
  /// read_peer_address. On failure: status::system_error, and
  /// last_peer_read_failure names q, its pid and errno.
  COLLX_HOST_DEVICE status read_user_buffer(int q, bool recv_side, std::size_t off, void* dst, std::size_t n,
                                            int stripe = 0) const {
#if COLLX_DEVICE_CODE
    (void)q, (void)recv_side, (void)off, (void)dst, (void)n, (void)stripe;
    return status::not_supported;
#else
    return read_peer_address(q, published_address(q, recv_side, stripe) + off, dst, n);
#endif
  }
  /// Address `addr` of rank q's address space (one q handed over during the
  /// call) as a pointer rank `self` can load through (both run in one
  /// process), else nullptr: read it with read_peer_address().
  COLLX_HOST_DEVICE const void* loadable_peer_address(int self, int q, std::uint64_t addr) const {
#if COLLX_DEVICE_CODE
    (void)self, (void)q, (void)addr;
    return nullptr;
#else
    return same_process(self, q) ? reinterpret_cast<const void*>(static_cast<std::uintptr_t>(addr)) : nullptr;
#endif
  }
  /// dst ← n bytes at address `addr` of rank q's address space (q runs in
  /// another process): a copy through the mapping where they lie in a
  /// symmetric share of q, else one cross-memory-attach read. On failure:
  /// status::system_error, and last_peer_read_failure names q, its pid and errno.
  COLLX_HOST_DEVICE status read_peer_address(int q, std::uint64_t addr, void* dst, std::size_t n) const {
#if COLLX_DEVICE_CODE
    (void)q, (void)addr, (void)dst, (void)n;
    return status::not_supported;
#else
    if (const std::byte* mapped = symmetric_address(q, addr, n)) {
      std::memcpy(dst, mapped, n);
      symmetric_counters.bytes_read.fetch_add(n, std::memory_order_relaxed);
      return status::ok;
    }
    const int pid = detail::load_relaxed(&record(q)->pid);
    return counted(q, pid, read_peer_memory(pid, static_cast<std::uintptr_t>(addr), dst, n), n, false);
#endif
  }

 private:
#if !COLLX_DEVICE_CODE
  /// Peer q's bytes [addr, addr + n) in this process, where they lie in one
  /// symmetric share of q that this rank has mapped, else nullptr.
  std::byte* symmetric_address(int q, std::uint64_t addr, std::size_t n) const {
    return symmetric != nullptr ? symmetric->find(q, addr, n) : nullptr;
  }
  bool same_process(int self, int q) const {
    return detail::load_relaxed(&record(q)->pid) == detail::load_relaxed(&record(self)->pid);
  }
  std::uintptr_t published_address(int q, bool recv_side, int stripe) const {
    return static_cast<std::uintptr_t>(
        detail::load_relaxed(line(q, recv_side ? user_recv : user_send, stripe)));
  }
  /// A cross-memory-attach copy's outcome, counted in peer_read_counters
  /// (or, on failure, recorded in last_peer_read_failure).
  static status counted(int q, int pid, status st, std::size_t n, bool write) {
    if (st != status::ok) {
      last_peer_read_failure = {q, pid, errno};
      return st;
    }
    (write ? peer_read_counters.writes : peer_read_counters.reads).fetch_add(1, std::memory_order_relaxed);
    (write ? peer_read_counters.bytes_written : peer_read_counters.bytes)
        .fetch_add(n, std::memory_order_relaxed);
    return st;
  }
#endif
};

/// Compile-time capabilities of a transport (collx/concepts.hpp), read
/// against algorithms' and protocols' needs by collx/composition.hpp.
struct shm {
  static constexpr const char* name = "shm";
  static constexpr bool direct_load_store = true;
  static constexpr bool in_order_128b_lines = true;
  static constexpr bool peer_buffer_access = true;
  static constexpr bool user_buffer_access = true;  // single copy on the host (see shm_view)
  static constexpr bool multicast = true;  // a switch channel by P loads / P stores (switch_channel.hpp)
  static constexpr bool needs_proxy = false;
  using view = shm_view;
};

}  // namespace collx::transport
