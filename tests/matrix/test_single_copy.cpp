// Single copy on thread ranks: nvls reading peers' user buffers in place, at
// every size (threshold 0), checked against double references: every
// collective nvls serves × dtype × op × P ∈ 1..9 × counts × in/out of place,
// ~1M elements, all_to_all staged and single copy, and back-to-back calls
// whose buffers peers are still reading when a fast rank starts the next call.
#include "../support/matrix.hpp"

using namespace collx;
using namespace collx::test;

namespace {
comm_options single_copy_everywhere() {
  comm_options o = test_options();
  o.single_copy = true;
  o.single_copy_min_bytes = 0;
  return o;
}
}  // namespace

TEST_CASE("single copy: every dtype and op at small and prime counts", "[single_copy][matrix]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9);
  INFO("P = " << P);
  report(run_on_threads(P, small_matrix(algo_id::nvls, P), single_copy_everywhere()));
}

TEST_CASE("single copy: ~1M elements", "[single_copy][matrix][large]") {
  const int P = GENERATE(2, 3, 8);
  INFO("P = " << P);
  report(run_on_threads(P, large_matrix(algo_id::nvls, P), single_copy_everywhere()));
}

TEST_CASE("single copy: back-to-back calls mixing single copy and staging", "[single_copy]") {
  // A 4 KiB threshold puts consecutive calls on different paths; no harness
  // barrier separates them, so a rank that finishes early reads or overwrites
  // while peers still finish the previous call.
  comm_options o = test_options();
  o.single_copy_min_bytes = 4096;
  const int P = GENERATE(2, 3, 5);
  std::vector<case_desc> cases;
  const coll kinds[] = {coll::all_reduce, coll::all_gather, coll::reduce_scatter, coll::broadcast,
                        coll::all_to_all};
  for (int i = 0; i < 250; ++i) {
    const coll kind = kinds[i % 5];
    cases.push_back(make_case(kind, i % 2 ? dtype::int32 : dtype::float32, reduce_op::sum,
                              static_cast<std::size_t>((i * 7919) % 3000), {algo_id::nvls, proto_id::simple},
                              i % P, i % 4 == 0 && kind != coll::all_to_all));
  }
  report(run_on_threads(P, cases, o));
}

TEST_CASE("nvls all_to_all, staged and single copy, every dtype", "[single_copy][alltoall]") {
  const int P = GENERATE(1, 2, 3, 5, 8);
  INFO("P = " << P);
  const std::size_t p = static_cast<std::size_t>(P);
  std::vector<case_desc> cases;
  for (dtype dt : {dtype::int8, dtype::float16, dtype::float32, dtype::float64})
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, p + 1, std::size_t{1009}, std::size_t{70001}})
      cases.push_back(
          make_case(coll::all_to_all, dt, reduce_op::sum, count, {algo_id::nvls, proto_id::simple}));
  comm_options staged = test_options();
  staged.single_copy = false;
  report(run_on_threads(P, cases, staged));
  report(run_on_threads(P, cases, single_copy_everywhere()));
}
