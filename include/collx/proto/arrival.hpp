// collx/proto/arrival.hpp — the receiver's wait for a peer's data, shared by
// every protocol.
//
// On most views a receiver polls its condition (a published tail, a line's
// flags) through the executor's wait. A view whose steps a proxy moves
// (transport/proxied.hpp) adds two things to every such wait: the rank
// drives the network itself while it waits (view.drive(from): no hand-off
// to the proxy thread on a receive's path, and the credits its proxy
// deferred go out, since a peer may be waiting for them), and a peer that
// closed its communicator ends the wait (view.has_left(from)): its step
// will never come, so the wait fails naming it (view.departed) instead of
// running into the deadline.
#pragma once

#include <collx/config.hpp>
#include <collx/error.hpp>

#include <cstdint>

namespace collx::proto {

/// A view whose peers may leave and whose rank drives the network while it
/// waits (transport::proxied_view).
template <class View>
concept departing_view = requires(const View& v) {
  v.drive(0);
  v.has_left(0);
  v.departed(0, 0, std::uint64_t{});
};

/// Waits until `arrived()` holds; `arrived` loads with acquire whatever it
/// reads, so what the sender wrote before its signal is visible after it.
/// (`from`, `ch`, `step`): what is waited for, for the failure when `from`
/// left without sending it. Errors: the executor's (timeout, aborted, a
/// failed check), or status::aborted once the view has named the departed
/// peer in the communicator's failure.
template <class Exec, class View, class Arrived>
COLLX_HOST_DEVICE status wait_arrival(const Exec& ex, const View& view, int from, int ch, std::uint64_t step,
                                      Arrived&& arrived) {
  if constexpr (departing_view<View>) {
    bool got = false;
    const status st = ex.wait([&] {
      if ((got = arrived())) return true;
      view.drive(from);
      return (got = arrived()) || view.has_left(from);
    });
    if (st != status::ok) return st;
    // A step published before the goodbye still counts.
    if (!got && !arrived()) return view.departed(from, ch, step);
    return status::ok;
  } else {
    (void)view, (void)from, (void)ch, (void)step;
    return ex.wait(arrived);
  }
}

}  // namespace collx::proto
