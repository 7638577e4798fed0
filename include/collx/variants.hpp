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
#include <collx/proto/ids.hpp>
#include <collx/proto/ll.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/proto/list.hpp>
#include <collx/proto/simple.hpp>
#include <collx/type_list.hpp>

#include <cstddef>

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

/// A runtime request for a variant; `automatic` lets the communicator choose.
struct variant_choice {
  algo_id algo = algo_id::automatic;
  proto_id proto = proto_id::automatic;
};

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
template <class Transport, class F>
constexpr bool visit_variant(coll c, algo_id a, proto_id p, F&& f) {
  return [&]<class... Algos>(type_list<Algos...>) {
    return ((Algos::id == a && detail::visit_protos<Transport, F, Algos>(c, p, f, protocols{})) || ...);
  }(algorithms{});
}

}  // namespace collx
