// One rank of a hierarchical communicator (collx/hier.hpp), started by
// tests/net/hier.sh as nodes × ranks with collxrun --nnodes (COLLX_HOSTID
// makes each launcher's ranks one node).
//
//   hier_rank check   all_reduce (in and out of place), all_gather,
//                     reduce_scatter, all_to_all, reduce and broadcast from every root,
//                     hierarchical and flat, sizes
//                     with and without a remainder modulo the node size,
//                     fp32 and int32, against a reference computed here with
//                     guard words; the path each call took is checked too
//   hier_rank bench_a2a   the same for all_to_all, 8 B..16 MiB per peer
//   hier_rank kill DIR    hierarchical all_reduce until it fails (pid in DIR/pid.RANK)
//   hier_rank bench   all_reduce fp32 8 B..64 MiB (×4), interleaved: flat (its
//                     automatic choice), hierarchical, the flat ring, tree
//                     (chains inside nodes) and rhd: size, median µs of each,
//                     the model's pick between flat and hierarchical
#include <collx/hier.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "net_matrix.hpp"

namespace {

using net_matrix::guarded;
using net_matrix::input;
using mode = collx::hier::hier_options::mode;

template <class T>
void check_all(collx::hier_communicator& c, std::size_t n, const char* tname, bool hier,
               net_matrix::tally& t) {
  const int P = c.size(), me = c.rank();
  const std::string tag = std::string(tname) + " n=" + std::to_string(n) + (hier ? " hier" : " flat");
  std::vector<T> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<T>(input(me, i));
  auto sum_at = [&](std::size_t i) {
    double s = 0;
    for (int r = 0; r < P; ++r) s += input(r, i);
    return s;
  };
  {
    guarded<T> y(n);
    c.all_reduce(x.data(), y.data(), n, collx::reduce_op::sum);
    bool ok = y.guards_intact(n) && c.last_was_hierarchical() == hier;
    for (std::size_t i = 0; i < n && ok; ++i) ok = static_cast<double>(y.data()[i]) == sum_at(i);
    t.expect(ok, "all_reduce " + tag);
  }
  {
    guarded<T> y(n);
    std::copy(x.begin(), x.end(), y.data());
    c.all_reduce(y.data(), y.data(), n, collx::reduce_op::sum);  // in place
    bool ok = y.guards_intact(n);
    for (std::size_t i = 0; i < n && ok; ++i) ok = static_cast<double>(y.data()[i]) == sum_at(i);
    t.expect(ok, "all_reduce in place " + tag);
  }
  {
    guarded<T> y(n * P);
    c.all_gather(x.data(), y.data(), n);
    bool ok = y.guards_intact(n * P) && c.last_was_hierarchical() == hier;
    for (int r = 0; r < P && ok; ++r)
      for (std::size_t i = 0; i < n && ok; ++i) ok = y.data()[r * n + i] == static_cast<T>(input(r, i));
    t.expect(ok, "all_gather " + tag);
  }
  {
    std::vector<T> xs(n * P);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<T>(input(me, i));
    guarded<T> y(n);
    c.reduce_scatter(xs.data(), y.data(), n, collx::reduce_op::sum);
    bool ok = y.guards_intact(n) && c.last_was_hierarchical() == hier;
    for (std::size_t i = 0; i < n && ok; ++i) ok = static_cast<double>(y.data()[i]) == sum_at(me * n + i);
    t.expect(ok, "reduce_scatter " + tag);
  }
  {
    std::vector<T> xs(n * P);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<T>(input(me, i));
    guarded<T> y(n * P);
    c.all_to_all(xs.data(), y.data(), n);
    bool ok = y.guards_intact(n * P) && c.last_was_hierarchical() == hier;
    for (int r = 0; r < P && ok; ++r)
      for (std::size_t i = 0; i < n && ok; ++i)
        ok = y.data()[r * n + i] == static_cast<T>(input(r, me * n + i));
    t.expect(ok, "all_to_all " + tag);
  }
  for (int root = 0; root < P; ++root) {
    guarded<T> y(n);
    const T untouched = static_cast<T>(-12345);
    std::fill(y.data(), y.data() + n, untouched);
    c.reduce(x.data(), y.data(), n, collx::reduce_op::max, root);
    bool ok = y.guards_intact(n) && c.last_was_hierarchical() == hier;
    for (std::size_t i = 0; i < n && ok && me == root; ++i) {
      double want = input(0, i);
      for (int r = 1; r < P; ++r) want = std::max<double>(want, input(r, i));
      ok = static_cast<double>(y.data()[i]) == want;
    }
    // Not the root: its output is not written.
    for (std::size_t i = 0; i < n && ok && me != root; ++i) ok = y.data()[i] == untouched;
    t.expect(ok, "reduce(max) root " + std::to_string(root) + " " + tag);
  }
  for (int root = 0; root < P; ++root) {
    guarded<T> y(n);
    c.broadcast(x.data(), y.data(), n, root);
    bool ok = y.guards_intact(n) && c.last_was_hierarchical() == hier;
    for (std::size_t i = 0; i < n && ok; ++i) ok = y.data()[i] == static_cast<T>(input(root, i));
    t.expect(ok, "broadcast root " + std::to_string(root) + " " + tag);
  }
}

int check(collx::hier_communicator& c) {
  net_matrix::tally t;
  t.expect(c.hierarchical(), "hierarchical: " + c.why_flat());
  for (mode m : {mode::hierarchical, mode::flat}) {
    c.set_mode(m);
    for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, std::size_t{1000},
                          std::size_t{65537}, std::size_t{300001}}) {
      check_all<float>(c, n, "float32", m == mode::hierarchical && c.hierarchical(), t);
      if (n <= 65537) check_all<std::int32_t>(c, n, "int32", m == mode::hierarchical && c.hierarchical(), t);
    }
  }
  // The model's choice on these two links: hierarchical for all_reduce.
  c.set_mode(mode::automatic);
  std::vector<float> a(1 << 18, 1.0f), b(a.size());
  c.all_reduce(a.data(), b.data(), a.size(), collx::reduce_op::sum);
  t.expect(c.last_was_hierarchical() == c.hierarchical(),
           "automatic all_reduce of 1 MiB takes the hierarchy");
  std::printf("rank %d: %s: %d nodes x %d ranks, %d checks, %d failures\n", c.rank(),
              t.failures ? "FAILED" : "PASS", c.nodes(), c.local_size(), t.checks, t.failures);
  return t.failures ? 1 : 0;
}

int bench(collx::hier_communicator& c, bool a2a) {
  using clock = std::chrono::steady_clock;
  // What each round times, interleaved: the flat communicator's automatic
  // choice, the hierarchy, and for all_reduce the flat ring, the flat tree
  // (chains inside nodes, algo/tree.hpp) and the flat rhd (nearest partners
  // first, algo/rhd.hpp) named explicitly.
  struct contender {
    const char* name;
    mode m;
    collx::algo_id algo;
  };
  std::vector<contender> who = {{"flat_us", mode::flat, collx::algo_id::automatic},
                                {"hier_us", mode::hierarchical, collx::algo_id::automatic}};
  if (!a2a) {
    who.push_back({"ring_us", mode::flat, collx::algo_id::ring});
    who.push_back({"tree_us", mode::flat, collx::algo_id::tree});
    who.push_back({"rhd_us", mode::flat, collx::algo_id::rhd});
  }
  if (c.rank() == 0) {
    std::printf("# %d nodes x %d ranks; %s fp32 (all_to_all: bytes per peer); median us of 7 rounds (",
                c.nodes(), c.local_size(), a2a ? "all_to_all" : "all_reduce");
    for (const auto& w : who) std::printf("%s%s", w.name, &w == &who.back() ? "" : ", ");
    std::printf(" interleaved); ratio = flat/hier%s\n%12s", a2a ? "" : ", ring/hier = ring_us/hier_us",
                "bytes");
    for (const auto& w : who) std::printf(" %12s", w.name);
    std::printf(" %8s%s %10s %10s\n", "ratio", a2a ? "" : " ring/hier", "flat_GB/s", "model");
  }
  const std::size_t largest = std::size_t{a2a ? 16u : 64u} << 20;
  for (std::size_t bytes = 8; bytes <= largest;
       bytes = bytes < largest && bytes * 4 > largest ? largest : bytes * 4) {
    const std::size_t n = bytes / 4, len = a2a ? n * std::size_t(c.size()) : n;
    std::vector<float> x(len, 1.0f), y(len);
    auto call = [&](const contender& w) {
      if (a2a) return c.all_to_all(x.data(), y.data(), n);
      if (w.algo == collx::algo_id::automatic)
        return c.all_reduce(x.data(), y.data(), n, collx::reduce_op::sum);
      c.flat().all_reduce(x.data(), y.data(), n, collx::reduce_op::sum,
                          collx::variant_choice{w.algo, collx::proto_id::simple});
    };
    const int iters = bytes <= (std::size_t{1} << 20) ? 20 : 3;
    std::vector<std::vector<double>> t(who.size());
    for (int round = 0; round < 7; ++round)
      for (std::size_t k = 0; k < who.size(); ++k) {
        c.set_mode(who[k].m);
        call(who[k]);  // warm
        c.barrier();
        const auto t0 = clock::now();
        for (int i = 0; i < iters; ++i) call(who[k]);
        t[k].push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count() / iters);
      }
    for (auto& v : t) std::sort(v.begin(), v.end());
    c.set_mode(mode::automatic);
    const bool pick = c.use_hierarchy(a2a ? collx::coll::all_to_all : collx::coll::all_reduce, double(bytes));
    const int P = c.size();
    const double factor = a2a ? double(P - 1) : 2.0 * (P - 1) / P;  // busbw: bytes each rank moves
    if (c.rank() == 0) {
      std::printf("%12zu", bytes);
      for (const auto& v : t) std::printf(" %12.1f", v[3]);
      std::printf(" %8.2f", t[0][3] / t[1][3]);
      if (!a2a) std::printf(" %9.2f", t[2][3] / t[1][3]);
      std::printf(" %10.3f %10s\n", factor * bytes / (t[0][3] * 1e3), pick ? "hier" : "flat");
    }
  }
  return 0;
}

/// Hierarchical all_reduce in a loop until it fails; writes its pid to
/// DIR/pid.RANK once running. tests/net/hier.sh kill SIGKILLs one rank: every
/// survivor must fail (printing FAILED_AS_EXPECTED and the error), not hang.
int until_failure(collx::hier_communicator& c, const std::string& dir) {
  c.set_mode(mode::hierarchical);
  std::vector<float> x(1 << 16, 1.0f), y(x.size());
  for (long i = 0;; ++i) {
    try {
      c.all_reduce(x.data(), y.data(), x.size(), collx::reduce_op::sum);
    } catch (const collx::error& e) {
      std::printf("rank %d: FAILED_AS_EXPECTED (%s): %s\n", c.rank(), collx::to_string(e.code()), e.what());
      std::fflush(stdout);
      std::_Exit(0);  // the communicators are broken; the test looks at this line only
    }
    if (i == 20) {
      const std::string f = dir + "/pid." + std::to_string(c.rank());
      if (std::FILE* o = std::fopen(f.c_str(), "w")) {
        std::fprintf(o, "%d\n", static_cast<int>(::getpid()));
        std::fclose(o);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string m = argc > 1 ? argv[1] : "check";
  try {
    collx::hier_communicator c = collx::hier::from_env();
    if (m == "kill") return until_failure(c, argc > 2 ? argv[2] : "/tmp");
    const int rc = m == "bench" ? bench(c, false) : m == "bench_a2a" ? bench(c, true) : check(c);
    c.destroy();
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
