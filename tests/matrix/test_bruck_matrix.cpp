// The test matrix of the Bruck algorithm on thread ranks: all_gather
// × every protocol × dtype × op × P ∈ 1..9 × counts ×
// in/out of place, checked against double references with guard bytes; plus
// ~1M elements for a representative subset; and buffers off alignment for
// all_gather and Bruck's all_to_all (bruck_a2a.hpp).
#include "../support/matrix.hpp"

using namespace collx;
using namespace collx::test;

TEST_CASE("bruck: every protocol, dtype and op at small and prime counts", "[bruck][matrix]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9);
  INFO("P = " << P);
  report(run_on_threads(P, small_matrix(algo_id::bruck, P)));
}

TEST_CASE("bruck: ~1M elements", "[bruck][matrix][large]") {
  const int P = GENERATE(2, 5, 8);
  INFO("P = " << P);
  report(run_on_threads(P, large_matrix(algo_id::bruck, P)));
}

TEST_CASE("bruck: buffers off vector alignment, guard bytes intact", "[bruck][misaligned]") {
  const int P = GENERATE(3, 4);
  INFO("P = " << P);
  report(run_on_threads(P, misaligned_matrix(algo_id::bruck, P)));
  report(run_on_threads(P, misaligned_matrix(algo_id::bruck_a2a, P)));
}
