// collx/needs.hpp — what an algorithm or a protocol needs from a transport.
//
// Needs are optional `static constexpr bool` members of the policy; absent
// means false. collx/composition.hpp reads them against the transport's
// capabilities, and the tuner reads needs_peer_memory to price a schedule by
// barriers and peer bandwidth instead of protocol steps.
#pragma once

namespace collx {

/// What transport T offers beyond the capabilities every transport states
/// (collx/concepts.hpp); each false unless T declares it.
template <class T>
struct transport_offers {
  /// A proxy writes every step whole, then publishes its tail (release).
  static constexpr bool whole_steps = [] {
    if constexpr (requires { T::delivers_whole_steps; }) return bool(T::delivers_whole_steps);
    else return false;
  }();
};

/// What algorithm A needs from a transport (each false unless A declares it).
template <class A>
struct algorithm_needs {
  static constexpr bool peer_memory = [] {
    if constexpr (requires { A::needs_peer_memory; }) return bool(A::needs_peer_memory);
    else return false;
  }();
  static constexpr bool user_buffers = [] {
    if constexpr (requires { A::needs_user_buffers; }) return bool(A::needs_user_buffers);
    else return false;
  }();
  static constexpr bool multicast = [] {
    if constexpr (requires { A::needs_multicast; }) return bool(A::needs_multicast);
    else return false;
  }();
  static constexpr bool proxy = [] {
    if constexpr (requires { A::needs_proxy; }) return bool(A::needs_proxy);
    else return false;
  }();
};

/// What protocol P needs from a transport (each false unless P declares it).
template <class P>
struct protocol_needs {
  static constexpr bool direct_load_store = [] {
    if constexpr (requires { P::needs_direct_load_store; }) return bool(P::needs_direct_load_store);
    else return false;
  }();
  static constexpr bool flagged_lines = [] {
    if constexpr (requires { P::needs_flagged_lines; }) return bool(P::needs_flagged_lines);
    else return false;
  }();
  static constexpr bool in_order_128b_lines = [] {
    if constexpr (requires { P::needs_in_order_128b_lines; }) return bool(P::needs_in_order_128b_lines);
    else return false;
  }();
};

}  // namespace collx
