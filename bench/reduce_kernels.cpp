// collx-reduce-bench: the host reduction kernels (detail/host_kernels.hpp)
// against memcpy, with Google Benchmark.
//
//   reduce/<dtype>/<op>/<isa>/<bytes>   d = a ⊕ b (the erased table's
//                                       [Reduce][no post][one output] kernel)
//   post/<dtype>/avg/<isa>/<bytes>      d = a / nranks (avg's final copy)
//   copy/<dtype>/<isa>/<bytes>          the table's copy kernel
//   memcpy/<bytes>                      std::memcpy, the yardstick
//
// <bytes> is the size of each buffer (a, b and d); bytes_per_second counts
// the bytes of d written, so a kernel at memcpy's rate shows the same figure
// while moving one more input stream. <isa> is scalar (the plain loop of
// reduce_copy(), the code before vectorization), baseline (vectorized for the
// build's target), avx2, avx512 or best (what collx uses on this CPU); each
// is registered only where the CPU runs it. Select with --benchmark_filter,
// e.g. 'reduce/(float|bfloat16)/sum/' or '/best/'.
#include <benchmark/benchmark.h>

#include <collx/detail/erased_reducer.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using collx::dtype;
using collx::reduce_op;
using collx::detail::erased_reducer;
namespace host = collx::detail::host;

constexpr std::uint32_t kRanks = 4;  // avg's divisor

struct buffer {
  std::unique_ptr<unsigned char, decltype(&std::free)> p{nullptr, &std::free};
  explicit buffer(std::size_t bytes)
      : p(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), &std::free) {}
  void* get() const { return p.get(); }
};

/// Finite values of moderate size for the float types (sums and products
/// stay in range), any bits for integers.
template <class T>
void fill(void* dst, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  T* d = static_cast<T*>(dst);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      d[i] = static_cast<T>(rng());
    } else {
      const double x = (static_cast<double>(rng() % 2001) - 1000.0) / 256.0;
      d[i] = static_cast<T>(x);
    }
  }
}

struct kernel_case {
  erased_reducer::kernel k;
  std::size_t elem;
  void (*init)(void*, std::size_t, std::uint64_t);
};

void run_kernel(benchmark::State& state, kernel_case c, std::size_t bytes, bool reduce) {
  const std::size_t n = bytes / c.elem;
  buffer a(bytes), b(bytes), d(bytes);
  c.init(a.get(), n, 1);
  c.init(b.get(), n, 2);
  std::memset(d.get(), 0, bytes);
  for (auto _ : state) {
    c.k(a.get(), reduce ? b.get() : nullptr, d.get(), nullptr, n, kRanks);
    benchmark::DoNotOptimize(d.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n * c.elem));
}

void run_memcpy(benchmark::State& state, std::size_t bytes) {
  buffer a(bytes), d(bytes);
  std::memset(a.get(), 1, bytes);
  std::memset(d.get(), 0, bytes);
  for (auto _ : state) {
    std::memcpy(d.get(), a.get(), bytes);
    benchmark::DoNotOptimize(d.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

std::string size_name(std::size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + "MiB" : std::to_string(bytes >> 10) + "KiB";
}

void register_all() {
  const std::size_t sizes[] = {std::size_t(32) << 10, std::size_t(16) << 20};
  std::vector<std::pair<std::string, host::isa>> isas{{"scalar", host::isa::scalar}};
  for (host::isa i : {host::isa::baseline, host::isa::avx2, host::isa::avx512})
    if (host::isa_supported(i)) isas.emplace_back(host::name(i), i);
  isas.emplace_back("best", host::best_isa());

  for (std::size_t bytes : sizes)
    benchmark::RegisterBenchmark(("memcpy/" + size_name(bytes)).c_str(),
                                 [bytes](benchmark::State& s) { run_memcpy(s, bytes); });

  for (int di = 0; di < collx::dtype_count; ++di) {
    const auto dt = static_cast<dtype>(di);
    collx::visit_dtype(dt, [&]<class T>(std::type_identity<T>) {
      for (int oi = 0; oi < collx::reduce_op_count; ++oi) {
        const auto op = static_cast<reduce_op>(oi);
        collx::visit_reduce_op(op, [&]<reduce_op Op>(std::integral_constant<reduce_op, Op>) {
          if constexpr (!collx::is_bitwise(Op) || std::is_integral_v<T>) {
            for (const auto& [iname, isa] : isas) {
              const erased_reducer::table* t = erased_reducer::table_for<T, Op>(isa);
              for (std::size_t bytes : sizes) {
                const std::string tail = "/" + iname + "/" + size_name(bytes);
                const kernel_case red{t->k[1][0][0], sizeof(T), &fill<T>};
                benchmark::RegisterBenchmark(
                    ("reduce/" + std::string(collx::name(dt)) + "/" + collx::name(op) + tail).c_str(),
                    [red, bytes](benchmark::State& s) { run_kernel(s, red, bytes, true); });
                if constexpr (Op == reduce_op::avg) {
                  const kernel_case post{t->k[0][1][0], sizeof(T), &fill<T>};
                  benchmark::RegisterBenchmark(
                      ("post/" + std::string(collx::name(dt)) + "/avg" + tail).c_str(),
                      [post, bytes](benchmark::State& s) { run_kernel(s, post, bytes, false); });
                }
                if constexpr (Op == reduce_op::sum) {
                  if (iname != "best") continue;  // memcpy whatever the table
                  const kernel_case copy{t->k[0][0][0], sizeof(T), &fill<T>};
                  benchmark::RegisterBenchmark(
                      ("copy/" + std::string(collx::name(dt)) + tail).c_str(),
                      [copy, bytes](benchmark::State& s) { run_kernel(s, copy, bytes, false); });
                }
              }
            }
          }
        });
      }
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("collx.best_isa", host::name(host::best_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
