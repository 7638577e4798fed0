// collx/tune/explain.hpp — why the automatic choice picks what it picks:
// every candidate variant's prediction, split into latency, bandwidth and
// reduction (tune::predict), in the order the choice ranks them.
//
// explain<Transport>(profile, problem, request) enumerates exactly the
// candidates tune::fastest considers (tune/select.hpp), stably sorted by
// predicted time, so the first entry is fastest()'s pick (ties keep the
// choice's order) and the second is the runner-up. Host only (a vector);
// collx-explain and collx-probe print it.
#pragma once

#include <collx/tune/model.hpp>
#include <collx/tune/select.hpp>

#include <algorithm>
#include <vector>

namespace collx::tune {

/// One candidate variant and its predicted time.
struct explained {
  variant_choice variant;
  prediction time;
};

/// Every candidate for q under m and r, fastest first (see above).
template <class Transport, class Exec = exec::host>
std::vector<explained> explain(const profile& m, const problem& q, const request& r = {}) {
  std::vector<explained> out;
  select_detail::for_each_variant<false>([&]<class A, class P>() {
    if (!select_detail::candidate<A, P, Transport, Exec>(q.kind, r)) return;
    out.push_back({{A::id, P::id}, predict<A, P>(m, q)});
  });
  std::stable_sort(out.begin(), out.end(), [](const explained& a, const explained& b) {
    return a.time.total_us() < b.time.total_us();
  });
  return out;
}

}  // namespace collx::tune
