// The measured choice (comm/measured_choice.hpp, comm_options::tune_online):
// the model's ranking (tune::ranked), the per-class bookkeeping, and thread
// ranks that explore, agree on the candidate whose slowest rank was fastest,
// and keep it, with every call's result checked against a reference.
#include <collx/comm/measured_choice.hpp>
#include <collx/communicator.hpp>
#include <collx/tune/explain.hpp>
#include <collx/tune/select.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace collx;
using Catch::Matchers::Contains;

namespace {

// ranked<1> is fastest()'s pick, and ranked<N> lists explain()'s order.
constexpr tune::problem small_ar{coll::all_reduce, 2, 64.0};
constexpr tune::problem large_ag{coll::all_gather, 4, 16e6, true};
static_assert(tune::ranked<1, transport::shm>(tune::shm_host, small_ar).variant[0] ==
              tune::fastest<transport::shm>(tune::shm_host, small_ar));
static_assert(tune::ranked<1, transport::shm>(tune::shm_host, large_ag).variant[0] ==
              tune::fastest<transport::shm>(tune::shm_host, large_ag));
static_assert(tune::ranked<3, transport::shm>(tune::shm_host, large_ag).size == 3);

/// Synthetic call times per rank, by the order in which a rank first ran each
/// variant (the exploration's round robin runs the candidates in the model's
/// order): rank 0 finds the first candidate fastest, rank 1 the second; the
/// third is the least slow on the slowest rank, and the one to keep.
constexpr std::array<std::array<double, 3>, 2> fake_us{{{1.0, 5.0, 3.0}, {6.0, 2.0, 3.0}}};
std::mutex fake_mu;
std::map<int, std::vector<variant_choice>> fake_seen;  // per rank, first-seen order
int fake_calls = 0;

double fake_time(int rank, variant_choice v, double) {
  std::lock_guard lock(fake_mu);
  ++fake_calls;
  auto& seen = fake_seen[rank];
  std::size_t i = 0;
  while (i < seen.size() && !(seen[i] == v)) ++i;
  if (i == seen.size()) seen.push_back(v);
  return i < 3 ? fake_us[std::size_t(rank % 2)][i] : 100.0;
}

struct call_log {
  std::vector<variant_choice> variants;
  std::string wrong;
};

/// Runs `sizes` (floats per call, in order) as all_reduce sums on P thread
/// ranks with options o, checking every result and a guard on each side.
std::vector<call_log> run_all_reduces(int P, const comm_options& o, const std::vector<std::size_t>& sizes) {
  auto comms = communicator::create_thread_group(P, o);
  std::vector<call_log> log(static_cast<std::size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      call_log& l = log[std::size_t(r)];
      const float guard = -7.0f;
      try {
        for (std::size_t k = 0; k < sizes.size(); ++k) {
          const std::size_t n = sizes[k];
          std::vector<float> in(n), out(n + 2, guard);
          for (std::size_t i = 0; i < n; ++i) in[i] = float((r + 1) * int(k + 1)) + float(i % 5);
          comms[std::size_t(r)].all_reduce(in.data(), out.data() + 1, n, reduce_op::sum);
          l.variants.push_back(comms[std::size_t(r)].last_variant());
          const float ranks_term = float(P * (P + 1) / 2 * int(k + 1));
          for (std::size_t i = 0; i < n && l.wrong.empty(); ++i)
            if (out[i + 1] != ranks_term + float(P) * float(i % 5))
              l.wrong = "call " + std::to_string(k) + " element " + std::to_string(i) + ": " +
                        std::to_string(out[i + 1]);
          if (l.wrong.empty() && (out[0] != guard || out[n + 1] != guard))
            l.wrong = "call " + std::to_string(k) + ": a guard was overwritten";
        }
      } catch (const collx::error& e) {
        l.wrong = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return log;
}

comm_options measured_options(std::uint32_t candidates) {
  comm_options o;
  o.timeout = std::chrono::seconds(60);
  o.tune_file = "builtin";
  o.contention = 0;  // no decision points: the classes stay the same
  o.tune_online = candidates;
  o.tune_online_time = &fake_time;
  return o;
}

void reset_fake() {
  std::lock_guard lock(fake_mu);
  fake_seen.clear();
  fake_calls = 0;
}

/// run_all_reduces on 2 ranks, every result right and no call timed; rank 0's variants.
std::vector<variant_choice> run_untimed(const comm_options& o, const std::vector<std::size_t>& sizes) {
  reset_fake();
  const auto log = run_all_reduces(2, o, sizes);
  for (const call_log& l : log) {
    INFO(l.wrong);
    CHECK(l.wrong.empty());
    CHECK(l.variants.size() == sizes.size());
  }
  std::lock_guard lock(fake_mu);
  CHECK(fake_calls == 0);
  return log[0].variants;
}

std::string vname(variant_choice v) { return std::string(name(v.algo)) + "/" + name(v.proto); }

}  // namespace

TEST_CASE("measured choice: a class's turns, samples and decision", "[measured]") {
  using M = comm::measured_class;
  static_assert(M::timed_per_block(64 * 1024) == 10 && M::timed_per_block(64 * 1024 + 1) == 1);
  static_assert(M::exploration_calls(4, 8) == 3 * 4 * 11 && M::exploration_calls(4, 1e6) == 3 * 4 * 2);
  M m;
  m.candidates = 3;
  m.timed = 2;  // blocks of three calls: one untimed, two timed
  for (std::uint32_t i = 0; i < 3; ++i) m.candidate[i] = {algo_id(i), proto_id::simple};
  REQUIRE(m.exploration_calls() == 3 * 3 * 3);
  REQUIRE(m.samples() == 6);
  // Three rounds; in each, a block per candidate in the model's order.
  for (std::uint32_t k = 0; k < m.exploration_calls(); ++k) {
    INFO("call " << k);
    const auto t = m.next_turn();
    CHECK(t.candidate == (k % 9) / 3);
    CHECK(t.timed == (k % 3 != 0));
    if (t.timed) CHECK(t.sample == (k / 9) * 2 + k % 3 - 1);
    // Candidate c's samples are 10c + sample; candidate 1's first one is an outlier.
    const double us = t.candidate == 1 && t.timed && t.sample == 0 ? 1000.0 : 10.0 * t.candidate + t.sample;
    CHECK(m.record(t, us) == (k + 1 == m.exploration_calls()));
  }
  double med[3];
  m.medians(med);
  CHECK(med[0] == 2.5);   // samples 0..5
  CHECK(med[1] == 13.5);  // 11..15 and 1000: the outlier does not move the median
  CHECK(med[2] == 22.5);
  const double slowest[3] = {5.0, 4.0, 4.0};  // ties go to the earlier (the model's order)
  CHECK(m.decide(slowest) == m.candidate[1]);
  CHECK(m.decided);

  using K = comm::measured_key;
  CHECK(K::size_class(0) == 0);
  CHECK(K::size_class(1) == 1);
  CHECK(K::size_class(8) == 4);
  CHECK(K::size_class(15) == 4);
  CHECK(K::size_class(16) == 5);
  K a{coll::all_reduce, {}, 4096, 0, false, false}, b = a;
  b.bytes = 6000;
  CHECK(a.packed() == b.packed());  // one class: [4096, 8192)
  b.bytes = 8192;
  CHECK(a.packed() != b.packed());
  b = a;
  b.contention = 0.25;
  CHECK(a.packed() != b.packed());
  b = a;
  b.in_place = true;
  CHECK(a.packed() != b.packed());
  b = a;
  b.c = coll::all_gather;
  CHECK(a.packed() != b.packed());
}

TEST_CASE("measured choice: tune::ranked lists the model's best in order", "[measured]") {
  for (const tune::problem& q : {small_ar, large_ag, tune::problem{coll::reduce_scatter, 3, 1e6, true}}) {
    const auto r = tune::ranked<6, transport::shm>(tune::shm_host, q);
    const auto all = tune::explain<transport::shm>(tune::shm_host, q);
    REQUIRE(r.size == std::min<std::size_t>(6, all.size()));
    for (std::size_t i = 0; i < r.size; ++i) {
      INFO(i);
      CHECK(r.us[i] == Approx(all[i].time.total_us()));
      if (i > 0) CHECK(r.us[i - 1] <= r.us[i]);
    }
  }
}

TEST_CASE("measured choice: COLLX_TUNE_ONLINE and the options", "[measured]") {
  ::setenv("COLLX_TUNE_ONLINE", "3", 1);
  CHECK(comm_options::from_env().tune_online == 3);
  for (const char* bad : {"9", "x", "", "-1"}) {
    INFO(bad);
    ::setenv("COLLX_TUNE_ONLINE", bad, 1);
    CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_TUNE_ONLINE"));
  }
  ::unsetenv("COLLX_TUNE_ONLINE");
  CHECK(comm_options{}.tune_online == 0);
  comm_options o;
  o.tune_online = 9;
  CHECK_THROWS_WITH(o.validate(), Contains("tune_online"));
}

TEST_CASE("measured choice: ranks explore alike and keep the slowest rank's fastest", "[measured]") {
  constexpr int P = 2;
  constexpr std::uint32_t n = 3;
  constexpr std::uint32_t explore = comm::measured_class::exploration_calls(n, 4096);
  constexpr std::uint32_t block = 1 + comm::measured_class::timed_per_block(4096);
  // 1024 floats (4 KiB): the class [4096, 8192); then 1500 floats (6000 B),
  // the same class; then 4096 floats, a new class, explored again.
  std::vector<std::size_t> sizes(explore + 2, 1024);
  sizes.push_back(1500);
  for (std::uint32_t k = 0; k < explore + 1; ++k) sizes.push_back(4096);
  reset_fake();
  const auto log = run_all_reduces(P, measured_options(n), sizes);
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r);
    INFO(log[std::size_t(r)].wrong);
    REQUIRE(log[std::size_t(r)].wrong.empty());
    REQUIRE(log[std::size_t(r)].variants.size() == sizes.size());
  }
  const auto& v0 = log[0].variants;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    INFO("call " << k);
    CHECK(log[1].variants[k] == v0[k]);  // every rank ran the same variant
  }
  // Blocks of n different candidates, repeated in three rounds.
  const variant_choice first[n] = {v0[0], v0[block], v0[2 * block]};
  CHECK(!(first[0] == first[1]));
  CHECK(!(first[1] == first[2]));
  CHECK(!(first[0] == first[2]));
  for (std::uint32_t k = 0; k < explore; ++k) {
    INFO("call " << k);
    CHECK(v0[k] == first[(k % (n * block)) / block]);
  }
  // Kept: the third (rank 0's 3 and rank 1's 3 µs beat 5 and 6), not either rank's own fastest.
  INFO("candidates " << vname(first[0]) << ", " << vname(first[1]) << ", " << vname(first[2]));
  CHECK(v0[explore] == first[2]);
  CHECK(v0[explore + 1] == first[2]);
  CHECK(v0[explore + 2] == first[2]);  // 6000 B: the same class, no exploration
  // The new class explores from its first call, with the model's candidates for it.
  std::lock_guard lock(fake_mu);
  CHECK(fake_calls == int(P * 2 * n * comm::measured_class::rounds * (block - 1)));  // timed calls only
}

TEST_CASE("measured choice: off, fixed variants and determinism", "[measured]") {
  constexpr int P = 2;
  const std::vector<std::size_t> sizes(16, 1024);
  SECTION("off: the model's pick on every call, nothing timed") {
    const auto v = run_untimed(measured_options(0), sizes);
    for (const auto& x : v) CHECK(x == v[0]);
  }
  SECTION("a fixed variant is not explored") {
    comm_options o = measured_options(4);
    o.variant = {algo_id::ring, proto_id::ll};
    for (const auto& x : run_untimed(o, sizes)) CHECK(x == variant_choice{algo_id::ring, proto_id::ll});
  }
  SECTION("a fixed algorithm explores its protocols only") {
    reset_fake();
    comm_options o = measured_options(3);
    o.variant = {algo_id::ring, proto_id::automatic};
    const auto log = run_all_reduces(P, o, sizes);
    REQUIRE(log[0].wrong.empty());
    for (const auto& v : log[0].variants) CHECK(v.algo == algo_id::ring);
    CHECK(!(log[0].variants[0] == log[0].variants[1 + comm::measured_class::timed_per_block(4096)]));
  }
  SECTION("deterministic: only algorithms that promise it") {
    reset_fake();
    comm_options o = measured_options(8);
    o.deterministic = true;
    const auto log = run_all_reduces(P, o, sizes);
    REQUIRE(log[0].wrong.empty());
    for (const auto& v : log[0].variants) {
      INFO(vname(v));
      CHECK(algo_is_deterministic(v.algo));
    }
  }
}
