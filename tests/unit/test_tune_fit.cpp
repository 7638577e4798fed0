// Calibration (tune/fit.hpp): the fit collx-probe uses recovers known α and
// β from synthetic sweeps with noise, and reports how well a line fits.
#include <collx/transport/shm.hpp>
#include <collx/tune/fit.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/select.hpp>

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

// Timed calls of every variant of all_reduce, all_gather and reduce_scatter
// on 2 and 4 ranks (4 also oversubscribed), 8 B to 16 MiB, as the model
// prices them under `truth`, with relative noise ±amp.
std::vector<collx::tune::timed_call> synthetic_calls(const collx::tune::profile& truth, double amp,
                                                     std::uint64_t seed) {
  using namespace collx;
  noise n{seed};
  std::vector<tune::timed_call> calls;
  for (coll c : {coll::all_reduce, coll::all_gather, coll::reduce_scatter})
    for (int P : {2, 4})
      for (bool over : {false, true})
        for (double b = 8; b <= 16 << 20; b *= 8) {
          if (over && P == 2) continue;
          tune::problem q{c, P, b, b >= 256 * 1024, over};
          q.cpu_share = over ? 0.5 : 1;  // 4 ranks on 2 CPUs
          tune::select_detail::for_each_variant<false>([&]<class A, class Pr>() {
            if (!tune::select_detail::candidate<A, Pr, transport::shm, exec::host>(c, {})) return;
            calls.push_back(
                tune::timed<A, Pr>(q, tune::predict_us<A, Pr>(truth, q) * (1 + amp * n.next()), truth));
          });
        }
  return calls;
}

TEST_CASE("fit: a whole profile from timed calls of every variant", "[tune][fit]") {
  using namespace collx;
  tune::profile truth = tune::shm_host;
  truth.cache_bytes = 32 << 20, truth.mem_gbps = 2.5;       // 4 ranks × 2 × 16 MiB misses 3/4 of it
  truth.near_cache_bytes = 2 << 20, truth.near_gbps = 6.0;  // and from 256 KiB on the near cache
  truth.call_us = 0.1, truth.oversub_call_us = 3.0;
  truth.single_copy_gbps = 1.7;  // peers' buffers in place, from 256 KiB
  truth.reduce_gbps = 5.0;  // slower than Simple's 7 GB/s: a reduction there adds 1/5 − 1/7 ns per byte
  truth.proto[proto::channel_of<proto::simple>].oversub_extra_us = 3.0;
  truth.proto[proto::channel_of<proto::ll128>].oversub_extra_us = 1.0;
  // Start far from the truth: the fit must not lean on it.
  tune::profile start = truth;
  start.intra = {tune::link_kind::shm, 5.0, 50.0};
  start.barrier_us = 9, start.peer_gbps = 40, start.copy_gbps = 3,  // γ: measured apart, not fitted
      start.oversub_step_us = 1, start.mem_gbps = 30, start.single_copy_gbps = 20, start.near_gbps = 40,
  start.call_us = 1, start.oversub_call_us = 0.5;
  for (auto& pp : start.proto) pp.oversub_extra_us = 5;
  for (double amp : {0.0, 0.05}) {
    const auto calls = synthetic_calls(truth, amp, 7);
    const tune::profile_fit f = tune::fit_profile(calls, start);
    INFO("noise " << amp << ", " << calls.size() << " calls, residual " << f.rms_rel_residual);
    const double tol = amp == 0 ? 1e-6 : 0.05;
    CHECK(f.identified == 3 * proto::channel_count + 8);
    for (int ch = 0; ch < proto::channel_count; ++ch) {
      INFO("channel " << ch);
      CHECK(f.model.alpha_us(f.model.intra, ch) == Approx(truth.alpha_us(truth.intra, ch)).epsilon(tol));
      CHECK(f.model.gbps(f.model.intra, ch) == Approx(truth.gbps(truth.intra, ch)).epsilon(tol));
    }
    CHECK(f.model.barrier_us == Approx(truth.barrier_us).epsilon(tol));
    CHECK(f.model.peer_gbps == Approx(truth.peer_gbps).epsilon(tol));
    CHECK(f.model.copy_gbps == Approx(truth.copy_gbps).epsilon(amp == 0 ? tol : 0.15));
    CHECK(f.model.reduce_gbps == Approx(truth.reduce_gbps).epsilon(tol));
    CHECK(f.model.oversub_step_us == Approx(truth.oversub_step_us).epsilon(tol));
    for (int ch = 0; ch < proto::channel_count; ++ch) {
      INFO("channel " << ch);
      CHECK(f.model.proto[ch].oversub_extra_us ==
            Approx(truth.proto[ch].oversub_extra_us).epsilon(tol).margin(amp == 0 ? 1e-6 : 0.1));
    }
    CHECK(f.model.single_copy_gbps == Approx(truth.single_copy_gbps).epsilon(tol));
    CHECK(f.model.mem_gbps == Approx(truth.mem_gbps).epsilon(tol));
    CHECK(f.model.near_gbps == Approx(truth.near_gbps).epsilon(tol));
    CHECK(f.model.call_us == Approx(truth.call_us).epsilon(tol).margin(amp == 0 ? 1e-9 : 0.03));
    // With noise, partly confounded with the oversubscribed steps (few
    // oversubscribed calls differ in steps).
    CHECK(f.model.oversub_call_us == Approx(truth.oversub_call_us).epsilon(amp == 0 ? tol : 0.15));
    CHECK(f.model.cache_bytes == truth.cache_bytes);
    CHECK(f.model.near_cache_bytes == truth.near_cache_bytes);
    CHECK(f.rms_rel_residual <= amp + 1e-9);
  }
}

TEST_CASE("fit: parameters no call exercises keep the start's values", "[tune][fit]") {
  using namespace collx;
  // Only ring all_gather on Simple: no barrier, peer, copy, reduction or
  // oversubscribed step in any call.
  std::vector<tune::timed_call> calls;
  for (double b = 8; b <= 16 << 20; b *= 4) {
    const algo::cost_terms t = algo::ring::cost(coll::all_gather, 2, b);
    calls.push_back({t, proto::channel_of<proto::simple>, false, 0.8 + t.bytes_sent / 7e3});
  }
  const tune::profile_fit f = tune::fit_profile(calls, tune::h100_nvswitch);
  CHECK(f.identified == 2);
  CHECK(f.model.alpha_us(f.model.intra, proto::channel_of<proto::simple>) == Approx(0.8));
  CHECK(f.model.gbps(f.model.intra, proto::channel_of<proto::simple>) == Approx(7.0));
  CHECK(f.model.barrier_us == tune::h100_nvswitch.barrier_us);
  CHECK(f.model.reduce_gbps == tune::h100_nvswitch.reduce_gbps);
  CHECK(f.rms_rel_residual < 1e-9);
}

// What collx-probe's measure step times on 2 ranks, exact under `truth`:
// ring all_gather sweeps per protocol, ring all_reduce at 8 B, staged nvls
// all_gather from 8 B to 1 MiB.
collx::tune::profile measure_step_truth() {
  collx::tune::profile truth = collx::tune::shm_host;
  truth.peer_gbps = 11.0, truth.copy_gbps = 90.0, truth.barrier_us = 0.17, truth.call_us = 0.05;
  return truth;
}

std::vector<collx::tune::timed_call> measure_step_calls(const collx::tune::profile& truth) {
  using namespace collx;
  const int P = 2;
  std::vector<tune::timed_call> calls;
  auto add = [&]<class A, class Pr>(coll c, double b) {
    tune::problem q{c, P, b};
    calls.push_back(tune::timed<A, Pr>(q, tune::predict_us<A, Pr>(truth, q), truth));
  };
  for (double b = 8; b <= 16 << 20; b *= 4) {
    add.operator()<algo::ring, proto::simple>(coll::all_gather, b);
    add.operator()<algo::ring, proto::ll>(coll::all_gather, b);
    add.operator()<algo::ring, proto::ll128>(coll::all_gather, b);
  }
  add.operator()<algo::ring, proto::simple>(coll::all_reduce, 8);
  for (double b = 8; b <= 1 << 20; b *= 8) add.operator()<algo::nvls, proto::simple>(coll::all_gather, b);
  return calls;
}

TEST_CASE("fit: the copy rate held, staged nvls tells the peer rate", "[tune][fit]") {
  using namespace collx;
  // The measure step's calls. Staged nvls copies into its staging buffer (staged_bytes) and out
  // of the peers' (peer_bytes) in the same proportion at every size, so these
  // calls alone cannot tell the copy rate from the peer rate; the probe
  // measures memcpy apart and holds it.
  const tune::profile truth = measure_step_truth();
  const std::vector<tune::timed_call> calls = measure_step_calls(truth);
  int both = 0;  // the premise: staged nvls calls that copy and load peers alike
  for (const tune::timed_call& c : calls) both += c.terms.peer_bytes > 0 && c.terms.staged_bytes > 0;
  REQUIRE(both >= 5);
  tune::profile start = truth;
  start.peer_gbps = 2.5, start.barrier_us = 5, start.call_us = 1;  // far off, as a preset may be
  const tune::profile_fit f = tune::fit_profile(calls, start, {.hold_copy = true});
  CHECK(f.model.copy_gbps == start.copy_gbps);  // held, not fitted
  CHECK(f.model.peer_gbps == Approx(truth.peer_gbps).epsilon(1e-6));
  CHECK(f.model.barrier_us == Approx(truth.barrier_us).epsilon(1e-6));
  CHECK(f.rms_rel_residual < 1e-9);
  // Held at a wrong rate, the copies' time moves into the peer rate instead:
  // the fit does not quietly refit the held parameter.
  tune::profile slow_copy = start;
  slow_copy.copy_gbps = 45.0;
  const tune::profile_fit g = tune::fit_profile(calls, slow_copy, {.hold_copy = true});
  CHECK(g.model.copy_gbps == 45.0);
  CHECK(g.model.peer_gbps > truth.peer_gbps);
  // Nothing to hold: refused, not priced at nothing.
  tune::profile no_copy = start;
  no_copy.copy_gbps = 0;
  CHECK_THROWS_WITH(tune::fit_profile(calls, no_copy, {.hold_copy = true}),
                    Catch::Contains("hold_copy needs the start profile's copy_gbps"));
}

TEST_CASE("fit: a few calls many times too long do not move a robust fit", "[tune][fit]") {
  using namespace collx;
  // The probe's measure-step calls, exact, then three of them 6x as long, as
  // a rank descheduled under load makes them.
  const tune::profile truth = measure_step_truth();
  const std::vector<tune::timed_call> calls = measure_step_calls(truth);
  const tune::fit_options plain{.hold_copy = true}, robust{.hold_copy = true, .robust_rel = 0.2};
  // Without outliers both recover the truth.
  const tune::profile_fit exact = tune::fit_profile(calls, truth, robust);
  CHECK(exact.model.peer_gbps == Approx(truth.peer_gbps).epsilon(1e-6));
  CHECK(exact.model.intra.gbps == Approx(truth.intra.gbps).epsilon(1e-6));
  std::vector<tune::timed_call> noisy = calls;
  const std::size_t hit[] = {4, 13, noisy.size() - 2};  // ring ll128 64 B, ring ll 4 KiB, nvls 128 KiB
  for (std::size_t i : hit) noisy[i].us *= 6;
  const tune::profile_fit p = tune::fit_profile(noisy, truth, plain);
  const tune::profile_fit r = tune::fit_profile(noisy, truth, robust);
  auto off = [](double got, double want) { return std::fabs(got / want - 1); };
  const double worst_plain =
      std::max({off(p.model.peer_gbps, truth.peer_gbps), off(p.model.barrier_us, truth.barrier_us),
                off(p.model.gbps(p.model.intra, 1), truth.gbps(truth.intra, 1)),
                off(p.model.alpha_us(p.model.intra, 2), truth.alpha_us(truth.intra, 2))});
  const double worst_robust =
      std::max({off(r.model.peer_gbps, truth.peer_gbps), off(r.model.barrier_us, truth.barrier_us),
                off(r.model.gbps(r.model.intra, 1), truth.gbps(truth.intra, 1)),
                off(r.model.alpha_us(r.model.intra, 2), truth.alpha_us(truth.intra, 2))});
  INFO("worst relative error: plain " << worst_plain << ", robust " << worst_robust);
  CHECK(worst_plain > 0.10);   // the premise: plain least squares is pulled off
  CHECK(worst_robust < 0.05);  // Huber bounds an outlier's pull, it does not drop it
  CHECK(worst_robust < worst_plain / 3);
  CHECK_THROWS_WITH(tune::fit_profile(calls, truth, {.robust_rel = -1}),
                    Catch::Contains("robust_rel must be finite and >= 0"));
}

}  // namespace tune_fit_test
