// collx/transport/shm.hpp — the shared-memory transport: layout and traits.
//
// All ranks of a node map one segment. It holds a header (with the
// communicator-wide abort word), a P×P mesh of connection control blocks and
// the FIFO buffers of every directed pair, page-aligned. Pages of pairs an
// algorithm never uses are never touched, so the mesh costs address space, not
// memory. The same layout serves thread ranks (one anonymous mapping) and
// process ranks (a POSIX shm object); see shm_segment.hpp for creation.
//
// After the FIFOs come one barrier counter per rank (own cache line) and one
// registered buffer per rank (peer_buffer_bytes(), at least 1 MiB and at least
// one FIFO): every rank may load and store every rank's buffer, which is what
// the peer-memory primitives and the NVLS-style algorithm build on; a rank's
// own buffer is also its scratch memory.
//
// Capabilities (compile-time): ranks load and store the FIFO memory directly;
// 128-byte lines arrive in order when the flag word is written with release
// and read with acquire; every rank can load/store every peer's FIFO; no proxy.
#pragma once

#include <collx/config.hpp>
#include <collx/transport/fifo.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::transport {

struct shm_header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t nranks;
  std::uint32_t slots;
  std::uint32_t slot_bytes;
  std::uint64_t total_bytes;
  alignas(cache_line) std::uint32_t abort;  // non-zero: every wait returns status::aborted
  std::uint32_t abort_reason;               // collx::status of the first failure
  std::int32_t abort_rank;                  // rank that raised it (-1 = user abort())
};

inline constexpr std::uint64_t shm_magic = 0x636f6c6c78736d31ull;  // "collxsm1"
inline constexpr std::uint32_t shm_version = 1;
inline constexpr std::size_t shm_page = 4096;

COLLX_HOST_DEVICE constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

/// Byte offsets of the parts of a segment for a given geometry.
struct shm_layout {
  std::uint32_t nranks = 0, slots = 0, slot_bytes = 0;

  COLLX_HOST_DEVICE constexpr std::size_t ctrl_offset() const {
    return align_up(sizeof(shm_header), shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t fifo_bytes() const { return std::size_t(slots) * slot_bytes; }
  COLLX_HOST_DEVICE constexpr std::size_t buffers_offset() const {
    return align_up(ctrl_offset() + std::size_t(nranks) * nranks * sizeof(fifo_ctrl), shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t barrier_offset() const {
    return buffers_offset() + std::size_t(nranks) * nranks * align_up(fifo_bytes(), shm_page);
  }
  /// Bytes of each rank's registered buffer: derived from the FIFO geometry, so
  /// ranks that agree on FIFOs agree on it.
  COLLX_HOST_DEVICE constexpr std::size_t peer_buffer_bytes() const {
    const std::size_t mib = std::size_t(1) << 20;
    return align_up(fifo_bytes() > mib ? fifo_bytes() : mib, shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t peer_buffers_offset() const {
    return align_up(barrier_offset() + std::size_t(nranks) * cache_line, shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t total_bytes() const {
    return peer_buffers_offset() + std::size_t(nranks) * peer_buffer_bytes();
  }
};

/// Non-owning, trivially copyable view of a mapped segment from one rank.
struct shm_view {
  std::byte* base = nullptr;
  shm_layout layout{};

  COLLX_HOST_DEVICE shm_header* header() const { return reinterpret_cast<shm_header*>(base); }
  COLLX_HOST_DEVICE std::uint32_t* abort_word() const { return &header()->abort; }
  COLLX_HOST_DEVICE int nranks() const { return static_cast<int>(layout.nranks); }
  /// FIFO geometry, the same for every connection of this view.
  COLLX_HOST_DEVICE std::uint32_t fifo_slots() const { return layout.slots; }
  COLLX_HOST_DEVICE std::uint32_t fifo_slot_bytes() const { return layout.slot_bytes; }

  /// The connection carrying data from rank src to rank dst.
  COLLX_HOST_DEVICE fifo_ref fifo(int src, int dst) const {
    const std::size_t pair = std::size_t(src) * layout.nranks + std::size_t(dst);
    fifo_ref f;
    f.ctrl = reinterpret_cast<fifo_ctrl*>(base + layout.ctrl_offset()) + pair;
    f.buffer = base + layout.buffers_offset() + pair * align_up(layout.fifo_bytes(), shm_page);
    f.slots = layout.slots;
    f.slot_bytes = layout.slot_bytes;
    return f;
  }

  /// Rank r's registered buffer and barrier counter (see the header comment).
  COLLX_HOST_DEVICE std::byte* peer_buffer(int r) const {
    return base + layout.peer_buffers_offset() + std::size_t(r) * layout.peer_buffer_bytes();
  }
  COLLX_HOST_DEVICE std::size_t peer_buffer_bytes() const { return layout.peer_buffer_bytes(); }
  COLLX_HOST_DEVICE std::uint64_t* barrier_word(int r) const {
    return reinterpret_cast<std::uint64_t*>(base + layout.barrier_offset() + std::size_t(r) * cache_line);
  }
};

/// Compile-time capabilities of a transport, read by protocols and algorithms.
struct shm {
  static constexpr const char* name = "shm";
  static constexpr bool direct_load_store = true;
  static constexpr bool in_order_128b_lines = true;
  static constexpr bool peer_buffer_access = true;
  static constexpr bool needs_proxy = false;
  using view = shm_view;
};

}  // namespace collx::transport
