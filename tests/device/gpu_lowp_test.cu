// Narrow floats on a GPU (collx/numeric/hardware.hpp) against the host's
// portable code, which tests/unit/test_numeric.cpp checks against an
// independent reference:
//
//   * every bit pattern of half, bfloat16, e4m3 and e5m2 widened to float in a
//     kernel has the host's bits (NaN payloads included);
//   * a strided sweep over every float bit pattern, and every float next to a
//     midpoint, narrowed in a kernel has the host's bits (NaN included);
//   * detail::reduce_copy (the loop under every primitive) run by one block on
//     pairs of values (random patterns, specials, neighbours) for sum, prod,
//     min, max and avg: the host reducer's bits, or a NaN where the host has
//     one; 16-byte aligned (packed instructions) and off by one element
//     (element by element); guard elements before and after every output;
//   * detail::reduce_many (nvls's and the switch channel's loop: every
//     source of an element loaded before any is combined) over 3 and 8
//     sources, sum and avg: the bits of the host reducer's left-to-right
//     chain, or a NaN where it has one; aligned and off by one, with guards.
//
// Compiled for every listed architecture, so each of hardware.hpp's paths
// (sm_80: fma.rn.bf16x2, no fp8 cvt; sm_90 and later: all) is assembled by
// ptxas; a run checks the one of the GPU it finds. Exits 77 without a GPU.
#include "gpu_test.cuh"

#include <collx/cuda/check.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/exec/cuda.hpp>
#include <collx/reduce_op.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace collx;

namespace {

template <class T>
using bits_of = decltype(T{}.bits);

template <class T>
__global__ void widen_kernel(const T* in, float* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = static_cast<float>(in[i]);
}

template <class T>
__global__ void narrow_kernel(const float* in, T* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = T(in[i]);
}

template <class T, reduce_op Op>
__global__ void reduce_kernel(const T* a, const T* b, T* d, std::size_t n) {
  const reducer<T, Op> red{4};  // avg divides by 4
  detail::reduce_copy<true, Op == reduce_op::avg, 1>(exec::cuda_block_group{}, a, b, d, nullptr, n, red);
}

template <class T, reduce_op Op>
__global__ void reduce_many_kernel(const T* const* src, int k, T* d, std::size_t n) {
  const reducer<T, Op> red{4};
  detail::reduce_many<Op == reduce_op::avg>(exec::cuda_block_group{}, src, k, d, n, red);
}

template <class T>
bool is_nan(T v) {
  return std::isnan(static_cast<float>(v));
}

template <class T>
struct device_array {
  T* p = nullptr;
  explicit device_array(std::size_t n) { CUDA_OK(cudaMalloc(&p, n * sizeof(T) + 64)); }
  ~device_array() { cudaFree(p); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
};

/// Runs `launch` (one kernel), waits for it and returns the `total` elements
/// of `d` it wrote into.
template <class T, class Launch>
std::vector<T> fetch_after(Launch launch, const device_array<T>& d, std::size_t total) {
  launch();
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<T> h(total);
  CUDA_OK(cudaMemcpy(h.data(), d.p, total * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

/// The device's result is the host's bits, or a NaN where the host has one.
template <class T>
bool same_result(const T& want, const T& got) {
  return want.bits == got.bits || (is_nan(want) && is_nan(got));
}

/// out[i] = what `kernel` makes of in[i], on the GPU.
template <class Out, class In>
std::vector<Out> on_gpu(const std::vector<In>& in, void (*kernel)(const In*, Out*, std::size_t)) {
  const std::size_t n = in.size();
  device_array<In> din(n);
  device_array<Out> dout(n);
  CUDA_OK(cudaMemcpy(din.p, in.data(), n * sizeof(In), cudaMemcpyHostToDevice));
  kernel<<<64, 256>>>(din.p, dout.p, n);
  CUDA_OK(cudaGetLastError());
  std::vector<Out> out(n);
  CUDA_OK(cudaMemcpy(out.data(), dout.p, n * sizeof(Out), cudaMemcpyDeviceToHost));
  return out;
}

template <class T>
int check_widen(const char* name) {
  constexpr std::size_t n = std::size_t(1) << (8 * sizeof(T));
  std::vector<T> in(n);
  for (std::size_t b = 0; b < n; ++b) in[b] = T::from_bits(bits_of<T>(b));
  const std::vector<float> out = on_gpu<float, T>(in, widen_kernel<T>);
  int wrong = 0;
  for (std::size_t b = 0; b < n; ++b) {
    const float want = static_cast<float>(in[b]);
    if (std::memcmp(&want, &out[b], sizeof want) != 0 && wrong++ < 5)
      std::printf("  %s widen 0x%zx: device %a, host %a\n", name, b, out[b], want);
  }
  std::printf("%s: widen, %zu patterns: %s\n", name, n, wrong ? "WRONG" : "ok");
  return wrong;
}

template <class T>
int check_narrow(const char* name) {
  std::vector<float> in;
  for (std::uint64_t b = 0; b < (std::uint64_t(1) << 32); b += 65521) {
    const auto u = std::uint32_t(b);
    float f;
    std::memcpy(&f, &u, sizeof f);
    in.push_back(f);
  }
  // Every value of T, the midpoints between neighbours and the floats on each
  // side of them (the ties and near-ties of round-to-nearest-even).
  constexpr std::size_t n_patterns = std::size_t(1) << (8 * sizeof(T));
  for (std::size_t b = 0; b + 1 < n_patterns; ++b) {
    const float lo = static_cast<float>(T::from_bits(bits_of<T>(b)));
    const float hi = static_cast<float>(T::from_bits(bits_of<T>(b + 1)));
    if (std::isnan(lo) || std::isnan(hi) || std::isinf(lo) || std::isinf(hi)) continue;
    const float mid = lo + (hi - lo) / 2;
    for (float f : {lo, mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)}) in.push_back(f);
  }
  for (float f : {INFINITY, -INFINITY, NAN, -NAN, 1e30f, -1e30f, 0.0f, -0.0f}) in.push_back(f);
  const std::size_t n = in.size();
  const std::vector<T> out = on_gpu<T, float>(in, narrow_kernel<T>);
  int wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T want(in[i]);
    if (want.bits != out[i].bits && wrong++ < 5)
      std::printf("  %s narrow %a: device 0x%x, host 0x%x\n", name, in[i], unsigned(out[i].bits),
                  unsigned(want.bits));
  }
  std::printf("%s: narrow, %zu floats: %s\n", name, n, wrong ? "WRONG" : "ok");
  return wrong;
}

/// reduce_copy of n pairs in one block of 256 threads; `offset` elements past
/// a 16-byte boundary (0: the packed body; 1: element by element).
template <class T, reduce_op Op>
int check_reduce(const char* name, const char* op_name, const std::vector<T>& a, const std::vector<T>& b,
                 std::size_t offset) {
  const std::size_t n = a.size(), guard = 16, total = n + offset + 2 * guard;
  const T sentinel = T::from_bits(bits_of<T>(0x5A));
  std::vector<T> ha(total, sentinel), hb(total, sentinel), hd(total, sentinel);
  for (std::size_t i = 0; i < n; ++i) {
    ha[guard + offset + i] = a[i];
    hb[guard + offset + i] = b[i];
  }
  device_array<T> da(total), db(total), dd(total);
  CUDA_OK(cudaMemcpy(da.p, ha.data(), total * sizeof(T), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db.p, hb.data(), total * sizeof(T), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dd.p, hd.data(), total * sizeof(T), cudaMemcpyHostToDevice));
  const std::size_t at = guard + offset;
  hd = fetch_after([&] { reduce_kernel<T, Op><<<1, 256>>>(da.p + at, db.p + at, dd.p + at, n); }, dd, total);
  const reducer<T, Op> red{4};
  int wrong = 0;
  for (std::size_t i = 0; i < total; ++i) {
    const bool inside = i >= at && i < at + n;
    bool ok;
    T want = sentinel;
    if (inside) {
      want = red(a[i - at], b[i - at]);
      if constexpr (Op == reduce_op::avg) want = red.post(want);
      ok = same_result(want, hd[i]);
    } else {
      ok = hd[i].bits == sentinel.bits;
    }
    if (!ok && wrong++ < 5)
      std::printf("  %s %s offset %zu, element %zd%s: a 0x%x b 0x%x: device 0x%x, host 0x%x\n", name, op_name,
                  offset, std::ptrdiff_t(i) - std::ptrdiff_t(at), inside ? "" : " (guard)",
                  inside ? unsigned(a[i - at].bits) : 0u, inside ? unsigned(b[i - at].bits) : 0u,
                  unsigned(hd[i].bits), unsigned(want.bits));
  }
  return wrong;
}

/// reduce_many over k sources (source j: the patterns of a or b, rotated by
/// j) in one block of 256 threads, `offset` elements past a 16-byte boundary.
template <class T, reduce_op Op>
int check_reduce_many(const char* name, const char* op_name, const std::vector<T>& a, const std::vector<T>& b,
                      int k, std::size_t offset) {
  const std::size_t n = a.size(), guard = 16, total = n + offset + 2 * guard, at = guard + offset;
  const T sentinel = T::from_bits(bits_of<T>(0x5A));
  std::vector<std::vector<T>> hs(static_cast<std::size_t>(k), std::vector<T>(total, sentinel));
  std::vector<std::unique_ptr<device_array<T>>> ds;
  std::vector<const T*> ptrs;
  for (int j = 0; j < k; ++j) {
    const std::vector<T>& from = j % 2 == 0 ? a : b;
    for (std::size_t i = 0; i < n; ++i) hs[std::size_t(j)][at + i] = from[(i + std::size_t(j) * 7) % n];
    ds.push_back(std::make_unique<device_array<T>>(total));
    CUDA_OK(cudaMemcpy(ds.back()->p, hs[std::size_t(j)].data(), total * sizeof(T), cudaMemcpyHostToDevice));
    ptrs.push_back(ds.back()->p + at);
  }
  device_array<const T*> dptrs(static_cast<std::size_t>(k));
  CUDA_OK(cudaMemcpy(dptrs.p, ptrs.data(), ptrs.size() * sizeof(const T*), cudaMemcpyHostToDevice));
  std::vector<T> hd(total, sentinel);
  device_array<T> dd(total);
  CUDA_OK(cudaMemcpy(dd.p, hd.data(), total * sizeof(T), cudaMemcpyHostToDevice));
  hd = fetch_after([&] { reduce_many_kernel<T, Op><<<1, 256>>>(dptrs.p, k, dd.p + at, n); }, dd, total);
  const reducer<T, Op> red{4};
  int wrong = 0;
  for (std::size_t i = 0; i < total; ++i) {
    const bool inside = i >= at && i < at + n;
    T want = sentinel;
    if (inside) {
      want = hs[0][i];
      for (int j = 1; j < k; ++j) want = red(want, hs[std::size_t(j)][i]);
      if constexpr (Op == reduce_op::avg) want = red.post(want);
    }
    const bool ok = inside ? same_result(want, hd[i]) : want.bits == hd[i].bits;
    if (!ok && wrong++ < 5)
      std::printf("  %s %s reduce_many k %d offset %zu, element %zd%s: device 0x%x, host 0x%x\n", name,
                  op_name, k, offset, std::ptrdiff_t(i) - std::ptrdiff_t(at), inside ? "" : " (guard)",
                  unsigned(hd[i].bits), unsigned(want.bits));
  }
  return wrong;
}

template <class T>
int check_reductions(const char* name) {
  constexpr std::size_t n_patterns = std::size_t(1) << (8 * sizeof(T));
  std::mt19937_64 rng(0xC0FFEE);
  std::uniform_int_distribution<std::size_t> pick(0, n_patterns - 1);
  std::vector<T> a, b;
  auto add = [&](std::size_t x, std::size_t y) {
    a.push_back(T::from_bits(bits_of<T>(x)));
    b.push_back(T::from_bits(bits_of<T>(y)));
  };
  for (int i = 0; i < 200000; ++i) add(pick(rng), pick(rng));         // random patterns: every class
  for (std::size_t x = 0; x + 1 < n_patterns; x += 3) add(x, x + 1);  // neighbours: ties, carries
  for (std::size_t x = 0; x < n_patterns; x += 5) add(x, x);
  const std::size_t sign = n_patterns >> 1;
  for (std::size_t x = 0; x < sign; x += 7) add(x, x ^ sign);  // x − x, and ±0
  int wrong = 0;
  for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
    int w = 0;
    w += check_reduce<T, reduce_op::sum>(name, "sum", a, b, offset);
    w += check_reduce<T, reduce_op::prod>(name, "prod", a, b, offset);
    w += check_reduce<T, reduce_op::min>(name, "min", a, b, offset);
    w += check_reduce<T, reduce_op::max>(name, "max", a, b, offset);
    w += check_reduce<T, reduce_op::avg>(name, "avg", a, b, offset);
    std::printf("%s: reduce_copy of %zu pairs, offset %zu, sum/prod/min/max/avg: %s\n", name, a.size(),
                offset, w ? "WRONG" : "ok");
    wrong += w;
    int m = 0;
    for (int k : {3, 8}) {
      m += check_reduce_many<T, reduce_op::sum>(name, "sum", a, b, k, offset);
      m += check_reduce_many<T, reduce_op::avg>(name, "avg", a, b, k, offset);
    }
    std::printf("%s: reduce_many over 3 and 8 sources, offset %zu, sum/avg: %s\n", name, offset,
                m ? "WRONG" : "ok");
    wrong += m;
  }
  return wrong;
}

template <class T>
int check_type(const char* name) {
  return check_widen<T>(name) + check_narrow<T>(name) + check_reductions<T>(name);
}

}  // namespace

int main() {
  if (const int rc = test::exit_code_without_gpu(); rc >= 0) return rc;
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU 0: %s, sm_%d%d\n", prop.name, prop.major, prop.minor);
  int wrong = check_type<half_t>("half") + check_type<bfloat16_t>("bfloat16") +
              check_type<float8_e4m3_t>("e4m3") + check_type<float8_e5m2_t>("e5m2");
  std::printf("%s\n", wrong ? "FAILED" : "all ok");
  return wrong ? 1 : 0;
}
