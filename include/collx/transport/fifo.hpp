// collx/transport/fifo.hpp — one directed connection's FIFO as protocols see it.
//
// A connection src→dst owns a ring of `slots` step slots of `slot_bytes` each
// and two step counters on separate cache lines: `tail`, written only by the
// sender (steps published), and `head`, written only by the receiver (steps
// consumed); the sender also keeps `head_seen`, the last head it loaded. A
// fifo_ref points at each of them separately, so a transport may put them in
// different memories: the shm transport keeps all three in one fifo_ctrl of
// the shared segment; the mesh transport (transport/mesh.hpp) puts the slots
// and the tail in the receiver's memory and head and head_seen in the
// sender's, so that each side polls its own memory and writes the other's. Counters are 64-bit and only ever
// increase, so they persist across collectives and never wrap in practice (2^64 steps). Protocols decide what
// a slot holds and how readiness is signalled; the transport only provides memory.
#pragma once

#include <collx/config.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::transport {

inline constexpr std::size_t cache_line = 128;  // also separates lines on prefetch-pair CPUs

struct alignas(cache_line) fifo_ctrl {
  std::uint64_t tail;       // sender → receiver: steps published
  std::uint64_t head_seen;  // sender's private copy of the last head it loaded (saves a remote load per step)
  char pad0[cache_line - 2 * sizeof(std::uint64_t)];
  std::uint64_t head;  // receiver → sender: steps consumed
  char pad1[cache_line - sizeof(std::uint64_t)];
};
static_assert(sizeof(fifo_ctrl) == 2 * cache_line);

/// Non-owning view of one connection. Trivially copyable (device-capable).
struct fifo_ref {
  std::uint64_t* tail = nullptr;       // polled by the receiver, stored by the sender
  std::uint64_t* head = nullptr;       // polled by the sender, stored by the receiver
  std::uint64_t* head_seen = nullptr;  // the sender's own
  std::byte* buffer = nullptr;         // slots: written by the sender, read by the receiver
  std::uint32_t slots = 0;
  std::uint32_t slot_bytes = 0;

  COLLX_HOST_DEVICE std::byte* slot(std::uint64_t step) const {
    return buffer + static_cast<std::size_t>(step % slots) * slot_bytes;
  }
};

}  // namespace collx::transport
