// Cache sizes from a working-set sweep (tune/cache_fit.hpp): the fit
// collx-probe uses recovers known sizes and rates from synthetic sweeps with
// noise, finds the knees of a measured sweep, says when a level did not
// show, and refuses input it cannot fit.
#include <collx/tune/cache_fit.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

// A named namespace: the unit tests build as one translation unit.
namespace cache_fit_test {

using collx::tune::cache_levels;
using collx::tune::cache_point;
using collx::tune::fit_cache_levels;

constexpr double KiB = 1024, MiB = 1024 * KiB;

// A deterministic uniform in [-1, 1) (SplitMix64).
double uniform(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) / double(1ull << 52) - 1;
}

// Working sets 64 KiB .. 1 GiB by √2, rates from the model's own form (the
// level's miss share 1 − size / ws pays its extra time), with relative noise
// of ±amp.
std::vector<cache_point> model_sweep(double near, double last, double in_gbps, double near_gbps,
                                     double mem_gbps, double amp, std::uint64_t seed) {
  std::vector<cache_point> s;
  for (double ws = 64 * KiB; ws <= 1024 * MiB * 1.0001; ws *= std::sqrt(2.0)) {
    double ns = 1 / in_gbps;
    if (near > 0 && ws > near) ns += (1 - near / ws) / near_gbps;
    if (last > 0 && ws > last) ns += (1 - last / ws) / mem_gbps;
    s.push_back({ws, 1 / ns * (1 + amp * uniform(seed))});
  }
  return s;
}

// Within a factor f of want.
bool near_to(double got, double want, double f) { return got >= want / f && got <= want * f; }

TEST_CASE("cache fit: two levels of the model's form are recovered from a noisy sweep", "[tune][cache]") {
  for (std::uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    const std::vector<cache_point> s = model_sweep(2 * MiB, 32 * MiB, 200, 150, 40, 0.03, seed);
    const cache_levels r = fit_cache_levels(s);
    INFO("seed " << seed << ": near " << r.near_bytes << ", last " << r.last_bytes << ", rates " << r.in_gbps
                 << " / " << r.near_gbps << " / " << r.mem_gbps);
    CHECK(near_to(r.near_bytes, 2 * MiB, std::sqrt(2.0)));
    CHECK(near_to(r.last_bytes, 32 * MiB, std::sqrt(2.0)));
    CHECK(near_to(r.in_gbps, 200, 1.1));
    CHECK(near_to(r.near_gbps, 150, 1.5));
    CHECK(near_to(r.mem_gbps, 40, 1.25));
    CHECK(r.points == s.size());
    CHECK(r.rms_rel_residual < 0.05);
  }
  // Without noise the grid's own points are found exactly.
  const cache_levels exact = fit_cache_levels(model_sweep(1 * MiB, 16 * MiB, 120, 60, 20, 0, 9));
  CHECK(exact.near_bytes == Approx(1 * MiB).epsilon(1e-9));
  CHECK(exact.last_bytes == Approx(16 * MiB).epsilon(1e-9));
  CHECK(exact.mem_gbps == Approx(20).epsilon(1e-6));
  CHECK(exact.rms_rel_residual < 1e-9);
}

TEST_CASE("cache fit: the knees of a sweep measured on a VM that reports a 508 MiB L3", "[tune][cache]") {
  // memcpy by two pinned threads at once on a 2-CPU AMD EPYC VM (1 MiB L2 per
  // core; CPUID and hwloc report an L3 of 508 MiB): bytes copied per second at
  // each total working set (bytes read plus written).
  const std::vector<cache_point> s = {
      {64 * KiB, 234.1},  {96 * KiB, 204.8},  {128 * KiB, 181.5}, {192 * KiB, 192.4}, {256 * KiB, 207.4},
      {384 * KiB, 206.7}, {512 * KiB, 227.8}, {768 * KiB, 229.5}, {1 * MiB, 216.3},   {1.5 * MiB, 145.9},
      {2 * MiB, 96.5},    {3 * MiB, 133.0},   {4 * MiB, 98.0},    {6 * MiB, 90.4},    {8 * MiB, 87.9},
      {12 * MiB, 92.2},   {16 * MiB, 89.7},   {24 * MiB, 89.2},   {32 * MiB, 95.9},   {48 * MiB, 60.7},
      {64 * MiB, 50.2},   {96 * MiB, 41.1},   {128 * MiB, 37.7},  {192 * MiB, 33.7},  {256 * MiB, 32.8},
      {384 * MiB, 29.6},  {512 * MiB, 27.4},  {768 * MiB, 28.9},  {1024 * MiB, 30.0}};
  const cache_levels r = fit_cache_levels(s);
  INFO("near " << r.near_bytes / MiB << " MiB, last " << r.last_bytes / MiB << " MiB, residual "
               << r.rms_rel_residual);
  // The two L2s (2 MiB) and an L3 of tens of MiB, not 508.
  CHECK(r.near_bytes >= 0.5 * MiB);
  CHECK(r.near_bytes <= 2 * MiB);
  CHECK(r.last_bytes >= 16 * MiB);
  CHECK(r.last_bytes <= 64 * MiB);
  CHECK(r.in_gbps > 150);
  CHECK(r.mem_gbps > 0);
}

TEST_CASE("cache fit: levels that do not show are reported as none", "[tune][cache]") {
  SECTION("a flat sweep: no level") {
    const cache_levels r = fit_cache_levels(model_sweep(0, 0, 100, 1, 1, 0.02, 7));
    CHECK(r.near_bytes == 0);
    CHECK(r.last_bytes == 0);
    CHECK(r.near_gbps == 0);
    CHECK(r.mem_gbps == 0);
    CHECK(near_to(r.in_gbps, 100, 1.05));
  }
  SECTION("one fall: it is the last level") {
    const cache_levels r = fit_cache_levels(model_sweep(0, 8 * MiB, 100, 1, 25, 0.02, 8));
    CHECK(r.near_bytes == 0);
    CHECK(near_to(r.last_bytes, 8 * MiB, std::sqrt(2.0)));
    CHECK(near_to(r.mem_gbps, 25, 1.25));
  }
  SECTION("one fall and a second too small to count: the first is the last level") {
    // The second adds about 4 % at 1 GiB, under the 10 % a level must add.
    const cache_levels r = fit_cache_levels(model_sweep(4 * MiB, 128 * MiB, 100, 25, 500, 0, 10));
    CHECK(r.near_bytes == 0);
    CHECK(r.near_gbps == 0);
    CHECK(r.last_bytes == Approx(4 * MiB).epsilon(1e-9));
    CHECK(r.mem_gbps == Approx(25).epsilon(1e-6));
  }
  SECTION("a fall beyond the sweep: not seen") {
    const cache_levels r = fit_cache_levels(model_sweep(0, 4096 * MiB, 100, 1, 25, 0.02, 9));
    CHECK(r.last_bytes == 0);
    CHECK(r.mem_gbps == 0);
  }
}

TEST_CASE("cache fit: input it cannot fit is refused with the reason", "[tune][cache]") {
  const std::vector<cache_point> three = {{1 * MiB, 10}, {2 * MiB, 9}, {4 * MiB, 8}};
  CHECK_THROWS_WITH(fit_cache_levels(three), Catch::Contains("at least 4 working sets"));
  std::vector<cache_point> s = model_sweep(1 * MiB, 16 * MiB, 100, 50, 20, 0, 1);
  s[3].gbps = 0;
  CHECK_THROWS_AS(fit_cache_levels(s), collx::error);
  s[3].gbps = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(fit_cache_levels(s), Catch::Contains("positive and finite"));
  s[3].gbps = 10, s[4].working_set = -1;
  CHECK_THROWS_AS(fit_cache_levels(s), collx::error);
}

}  // namespace cache_fit_test
