// Schedules that exchange many small blocks per round (Bruck's all_gather,
// RHD and Rabenseifner over per-rank blocks) with FIFOs smaller than a
// round's block count: every rank sends before it receives, so no rank may
// run more FIFO steps ahead of what it received than half the slots
// (detail::paced's window), or the ranks all block in their sends; with no
// window at all these cases time out. Checked on thread ranks against double references with guard
// bytes: 2-slot FIFOs at P = 5..9, and the default 8 slots at P = 33, where a
// Bruck round carries 16 blocks.
#include "../support/matrix.hpp"

#include <array>

using namespace collx;
using namespace collx::test;

namespace paced_rounds_test {

std::vector<case_desc> block_cases(algo_id algo) {
  std::vector<case_desc> cases;
  const std::array<std::size_t, 3> counts{1, 3, 37};
  for (proto_id proto : {proto_id::simple, proto_id::ll, proto_id::ll128})
    for (coll kind : {coll::all_gather, coll::reduce_scatter, coll::all_reduce})
      if (implements(algo, kind))
        add_counts(cases, make_case(kind, dtype::float32, reduce_op::sum, 0, {algo, proto}), counts,
                   [] { return 0; });
  return cases;
}

}  // namespace paced_rounds_test

using namespace paced_rounds_test;

TEST_CASE("paced rounds: many blocks per round through 2-slot FIFOs", "[paced][matrix]") {
  const algo_id algo = GENERATE(algo_id::bruck, algo_id::rhd, algo_id::rabenseifner);
  const int P = GENERATE(5, 7, 9);
  INFO("algo = " << name(algo) << ", P = " << P);
  comm_options o = test_options();
  o.fifo_slots = 2;
  report(run_on_threads(P, block_cases(algo), o));
}

TEST_CASE("paced rounds: Bruck at P = 33 with the default FIFOs", "[paced][matrix]") {
  report(run_on_threads(33, block_cases(algo_id::bruck)));
}
