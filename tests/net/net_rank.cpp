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

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

int failures = 0, checks = 0;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok && failures++ < 20) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

constexpr std::int32_t guard_value = 0x5a5a5a5a;
constexpr std::size_t guard = 16;

// Rank r's input element i: a small integer, so float sums are exact.
std::int32_t input(int r, std::size_t i) { return static_cast<std::int32_t>((r + 1) * (i % 13 + 1)) - 3 * r; }

/// A buffer of n elements of T with `guard` guard elements on each side.
template <class T>
struct guarded {
  std::vector<T> v;
  explicit guarded(std::size_t n) : v(n + 2 * guard) {
    for (std::size_t i = 0; i < guard; ++i) {
      std::memcpy(&v[i], &guard_value, sizeof(T) < 4 ? sizeof(T) : 4);
      std::memcpy(&v[guard + n + i], &guard_value, sizeof(T) < 4 ? sizeof(T) : 4);
    }
  }
  T* data() { return v.data() + guard; }
  bool guards_intact(std::size_t n) const {
    for (std::size_t i = 0; i < guard; ++i)
      if (std::memcmp(&v[i], &guard_value, sizeof(T) < 4 ? sizeof(T) : 4) != 0 ||
          std::memcmp(&v[guard + n + i], &guard_value, sizeof(T) < 4 ? sizeof(T) : 4) != 0)
        return false;
    return true;
  }
};

std::string tag(const char* coll, collx::algo_id a, std::size_t n, const char* t) {
  return std::string(coll) + " " + (a == collx::algo_id::automatic ? "auto" : collx::name(a)) +
         " n=" + std::to_string(n) + " " + t;
}

template <class T>
void run_all(collx::net_communicator& c, collx::algo_id a, std::size_t n, const char* tname) {
  using collx::variant_choice;
  const int P = c.size(), me = c.rank();
  const variant_choice v{
      a, a == collx::algo_id::automatic ? collx::proto_id::automatic : collx::proto_id::simple};
  auto serves = [&](collx::coll k) { return a == collx::algo_id::automatic || collx::implements(a, k); };
  std::vector<T> x(n * P);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(input(me, i));

  if (serves(collx::coll::all_reduce)) {
    guarded<T> y(n);
    c.all_reduce(x.data(), y.data(), n, collx::reduce_op::sum, v);
    bool ok = y.guards_intact(n);
    for (std::size_t i = 0; i < n && ok; ++i) {
      double want = 0;
      for (int r = 0; r < P; ++r) want += input(r, i);
      ok = static_cast<double>(y.data()[i]) == want;
    }
    expect(ok, tag("all_reduce", a, n, tname));
  }
  if (serves(collx::coll::all_gather)) {
    guarded<T> y(n * P);
    c.all_gather(x.data(), y.data(), n, v);
    bool ok = y.guards_intact(n * P);
    for (int r = 0; r < P && ok; ++r)
      for (std::size_t i = 0; i < n && ok; ++i) ok = y.data()[r * n + i] == static_cast<T>(input(r, i));
    expect(ok, tag("all_gather", a, n, tname));
  }
  if (serves(collx::coll::reduce_scatter)) {
    guarded<T> y(n);
    c.reduce_scatter(x.data(), y.data(), n, collx::reduce_op::sum, v);
    bool ok = y.guards_intact(n);
    for (std::size_t i = 0; i < n && ok; ++i) {
      double want = 0;
      for (int r = 0; r < P; ++r) want += input(r, me * n + i);
      ok = static_cast<double>(y.data()[i]) == want;
    }
    expect(ok, tag("reduce_scatter", a, n, tname));
  }
  if (serves(collx::coll::broadcast)) {
    for (int root = 0; root < P; ++root) {
      guarded<T> y(n);
      c.broadcast(x.data(), y.data(), n, root, v);
      bool ok = y.guards_intact(n);
      for (std::size_t i = 0; i < n && ok; ++i) ok = y.data()[i] == static_cast<T>(input(root, i));
      expect(ok, tag("broadcast", a, n, tname) + " root " + std::to_string(root));
    }
  }
  if (serves(collx::coll::reduce)) {
    guarded<T> y(n);
    const int root = P - 1;
    c.reduce(x.data(), y.data(), n, collx::reduce_op::max, root, v);
    bool ok = y.guards_intact(n);
    for (std::size_t i = 0; i < n && ok && me == root; ++i) {
      double want = input(0, i);
      for (int r = 1; r < P; ++r) want = std::max<double>(want, input(r, i));
      ok = static_cast<double>(y.data()[i]) == want;
    }
    expect(ok, tag("reduce(max)", a, n, tname));
  }
  if (serves(collx::coll::all_to_all)) {
    guarded<T> y(n * P);
    c.all_to_all(x.data(), y.data(), n, v);
    bool ok = y.guards_intact(n * P);
    for (int r = 0; r < P && ok; ++r)
      for (std::size_t i = 0; i < n && ok; ++i)
        ok = y.data()[r * n + i] == static_cast<T>(input(r, me * n + i));
    expect(ok, tag("all_to_all", a, n, tname));
  }
}

int check(collx::net_communicator& c) {
  using collx::algo_id;
  const algo_id algos[] = {algo_id::automatic,    algo_id::ring,  algo_id::tree,   algo_id::rhd,
                           algo_id::rabenseifner, algo_id::bruck, algo_id::direct, algo_id::bruck_a2a};
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{1000}, std::size_t{65537},
                        std::size_t{1} << 20})
    for (algo_id a : algos) {
      run_all<float>(c, a, n, "float32");
      if (n <= 65537) run_all<std::int32_t>(c, a, n, "int32");
    }
  // Point to point: a ring exchange and a message to self in one group.
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) {
    const int P = c.size(), me = c.rank(), right = (me + 1) % P, left = (me + P - 1) % P;
    std::vector<std::int32_t> x(n), self_in(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = input(me, i), self_in[i] = input(me + 7, i);
    guarded<std::int32_t> from_left(n), from_self(n);
    c.group_start();
    c.send(x.data(), n, right);
    c.send(self_in.data(), n, me);
    c.recv(from_left.data(), n, left);
    c.recv(from_self.data(), n, me);
    c.group_end();
    bool ok = from_left.guards_intact(n) && from_self.guards_intact(n);
    for (std::size_t i = 0; i < n && ok; ++i)
      ok = from_left.data()[i] == input(left, i) && from_self.data()[i] == input(me + 7, i);
    expect(ok, "send/recv ring and self n=" + std::to_string(n));
  }
  c.barrier();
  // Refused by capability, before any byte moves; the communicator stays usable.
  for (auto v : {collx::variant_choice{algo_id::ring, collx::proto_id::ll},
                 collx::variant_choice{algo_id::ring, collx::proto_id::ll128},
                 collx::variant_choice{algo_id::nvls, collx::proto_id::simple}}) {
    float a = 1, b = 0;
    bool refused = false;
    try {
      c.all_reduce(&a, &b, 1, collx::reduce_op::sum, v);
    } catch (const collx::error& e) {
      refused = e.code() == collx::status::not_supported;
      if (c.rank() == 0 && v.proto == collx::proto_id::ll) std::printf("refused as expected: %s\n", e.what());
    }
    expect(refused, std::string("variant ") + collx::name(v.algo) + "/" + collx::name(v.proto) + " refused");
  }
  float one = 1, sum = 0;
  c.all_reduce(&one, &sum, 1, collx::reduce_op::sum);
  expect(sum == static_cast<float>(c.size()), "all_reduce after refused variants");
  std::printf("rank %d: %s: %d checks, %d failures\n", c.rank(), failures ? "FAILED" : "PASS", checks,
              failures);
  return failures ? 1 : 0;
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
    for (int w = 0; w < 3; ++w) c.all_reduce(x.data(), y.data(), n, collx::reduce_op::sum);
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
