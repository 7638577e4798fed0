// One rank of a socket-transport communicator (collx/net.hpp), started once
// per host (network namespace) by tests/net/netns.sh, or twice on loopback.
//
//   net_rank check           every collective the socket transport serves,
//                            every algorithm that serves it (Simple) and the
//                            automatic choice, sizes 1 element to 1 Mi, checked
//                            against a reference computed here and guard words
//                            around every output; LL and nvls refused
//   net_rank fault|abort|linkdown FILE
//                            all_reduce in a loop, FILE touched once running;
//                            then a fault (see until_failure): every rank that
//                            survives must fail within the deadline, as named
//   net_rank bench           all_reduce fp32 8 B..64 MiB: size, time, busbw
//
// Ranks come from the environment (COLLX_RANK/SIZE/ROOT_ADDR/SECRET).
#include <collx/net.hpp>

#include "net_matrix.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

net_matrix::tally checks_done;

/// The mean time of an 8-byte all_reduce over `calls` calls in a row, in µs:
/// what the link's delay costs a call (netns.sh checks it over a delayed
/// link). The mean, not the median: back to back, one rank of two may wait a
/// whole round trip in each call and the other hardly at all, but both make
/// the same number of calls in the same time.
double small_call_mean_us(collx::net_communicator& c, int calls) {
  float x[2] = {1.0f, 2.0f}, y[2] = {};
  c.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) c.all_reduce(x, y, 2, collx::reduce_op::sum);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
}

int check(collx::net_communicator& c) {
  net_matrix::check_matrix(c, {1, 2, 7, 1000, 65537, std::size_t{1} << 20}, checks_done);
  std::printf("rank %d: 8-byte all_reduce: mean %.1f us\n", c.rank(), small_call_mean_us(c, 20));
  // Where the steps went, for the scripts to check against the layout they made.
  std::printf(
      "rank %d: %s: %d checks, %d failures; %zu peer(s) through memory, %llu step(s) over the network\n",
      c.rank(), checks_done.failures ? "FAILED" : "PASS", checks_done.checks, checks_done.failures,
      collx::net::peers_through_memory(c).size(),
      static_cast<unsigned long long>(collx::net::steps_over_network(c)));
  return checks_done.failures ? 1 : 0;
}

/// all_reduce in a loop until it fails; FILE is written once running. What
/// the failure must look like depends on `mode`:
///   fault     rank 1 is SIGKILLed by the script: rank 0 fails within the
///             deadline, naming rank 1 and its address
///   abort     rank 1 calls abort() after 20 calls: both fail at once, rank 0
///             with "aborted by communicator::abort()" (the abort crossed hosts)
///   linkdown  the script takes the link down: both fail with a timeout at
///             the deadline (COLLX_TIMEOUT), not later
///   mismatch  from call 21 on rank 1 reduces with max, rank 0 with sum: both
///             fail with status::mismatch naming the reduce_op within 3 calls
///             (rank 1 compares its calls with rank 0's forwarded records)
int until_failure(collx::net_communicator& c, const std::string& mode, const char* marker) {
  std::vector<float> x(1 << 18, 1.0f), y(x.size());
  const double deadline_s = static_cast<double>(c.options().timeout.count()) / 1000.0;
  auto start = std::chrono::steady_clock::now();
  for (int it = 0;; ++it) {
    try {
      if (mode == "abort" && c.rank() == 1 && it == 20) {
        start = std::chrono::steady_clock::now();
        c.abort();
      }
      // mismatch: from call 21 on, rank 1 asks for max where rank 0 asks for sum.
      const bool differ = mode == "mismatch" && c.rank() == 1 && it > 20;
      c.all_reduce(x.data(), y.data(), x.size(), differ ? collx::reduce_op::max : collx::reduce_op::sum);
    } catch (const collx::error& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string msg = e.what();
      std::printf("rank %d failed after %d calls, %.2f s: %s\n", c.rank(), it, s, msg.c_str());
      bool ok = false;
      if (mode == "fault") ok = c.rank() == 0 && msg.find("rank 1 (") != std::string::npos && s < deadline_s;
      if (mode == "abort")
        ok = msg.find("aborted by communicator::abort()") != std::string::npos && s < deadline_s / 2;
      if (mode == "linkdown") ok = e.code() == collx::status::timeout && s < deadline_s + 2.0;
      if (mode == "mismatch")
        ok = e.code() == collx::status::mismatch && msg.find("the reduce_op differs") != std::string::npos &&
             it <= 24;
      std::printf("%s\n", ok ? "FAILED_AS_EXPECTED" : "UNEXPECTED_FAILURE");
      return ok ? 0 : 1;
    }
    if (it == 20) {
      std::ofstream(marker) << "running\n";
      start = std::chrono::steady_clock::now();  // the fault comes after this
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) break;
  }
  std::printf("rank %d: no failure seen\n", c.rank());
  return 1;
}

int bench(collx::net_communicator& c) {
  const int P = c.size();
  for (std::size_t bytes = 8; bytes <= (std::size_t{64} << 20); bytes *= 2) {
    const std::size_t n = bytes / 4;
    std::vector<float> x(n, 1.0f), y(n);
    const int iters = bytes <= (1 << 16) ? 200 : bytes <= (1 << 22) ? 20 : 5;
    // Warm-up: twice round every FIFO slot (8 by default), so the first
    // touch of a protocol's slots is not timed (the first size on a
    // channel paid it inside the loop with 3: bench/results/net_ll.md).
    for (int w = 0; w < 16; ++w) c.all_reduce(x.data(), y.data(), n, collx::reduce_op::sum);
    c.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) c.all_reduce(x.data(), y.data(), n, collx::reduce_op::sum);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    const double busbw = static_cast<double>(bytes) / us / 1e3 * 2.0 * (P - 1) / P;
    if (y[0] != static_cast<float>(P)) std::printf("WRONG RESULT\n");
    if (c.rank() == 0)
      std::printf("%12zu %12.2f %10.3f  %s/%s\n", bytes, us, busbw, collx::name(c.last_variant().algo),
                  collx::name(c.last_variant().proto));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  try {
    collx::net_communicator c = collx::net::from_env();
    int rc = 0;
    if (mode == "check") rc = check(c);
    else if (mode == "fault" || mode == "abort" || mode == "linkdown" || mode == "mismatch")
      rc = until_failure(c, mode, argc > 2 ? argv[2] : "/dev/null");
    else if (mode == "bench") rc = bench(c);
    else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
