// The test matrix of the double binary tree on thread ranks: all_reduce,
// broadcast and reduce × every protocol × dtype × op × P ∈ 1..9 × counts ×
// in/out of place, checked against double references with guard bytes; plus
// ~1M elements for a representative subset; and buffers off alignment.
#include "../support/matrix.hpp"

using namespace collx;
using namespace collx::test;

TEST_CASE("tree: every protocol, dtype and op at small and prime counts", "[tree][matrix]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9);
  INFO("P = " << P);
  report(run_on_threads(P, small_matrix(algo_id::tree, P)));
}

TEST_CASE("tree: ~1M elements", "[tree][matrix][large]") {
  const int P = GENERATE(2, 5, 8);
  INFO("P = " << P);
  report(run_on_threads(P, large_matrix(algo_id::tree, P)));
}

TEST_CASE("tree: buffers off vector alignment, guard bytes intact", "[tree][misaligned]") {
  const int P = GENERATE(3, 4);
  INFO("P = " << P);
  report(run_on_threads(P, misaligned_matrix(algo_id::tree, P)));
}

TEST_CASE("tree: links are consistent and every rank is reachable", "[tree]") {
  for (coll c : {coll::all_reduce, coll::broadcast})
    for (int P = 1; P <= 70; ++P)
      for (int root : {0, P / 2, P - 1})
        for (int w = 0; w < 2; ++w) {
          int roots = 0;
          for (int r = 0; r < P; ++r) {
            const auto t = algo::tree::node(c, P, r, root, w);
            if (t.parent < 0) {
              ++roots;
              if (c != coll::all_reduce) CHECK(r == root);
            } else {
              const auto u = algo::tree::node(c, P, t.parent, root, w);
              bool listed = false;
              for (int k = 0; k < u.nkids; ++k) listed = listed || u.kids[k] == r;
              CHECK(listed);
            }
            for (int k = 0; k < t.nkids; ++k) CHECK(algo::tree::node(c, P, t.kids[k], root, w).parent == r);
            // Walking up ends at the root within P hops (no cycles).
            int hops = 0;
            for (auto u = t; u.parent >= 0 && hops <= P; u = algo::tree::node(c, P, u.parent, root, w))
              ++hops;
            CHECK(hops < P + 1);
          }
          CHECK(roots == 1);
        }
}
