// collx/variants.hpp — the compiled set of (algorithm, protocol) variants and
// the fold that turns a runtime choice into a call of the instantiated code.
//
// Adding an algorithm or protocol is adding its type to a list here; there is
// no string-keyed registry. A variant that cannot serve a collective on a
// transport is filtered by the gate that rejects explicit composition
// (collx/composition.hpp), and a collective the algorithm does not implement
// by Algo::implements, so the fold never instantiates a schedule that explicit
// use would refuse to compile.
//
// The protocol axis: a protocol is the wire format of a connection's FIFO, so
// only algorithms that move data through connections have one. Algorithms on
// peer memory (needs_peer_memory: nvls) touch no FIFO; each is one variant,
// named with proto::simple (protocols_of, protocol_of below), whatever
// protocol a caller names. Simple rather than a marker of its own: proto_id
// and the protocol list belong to the protocols (every per-channel table is
// indexed by them, and ids are recorded in call records), the primitives a
// schedule runs on need an engine type, and Simple's formats nothing.
//
// Policies outside these lists compose explicitly only: direct_one_shot and
// direct_two_shot (forced flavours of direct's all_reduce) have ids of their
// own so that a call's variant names them, but the automatic choice and
// COLLX_ALGO do not offer them.
#pragma once

#include <collx/algo/bruck.hpp>
#include <collx/algo/bruck_a2a.hpp>
#include <collx/algo/direct.hpp>
#include <collx/algo/ids.hpp>
#include <collx/algo/nvls.hpp>
#include <collx/algo/rabenseifner.hpp>
#include <collx/algo/rhd.hpp>
#include <collx/algo/ring.hpp>
#include <collx/algo/tree.hpp>
#include <collx/coll.hpp>
#include <collx/composition.hpp>
#include <collx/concepts.hpp>
#include <collx/needs.hpp>
#include <collx/proto/ids.hpp>
#include <collx/proto/ll.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/proto/list.hpp>
#include <collx/proto/simple.hpp>
#include <collx/type_list.hpp>

#include <cstddef>
#include <type_traits>

namespace collx {

using algorithms = type_list<algo::ring, algo::tree, algo::rhd, algo::rabenseifner, algo::bruck, algo::nvls,
                             algo::direct, algo::bruck_a2a>;
using protocols = proto::compiled;  // the channel order too (proto/list.hpp)

static_assert([]<class... As>(type_list<As...>) { return (algorithm<As> && ...); }(algorithms{}),
              "every compiled algorithm satisfies collx::algorithm (collx/concepts.hpp)");
static_assert([]<class... Ps>(type_list<Ps...>) { return (protocol<Ps> && ...); }(protocols{}),
              "every compiled protocol satisfies collx::protocol (collx/concepts.hpp)");
static_assert(
    []<class... As>(type_list<As...>) {
      const algo_id ids[] = {As::id...};
      for (std::size_t i = 0; i < sizeof...(As); ++i)
        for (std::size_t j = i + 1; j < sizeof...(As); ++j)
          if (ids[i] == ids[j]) return false;
      return true;
    }(algorithms{}),
    "every compiled algorithm has an id of its own (algo/ids.hpp), so a runtime choice names one schedule");

/// A variant: an (algorithm, protocol) pair of ids. As a request,
/// `automatic` lets the communicator choose. A structural type: the tuner's
/// choice can be a template argument (tune/select.hpp).
struct variant_choice {
  algo_id algo = algo_id::automatic;
  proto_id proto = proto_id::automatic;
  friend constexpr bool operator==(const variant_choice&, const variant_choice&) = default;
};

/// Whether algorithm A promises bitwise-identical all_reduce results on every
/// rank and across calls (its `deterministic` trait; false if it has none).
template <class A>
inline constexpr bool is_deterministic = [] {
  if constexpr (requires { A::deterministic; }) return static_cast<bool>(A::deterministic);
  else return false;
}();

/// Runtime form of is_deterministic for a compiled algorithm id.
constexpr bool algo_is_deterministic(algo_id a) {
  return []<class... As>(algo_id id, type_list<As...>) {
    return ((As::id == id && is_deterministic<As>) || ...);
  }(a, algorithms{});
}

/// Whether algorithm A has a protocol axis (see the header comment): false
/// for algorithms on peer memory, which move no bytes through connections.
template <class A>
inline constexpr bool has_protocol_axis = !algorithm_needs<A>::peer_memory;

/// The protocols A's variants use: the compiled list, or Simple alone.
template <class A>
using protocols_of = std::conditional_t<has_protocol_axis<A>, protocols, type_list<proto::simple>>;

/// The protocol variant <A, P> runs with: P, or Simple where A has no axis.
template <class A, class P>
using protocol_of = std::conditional_t<has_protocol_axis<A>, P, proto::simple>;

/// Runtime form of protocol_of: the protocol a request (a, p) names; p
/// itself unless the compiled algorithm a has no protocol axis.
constexpr proto_id protocol_of_id(algo_id a, proto_id p) {
  const bool no_axis = []<class... As>(algo_id id, type_list<As...>) {
    return ((As::id == id && !has_protocol_axis<As>) || ...);
  }(a, algorithms{});
  return no_axis ? proto::simple::id : p;
}

/// Whether the compiled algorithm named `a` implements collective c.
constexpr bool implements(algo_id a, coll c) {
  return [&]<class... Algos>(type_list<Algos...>) {
    return ((Algos::id == a && Algos::implements(c)) || ...);
  }(algorithms{});
}

namespace detail {
template <class Transport, class F, class Algo, class... Protos>
constexpr bool visit_protos(coll c, proto_id p, F& f, type_list<Protos...>) {
  return ((Protos::id == p && Algo::implements(c) && composable<Algo, Protos, Transport>
               ? (f.template operator()<Algo, Protos>(), true)
               : false) ||
          ...);
}
}  // namespace detail

/// Calls f.template operator()<Algo, Proto>() for the compiled variant named
/// by (a, p) if it serves collective c on Transport; returns whether one did.
/// Each variant is visited under its own name only: an algorithm without a
/// protocol axis under (a, simple), not under every protocol.
template <class Transport, class F>
constexpr bool visit_variant(coll c, algo_id a, proto_id p, F&& f) {
  return [&]<class... Algos>(type_list<Algos...>) {
    return ((Algos::id == a && detail::visit_protos<Transport, F, Algos>(c, p, f, protocols_of<Algos>{})) ||
            ...);
  }(algorithms{});
}

}  // namespace collx
