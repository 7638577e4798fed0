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
// over the link.
//
// Region of rank r, in order (each part page-aligned where noted):
//   receive control: one line per (src, stripe, channel): the tail
//   send control:    two lines per (dst, stripe, channel): the head, then head_seen
//   barrier line:    rank r's peer-memory barrier counter
//   FIFO slots (page-aligned): per (src, stripe) one block of every channel's
//                    slots, as shm_layout lays a pair's block out
//   registered buffer (page-aligned): what the peer-memory primitives load
//                    and store (shm_layout::peer_buffer_bytes() of the geometry)
// Counters start at zero in a zeroed region; LL flags derive from steps, so
// zeroed slots hold no valid line.
//
// Capabilities: as shm, except peers' user buffers (single copy on the
// device needs registered user buffers, not built yet). in_order_128b_lines
// is a property of the path: CPUs with release/acquire flags (tested) and
// one GPU's memory system; across GPUs only NVLink, which the creator must
// check before offering LL128 (gpu::communicator asks NVML whether every
// pair of its GPUs is on NVLink: collx/cuda/links.hpp).
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/transport/fifo.hpp>
#include <collx/transport/shm.hpp>
#include <collx/transport/switch_channel.hpp>

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

  static constexpr mesh_layout make(const shm_layout& geometry) { return {geometry}; }

  COLLX_HOST_DEVICE constexpr std::size_t links() const {
    return std::size_t(fifos.nranks) * fifos.nstripes * fifos.nchannels;
  }
  COLLX_HOST_DEVICE constexpr std::size_t recv_ctrl_offset() const { return 0; }
  COLLX_HOST_DEVICE constexpr std::size_t send_ctrl_offset() const { return links() * cache_line; }
  COLLX_HOST_DEVICE constexpr std::size_t barrier_offset() const {
    return send_ctrl_offset() + links() * 2 * cache_line;
  }
  COLLX_HOST_DEVICE constexpr std::size_t slots_offset() const {
    return align_up(barrier_offset() + cache_line, shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t peer_buffer_offset() const {
    return slots_offset() + std::size_t(fifos.nranks) * fifos.nstripes * fifos.pair_bytes();
  }
  /// Bytes of one rank's region.
  COLLX_HOST_DEVICE constexpr std::size_t region_bytes() const {
    return peer_buffer_offset() + fifos.peer_buffer_bytes();
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
  COLLX_HOST_DEVICE std::uint64_t* barrier_word(int r) const {
    return reinterpret_cast<std::uint64_t*>(regions[r] + layout.barrier_offset());
  }
  /// Multicast load-reduce and store by P loads / P stores (switch_channel.hpp).
  COLLX_HOST_DEVICE peer_switch_channel<mesh_view> switch_channel(int rank) const { return {*this, rank}; }
};

/// Compile-time capabilities (collx/concepts.hpp); see the header comment.
struct mesh {
  static constexpr const char* name = "mesh";
  static constexpr bool direct_load_store = true;
  static constexpr bool in_order_128b_lines = true;  // per path: see the header comment
  static constexpr bool peer_buffer_access = true;
  static constexpr bool user_buffer_access = false;
  static constexpr bool multicast = true;
  static constexpr bool needs_proxy = false;
  using view = mesh_view;
};

}  // namespace collx::transport
