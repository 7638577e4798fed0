// Tests for detail::reduce_many (collx/detail/reduce_copy.hpp), the loop under
// prims::local_reduce_many: dst = post?(src[0] ⊕ … ⊕ src[k-1]), left to
// right. Checked bit for bit against a scalar chain written here, for every
// source count 1..8, lengths around the 16-byte packs, sources at the same
// and at different offsets from a pack boundary (packed and element paths),
// dst aliasing src[0], groups of one worker (typed and type-erased reducers)
// and teams of three threads; guard elements around dst must stay untouched.
#include <catch2/catch.hpp>

#include <collx/detail/erased_reducer.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/dtype.hpp>
#include <collx/exec/host.hpp>
#include <collx/exec/host_team.hpp>
#include <collx/numeric/float16.hpp>
#include <collx/reduce_op.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace reduce_many_test {

using namespace collx;

template <class T>
T value(std::mt19937& g) {
  std::uniform_real_distribution<double> d(-100.0, 100.0);
  if constexpr (std::is_integral_v<T>) return static_cast<T>(d(g) * 1000);
  else return static_cast<T>(static_cast<float>(d(g)));
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

constexpr std::size_t guard = 4;

/// One case: k sources of n elements, source j starting `shift[j]` elements
/// after a 16-byte boundary, dst `dshift` after one (or dst = src[0]).
struct layout {
  int k;
  std::size_t n;
  std::size_t shift[8];
  std::size_t dshift;
  bool alias;
};

/// Runs reduce_many on every layout with `run(src, k, dst, n)` and checks it
/// against the chain; returns the first failure's description, or "".
template <class T, class Red, class Run>
std::string check_all(const Red& red, bool post, Run run) {
  std::mt19937 g(7);
  const std::size_t V = 16 / sizeof(T);
  for (int k = 1; k <= 8; ++k)
    for (std::size_t n : {std::size_t(0), std::size_t(1), 2 * V - 1, 2 * V, 37 * V + 3, std::size_t(1031)})
      for (int mode = 0; mode < 4; ++mode) {
        // mode 0: all aligned; 1: all one element off (packs after a head);
        // 2: sources at different offsets (element path); 3: dst = src[0].
        layout l{k, n, {}, 0, mode == 3};
        for (int j = 0; j < k; ++j) l.shift[j] = mode == 1 ? 1 : mode == 2 ? std::size_t(j) % V : 0;
        l.dshift = mode == 1 ? 1 : mode == 2 ? V - 1 : 0;
        std::vector<std::vector<T>> store(static_cast<std::size_t>(k));
        const T* src[8];
        for (int j = 0; j < k; ++j) {
          auto& s = store[static_cast<std::size_t>(j)];
          s.resize(n + V + 2 * guard);
          for (auto& x : s) x = value<T>(g);
        }
        // 16-byte aligned bases: vector storage is aligned to at least 16 for these types.
        for (int j = 0; j < k; ++j) src[j] = store[static_cast<std::size_t>(j)].data() + guard + l.shift[j];
        std::vector<T> out(n + V + 2 * guard);
        for (auto& x : out) x = value<T>(g);
        T* dst = l.alias ? const_cast<T*>(src[0]) : out.data() + guard + l.dshift;
        const std::vector<T> before = l.alias ? store[0] : out;
        // The chain, element by element, from the inputs before the call.
        std::vector<T> want(n);
        for (std::size_t i = 0; i < n; ++i) {
          T v = src[0][i];
          for (int j = 1; j < k; ++j) v = red(v, src[j][i]);
          if (post) v = red.post(v);
          want[i] = v;
        }
        run(src, k, dst, n);
        const std::string where =
            "k " + std::to_string(k) + ", n " + std::to_string(n) + ", mode " + std::to_string(mode);
        for (std::size_t i = 0; i < n; ++i)
          if (!same_bits(dst[i], want[i])) return where + ": element " + std::to_string(i) + " differs";
        // Nothing outside dst[0, n) changed.
        const std::vector<T>& after = l.alias ? store[0] : out;
        const T* base = l.alias ? store[0].data() : out.data();
        const std::size_t lo = static_cast<std::size_t>(dst - base);
        for (std::size_t i = 0; i < after.size(); ++i)
          if ((i < lo || i >= lo + n) && !same_bits(after[i], before[i]))
            return where + ": element " + std::to_string(i) + " outside the output was written";
      }
  return "";
}

template <class T, reduce_op Op>
void one_worker_and_team() {
  const reducer<T, Op> red{3};
  constexpr bool post = reducer<T, Op>::has_post;
  INFO("one worker, typed reducer");
  CHECK(check_all<T>(red, post, [&](const T* const* s, int k, T* d, std::size_t n) {
          detail::reduce_many<post>(exec::host::workers(), s, k, d, n, red);
        }) == "");
  INFO("a team of 3 workers");
  CHECK(check_all<T>(red, post, [&](const T* const* s, int k, T* d, std::size_t n) {
          exec::team_state team(3, 11, 0, 10'000'000'000ull);
          std::vector<std::thread> lanes;
          for (int lane = 0; lane < 3; ++lane)
            lanes.emplace_back([&, lane] {
              exec::host_team ex;
              ex.team = &team;
              ex.lane = lane;
              detail::reduce_many<post>(ex.workers(), s, k, d, n, red);
            });
          for (auto& t : lanes) t.join();
        }) == "");
}

TEST_CASE("reduce_many equals the pairwise chain, bit for bit", "[reduce_many]") {
  SECTION("float sum") { one_worker_and_team<float, reduce_op::sum>(); }
  SECTION("float avg (post)") { one_worker_and_team<float, reduce_op::avg>(); }
  SECTION("double prod") { one_worker_and_team<double, reduce_op::prod>(); }
  SECTION("int32 max") { one_worker_and_team<std::int32_t, reduce_op::max>(); }
  SECTION("half sum") { one_worker_and_team<half_t, reduce_op::sum>(); }
  SECTION("bfloat16 avg") { one_worker_and_team<bfloat16_t, reduce_op::avg>(); }
}

TEST_CASE("reduce_many through the type-erased reducer of one host worker", "[reduce_many]") {
  const detail::erased_reducer red = detail::make_erased_reducer(dtype::float32, reduce_op::avg, 3);
  const reducer<float, reduce_op::avg> typed{3};
  // The erased reducer has no element operator; the chain is the typed one's.
  std::mt19937 g(3);
  for (int k = 1; k <= 8; ++k)
    for (std::size_t n : {std::size_t(0), std::size_t(5), std::size_t(1031)}) {
      std::vector<std::vector<float>> s(static_cast<std::size_t>(k), std::vector<float>(n));
      const float* src[8];
      for (int j = 0; j < k; ++j) {
        for (auto& x : s[static_cast<std::size_t>(j)]) x = value<float>(g);
        src[j] = s[static_cast<std::size_t>(j)].data();
      }
      std::vector<float> out(n + 2, -1.5f);
      detail::reduce_many<true>(exec::host::workers(), src, k, out.data() + 1, n, red);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        float v = src[0][i];
        for (int j = 1; j < k; ++j) v = typed(v, src[j][i]);
        wrong += !same_bits(out[i + 1], typed.post(v));
      }
      INFO("k " << k << ", n " << n);
      CHECK(wrong == 0);
      CHECK(out.front() == -1.5f);
      CHECK(out.back() == -1.5f);
    }
}

}  // namespace reduce_many_test
