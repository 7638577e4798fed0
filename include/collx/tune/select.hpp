// collx/tune/select.hpp — the automatic choice: the allowed variant the model
// predicts fastest, as a constexpr function over variant values.
//
// The choice in layers: selection.hpp parses COLLX_ALGO / COLLX_PROTO into an
// allow-set; fastest() here takes it (with the call's requested fields and
// the determinism option) as an input and folds over the compiled variants
// (variants.hpp) that compose on the transport (composition.hpp) and
// implement the collective, returning the argmin of tune::predict_us as a
// structural value; comm/dispatch.hpp then visits the one variant it names.
// Because everything is constexpr:
//   static_assert(tune::fastest<transport::shm>(tune::shm_host, {coll::all_reduce, 2, 8.0}) == …);
//   using v = tune::best_t<coll::all_reduce, 1024, 4, tune::shm_host, transport::shm>;
//   v::algorithm, v::protocol   — a kernel's variant as types.
//
// Order and ties: algorithms in the order of collx::algorithms with ring moved
// last, Simple first among an algorithm's protocols; the earlier of equal
// predictions wins. Ring goes last because where the model cannot tell it from
// rhd / rabenseifner (P = 2) they measured 1.2-2x faster from 32 KiB up
// (bench/results/algorithms_notes.md). Without a size (all_to_allv, whose
// sizes differ per rank), first_allowed() takes the first candidate in the
// order ring first, then collx::algorithms.
#pragma once

#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/composition.hpp>
#include <collx/exec/host.hpp>
#include <collx/proto/ids.hpp>
#include <collx/selection.hpp>
#include <collx/tune/model.hpp>
#include <collx/type_list.hpp>
#include <collx/variants.hpp>

#include <cstddef>
#include <type_traits>

namespace collx::tune {

/// What the choice may pick from, beyond what composes on the transport.
struct request {
  variant_choice fixed{};                // fields that are not automatic are kept as given
  selection allowed = selection::all();  // COLLX_ALGO / COLLX_PROTO
  bool deterministic = false;            // all_reduce: only algorithms that promise it
};

namespace select_detail {

// Whether variant <A, P> is a candidate for collective c under r. A protocol
// that A has no axis for is never the reason to drop it (variants.hpp).
template <class A, class P, class Transport, class Exec>
constexpr bool candidate(coll c, const request& r) {
  if constexpr (!composable<A, P, Transport, Exec>) {
    return false;
  } else {
    if (!A::implements(c)) return false;
    if (r.fixed.algo != algo_id::automatic) {
      if (A::id != r.fixed.algo) return false;
    } else if (!r.allowed.allows(c, A::id) ||
               (r.deterministic && c == coll::all_reduce && !is_deterministic<A>)) {
      return false;
    }
    if constexpr (has_protocol_axis<A>)
      if (r.fixed.proto != proto_id::automatic ? P::id != r.fixed.proto : !r.allowed.allows(c, P::id))
        return false;
    return true;
  }
}

// Calls f.template operator()<A, P>() for every compiled variant, in the
// choice's order (see the header comment); each variant once.
template <bool RingFirst, class F>
constexpr void for_each_variant(F&& f) {
  auto protocols_in_order = [&]<class A>() {
    [&]<class... Ps>(type_list<Ps...>) {
      ((Ps::id == proto_id::simple ? f.template operator()<A, Ps>() : void()), ...);
      ((Ps::id != proto_id::simple ? f.template operator()<A, Ps>() : void()), ...);
    }(protocols_of<A>{});
  };
  [&]<class... As>(type_list<As...>) {
    if constexpr (RingFirst)
      ((As::id == algo_id::ring ? protocols_in_order.template operator()<As>() : void()), ...);
    ((As::id != algo_id::ring ? protocols_in_order.template operator()<As>() : void()), ...);
    if constexpr (!RingFirst)
      ((As::id == algo_id::ring ? protocols_in_order.template operator()<As>() : void()), ...);
  }(algorithms{});
}

// The compiled policy of list L whose id is Id; fails loudly if none is.
template <auto Id, class L>
struct with_id {
  static_assert(L::size < 0, "collx: no compiled policy has this id (no variant serves the problem?)");
};
template <auto Id, class T, class... Ts>
struct with_id<Id, type_list<T, Ts...>>
    : std::conditional_t<T::id == Id, std::type_identity<T>, with_id<Id, type_list<Ts...>>> {};

}  // namespace select_detail

/// The `N` allowed variants the model predicts fastest for q, fastest first
/// (ties in the choice's order, so that ranked<1>(…).variant[0] is fastest()'s
/// pick), with their predicted times; `size` of them where fewer serve q.
/// The measured choice (comm/measured_choice.hpp) times these at run time.
template <std::size_t N>
struct ranked_variants {
  variant_choice variant[N]{};
  double us[N]{};
  std::size_t size = 0;
};

template <std::size_t N, class Transport, class Exec = exec::host>
constexpr ranked_variants<N> ranked(const profile& m, const problem& q, const request& r = {}) {
  static_assert(N > 0, "collx: ranked<N> needs N >= 1");
  ranked_variants<N> out;
  select_detail::for_each_variant<false>([&]<class A, class P>() {
    if (!select_detail::candidate<A, P, Transport, Exec>(q.kind, r)) return;
    const double us = predict_us<A, P>(m, q);
    std::size_t at = out.size < N ? out.size : N;
    while (at > 0 && us < out.us[at - 1]) --at;  // after every equal or faster one
    if (at >= N) return;
    for (std::size_t i = (out.size < N ? out.size : N - 1); i > at && i < N; --i) {
      out.variant[i] = out.variant[i - 1];
      out.us[i] = out.us[i - 1];
    }
    out.variant[at] = {A::id, P::id};
    out.us[at] = us;
    if (out.size < N) ++out.size;
  });
  return out;
}

/// The allowed variant that Transport (with Exec) serves and the model
/// predicts fastest for problem q under profile m. Fields of r.fixed that are
/// not automatic are kept; where nothing allowed serves q.kind, the result
/// keeps r.fixed's automatic fields (the caller reports it).
template <class Transport, class Exec = exec::host>
constexpr variant_choice fastest(const profile& m, const problem& q, const request& r = {}) {
  const ranked_variants<1> best = ranked<1, Transport, Exec>(m, q, r);
  return best.size > 0 ? best.variant[0] : r.fixed;
}

/// The choice without a size: the first candidate in the order ring first,
/// then collx::algorithms, Simple first (as fastest(), else r.fixed).
template <class Transport, class Exec = exec::host>
constexpr variant_choice first_allowed(coll c, const request& r = {}) {
  variant_choice first = r.fixed;
  bool found = false;
  select_detail::for_each_variant<true>([&]<class A, class P>() {
    if (found || !select_detail::candidate<A, P, Transport, Exec>(c, r)) return;
    first = {A::id, P::id};
    found = true;
  });
  return first;
}

/// A variant as types, for code that instantiates it (a kernel).
template <class Algo, class Proto>
struct variant_t {
  using algorithm = Algo;
  using protocol = Proto;
  static constexpr variant_choice value{Algo::id, Proto::id};
};

/// The variant value V (compiled, not automatic) as a variant_t.
template <variant_choice V>
struct variant_of {
  static_assert(V.algo != algo_id::automatic && V.proto != proto_id::automatic,
                "collx: no compiled variant serves this problem on the transport");
  using type = variant_t<typename select_detail::with_id<V.algo, algorithms>::type,
                         typename select_detail::with_id<V.proto, protocols>::type>;
};
template <variant_choice V>
using variant_type = typename variant_of<V>::type;

/// The variant a kernel should instantiate for collective C of Bytes bytes on
/// NRanks ranks of Transport, as predicted under profile M (nothing filtered
/// by COLLX_ALGO / COLLX_PROTO, default FIFO geometry, staged, not
/// oversubscribed): best<…>::value, and best_t<…> as a variant_t. A compile
/// error where no compiled variant serves C.
template <coll C, std::size_t Bytes, int NRanks, const profile& M, class Transport, class Exec = exec::host>
struct best {
  static constexpr variant_choice value = fastest<Transport, Exec>(M, problem{C, NRanks, double(Bytes)});
  using type = variant_type<value>;
};
template <coll C, std::size_t Bytes, int NRanks, const profile& M, class Transport, class Exec = exec::host>
using best_t = typename best<C, Bytes, NRanks, M, Transport, Exec>::type;

}  // namespace collx::tune
