// collx/composition.hpp — the one gate: may algorithm A and protocol P run on
// transport T under executor E?
//
// Algorithms and protocols state what they need as optional
// `static constexpr bool` members (absent means false); transports state what
// they offer (collx/concepts.hpp). Each rule below pairs one need with the
// capability that satisfies it:
//
//   who        needs                      transport offers
//   algorithm  needs_peer_memory          peer_buffer_access
//   algorithm  needs_user_buffers         user_buffer_access
//   algorithm  needs_multicast            multicast
//   algorithm  needs_proxy                needs_proxy (bytes moved by a proxy)
//   protocol   needs_direct_load_store    direct_load_store
//   protocol   needs_flagged_lines        direct_load_store, or delivers_whole_steps
//   protocol   needs_in_order_128b_lines  in_order_128b_lines
//
// `composable<A, P, T, E>` is the conjunction; the dispatch fold
// (variants.hpp) and the automatic choice filter by it. Explicit composition
// calls check_composable<A, P, T, E>(), the single place that turns a broken
// rule into a compile error with that rule's message (the algorithm, protocol
// and transport appear in the "required from" line above it).
// tests/compile_fail/ holds one case per rule.
//
// E defaults to the host executor. No rule depends on the executor yet; the
// gate checks that E is one, so a per-path capability (LL128 lines in order
// on this executor's path) has its place when a transport needs it.
#pragma once

#include <collx/concepts.hpp>
#include <collx/exec/host.hpp>
#include <collx/needs.hpp>

namespace collx {

/// The rules of the gate, one boolean each (true: the rule holds).
template <algorithm A, protocol P, transport_policy T, executor E>
struct composition_rules {
  static constexpr bool peer_memory = !algorithm_needs<A>::peer_memory || T::peer_buffer_access;
  static constexpr bool user_buffers = !algorithm_needs<A>::user_buffers || T::user_buffer_access;
  static constexpr bool multicast = !algorithm_needs<A>::multicast || T::multicast;
  static constexpr bool proxy = !algorithm_needs<A>::proxy || T::needs_proxy;
  static constexpr bool direct_load_store = !protocol_needs<P>::direct_load_store || T::direct_load_store;
  static constexpr bool flagged_lines =
      !protocol_needs<P>::flagged_lines || T::direct_load_store || transport_offers<T>::whole_steps;
  static constexpr bool in_order_128b_lines =
      !protocol_needs<P>::in_order_128b_lines || T::in_order_128b_lines;

  static constexpr bool all = peer_memory && user_buffers && multicast && proxy && direct_load_store &&
                              flagged_lines && in_order_128b_lines;
};

/// Whether <A, P> may run on transport T under executor E.
template <algorithm A, protocol P, transport_policy T, executor E = exec::host>
inline constexpr bool composable = composition_rules<A, P, T, E>::all;

/// Explicit composition's check: true, or a compile error per broken rule.
template <class A, class P, class T, class E = exec::host>
consteval bool check_composable() {
  static_assert(algorithm<A>,
                "collx: not an algorithm (collx/concepts.hpp: id, name, constexpr implements(coll) and cost(coll, "
                "P, bytes))");
  static_assert(protocol<P>, "collx: not a protocol (collx/concepts.hpp: id, name, payload_efficiency, engine)");
  static_assert(transport_policy<T>,
                "collx: not a transport (collx/concepts.hpp: name, view, and the capabilities direct_load_store, "
                "in_order_128b_lines, peer_buffer_access, user_buffer_access, multicast, needs_proxy)");
  static_assert(executor<E>,
                "collx: not an executor (collx/concepts.hpp: group, workers(), wait, wait_own, agree, "
                "fence_before_post, notify)");
  if constexpr (algorithm<A> && protocol<P> && transport_policy<T> && executor<E>) {
    using rules = composition_rules<A, P, T, E>;
    static_assert(rules::peer_memory,
                  "collx: the algorithm loads and stores peers' buffers (needs_peer_memory), but the transport "
                  "does not offer peer_buffer_access");
    static_assert(rules::user_buffers,
                  "collx: the algorithm reads peers' user buffers (needs_user_buffers), but the transport does "
                  "not offer user_buffer_access");
    static_assert(rules::multicast,
                  "collx: the algorithm needs a switch channel (needs_multicast: multicast load-reduce and "
                  "store), but the transport does not offer multicast");
    static_assert(rules::proxy,
                  "collx: the algorithm hands its transfers to a proxy (needs_proxy), but the transport's ranks "
                  "move bytes themselves (needs_proxy is false)");
    static_assert(rules::direct_load_store,
                  "collx: the protocol stores lines straight into the peer's FIFO (needs_direct_load_store), "
                  "but the transport does not offer direct_load_store; use proto::simple");
    static_assert(rules::flagged_lines,
                  "collx: the protocol's readers find its lines by their flags (needs_flagged_lines), but the "
                  "transport neither offers direct_load_store (lines stored where the reader polls) nor "
                  "delivers_whole_steps (a step written whole before its tail); use proto::simple");
    static_assert(rules::in_order_128b_lines,
                  "collx: the protocol needs 128-byte lines that arrive in order (needs_in_order_128b_lines), "
                  "but the transport does not declare in_order_128b_lines; use proto::ll or proto::simple");
  }
  return true;
}

}  // namespace collx
