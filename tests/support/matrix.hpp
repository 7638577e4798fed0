// Test support: the per-algorithm collective matrix on thread ranks.
//
// For one algorithm: every collective it implements × every compiled protocol
// (iterating collx::protocols, so new protocols are covered without edits) ×
// dtype/op pairs × counts × in/out of place. At small P every dtype/op pair
// runs; at larger P a rotating third of them, so that each pair still runs at
// two or more P ≥ 4 while the file stays fast.
#pragma once

#include "thread_ranks.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace collx::test {

inline constexpr coll five_colls[] = {coll::all_reduce, coll::all_gather, coll::reduce_scatter,
                                      coll::broadcast, coll::reduce};

/// The protocol ids of the compiled protocol list.
inline std::vector<proto_id> compiled_protocols() {
  return []<class... Ps>(type_list<Ps...>) { return std::vector<proto_id>{Ps::id...}; }(protocols{});
}

/// Whether the compiled algorithm `a` implements collective c.
inline bool algo_implements(algo_id a, coll c) {
  return []<class... As>(algo_id id, coll k, type_list<As...>) {
    return ((As::id == id && As::implements(k)) || ...);
  }(a, c, algorithms{});
}

/// The protocols worth testing for algorithm `a`: all of them, except for
/// algorithms that move data through peer memory (no protocol in the path).
inline std::vector<proto_id> protocols_for(algo_id a) {
  auto all = compiled_protocols();
  if (!has_protocol_axis(a)) all.resize(1);
  return all;
}

/// The small-count matrix of algorithm `a` at P ranks, for every protocol.
inline std::vector<case_desc> small_matrix(algo_id a, int P) {
  const std::size_t p = static_cast<std::size_t>(P);
  const std::vector<std::size_t> counts{0, 1, p - 1, p, p + 1, 1009};
  std::vector<case_desc> cases;
  std::size_t k = 0;
  for (proto_id pr : protocols_for(a))
    add_dtype_op_matrix(
        cases, five_colls, counts, {a, pr}, P, k, [&](coll kind, std::size_t i, dtype, reduce_op) {
          return algo_implements(a, kind) && !(is_reduction(kind) && P >= 4 && i % 3 != p % 3);
        });
  return cases;
}

/// ~1M elements for a representative subset (fp32 sum, int32 max, bf16 sum,
/// fp64 avg; data movement in fp32 and int8), every protocol.
inline std::vector<case_desc> large_matrix(algo_id a, int P) {
  const std::size_t total = (1u << 20) + 3;
  const std::pair<dtype, reduce_op> subset[] = {{dtype::float32, reduce_op::sum},
                                                {dtype::int32, reduce_op::max},
                                                {dtype::bfloat16, reduce_op::sum},
                                                {dtype::float64, reduce_op::avg}};
  std::vector<case_desc> cases;
  int k = 0;
  for (proto_id pr : protocols_for(a))
    for (coll kind : five_colls) {
      if (!algo_implements(a, kind)) continue;
      for (auto [dt, op] : subset) {
        if (!is_reduction(kind) && op != reduce_op::sum) continue;
        if (!is_reduction(kind) && dt == dtype::bfloat16) dt = dtype::int8;
        const std::size_t count = kind == coll::all_gather || kind == coll::reduce_scatter
                                      ? total / static_cast<std::size_t>(P)
                                      : total;
        const bool in_place = (k % 2) == 1;
        cases.push_back(make_case(kind, dt, op, count, {a, pr}, k++ % P, in_place));
      }
    }
  return cases;
}

/// Buffers off alignment: every collective algorithm `a` implements (the five
/// above and all_to_all) × every protocol × 1, 3 and 7 elements off a 64-byte
/// boundary × four element widths, at a prime count (no line or vector width
/// divides it). run_case checks every value against the double reference and
/// the guard bytes around every buffer (nothing outside the output written).
/// One element misaligned runs in place; its ops include avg (a final
/// post-op pass) and max.
inline std::vector<case_desc> misaligned_matrix(algo_id a, int P) {
  const std::pair<dtype, reduce_op> types[] = {{dtype::float32, reduce_op::sum},
                                               {dtype::float16, reduce_op::sum},
                                               {dtype::int8, reduce_op::max},
                                               {dtype::float64, reduce_op::avg}};
  std::vector<case_desc> cases;
  for (proto_id pr : protocols_for(a))
    for (coll kind : {coll::all_reduce, coll::all_gather, coll::reduce_scatter, coll::broadcast, coll::reduce,
                      coll::all_to_all}) {
      if (!algo_implements(a, kind)) continue;
      for (std::size_t mis : {1, 3, 7})
        for (auto [dt, op] : types) {
          case_desc c = make_case(kind, dt, is_reduction(kind) ? op : reduce_op::sum, 1031, {a, pr},
                                  static_cast<int>(mis % static_cast<std::size_t>(P)),
                                  mis == 1 && kind != coll::all_to_all);
          c.misalign = mis;
          cases.push_back(c);
        }
    }
  return cases;
}

inline void report(const std::vector<std::string>& failures) {
  for (std::size_t i = 0; i < failures.size() && i < 8; ++i) UNSCOPED_INFO(failures[i]);
  CHECK(failures.empty());
}

}  // namespace collx::test
