// Process ranks' agreement on a multicast object (collx/cuda/multicast_plan.hpp).
#include <collx/cuda/multicast_plan.hpp>
#include <collx/error.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace collx;
using gpu::make_multicast_vote;

TEST_CASE("multicast plan: every rank joins, at the largest alignment any rank needs", "[multicast_plan]") {
  const std::vector<gpu::multicast_vote> votes{make_multicast_vote(false, 2u << 20, ""),
                                               make_multicast_vote(false, 512u << 20, ""),
                                               make_multicast_vote(false, 2u << 20, "")};
  const gpu::multicast_plan p = gpu::agree_multicast(votes, "op");
  CHECK(p.align == (512u << 20));
  CHECK(p.why.empty());
  CHECK_FALSE(p.required);
}

TEST_CASE("multicast plan: one rank refuses, so none joins, naming it", "[multicast_plan]") {
  const std::vector<gpu::multicast_vote> votes{
      make_multicast_vote(false, 2u << 20, ""),
      make_multicast_vote(false, 2u << 20, "GPU 1 does not offer multicast"),
      make_multicast_vote(false, 0, "multicast is off")};
  const gpu::multicast_plan p = gpu::agree_multicast(votes, "op");
  CHECK(p.align == 0);
  CHECK(p.why == "rank 1: GPU 1 does not offer multicast");
  // A refusing rank's alignment never counts.
  CHECK(make_multicast_vote(false, 4096, "no").align == 0);
}

TEST_CASE("multicast plan: asked for by one rank and refused by another, every rank throws alike",
          "[multicast_plan]") {
  const std::vector<gpu::multicast_vote> votes{make_multicast_vote(true, 2u << 20, ""),
                                               make_multicast_vote(false, 0, "ranks share a GPU")};
  try {
    (void)gpu::agree_multicast(votes, "gpu::init_rank");
    FAIL("a refused multicast that rank 0 asked for was accepted");
  } catch (const error& e) {
    CHECK(e.code() == status::not_supported);
    CHECK(std::string(e.what()).find("gpu::init_rank: multicast is on, but rank 1: ranks share a GPU") !=
          std::string::npos);
  }
  // Asked for and offered by every rank: required, and joined.
  const std::vector<gpu::multicast_vote> all_on{make_multicast_vote(true, 2u << 20, ""),
                                                make_multicast_vote(true, 2u << 20, "")};
  const gpu::multicast_plan p = gpu::agree_multicast(all_on, "op");
  CHECK(p.required);
  CHECK(p.align == (2u << 20));
}
