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
  std::uint32_t reserved;
  /// Why the abort word was raised: set once, by the first failure, before
  /// the word (see detail/watchdog.hpp for the packing). Zero until then.
  std::uint64_t abort_cause;
};

/// Calls remembered per rank: a peer that finished a mismatched call and
/// moved on is still compared against the call it made at each sequence.
inline constexpr std::size_t call_history = 4;

/// One rank's public record, written only by that rank. Identity fields are
/// written once when the rank joins; calls[s % call_history] describes the
/// rank's call number s (its `seq` field is stored last, with release).
struct alignas(cache_line) rank_record {
  std::int32_t pid;  // 0 until the rank has joined
  std::uint32_t reserved;
  std::uint64_t start_time;  // /proc/<pid>/stat starttime: tells a reused pid apart
  std::uint64_t pid_ns;      // inode of the rank's pid namespace: pids compare only within one
  std::uint64_t seq;         // number of calls this rank has published
  struct call {
    std::uint64_t seq, signature, count;
  } calls[call_history];
};
static_assert(sizeof(rank_record) == cache_line);

inline constexpr std::uint64_t shm_magic = 0x636f6c6c78736d31ull;  // "collxsm1"
inline constexpr std::uint32_t shm_version = 2;
inline constexpr std::size_t shm_page = 4096;

COLLX_HOST_DEVICE constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

/// Byte offsets of the parts of a segment for a given geometry.
struct shm_layout {
  std::uint32_t nranks = 0, slots = 0, slot_bytes = 0;

  COLLX_HOST_DEVICE constexpr std::size_t records_offset() const {
    return align_up(sizeof(shm_header), cache_line);
  }
  COLLX_HOST_DEVICE constexpr std::size_t ctrl_offset() const {
    return align_up(records_offset() + std::size_t(nranks) * sizeof(rank_record), shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t fifo_bytes() const { return std::size_t(slots) * slot_bytes; }
  COLLX_HOST_DEVICE constexpr std::size_t buffers_offset() const {
    return align_up(ctrl_offset() + std::size_t(nranks) * nranks * sizeof(fifo_ctrl), shm_page);
  }
  COLLX_HOST_DEVICE constexpr std::size_t total_bytes() const {
    return buffers_offset() + std::size_t(nranks) * nranks * align_up(fifo_bytes(), shm_page);
  }
};

/// Non-owning, trivially copyable view of a mapped segment from one rank.
struct shm_view {
  std::byte* base = nullptr;
  shm_layout layout{};

  COLLX_HOST_DEVICE shm_header* header() const { return reinterpret_cast<shm_header*>(base); }
  COLLX_HOST_DEVICE std::uint32_t* abort_word() const { return &header()->abort; }
  COLLX_HOST_DEVICE rank_record* record(int rank) const {
    return reinterpret_cast<rank_record*>(base + layout.records_offset()) + rank;
  }
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
