// The test matrix of the ring algorithm on thread ranks: every collective ×
// dtype × op × P × count × in/out of place, checked against double references
// with guard bytes and unchanged inputs.
#include "../support/matrix.hpp"

using namespace collx;
using namespace collx::test;

namespace {

std::vector<case_desc> matrix(int P, const std::vector<std::size_t>& counts, bool all_pairs,
                              variant_choice v) {
  std::vector<case_desc> cases;
  std::size_t k = 0;
  add_dtype_op_matrix(cases, five_colls, counts, v, P, k, [&](coll, std::size_t, dtype dt, reduce_op op) {
    return all_pairs || common_pair(dt, op);
  });
  return cases;
}

}  // namespace

TEST_CASE("ring/simple: every collective, dtype and op at small and prime counts", "[ring][matrix]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 7, 8);
  const std::vector<std::size_t> counts{
      0,   1, static_cast<std::size_t>(P - 1), static_cast<std::size_t>(P), static_cast<std::size_t>(P + 1),
      1009};
  INFO("P = " << P);
  report(run_on_threads(P, matrix(P, counts, true, {algo_id::ring, proto_id::simple})));
}

TEST_CASE("ring/simple: ~1M elements, every collective and dtype", "[ring][matrix][large]") {
  // What ~1M elements adds to the small matrix: each connection carries a
  // vector many FIFO slots long, so every call runs many pipelined steps and
  // wraps around the FIFO (int8 all_reduce at P = 2: 16 steps of the 8-slot,
  // 64 KiB Simple FIFO; fp64 at P = 8: 224), at every element width, for
  // every collective, in and out of place. The steps depend on the element
  // width, not on the op (the dispatch runs one schedule per width, the op
  // behind an erased reducer), and every (dtype, op) kernel is checked by the
  // small matrix; so here every dtype runs with sum, and fp32 and int32 with
  // every op. P: even, odd, prime and the largest of the small matrix (P = 1
  // has no connection).
  const int P = GENERATE(2, 3, 5, 8);
  INFO("P = " << P);
  // Under sanitizers (COLLX_TEST_SCALE=quick): 64 Ki elements on P <= 3 only.
  const bool quick = quick_scale();
  if (quick && P > 3) return;
  const std::size_t total = quick ? (1u << 16) + 3 : (1u << 20) + 3;
  // all_gather/reduce_scatter count is per rank: keep the total near 1M.
  auto cases = matrix(P, {total}, false, {algo_id::ring, proto_id::simple});
  for (auto& c : cases)
    if (c.kind == coll::all_gather || c.kind == coll::reduce_scatter)
      c.count = total / static_cast<std::size_t>(P);
  report(run_on_threads(P, cases));
}

TEST_CASE("ring/simple: buffers off vector alignment", "[ring]") {
  // Every collective ring serves, pinned to ring/simple (run_case checks that
  // it ran), at 1, 3 and 7 elements off a 64-byte boundary, four element
  // widths, a prime count; one element off runs in place.
  const int P = GENERATE(2, 3, 5);
  std::vector<case_desc> cases;
  for (case_desc c : misaligned_matrix(algo_id::ring, P))
    if (c.variant.proto == proto_id::simple) {
      c.count = 4099;
      cases.push_back(c);
    }
  REQUIRE(cases.size() == 5 * 3 * 4);
  report(run_on_threads(P, cases));
}

TEST_CASE("back-to-back calls of different sizes reuse the connections' counters", "[ring]") {
  // Ring on every protocol in turn, so each channel's counters continue from
  // calls of other sizes and from calls on the other channels.
  const int P = 4;
  const auto protos = compiled_protocols();
  std::vector<case_desc> cases;
  for (int i = 0; i < 300; ++i) {
    case_desc c;
    c.kind = five_colls[i % 5];
    c.dt = static_cast<dtype>(i % dtype_count);
    c.count = static_cast<std::size_t>((i * 7919) % 70000);
    c.in_place = i % 3 == 0;
    c.root = i % P;
    c.variant = {algo_id::ring, protos[static_cast<std::size_t>(i / 5) % protos.size()]};
    cases.push_back(c);
  }
  report(run_on_threads(P, cases));
}
