// Calibration (tune/fit.hpp): the fit collx-probe uses recovers known α and
// β from synthetic sweeps with noise, and reports how well a line fits.
#include <collx/tune/fit.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

// A named namespace: the unit tests build as one translation unit.
namespace tune_fit_test {

// A deterministic uniform in [-1, 1) (SplitMix64), so the test is repeatable.
struct noise {
  std::uint64_t s;
  double next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return double(z >> 11) / double(1ull << 52) - 1;
  }
};

// A probe-like sweep: x = 8 B .. 16 MiB by 2x, t = α + x/(gbps·1e3) µs with
// relative noise of ±`amp` (uniform), three repeats per size.
void sweep(double alpha_us, double gbps, double amp, std::uint64_t seed, std::vector<double>& x,
           std::vector<double>& t) {
  noise n{seed};
  for (double b = 8; b <= 16 << 20; b *= 2)
    for (int r = 0; r < 3; ++r) {
      x.push_back(b);
      t.push_back((alpha_us + b / (gbps * 1e3)) * (1 + amp * n.next()));
    }
}

TEST_CASE("fit: exact points give the line back", "[tune][fit]") {
  const std::vector<double> x{8, 64, 4096, 1 << 20}, t{0.8 + 8e-3, 0.8 + 64e-3, 0.8 + 4.096, 0.8 + 1048.576};
  const collx::tune::line_fit f = collx::tune::fit_line(x, t);
  REQUIRE(f.ok);
  CHECK(f.a == Approx(0.8).epsilon(1e-9));
  CHECK(f.b == Approx(1e-3).epsilon(1e-9));
  CHECK(f.rms_rel_residual < 1e-9);
}

TEST_CASE("fit: α and β from noisy sweeps within a few percent", "[tune][fit]") {
  // Parameters of the kind the probe meets: shm Simple and LL on CPUs, NVLink.
  struct truth {
    double alpha_us, gbps;
  };
  for (const truth& k : {truth{0.8, 7.0}, truth{0.65, 0.58}, truth{3.4, 370.8}})
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      std::vector<double> x, t;
      sweep(k.alpha_us, k.gbps, 0.05, seed, x, t);  // ±5 % on every point
      const collx::tune::line_fit f = collx::tune::fit_line(x, t);
      INFO("alpha " << k.alpha_us << " us, " << k.gbps << " GB/s, seed " << seed);
      REQUIRE(f.ok);
      CHECK(f.a == Approx(k.alpha_us).epsilon(0.03));
      CHECK(1 / (f.b * 1e3) == Approx(k.gbps).epsilon(0.03));
      // The residual reflects the noise (uniform ±5 %: rms 2.9 %).
      CHECK(f.rms_rel_residual > 0.015);
      CHECK(f.rms_rel_residual < 0.05);
    }
}

TEST_CASE("fit: a curve is reported as a bad fit", "[tune][fit]") {
  // Bandwidth that halves above 1 MiB (a cache edge): no line fits well.
  std::vector<double> x, t;
  for (double b = 8; b <= 16 << 20; b *= 2) {
    x.push_back(b);
    t.push_back(1.0 + b / (b > (1 << 20) ? 5e3 : 10e3));
  }
  const collx::tune::line_fit f = collx::tune::fit_line(x, t);
  REQUIRE(f.ok);
  CHECK(f.rms_rel_residual > 0.1);
  // Too few or degenerate points: not ok.
  CHECK_FALSE(collx::tune::fit_line({8}, {1.0}).ok);
  CHECK_FALSE(collx::tune::fit_line({8, 8, 8}, {1.0, 1.1, 0.9}).ok);
  CHECK_FALSE(collx::tune::fit_line({8, 16}, {1.0, -1.0}).ok);
}

}  // namespace tune_fit_test
