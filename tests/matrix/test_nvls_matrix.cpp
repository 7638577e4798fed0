// The test matrix of the multicast (NVLS-style) algorithm on peer memory on thread ranks: all_reduce,
// reduce_scatter and all_gather × every protocol × dtype × op × P ∈ 1..9 × counts ×
// in/out of place, checked against double references with guard bytes; plus
// ~1M elements for a representative subset; and buffers off alignment.
#include "../support/matrix.hpp"

using namespace collx;
using namespace collx::test;

TEST_CASE("nvls: every protocol, dtype and op at small and prime counts", "[nvls][matrix]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9);
  INFO("P = " << P);
  report(run_on_threads(P, small_matrix(algo_id::nvls, P)));
}

TEST_CASE("nvls: ~1M elements", "[nvls][matrix][large]") {
  const int P = GENERATE(2, 5, 8);
  INFO("P = " << P);
  report(run_on_threads(P, large_matrix(algo_id::nvls, P)));
}

TEST_CASE("nvls: buffers off vector alignment, guard bytes intact", "[nvls][misaligned]") {
  const int P = GENERATE(3, 4);
  INFO("P = " << P);
  report(run_on_threads(P, misaligned_matrix(algo_id::nvls, P)));
}

TEST_CASE("nvls: back-to-back calls never touch a buffer a peer still reads", "[nvls]") {
  // No harness barrier separates consecutive data-movement calls, so a rank
  // that finishes early starts the next call while peers copy out the last one.
  const int P = GENERATE(3, 5);
  std::vector<case_desc> cases;
  for (int i = 0; i < 200; ++i) {
    case_desc c;
    c.kind = i % 7 == 6 ? coll::reduce_scatter : coll::all_gather;
    c.dt = i % 2 ? dtype::int8 : dtype::float32;
    c.count = static_cast<std::size_t>((i * 7919) % 5000);
    c.in_place = i % 3 == 0;
    c.variant = {algo_id::nvls, proto_id::simple};
    cases.push_back(c);
  }
  report(run_on_threads(P, cases));
}
