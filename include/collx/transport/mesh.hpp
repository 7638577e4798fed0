// collx/transport/mesh.hpp — the mesh transport: every rank owns its own
// memory region, and FIFOs live where they are polled ("poll local, write
// remote").
//
// On GPUs of one node, a region is device memory of the rank's GPU, reached
// by peers over NVLink or PCIe peer access (the regions are mapped into every
// rank's address space, so a view holds one pointer per rank). A connection
// src → dst keeps its slots and its `tail` in dst's region (the receiver
// polls its own memory; the sender's stores cross the link once per step),
// and its `head` and `head_seen` in src's region (the sender polls its own
// memory for credit). No load ever crosses a link in a wait loop, which is
// what makes polling cheap on a GPU: a poll of peer memory is a round trip
// over the link. The peer-memory barrier follows the same rule: a rank
// stores its count into every region and polls only its own.
//
// Region of rank r, in order (each part page-aligned where noted):
//   receive control: one line per (src, stripe, channel): the tail
//   send control:    two lines per (dst, stripe, channel): the head, then head_seen
//   barrier lines:   one line per (rank q, stripe): q's peer-memory barrier
//                    counter of that stripe and the user buffers it
//                    published, as q wrote them here (every rank writes its
//                    line into every region, so barriers and the published
//                    buffers are read from the reader's own memory; a
//                    split peer-memory schedule's stripes synchronise and
//                    publish independently)
//   FIFO slots (page-aligned): per (src, stripe) one block of every channel's
//                    slots, as shm_layout lays a pair's block out
//   registered buffer (page-aligned, or aligned to the multicast granularity
//                    where a multicast object binds it): what the
//                    peer-memory primitives load and store
//                    (shm_layout::peer_buffer_bytes() of the geometry)
// Counters start at zero in a zeroed region; LL flags derive from steps, so
// zeroed slots hold no valid line.
//
// Peers' user buffers (single copy): only registered ones, windows
// (transport/user_windows.hpp): the launch puts the call's windows in the
// view (`windows`), and each rank publishes the windows, offsets and size of
// its call in its barrier line (words after the counter), stamped with the
// barrier it precedes, so a peer that is not in the same registered call is
// found, not read. Capabilities otherwise as shm. in_order_128b_lines
// is a property of the path: CPUs with release/acquire flags (tested) and
// one GPU's memory system; across GPUs only NVLink, which the creator must
// check before offering LL128 (gpu::communicator asks NVML whether every
// pair of its GPUs is on NVLink: collx/cuda/links.hpp).
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/transport/fifo.hpp>
#include <collx/transport/multimem.hpp>
#include <collx/transport/shm.hpp>
#include <collx/transport/switch_channel.hpp>
#include <collx/transport/user_windows.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::transport {

/// Most ranks a mesh view can name (a view carries one pointer per rank; 72
/// is the largest NVLink domain, an NVL72 rack).
inline constexpr int max_mesh_ranks = 72;

/// Offsets inside one rank's region for a FIFO geometry; the same for every
/// rank. Built from the shm layout of the same geometry, whose per-pair
/// block and registered-buffer size it reuses.
struct mesh_layout {
  shm_layout fifos{};  // geometry: nranks, nchannels, nstripes, slots × slot bytes per channel
  /// Alignment of the registered buffer's offset and of its length within
  /// the region: a page, or a multicast granularity where the buffers are
  /// bound to a multicast object (which binds whole granules).
  std::size_t buffer_align = shm_page;

  static constexpr mesh_layout make(const shm_layout& geometry, std::size_t buffer_align = shm_page) {
    return {geometry, buffer_align};
  }

  COLLX_HOST_DEVICE constexpr std::size_t links() const {
    return std::size_t(fifos.nranks) * fifos.nstripes * fifos.nchannels;
  }
  COLLX_HOST_DEVICE constexpr std::size_t recv_ctrl_offset() const { return 0; }
  COLLX_HOST_DEVICE constexpr std::size_t send_ctrl_offset() const { return links() * cache_line; }
  COLLX_HOST_DEVICE constexpr std::size_t barrier_offset() const {
    return send_ctrl_offset() + links() * 2 * cache_line;
  }
  /// Offset of rank q's barrier line of stripe s (in every region).
  COLLX_HOST_DEVICE constexpr std::size_t barrier_line(int q, int s) const {
    return barrier_offset() + (std::size_t(s) * fifos.nranks + std::size_t(q)) * cache_line;
  }
  COLLX_HOST_DEVICE constexpr std::size_t slots_offset() const {
    return align_up(barrier_offset() + std::size_t(fifos.nranks) * fifos.nstripes * cache_line, shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t peer_buffer_offset() const {
    return align_up(slots_offset() + std::size_t(fifos.nranks) * fifos.nstripes * fifos.pair_bytes(),
                    buffer_align);
  }
  /// Bytes of the registered buffer rounded up to buffer_align (what a
  /// multicast object binds).
  COLLX_HOST_DEVICE constexpr std::size_t peer_buffer_span() const {
    return align_up(fifos.peer_buffer_bytes(), buffer_align);
  }
  /// Bytes of one rank's region.
  COLLX_HOST_DEVICE constexpr std::size_t region_bytes() const {
    return peer_buffer_offset() + peer_buffer_span();
  }
  /// Index of the link (peer, stripe, channel) within a region's control arrays.
  COLLX_HOST_DEVICE constexpr std::size_t link(int peer, int stripe, int ch) const {
    return (std::size_t(peer) * fifos.nstripes + std::size_t(stripe)) * fifos.nchannels + std::size_t(ch);
  }
};

/// Non-owning, trivially copyable view of a mesh from any rank: every rank's
/// region as mapped in this address space, and the group's abort word.
struct mesh_view {
  mesh_layout layout{};
  std::uint32_t* abort = nullptr;
  std::byte* regions[max_mesh_ranks]{};

  COLLX_HOST_DEVICE std::uint32_t* abort_word() const { return abort; }
  COLLX_HOST_DEVICE int nranks() const { return static_cast<int>(layout.fifos.nranks); }
  COLLX_HOST_DEVICE int nstripes() const { return static_cast<int>(layout.fifos.nstripes); }
  COLLX_HOST_DEVICE std::uint32_t fifo_slots(int ch) const { return layout.fifos.fifo[ch].slots; }
  COLLX_HOST_DEVICE std::uint32_t fifo_slot_bytes(int ch) const { return layout.fifos.fifo[ch].slot_bytes; }

  /// Channel ch's FIFO of stripe `stripe` of the connection src → dst: slots
  /// and tail in dst's region, head and head_seen in src's.
  COLLX_HOST_DEVICE fifo_ref fifo(int src, int dst, int ch, int stripe = 0) const {
    const mesh_layout& l = layout;
    std::byte* rx = regions[dst];
    std::byte* tx = regions[src];
    fifo_ref f;
    f.tail =
        reinterpret_cast<std::uint64_t*>(rx + l.recv_ctrl_offset() + l.link(src, stripe, ch) * cache_line);
    auto* sent = tx + l.send_ctrl_offset() + l.link(dst, stripe, ch) * 2 * cache_line;
    f.head = reinterpret_cast<std::uint64_t*>(sent);
    f.head_seen = reinterpret_cast<std::uint64_t*>(sent + cache_line);
    f.buffer = rx + l.slots_offset() +
               (std::size_t(src) * l.fifos.nstripes + std::size_t(stripe)) * l.fifos.at.pair +
               l.fifos.at.channel[ch];
    f.slots = l.fifos.fifo[ch].slots;
    f.slot_bytes = l.fifos.fifo[ch].slot_bytes;
    return f;
  }

  // ---- peer memory (the registered buffers and the barrier) ----------------------
  COLLX_HOST_DEVICE std::byte* peer_buffer(int r) const { return regions[r] + layout.peer_buffer_offset(); }
  COLLX_HOST_DEVICE std::size_t peer_buffer_bytes() const { return layout.fifos.peer_buffer_bytes(); }
  /// Rank r's barrier counter of stripe s as its own region holds it (the
  /// count r has reached).
  COLLX_HOST_DEVICE std::uint64_t* barrier_word(int r, int s = 0) const { return held(r, r, s); }
  /// Where rank `reader` polls rank q's counter of stripe s: its own region.
  COLLX_HOST_DEVICE const std::uint64_t* barrier_seen(int reader, int q, int s = 0) const {
    return held(reader, q, s);
  }
  /// Rank r has reached count v of stripe s: a release store into every
  /// region (remote stores, no round trip), its own last.
  COLLX_HOST_DEVICE void barrier_post(int r, int s, std::uint64_t v) const {
#if COLLX_DEVICE_CODE
    // One release fence for all P stores: a release store each would wait
    // for the previous one to reach its peer before the next could start.
    detail::fence_release();
    for (int k = 1; k <= nranks(); ++k) detail::store_relaxed(held((r + k) % nranks(), r, s), v);
#else
    // Release stores (plain stores on x86), which ThreadSanitizer follows.
    for (int k = 1; k <= nranks(); ++k) detail::store_release(held((r + k) % nranks(), r, s), v);
#endif
  }
  /// Around a barrier of a call that used the multicast address: relates
  /// this thread's multicast accesses to its ordinary ones (multimem.hpp).
  COLLX_HOST_DEVICE void alias_fence() const {
    if (multicast != nullptr || windows.multicast) multimem_alias_fence();
  }
  /// The multicast address of the registered buffers: offset k stands for
  /// offset k of every rank's peer_buffer() (a GPU group on NVSwitch with
  /// multicast objects, set per rank by the launch); null: none.
  std::byte* multicast = nullptr;
  /// Multicast load-reduce and store: by the switch where `multicast` is set
  /// and it performs the reduction, else by P loads / P stores
  /// (switch_channel.hpp).
  COLLX_HOST_DEVICE multicast_switch_channel<mesh_view> switch_channel(int rank) const {
    return {*this, rank};
  }

  // ---- peers' registered user buffers (single copy) ----------------------------
  /// This call's windows (set per launch; empty: the call is not registered).
  call_windows windows{};

  /// Words of rank q's barrier line of a stripe after the counter, written by
  /// rank q into every region before the barrier that publishes them: the
  /// stripe's send and recv windows (+1; 0: none) and offsets in them, its
  /// bytes per rank, and the barrier count (of that stripe) they were
  /// published for. line(reader, q, …): the copy in reader's region.
  enum line_word : int { send_window = 1, send_offset, recv_window, recv_offset, user_bytes, published_for };
  COLLX_HOST_DEVICE std::uint64_t* line(int reader, int q, line_word w, int s = 0) const {
    return held(reader, q, s) + w;
  }

  /// Smallest call in bytes from which ranks read peers' buffers in place:
  /// windows.min_bytes where this call is registered, else UINT64_MAX.
  COLLX_HOST_DEVICE std::uint64_t user_buffer_min_bytes() const {
    return windows.registered() ? windows.min_bytes : ~std::uint64_t{0};
  }
  /// Largest single-copy all_reduce (bytes per rank) run one-shot (algo::nvls).
  COLLX_HOST_DEVICE std::uint64_t user_one_shot_bytes() const { return windows.one_shot_bytes; }
  /// Stores rank r's windows and offsets of this call (of stripe s's slice)
  /// and its bytes per rank, stamped with the barrier of that stripe that
  /// will publish them (the next one).
  /// Written into every peer's region; the barrier's release store, which
  /// follows, publishes them.
  COLLX_HOST_DEVICE void publish_user_buffers(int r, const void* send, const void* recv, std::uint64_t bytes,
                                              int s = 0) const {
    const bool reg = windows.registered();
    const std::uint64_t words[] = {reg ? std::uint64_t(windows.send) + 1 : 0,
                                   reg ? offset_in(windows.send, r, send) : 0,
                                   reg ? std::uint64_t(windows.recv) + 1 : 0,
                                   reg ? offset_in(windows.recv, r, recv) : 0,
                                   bytes,
                                   detail::load_relaxed(barrier_word(r, s)) + 1};
    for (int q = 0; q < nranks(); ++q)
      for (int w = 0; w < 6; ++w) detail::store_relaxed(held(q, r, s) + send_window + w, words[w]);
  }
  /// After the barrier that published them: status::mismatch unless every
  /// peer published, for that barrier, registered windows for both sides and
  /// the same bytes as rank `self` (an unregistered peer, or one in another
  /// call, has not). Each peer's buffers are found through its own windows,
  /// so the ranks' windows need not be the same ones. Registered buffers
  /// stay mapped until deregistered, so no abort check.
  COLLX_HOST_DEVICE status may_load_peers(int self, std::uint64_t bytes, int s = 0) const {
    const std::uint64_t at = detail::load_relaxed(barrier_word(self, s));
    for (int q = 0; q < nranks(); ++q) {
      if (q == self) continue;
      if (detail::load_relaxed(line(self, q, published_for, s)) != at ||
          detail::load_relaxed(line(self, q, send_window, s)) == 0 ||
          detail::load_relaxed(line(self, q, recv_window, s)) == 0 ||
          (bytes != ~std::uint64_t{0} && detail::load_relaxed(line(self, q, user_bytes, s)) != bytes))
        return status::mismatch;
    }
    return status::ok;
  }
  /// Rank q's published send (or recv) buffer (of stripe s's slice) as mapped here.
  COLLX_HOST_DEVICE const void* loadable_user_buffer(int self, int q, bool recv_side, int s = 0) const {
    return user_address(self, q, recv_side, s);
  }
  COLLX_HOST_DEVICE void* storable_user_recv(int self, int q, int s = 0) const {
    return user_address(self, q, true, s);
  }
  /// The multicast address of this call's send (or recv) range, where its
  /// window has one and every rank published that window and the same
  /// offset in it (after the barrier that published them), else null. The
  /// same answer on every rank: it reads only what every rank published
  /// (and the window's address, which every rank's table has or lacks alike).
  COLLX_HOST_DEVICE std::byte* user_multicast(int self, bool recv_side, int s = 0) const {
    if (!windows.multicast) return nullptr;
    const line_word wk = recv_side ? recv_window : send_window, ok = recv_side ? recv_offset : send_offset;
    const std::uint64_t w = detail::load_relaxed(line(self, self, wk, s)),
                        off = detail::load_relaxed(line(self, self, ok, s));
    if (w == 0) return nullptr;
    for (int q = 0; q < nranks(); ++q)
      if (detail::load_relaxed(line(self, q, wk, s)) != w ||
          detail::load_relaxed(line(self, q, ok, s)) != off)
        return nullptr;
    const std::uintptr_t m = span(static_cast<int>(w - 1), self).multicast;
    return m == 0 ? nullptr : reinterpret_cast<std::byte*>(m + off);
  }
  /// The switch channel over one side of a call's registered buffers (the
  /// side's range of every rank, and its multicast address as
  /// user_multicast() gives it): peer_buffer(q) is rank q's published
  /// buffer of that side. Offsets are from the start of each rank's range.
  struct user_switch {
    const mesh_view* view;
    int self, stripe;
    bool recv_side;
    std::byte* multicast;
    COLLX_HOST_DEVICE int nranks() const { return view->nranks(); }
    COLLX_HOST_DEVICE std::byte* peer_buffer(int q) const {
      return view->user_address(self, q, recv_side, stripe);
    }
    template <class Group, class T, class Red>
    COLLX_HOST_DEVICE void load_reduce(const Group& g, std::size_t off, T* dst, std::size_t n, const Red& red,
                                       bool finish) const {
      multicast_switch_channel<user_switch>{*this, self}.load_reduce(g, off, dst, n, red, finish);
    }
    template <class Group, class T, class Red>
    COLLX_HOST_DEVICE void store(const Group& g, std::size_t off, const T* src, std::size_t n,
                                 const Red& red) const {
      multicast_switch_channel<user_switch>{*this, self}.store(g, off, src, n, red);
    }
  };
  COLLX_HOST_DEVICE user_switch user_switch_of(int self, bool recv_side, int s = 0) const {
    return {this, self, s, recv_side, user_multicast(self, recv_side, s)};
  }
  /// Whether rank q's call is in place (it published one buffer for both sides).
  COLLX_HOST_DEVICE bool user_buffers_alias(int self, int q, int s = 0) const {
    return detail::load_relaxed(line(self, q, send_window, s)) ==
               detail::load_relaxed(line(self, q, recv_window, s)) &&
           detail::load_relaxed(line(self, q, send_offset, s)) ==
               detail::load_relaxed(line(self, q, recv_offset, s));
  }
  COLLX_HOST_DEVICE bool user_buffers_writable() const { return true; }
  /// Every registered buffer is loadable (above), so nothing is read or
  /// written by a transport copy.
  COLLX_HOST_DEVICE status read_user_buffer(int, bool, std::size_t, void*, std::size_t, int = 0) const {
    return status::not_supported;
  }
  COLLX_HOST_DEVICE status write_user_recv(int, std::size_t, const void*, std::size_t, int = 0) const {
    return status::not_supported;
  }

 private:
  COLLX_HOST_DEVICE std::uint64_t offset_in(int w, int r, const void* p) const {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p) - span(w, r).base);
  }
  COLLX_HOST_DEVICE const window_span& span(int w, int q) const {
    return windows.table[static_cast<std::size_t>(w) * static_cast<std::size_t>(nranks()) +
                         static_cast<std::size_t>(q)];
  }
  /// Rank q's line of stripe s as `reader`'s region holds it.
  COLLX_HOST_DEVICE std::uint64_t* held(int reader, int q, int s) const {
    return reinterpret_cast<std::uint64_t*>(regions[reader] + layout.barrier_line(q, s));
  }
  COLLX_HOST_DEVICE std::byte* user_address(int self, int q, bool recv_side, int s) const {
    const std::uint64_t w = detail::load_relaxed(line(self, q, recv_side ? recv_window : send_window, s));
    if (w == 0 || !windows.registered()) return nullptr;
    const std::uint64_t off = detail::load_relaxed(line(self, q, recv_side ? recv_offset : send_offset, s));
    return reinterpret_cast<std::byte*>(span(static_cast<int>(w - 1), q).base + off);
  }
};

/// Compile-time capabilities (collx/concepts.hpp); see the header comment.
struct mesh {
  static constexpr const char* name = "mesh";
  static constexpr bool direct_load_store = true;
  static constexpr bool in_order_128b_lines = true;  // per path: see the header comment
  static constexpr bool peer_buffer_access = true;
  static constexpr bool user_buffer_access = true;  // registered windows only
  static constexpr bool multicast = true;
  static constexpr bool needs_proxy = false;
  using view = mesh_view;
};

}  // namespace collx::transport
