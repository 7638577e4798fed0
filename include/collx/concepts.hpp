// collx/concepts.hpp — the contracts between algorithms, protocols,
// transports and executors, written as concepts.
//
// Each concept states what the rest of collx calls on a policy today, no
// more: a new policy that satisfies it composes with the others, and one that
// does not is rejected with the concept's name instead of an instantiation
// backtrace. What a policy *needs* from another (peer memory, ordered lines,
// …) is not part of these shapes; collx/composition.hpp reads those traits.
//
// The schedules themselves (Algo::run<C>, Proto::engine<Exec, View>) are
// templates over the primitives and views, so the concepts check that they
// exist where a type to check them with is at hand (protocol_on), and the
// compile of the first call checks the rest.
#pragma once

#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/error.hpp>
#include <collx/proto/ids.hpp>

#include <concepts>
#include <type_traits>

namespace collx {

/// What an algorithm's cost() returns (algo/cost.hpp): the α-β-γ terms.
template <class C>
concept cost_terms_like = requires(const C& t) {
  { t.steps } -> std::convertible_to<double>;
  { t.bytes_sent } -> std::convertible_to<double>;
  { t.bytes_reduced } -> std::convertible_to<double>;
};

namespace concept_detail {
// Whether A::implements and A::cost are usable in constant expressions.
template <class A>
concept constexpr_costed = requires {
  typename std::bool_constant<A::implements(coll::all_reduce)>;
  typename std::bool_constant<(A::cost(coll::all_reduce, 8, 1024.0).steps >= 0)>;
};
}  // namespace concept_detail

/// An algorithm (include/collx/algo/): a schedule written against the
/// primitives.
///   A::id                  its algo_id, unique among the algorithms
///   A::name                its name, name(A::id)
///   A::implements(c)       constexpr: whether it serves collective c
///   A::cost(c, P, bytes)   constexpr α-β-γ terms (algo/cost.hpp)
///   A::run<C>(prims, args) the schedule, for every C it implements; for any
///                          other C a static_assert names the algorithm
/// Optional: `deterministic` (bitwise-identical all_reduce on every rank) and
/// the needs read by collx/composition.hpp (needs_peer_memory, …).
template <class A>
concept algorithm = requires(coll c, int nranks, double bytes) {
  { A::id } -> std::convertible_to<algo_id>;
  { A::name } -> std::convertible_to<const char*>;
  { A::implements(c) } -> std::same_as<bool>;
  { A::cost(c, nranks, bytes) } -> cost_terms_like;
} && concept_detail::constexpr_costed<A>;

/// A protocol (include/collx/proto/): the wire format of a connection's FIFO.
///   P::id                  its proto_id
///   P::name                its name, name(P::id)
///   P::payload_efficiency  payload bytes per byte moved through the FIFO
///   P::engine<Exec, View>  the step logic the primitives drive
/// Optional: the needs read by collx/composition.hpp (needs_direct_load_store,
/// needs_flagged_lines, needs_in_order_128b_lines).
template <class P>
concept protocol = requires {
  { P::id } -> std::convertible_to<proto_id>;
  { P::name } -> std::convertible_to<const char*>;
  { P::payload_efficiency } -> std::convertible_to<double>;
};

/// Protocol P has an engine for executor Exec over transport view View.
template <class P, class Exec, class View>
concept protocol_on = protocol<P> && requires { typename P::template engine<Exec, View>; };

/// A transport (include/collx/transport/): where FIFO memory lives and how a
/// peer reaches it. Its capabilities are compile-time booleans, each read by
/// collx/composition.hpp against what algorithms and protocols need:
///   direct_load_store    ranks load and store the FIFO memory directly
///   in_order_128b_lines  a 128-byte line written flag-last is seen whole
///                        once its flag is seen
///   peer_buffer_access   every rank loads/stores every rank's registered buffer
///   user_buffer_access   ranks may read peers' user buffers (single copy)
///   multicast            a switch channel: multicast load-reduce and store
///   needs_proxy          bytes are moved by a progress thread, not by the ranks
/// optionally (absent: false, collx/needs.hpp's transport_offers)
///   delivers_whole_steps a proxy writes each step whole, then publishes its
///                        tail (release): a line protocol may wait for it
/// and `view`, the trivially copyable connection table the primitives use.
/// (Named transport_policy because namespace collx::transport holds the
/// transports themselves.)
template <class T>
concept transport_policy = requires {
  { T::name } -> std::convertible_to<const char*>;
  { T::direct_load_store } -> std::convertible_to<bool>;
  { T::in_order_128b_lines } -> std::convertible_to<bool>;
  { T::peer_buffer_access } -> std::convertible_to<bool>;
  { T::user_buffer_access } -> std::convertible_to<bool>;
  { T::multicast } -> std::convertible_to<bool>;
  { T::needs_proxy } -> std::convertible_to<bool>;
  typename T::view;
  requires std::is_trivially_copyable_v<typename T::view>;
};

/// The workers that run one rank's share of a primitive together (one host
/// thread; a CUDA block's threads). Every worker calls sync() at the same
/// points; the leader alone publishes counters.
template <class G>
concept worker_group = requires(const G& g) {
  { g.size() } -> std::convertible_to<int>;
  { g.index() } -> std::convertible_to<int>;
  { g.leader() } -> std::convertible_to<bool>;
  g.sync();
};

namespace concept_detail {
struct ready {
  COLLX_HOST_DEVICE constexpr bool operator()() const { return true; }
};
}  // namespace concept_detail

/// An executor (include/collx/exec/): where a rank's work runs and how it
/// waits.
///   E::group, e.workers()  the worker group of the rank
///   e.wait(pred)           until pred() holds, with the deadline and abort
///                          checks; all workers call it and get one verdict
///   e.wait_own(pred)       the same, for one worker alone
///   E::agree(s)            the workers' common verdict on their statuses
///   e.fence_before_post()  orders payload stores before a counter's release
///   e.notify(q)            wakes rank q if it sleeps on a wait
template <class E>
concept executor = requires(const E& e, status s, int q) {
  typename E::group;
  requires worker_group<typename E::group>;
  { e.workers() } -> std::convertible_to<typename E::group>;
  { e.wait(concept_detail::ready{}) } -> std::same_as<status>;
  { e.wait_own(concept_detail::ready{}) } -> std::same_as<status>;
  { E::agree(s) } -> std::same_as<status>;
  e.fence_before_post();
  e.notify(q);
};

}  // namespace collx
