// collx/proto/credit.hpp — the sender's side of a FIFO's flow control,
// shared by every protocol.
//
// A sender may fill slot `step` once the receiver has consumed step − slots,
// i.e. once head + slots > step. The sender keeps the last head it loaded in
// its own line (head_seen) and loads the receiver's line, a cross-core miss,
// only when that cached value says the FIFO is full.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/error.hpp>
#include <collx/transport/fifo.hpp>

#include <cstdint>

namespace collx::proto {

/// Waits until slot `step` of `out` is free. `head_seen` is the group's copy
/// of out.ctrl->head_seen; every worker of the group calls this with the same
/// values and leaves with the same result.
template <class Exec, class Group>
COLLX_HOST_DEVICE status wait_credit(const Exec& ex, const Group& g, const transport::fifo_ref& out,
                                     std::uint64_t step, std::uint64_t& head_seen) {
  const std::uint64_t slots = out.slots;
  if (head_seen + slots > step) return status::ok;
  const status st = ex.wait([&] { return detail::load_acquire(&out.ctrl->head) + slots > step; });
  if (st != status::ok) return st;
  // One worker refreshes the cache; after the sync every worker reads the same
  // value, so the whole group keeps taking the same branches.
  if (g.leader()) detail::store_relaxed(&out.ctrl->head_seen, detail::load_acquire(&out.ctrl->head));
  g.sync();
  head_seen = detail::load_relaxed(&out.ctrl->head_seen);
  return status::ok;
}

}  // namespace collx::proto
