// collx/transport/user_windows.hpp — registered user buffers ("windows") of a
// group whose ranks load and store each other's memory (the mesh transport).
//
// A window is one buffer per rank, registered collectively: the k-th buffer
// every rank registers makes window k (NCCL's ncclCommRegister, the
// registered buffers of vLLM's custom all-reduce). Every rank maps every
// rank's buffer of every window into its own address space (on GPUs: the
// same pointer in one process with peer access, an IPC mapping across
// processes), so a schedule can read a peer's send buffer, or write into its
// recv buffer, in place: one copy instead of two through the staging buffer.
//
// A call is registered when its send and recv buffers each lie inside this
// rank's part of some window (a broadcast's non-root send is not looked at).
// The host looks that up when it launches the call (window_registry::find,
// transport/window_registry.hpp, host only)
// and puts, in the view, the windows of both sides and where the kernel reads
// every rank's mapping of every window (call_windows: on a GPU, a table in
// its own memory). During the call each rank publishes the windows and
// offsets it uses; a peer's address is that peer's mapping of its own
// published window plus its offset, so ranks may use different windows and
// offsets. Every rank of a call is registered or none is (the choice of
// schedule depends on it); a rank that finds a peer unregistered, or of
// another size, fails the call with status::mismatch (transport/mesh.hpp,
// mesh_view::may_load_peers).
//
// A window whose buffers are bound to a multicast object has a multicast
// address (window_span::multicast). Where every rank of a call published the
// same window and offset for a side, that side's range is one range of the
// multicast address, and the switch channel reduces from it or stores into it
// with one multimem instruction per 16-byte pack (mesh_view::user_switch):
// the registered buffers themselves take the place of the staging buffer.
#pragma once

#include <collx/config.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::transport {

/// One rank's buffer of one window, as this address space maps it, and the
/// window's multicast address where its buffers are bound to a multicast
/// object (an NVSwitch group: offset k of it stands for offset k of every
/// rank's buffer; as the table's reader maps it, the same in every rank's
/// entry of the window; 0: none).
struct window_span {
  std::uintptr_t base = 0;
  std::uint64_t bytes = 0;
  std::uintptr_t multicast = 0;

  COLLX_HOST_DEVICE constexpr bool holds(std::uintptr_t p, std::uint64_t n) const {
    return p >= base && p - base <= bytes && n <= bytes - (p - base);
  }
};

/// What a launch hands its kernel about the call's registered buffers: the
/// group's window table as the kernel reads it (on a GPU, a copy in its
/// memory), which window holds each side on this rank (-1: none), and the
/// size from which a call reads peers' buffers in place. Trivially copyable
/// and small: it travels in the kernel's arguments (graph replays carry it).
struct call_windows {
  const window_span* table = nullptr;  // [w * nranks + q]
  std::int32_t send = -1, recv = -1;
  std::uint64_t min_bytes = ~std::uint64_t{0};
  /// A single-copy all_reduce up to this many bytes per rank is one-shot
  /// (algo::nvls); 0: never.
  std::uint64_t one_shot_bytes = 0;
  /// The send or recv window has a multicast address (its accesses need the
  /// multicast proxy fence at the barriers: multimem.hpp).
  bool multicast = false;

  COLLX_HOST_DEVICE constexpr bool registered() const { return table != nullptr && send >= 0 && recv >= 0; }
};

}  // namespace collx::transport
