// Contention: the run-queue measurement (detail/sched_stat.hpp), how the model
// prices it (tune/model.hpp), and how ranks agree on it at decision points
// (comm/contention.hpp) so that the automatic choice stays the same on every
// rank while it changes with the load.
#include <collx/comm/contention.hpp>
#include <collx/communicator.hpp>
#include <collx/detail/sched_stat.hpp>
#include <collx/tune/model.hpp>
#include <collx/tune/select.hpp>

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace collx;
using Catch::Matchers::Contains;

namespace {

constexpr tune::problem contended_problem(coll c, int P, double bytes, double share) {
  tune::problem q{c, P, bytes, true};
  q.contention = share;
  return q;
}

// The model: with no contention nothing changes; under a busy task per CPU
// large calls go to the single-copy schedule, which synchronises three times
// instead of once per FIFO's worth of bytes.
static_assert(tune::fastest<transport::shm>(tune::shm_host, contended_problem(coll::all_reduce, 2, 64e6, 0))
                  .algo != algo_id::nvls);
static_assert(tune::fastest<transport::shm>(tune::shm_host, contended_problem(coll::all_reduce, 2, 64e6, 0.5))
                  .algo == algo_id::nvls);
static_assert(tune::fastest<transport::shm>(tune::shm_host, contended_problem(coll::all_gather, 4, 64e6, 0.5))
                  .algo == algo_id::nvls);
// Small calls stay on a one-step schedule: a barrier is a synchronisation too.
static_assert(tune::fastest<transport::shm>(tune::shm_host, contended_problem(coll::all_reduce, 2, 8, 0.5))
                  .algo == algo_id::direct);

struct probe_log {
  std::atomic<int> calls{0};
};
probe_log probed;

/// Rank 1 measures 0.8 up to point 4 and nothing after; rank 0 cannot tell
/// at odd points; the others measure nothing.
double busy_then_idle(int rank, std::uint64_t point) {
  probed.calls.fetch_add(1, std::memory_order_relaxed);
  if (rank == 1) return point <= 4 ? 0.8 : 0.0;
  if (rank == 0 && point % 2 == 1) return -1;
  return 0.0;
}

struct call_seen {
  double share = -1;
  variant_choice variant{};
};

}  // namespace

TEST_CASE("sched_stat: the share of wanted CPU time spent waiting for one", "[contention]") {
  using detail::sched_sample;
  const sched_sample a{1'000'000, 0, 42, true}, b{2'000'000, 1'000'000, 42, true};
  CHECK(detail::waiting_share(a, b) == Approx(0.5));
  CHECK(detail::waiting_share(a, a) < 0);                                 // too short to tell
  CHECK(detail::waiting_share(a, {2'000'000, 1'000'000, 43, true}) < 0);  // another thread
  CHECK(detail::waiting_share(b, a) < 0);                                 // counters went backwards
  CHECK(detail::waiting_share(a, {2'000'000, 1'000'000, 42, false}) < 0);
  const sched_sample now = detail::read_sched_sample();
  if (!now.valid) {
    WARN("no /proc/thread-self/schedstat here: the measured share is unknown and stays 0");
    return;
  }
  // Busy for ~5 ms: the thread ran, and the counters moved forward.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
  while (std::chrono::steady_clock::now() < until) {
  }
  const sched_sample later = detail::read_sched_sample();
  REQUIRE(later.valid);
  CHECK(later.run_ns > now.run_ns);
  const double share = detail::waiting_share(now, later);
  CHECK(share >= 0);
  CHECK(share <= 1);
  // Each thread reads its own counters (the file is kept open per thread),
  // and so does a forked child, whose copy of the parent's file is not its own.
  sched_sample other;
  std::thread([&] { other = detail::read_sched_sample(); }).join();
  CHECK(other.valid);
  CHECK(other.tid != now.tid);
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const sched_sample c = detail::read_sched_sample();
    // Its own thread, and counters of a process that just started (the parent's ran for 5 ms).
    const char ok = c.valid && c.tid == ::getpid() && c.run_ns < later.run_ns ? 1 : 0;
    (void)!::write(pipe_fds[1], &ok, 1);
    ::_exit(0);
  }
  char ok = 0;
  CHECK(::read(pipe_fds[0], &ok, 1) == 1);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  int ws = 0;
  ::waitpid(child, &ws, 0);
  CHECK(ok == 1);
}

TEST_CASE("contention: shares are agreed in steps, with hysteresis", "[contention]") {
  using comm::contention_detail::quantize;
  CHECK(quantize(0, 0) == 0);
  CHECK(quantize(249, 0) == 0);  // a quiet machine's start-up noise is no contention
  CHECK(quantize(250, 0) == 250);
  CHECK(quantize(400, 0) == 375);
  CHECK(quantize(800, 0) == 750);
  CHECK(quantize(1000, 0) == 875);
  CHECK(quantize(700, 750) == 750);  // less than half a step below: kept
  CHECK(quantize(680, 750) == 625);
  CHECK(quantize(200, 250) == 250);
  CHECK(quantize(150, 250) == 0);
  CHECK(quantize(900, 250) == 875);  // rises at once
}

TEST_CASE("contention: COLLX_CONTENTION and the options", "[contention]") {
  ::setenv("COLLX_CONTENTION", "auto", 1);
  CHECK(comm_options::from_env().contention < 0);
  ::setenv("COLLX_CONTENTION", "off", 1);
  CHECK(comm_options::from_env().contention == 0);
  ::setenv("COLLX_CONTENTION", "0.5", 1);
  CHECK(comm_options::from_env().contention == 0.5);
  for (const char* bad : {"1.5", "x", "", "-0.2", "0.5x"}) {
    INFO(bad);
    ::setenv("COLLX_CONTENTION", bad, 1);
    CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_CONTENTION"));
  }
  ::unsetenv("COLLX_CONTENTION");
  comm_options o;
  o.contention = 0.95;
  CHECK_THROWS_WITH(o.validate(), Contains("contention"));
  o.contention = 0.5;
  o.contention_interval = 0;
  CHECK_THROWS_WITH(o.validate(), Contains("contention_interval"));
}

TEST_CASE("contention: every rank prices the same share and picks the same variant", "[contention]") {
  // Every call is a decision point (interval 1).
  // Rank 1 alone is busy at first: the agreed share must rise on every rank,
  // move the choice off the single-copy schedule (at 256 KiB under the
  // built-in preset its barriers cost more under contention than direct's
  // steps: collx-explain all_reduce -p 2 --preset shm_host --sizes 256K
  // --single-copy --mapped --contention 0.75) on every rank alike, and back
  // when rank 1 is idle again. Two ranks: more than the CPUs would be priced
  // as oversubscribed instead, whatever the contention.
  constexpr int P = 2, calls = 14;
  constexpr std::size_t n = 64 * 1024;  // floats: 256 KiB
  comm_options o;
  o.timeout = std::chrono::seconds(60);
  o.contention = -1;
  o.contention_probe = &busy_then_idle;
  o.contention_interval = 1;
  o.tune_file = "builtin";
  probed.calls = 0;
  auto comms = communicator::create_thread_group(P, o);
  std::vector<std::vector<call_seen>> seen(P);
  std::vector<std::string> wrong(P);
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      const float guard = -7.0f;
      std::vector<float> in(n), out(n + 2);
      try {
        for (int k = 0; k < calls; ++k) {
          for (std::size_t i = 0; i < n; ++i) in[i] = float((r + 1) * (k + 1)) + float(i % 7);
          out.assign(n + 2, guard);
          comms[r].all_reduce(in.data(), out.data() + 1, n, reduce_op::sum);
          seen[r].push_back({comms[r].contention(), comms[r].last_variant()});
          // The reference: sum over ranks of (q + 1)(k + 1) + i % 7, exact in float.
          const float ranks_term = float(P * (P + 1) / 2 * (k + 1));
          for (std::size_t i = 0; i < n && wrong[r].empty(); ++i)
            if (out[i + 1] != ranks_term + float(P) * float(i % 7))
              wrong[r] = "call " + std::to_string(k) + " element " + std::to_string(i) + ": " +
                         std::to_string(out[i + 1]);
          if (out[0] != guard || out[n + 1] != guard)
            wrong[r] = "call " + std::to_string(k) + ": guard overwritten";
        }
      } catch (const collx::error& e) {
        wrong[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r);
    CHECK(wrong[r].empty());
    REQUIRE(seen[r].size() == std::size_t(calls));  // (not reached if a call failed)
  }
  bool rose = false, fell_after = false;
  for (int k = 0; k < calls; ++k) {
    INFO("call " << k);
    for (int r = 1; r < P; ++r) {
      CHECK(seen[r][k].share == seen[0][k].share);
      CHECK(seen[r][k].variant.algo == seen[0][k].variant.algo);
      CHECK(seen[r][k].variant.proto == seen[0][k].variant.proto);
    }
    if (seen[0][k].share == 0.75) {
      rose = true;
      CHECK(seen[0][k].variant.algo != algo_id::nvls);
    }
    if (rose && seen[0][k].share == 0) {
      fell_after = true;
      CHECK(seen[0][k].variant.algo == algo_id::nvls);
    }
  }
  CHECK(rose);
  CHECK(fell_after);
  CHECK(probed.calls.load() >= P * calls - P);
}

TEST_CASE("contention: a rank running ahead never overwrites a decision another has not taken",
          "[contention]") {
  // Broadcasts from rank 0 let it run ahead of the others by what the FIFOs
  // hold; with a decision point on every call it would lap the ring of
  // decisions without waiting for the others to take theirs.
  constexpr int P = 3, calls = 300;
  comm_options o;
  o.timeout = std::chrono::seconds(60);
  o.contention = -1;
  o.contention_probe = &busy_then_idle;
  o.contention_interval = 1;
  o.tune_file = "builtin";
  auto comms = communicator::create_thread_group(P, o);
  std::vector<std::vector<double>> shares(P);
  std::vector<int> wrong(P, 0);
  std::vector<std::string> failed(P);
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      try {
        for (int k = 0; k < calls; ++k) {
          std::int32_t v[3] = {-1, r == 0 ? k : -5, -1};
          comms[r].broadcast(&v[1], &v[1], 1, 0);
          if (v[0] != -1 || v[1] != k || v[2] != -1) ++wrong[r];
          shares[r].push_back(comms[r].contention());
        }
      } catch (const collx::error& e) {
        failed[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r);
    CHECK(failed[r] == "");
    CHECK(wrong[r] == 0);
    CHECK(shares[r] == shares[0]);
  }
}

TEST_CASE("contention: a fixed share is used as given and measures nothing", "[contention]") {
  comm_options o;
  o.contention = 0.5;
  o.contention_probe = &busy_then_idle;
  o.contention_interval = 1;
  probed.calls = 0;
  auto comms = communicator::create_thread_group(2, o);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      float x = 1;
      for (int k = 0; k < 20; ++k) comms[r].all_reduce(&x, &x, 1, reduce_op::max);
    });
  for (auto& t : ts) t.join();
  CHECK(probed.calls.load() == 0);
  CHECK(comms[0].contention() == 0.5);
  CHECK(comms[1].contention() == 0.5);
}
