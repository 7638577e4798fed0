// comm_options::deterministic: all_reduce results are bitwise identical on
// every rank and across repeated calls, for every algorithm whose
// `deterministic` trait says so and for the automatic choice, with float
// inputs whose sum depends on the order of the additions.
#include <collx/communicator.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace collx;

namespace {

// Large values that cancel plus small ones that get absorbed or not depending
// on when they are added.
float input(int rank, std::size_t i) {
  const std::size_t k = (i * 7 + static_cast<std::size_t>(rank) * 13) % 11;
  const float big = (rank % 2 == 0 ? 1.0f : -1.0f) * 3.0e7f * float(1 + i % 3);
  return k < 4 ? big : 1.0f + float(k) * 0.37f + float(rank) * 1.0e-3f;
}

std::vector<std::string> run(int P, variant_choice v, std::size_t n, int repeats) {
  comm_options o;
  o.timeout = std::chrono::seconds(60);
  o.deterministic = true;
  auto comms = communicator::create_thread_group(P, o);
  std::vector<std::vector<float>> out(static_cast<std::size_t>(P) * repeats);
  std::vector<std::string> errors(P);
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      std::vector<float> x(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = input(r, i);
      for (int k = 0; k < repeats; ++k) {
        auto& y = out[static_cast<std::size_t>(k * P + r)];
        y.assign(n, 0.0f);
        try {
          // Every other repeat in place, so both paths are compared.
          if (k % 2 == 1) {
            y = x;
            comms[r].all_reduce(y.data(), y.data(), n, reduce_op::sum, v);
          } else {
            comms[r].all_reduce(x.data(), y.data(), n, reduce_op::sum, v);
          }
          if (!algo_is_deterministic(comms[r].last_variant().algo))
            errors[r] = std::string("picked non-deterministic ") + name(comms[r].last_variant().algo);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      }
    });
  for (auto& t : ts) t.join();
  std::vector<std::string> fails;
  for (auto& e : errors)
    if (!e.empty()) fails.push_back(e);
  if (!fails.empty()) return fails;
  for (std::size_t i = 0; i < n; ++i) {
    double ref = 0, mag = 0;
    for (int r = 0; r < P; ++r) {
      ref += input(r, i);
      mag += std::fabs(input(r, i));
    }
    const float got = out[0][i];
    if (std::fabs(got - ref) > P * 0x1p-24 * mag) {
      fails.push_back("element " + std::to_string(i) + ": " + std::to_string(got) + " vs " +
                      std::to_string(ref));
      break;
    }
  }
  for (std::size_t j = 1; j < out.size() && fails.size() < 4; ++j)
    if (std::memcmp(out[j].data(), out[0].data(), n * sizeof(float)) != 0)
      fails.push_back("repeat " + std::to_string(j / P) + " rank " + std::to_string(j % P) +
                      " differs bitwise from repeat 0 rank 0");
  return fails;
}

}  // namespace

TEST_CASE("the inputs make float sums depend on the order of the additions", "[determinism]") {
  // Otherwise the test below could not fail.
  const int P = 5;
  int differ = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    float fwd = 0, bwd = 0;
    for (int r = 0; r < P; ++r) fwd += input(r, i);
    for (int r = P - 1; r >= 0; --r) bwd += input(r, i);
    differ += fwd != bwd;
  }
  CHECK(differ > 100);
}

TEST_CASE("deterministic all_reduce: bitwise identical on every rank and across calls", "[determinism]") {
  const int P = GENERATE(2, 3, 5, 8);
  const std::size_t n = 300007;  // several chunks, not a multiple of anything
  INFO("P = " << P);
  std::vector<variant_choice> variants{{}};  // the automatic choice
  []<class... As>(std::vector<variant_choice>& v, type_list<As...>) {
    ((As::implements(coll::all_reduce) && is_deterministic<As> ? v.push_back({As::id, proto_id::automatic})
                                                               : void()),
     ...);
  }(variants, algorithms{});
  for (auto v : variants) {
    INFO("algo = " << name(v.algo));
    const auto fails = run(P, v, n, 4);
    for (auto& f : fails) UNSCOPED_INFO(f);
    CHECK(fails.empty());
  }
}

TEST_CASE("deterministic option refuses an algorithm that does not promise it", "[determinism]") {
  // Every compiled all_reduce algorithm that lacks the trait must be refused.
  bool any = false;
  []<class... As>(bool& found, type_list<As...>) {
    ((As::implements(coll::all_reduce) && !is_deterministic<As> ? (found = true) : false), ...);
  }(any, algorithms{});
  if (!any) SUCCEED("every compiled all_reduce algorithm is deterministic");
  []<class... As>(type_list<As...>) {
    (
        [] {
          if constexpr (As::implements(coll::all_reduce) && !is_deterministic<As>) {
            comm_options o;
            o.deterministic = true;
            auto comms = communicator::create_thread_group(1, o);
            std::vector<float> x(4, 1.0f), y(4);
            CHECK_THROWS_AS(
                comms[0].all_reduce(x.data(), y.data(), 4, reduce_op::sum, {As::id, proto_id::automatic}),
                error);
          }
        }(),
        ...);
  }(algorithms{});
}
