// COLLX_ALGO / COLLX_PROTO parsing (NCCL list syntax) and the automatic choice
// (tune/select.hpp) as communicators make it.
#include <collx/communicator.hpp>
#include <collx/tune/select.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string_view>
#include <thread>
#include <vector>

using namespace collx;
using Catch::Matchers::Contains;

namespace {
selection algos(const char* spec) {
  selection s = selection::all();
  s.restrict_algos(spec);
  return s;
}
selection protos(const char* spec) {
  selection s = selection::all();
  s.restrict_protos(spec);
  return s;
}
constexpr coll colls[] = {coll::all_reduce, coll::all_gather, coll::reduce_scatter, coll::broadcast,
                          coll::reduce};

/// For every collective: `s` allows each of `yes` and none of `no`.
void check_everywhere(const selection& s, std::initializer_list<algo_id> yes,
                      std::initializer_list<algo_id> no) {
  for (coll c : colls) {
    INFO(name(c));
    for (algo_id a : yes) {
      INFO(name(a) << " allowed");
      CHECK(s.allows(c, a));
    }
    for (algo_id a : no) {
      INFO(name(a) << " refused");
      CHECK_FALSE(s.allows(c, a));
    }
  }
}
}  // namespace

TEST_CASE("selection: good algorithm and protocol lists", "[selection]") {
  SECTION("a plain list allows exactly its names everywhere") {
    check_everywhere(algos("ring,tree"), {algo_id::ring, algo_id::tree}, {algo_id::rhd, algo_id::nvls});
  }
  SECTION("^ excludes") {
    check_everywhere(algos("^nvls,bruck"), {algo_id::ring, algo_id::rabenseifner},
                     {algo_id::nvls, algo_id::bruck});
  }
  SECTION("per collective; others keep everything") {
    const auto s = algos("allreduce:tree;allgather:ring,bruck");
    CHECK(s.allows(coll::all_reduce, algo_id::tree));
    CHECK_FALSE(s.allows(coll::all_reduce, algo_id::ring));
    CHECK(s.allows(coll::all_gather, algo_id::bruck));
    CHECK_FALSE(s.allows(coll::all_gather, algo_id::rhd));
    CHECK(s.allows(coll::broadcast, algo_id::ring));
    CHECK(s.allows(coll::reduce_scatter, algo_id::rhd));
  }
  SECTION("case, blanks, collx names and left-to-right clauses") {
    const auto s = algos(" ^Tree ; All_Reduce : TREE ");
    CHECK(s.allows(coll::all_reduce, algo_id::tree));
    CHECK_FALSE(s.allows(coll::all_reduce, algo_id::ring));
    CHECK_FALSE(s.allows(coll::broadcast, algo_id::tree));
    CHECK(s.allows(coll::broadcast, algo_id::ring));
    const auto x = algos("reduce_scatter:^ring");
    CHECK_FALSE(x.allows(coll::reduce_scatter, algo_id::ring));
    CHECK(x.allows(coll::reduce_scatter, algo_id::rhd));
  }
  SECTION("protocols") {
    const auto s = protos("simple");
    CHECK(s.allows(coll::all_reduce, proto_id::simple));
    CHECK_FALSE(s.allows(coll::all_reduce, proto_id::ll));
    const auto x = protos("allgather:^ll128");
    CHECK(x.allows(coll::all_gather, proto_id::ll));
    CHECK_FALSE(x.allows(coll::all_gather, proto_id::ll128));
    CHECK(x.allows(coll::all_reduce, proto_id::ll128));
  }
}

TEST_CASE("selection: every policy has an id and a name of its own", "[selection]") {
  // One spelling: an algorithm's name is name(id).
  []<class... As>(type_list<As...>) {
    const bool same[] = {std::string_view(As::name) == std::string_view(name(As::id))...};
    for (bool b : same) CHECK(b);
  }(algorithms{});
  static_assert(algo::bruck_a2a::id != algo::bruck::id);
  static_assert(algo::direct_one_shot::id != algo::direct::id &&
                algo::direct_two_shot::id != algo::direct::id);
  static_assert(std::string_view(algo::direct_two_shot::name) == "direct_two_shot");
  SECTION("a family's name selects its forms, a form's name only itself") {
    const auto s = algos("alltoall:bruck");
    CHECK(s.allows(coll::all_to_all, algo_id::bruck_a2a));
    CHECK_FALSE(s.allows(coll::all_to_all, algo_id::direct));
    const auto x = algos("alltoall:bruck_a2a;allgather:^bruck_a2a");
    CHECK(x.allows(coll::all_to_all, algo_id::bruck_a2a));
    CHECK(x.allows(coll::all_gather, algo_id::bruck));
    const auto y = algos("^bruck");
    CHECK_FALSE(y.allows(coll::all_to_all, algo_id::bruck_a2a));
    CHECK_FALSE(y.allows(coll::all_gather, algo_id::bruck));
    CHECK(tune::first_allowed<transport::shm>(coll::all_to_all, {{}, s}).algo == algo_id::bruck_a2a);
    CHECK_THROWS_WITH(algos("allgather:bruck_a2a"), Contains("bruck_a2a cannot serve all_gather"));
  }
  SECTION("forms composed explicitly only are refused with a hint") {
    CHECK_THROWS_WITH(algos("allreduce:direct_one_shot"), Contains("composed explicitly only"));
    CHECK_THROWS_WITH(algos("direct_two_shot"), Contains("composed explicitly only"));
  }
  SECTION("a call's variant names the form that ran") {
    auto comms = communicator::create_thread_group(2);
    std::vector<std::thread> ts;
    std::vector<algo_id> one(2), two(2);
    for (int r = 0; r < 2; ++r)
      ts.emplace_back([&, r] {
        std::vector<float> x(64, 1.0f), y(64);
        collx::all_reduce<algo::direct_one_shot, proto::simple>(comms[r], x.data(), y.data(), x.size(),
                                                                reduce_op::sum);
        one[r] = comms[r].last_variant().algo;
        collx::all_reduce<algo::direct_two_shot, proto::simple>(comms[r], x.data(), y.data(), x.size(),
                                                                reduce_op::sum);
        two[r] = comms[r].last_variant().algo;
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < 2; ++r) {
      CHECK(one[r] == algo_id::direct_one_shot);
      CHECK(two[r] == algo_id::direct_two_shot);
    }
  }
}

TEST_CASE("composition: the shipped policies satisfy the concepts and the gate", "[selection][compose]") {
  static_assert(transport_policy<transport::shm>);
  static_assert(executor<exec::host>);
  static_assert(worker_group<exec::host::group>);
  static_assert(protocol_on<proto::ll128, exec::host, transport::shm_view>);
  static_assert(check_composable<algo::nvls, proto::simple, transport::shm, exec::host>());
  // The dispatch fold and explicit composition read the same rules, and shm
  // offers everything the compiled policies need.
  []<class... As>(type_list<As...>) {
    (
        [&]<class A>() {
          [&]<class... Ps>(type_list<Ps...>) {
            static_assert(((composable<A, Ps, transport::shm> ==
                            composition_rules<A, Ps, transport::shm, exec::host>::all) &&
                           ...));
            static_assert((composable<A, Ps, transport::shm> && ...));
          }(protocols{});
        }.template operator()<As>(),
        ...);
  }(algorithms{});
}

TEST_CASE("selection: bad lists throw naming the variable and the problem", "[selection]") {
  CHECK_THROWS_WITH(algos(""), Contains("COLLX_ALGO") && Contains("empty"));
  CHECK_THROWS_WITH(algos("ring,warp"), Contains("unknown name 'warp'"));
  CHECK_THROWS_WITH(algos("ring,,tree"), Contains("unknown name ''"));
  CHECK_THROWS_WITH(algos("auto"), Contains("unknown name"));
  CHECK_THROWS_WITH(algos("allreduce:"), Contains("empty list"));
  CHECK_THROWS_WITH(algos("^"), Contains("empty list"));
  CHECK_THROWS_WITH(algos("ring;"), Contains("empty clause"));
  CHECK_THROWS_WITH(algos("alltoall2:ring"), Contains("unknown collective 'alltoall2'"));
  CHECK_THROWS_WITH(algos("allgather:tree"), Contains("tree cannot serve all_gather"));
  CHECK_THROWS_WITH(algos("reduce:bruck"), Contains("bruck cannot serve reduce"));
  CHECK_THROWS_WITH(protos("fast"), Contains("COLLX_PROTO") && Contains("unknown name 'fast'"));
  CHECK_THROWS_WITH(protos("allreduce:ring"), Contains("unknown name 'ring'"));
  try {
    algos("warp");
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_argument);
  }
}

TEST_CASE("selection: the automatic choice prefers ring, then any allowed variant", "[selection]") {
  for (coll c : colls) {
    const auto v = tune::first_allowed<transport::shm>(c);
    CHECK(v.algo == algo_id::ring);
    CHECK(v.proto == proto_id::simple);
    const auto w = tune::first_allowed<transport::shm>(c, {{}, algos("^ring"), true});
    INFO(name(c) << " picked " << name(w.algo));
    CHECK(w.algo != algo_id::ring);
    CHECK(w.algo != algo_id::automatic);
    const auto none =
        tune::first_allowed<transport::shm>(c, {{}, algos("^ring,tree,rhd,rabenseifner,bruck,nvls,direct")});
    CHECK(none.algo == algo_id::automatic);
  }
  // A named algorithm keeps its name; only the protocol is chosen.
  const auto v = tune::first_allowed<transport::shm>(coll::all_reduce,
                                                     {{algo_id::tree, proto_id::automatic}, algos("ring")});
  CHECK(v.algo == algo_id::tree);
  CHECK(v.proto == proto_id::simple);
}

TEST_CASE("selection: communicators follow COLLX_ALGO and refuse what nothing serves", "[selection]") {
  SECTION("from the environment") {
    ::setenv("COLLX_ALGO", "allreduce:tree;allgather:bruck", 1);
    ::setenv("COLLX_DETERMINISTIC", "1", 1);
    const comm_options o = comm_options::from_env();
    ::unsetenv("COLLX_ALGO");
    ::unsetenv("COLLX_DETERMINISTIC");
    CHECK(o.deterministic);
    auto comms = communicator::create_thread_group(3, o);
    std::vector<std::thread> ts;
    std::vector<algo_id> ar(3), ag(3);
    std::vector<float> sums(3);
    for (int r = 0; r < 3; ++r)
      ts.emplace_back([&, r] {
        std::vector<float> x(1000, float(r + 1)), y(1000), z(3000);
        comms[r].all_reduce(x.data(), y.data(), x.size(), reduce_op::sum);
        ar[r] = comms[r].last_variant().algo;
        sums[r] = y[999];
        comms[r].all_gather(x.data(), z.data(), x.size());
        ag[r] = comms[r].last_variant().algo;
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < 3; ++r) {
      CHECK(ar[r] == algo_id::tree);
      CHECK(ag[r] == algo_id::bruck);
      CHECK(sums[r] == 6.0f);
    }
  }
  SECTION("bad environment values") {
    ::setenv("COLLX_ALGO", "rign", 1);
    CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_ALGO") && Contains("rign"));
    ::unsetenv("COLLX_ALGO");
    ::setenv("COLLX_PROTO", "^", 1);
    CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_PROTO"));
    ::unsetenv("COLLX_PROTO");
    ::setenv("COLLX_DETERMINISTIC", "yes", 1);
    CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_DETERMINISTIC"));
    ::unsetenv("COLLX_DETERMINISTIC");
  }
  SECTION("nothing allowed serves the collective") {
    comm_options o;
    o.allowed.restrict_algos("allgather:^ring,rhd,bruck,nvls,direct");
    auto comms = communicator::create_thread_group(1, o);
    std::vector<float> x(4, 1.0f), y(4);
    CHECK_THROWS_WITH(comms[0].all_gather(x.data(), y.data(), 4), Contains("COLLX_ALGO"));
    CHECK_NOTHROW(comms[0].all_reduce(x.data(), y.data(), 4, reduce_op::sum));
    CHECK(implements(comms[0].last_variant().algo, coll::all_reduce));
    CHECK(y[3] == 1.0f);
  }
}

TEST_CASE("selection: with a size, the model's fastest allowed variant wins", "[selection][tune]") {
  const auto pick = [](coll c, int P, double bytes, bool single_copy, bool oversub,
                       const selection& allowed = selection::all(), const tune::profile& m = tune::shm_host) {
    const tune::problem q{c, P, bytes, single_copy, oversub};
    return tune::fastest<transport::shm>(m, q, {{}, allowed});
  };
  // A machine whose peer reads are as fast as its copies.
  tune::profile fast_peers = tune::shm_host;
  fast_peers.peer_gbps = fast_peers.copy_gbps;
  // The fold really takes the argmin: no allowed variant predicts less.
  for (coll c : colls)
    for (int P : {1, 2, 3, 4, 8})
      for (double bytes : {8.0, 4096.0, double(1 << 20), double(1 << 26)}) {
        const tune::problem q{c, P, bytes, bytes >= 256 * 1024, P > 2};
        const variant_choice v = tune::fastest<transport::shm>(tune::shm_host, q);
        REQUIRE(v.algo != algo_id::automatic);
        double chosen = -1, least = 1e300;
        [&]<class... As>(type_list<As...>) {
          (
              [&]<class A>() {
                [&]<class... Ps>(type_list<Ps...>) {
                  (
                      [&]<class Pr>() {
                        if (!A::implements(c) || !composable<A, Pr, transport::shm>) return;
                        const double t = tune::predict_us<A, Pr>(tune::shm_host, q);
                        least = std::min(least, t);
                        if (A::id == v.algo && Pr::id == v.proto) chosen = t;
                      }.template operator()<Ps>(),
                      ...);
                }(protocols_of<A>{});
              }.template operator()<As>(),
              ...);
        }(algorithms{});
        INFO(name(c) << " P=" << P << " bytes=" << bytes << " picked " << name(v.algo) << "/"
                     << name(v.proto));
        CHECK(chosen == least);
      }
  // Latency-bound: the protocol with the lowest per-step latency.
  CHECK(pick(coll::all_reduce, 2, 8, false, false).proto == proto_id::ll);
  // Bandwidth-bound: reading peers' buffers in place where that is fast, not
  // where it is slower than the FIFOs (the measured profile).
  CHECK(pick(coll::all_reduce, 2, double(1 << 26), true, false, selection::all(), fast_peers).algo ==
        algo_id::nvls);
  CHECK(pick(coll::all_reduce, 2, double(1 << 26), true, false).algo != algo_id::nvls);
  // Latency-bound and oversubscribed: the fewest steps (one-shot direct).
  CHECK(pick(coll::all_reduce, 4, 8, false, true).algo == algo_id::direct);
  // Bandwidth-bound without it: never the half-payload LL lines.
  CHECK(pick(coll::all_reduce, 2, double(1 << 26), false, false).proto != proto_id::ll);
  // The filters still apply.
  CHECK(pick(coll::all_reduce, 2, double(1 << 26), true, false, algos("^nvls"), fast_peers).algo !=
        algo_id::nvls);
  // Constant-evaluable: a kernel can take its variant from a preset profile.
  static_assert(tune::predict_us<algo::ring, proto::simple>(tune::shm_host,
                                                            {coll::all_reduce, 2, 1024.0, false, false}) > 0);
}

TEST_CASE("the automatic choice is remembered per size, not reused across sizes", "[selection][tune]") {
  // The communicator remembers its last choice per collective; a call of
  // another size must evaluate the model again. At P = 2 the model takes
  // direct/LL for 8 B and a Simple variant for 16 MiB.
  auto comms = communicator::create_thread_group(2);
  const std::size_t sizes[] = {2, std::size_t{4} << 20, 2, 2};
  std::vector<variant_choice> seen[2];
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      std::vector<float> a(sizes[1], 1.0f), b(sizes[1]);
      for (std::size_t n : sizes) {
        comms[r].all_reduce(a.data(), b.data(), n, reduce_op::sum);
        seen[r].push_back(comms[r].last_variant());
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& s : seen) {
    REQUIRE(s.size() == 4);
    const bool small_differs = s[0].algo != s[1].algo || s[0].proto != s[1].proto;
    CHECK(small_differs);
    CHECK(s[2].algo == s[0].algo);
    CHECK(s[2].proto == s[0].proto);
    CHECK(s[3].algo == s[0].algo);
    CHECK(s[3].proto == s[0].proto);
  }
  CHECK(seen[0][1].algo == seen[1][1].algo);  // every rank chose alike
}

TEST_CASE("peer-memory algorithms have no protocol axis", "[selection][tune]") {
  // nvls runs and is reported as one variant, whatever protocol is named, and
  // COLLX_PROTO neither allows nor excludes it.
  comm_options o;
  o.allowed.restrict_protos("ll");
  auto comms = communicator::create_thread_group(2, o);
  std::vector<variant_choice> named(2), composed(2), automatic(2);
  std::vector<float> sums(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      std::vector<float> x(1000, float(r + 1)), y(1000);
      comms[r].all_reduce(x.data(), y.data(), x.size(), reduce_op::sum, {algo_id::nvls, proto_id::ll});
      named[r] = comms[r].last_variant();
      collx::all_reduce<algo::nvls, proto::ll128>(comms[r], x.data(), y.data(), x.size(), reduce_op::sum);
      composed[r] = comms[r].last_variant();
      comms[r].all_reduce(x.data(), y.data(), x.size(), reduce_op::sum, {algo_id::nvls, proto_id::automatic});
      automatic[r] = comms[r].last_variant();
      sums[r] = y[999];
    });
  for (auto& t : ts) t.join();
  const variant_choice one{algo_id::nvls, proto_id::simple};
  for (int r = 0; r < 2; ++r) {
    CHECK(named[r] == one);
    CHECK(composed[r] == one);
    CHECK(automatic[r] == one);
    CHECK(sums[r] == 3.0f);
  }
}

TEST_CASE("the model reads the communicator's FIFO geometry", "[selection][tune]") {
  // P = 4, 512 KiB: with the default Simple FIFO (chunks of 256 KiB) direct
  // runs two-shot and the model takes it; with chunks of 1 MiB direct would
  // run one-shot, which sends three times the vector, and the model leaves it.
  // Single copy off: thread ranks' loads would take nvls at this size.
  auto run = [](std::uint32_t slot_bytes) {
    comm_options o;
    o.single_copy = false;
    o.slot_bytes_of<proto::simple>() = slot_bytes;
    auto comms = communicator::create_thread_group(4, o);
    std::vector<variant_choice> seen(4);
    std::vector<std::thread> ts;
    for (int r = 0; r < 4; ++r)
      ts.emplace_back([&, r] {
        std::vector<float> x(128 * 1024, 1.0f), y(x.size());
        comms[r].all_reduce(x.data(), y.data(), x.size(), reduce_op::sum);
        seen[r] = comms[r].last_variant();
      });
    for (auto& t : ts) t.join();
    for (int r = 1; r < 4; ++r) CHECK(seen[r] == seen[0]);
    return seen[0];
  };
  CHECK(run(64 * 1024) == variant_choice{algo_id::direct, proto_id::simple});
  CHECK(run(256 * 1024).algo != algo_id::direct);
}
