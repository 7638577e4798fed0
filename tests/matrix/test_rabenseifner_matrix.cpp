// The test matrix of the Rabenseifner algorithm on thread ranks: all_reduce
// and reduce × every protocol × dtype × op × P ∈ 1..9 × counts ×
// in/out of place, checked against double references with guard bytes; plus
// ~1M elements for a representative subset; and buffers off alignment.
#include "../support/matrix.hpp"

using namespace collx;
using namespace collx::test;

TEST_CASE("rabenseifner: every protocol, dtype and op at small and prime counts", "[rabenseifner][matrix]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9);
  INFO("P = " << P);
  report(run_on_threads(P, small_matrix(algo_id::rabenseifner, P)));
}

TEST_CASE("rabenseifner: ~1M elements", "[rabenseifner][matrix][large]") {
  const int P = GENERATE(2, 5, 8);
  INFO("P = " << P);
  report(run_on_threads(P, large_matrix(algo_id::rabenseifner, P)));
}

TEST_CASE("rabenseifner: buffers off vector alignment, guard bytes intact", "[rabenseifner][misaligned]") {
  const int P = GENERATE(3, 4);
  INFO("P = " << P);
  report(run_on_threads(P, misaligned_matrix(algo_id::rabenseifner, P)));
}
