// collx/detail/host_kernels.hpp — the host's reduction kernels: the element
// loops behind the erased reducer (detail/erased_reducer.hpp), written so that
// compilers vectorize them for every (dtype, op).
//
// What keeps the plain loop of reduce_copy() from vectorizing on the host, or
// from vectorizing well, and the answer here:
//  - Narrow floats. The conversions of half_t and the fp8 types (numeric/)
//    branch per element (NaN, subnormal, rounding), which the vectorizer
//    cannot if-convert (bfloat16_t's it can, at length). The kernels use
//    branch-free conversions instead (widen_bits, narrow_bits below) that
//    return the same bits for every input.
//  - Aliasing. The output may be one of the inputs (in place: a == d0 or
//    b == d0), so the plain loop's pointers cannot be restrict, and compilers
//    guard its vector code with run-time overlap checks (clang's send the
//    in-place case to the scalar loop). The kernels check the pointers once
//    per call and, when each input is an output or apart from the outputs,
//    run a loop marked as free of loop-carried dependences; any other overlap
//    (which collx never produces) runs a scalar loop, element after element.
//  - Integer division (avg's post-op on integer types), which x86 has no
//    vector instruction for: 8-bit values divide exactly in float, int32 in
//    double, uint32 by a multiplication; 64-bit values keep the division.
//  - x86-64's baseline (SSE2) has no 64-bit integer compare or multiply for
//    prod/min/max on int64, and the vectorizer's code for the narrow floats
//    is long. On x86 with GCC or clang each kernel is therefore compiled three
//    times: for the build's own target, for AVX2 (with F16C) and for AVX-512
//    (F, BW, VL, DQ); the erased reducer's table picks the widest the CPU
//    has, once. With F16C and AVX-512, half_t converts with the hardware's
//    instructions (vcvtph2ps, vcvtps2ph; NaN first made the library's quiet
//    NaN of its sign), which the vectorizer does not make of the bit
//    manipulation.
//
// Every kernel computes each element with the same operations as the plain
// loop (element-wise, nothing reassociated), so its results are those of the
// plain loop bit for bit, whatever the vector width. One exception, shared by
// any two builds of the plain loop itself: when both operands of sum, prod or
// avg are NaN, which NaN comes out (its sign and payload) is the hardware's
// choice of operand order.
//
// Host only: nothing here is compiled for a device.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/numeric/float16.hpp>
#include <collx/numeric/float8.hpp>
#include <collx/reduce_op.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

// Per-ISA variants of the kernels: GCC and clang on x86, not under nvcc (its
// host pass compiles the same headers for code that never reaches them).
#if !defined(COLLX_HOST_MULTIVERSION)
#if !defined(__CUDACC__) && (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#define COLLX_HOST_MULTIVERSION 1
#else
#define COLLX_HOST_MULTIVERSION 0
#endif
#endif

#if defined(__GNUC__) || defined(__clang__)
#define COLLX_NOINLINE __attribute__((noinline))
#else
#define COLLX_NOINLINE
#endif

#if COLLX_HOST_MULTIVERSION
#include <cpuid.h>
#include <immintrin.h>
#define COLLX_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define COLLX_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif

namespace collx::detail::host {

/// The instruction sets a kernel can be compiled for. `scalar` is the plain
/// element loop of reduce_copy() (the reference the others are checked
/// against); `baseline` is the vectorizable loop for the build's own target.
enum class isa : std::uint8_t { scalar, baseline, avx2, avx512 };
inline constexpr int isa_count = 4;

constexpr const char* name(isa i) {
  switch (i) {
    case isa::scalar: return "scalar";
    case isa::baseline: return "baseline";
    case isa::avx2: return "avx2";
    case isa::avx512: return "avx512";
  }
  return "invalid";
}

/// Whether this CPU runs kernels compiled for i (and this build has them).
inline bool isa_supported(isa i) noexcept {
  switch (i) {
    case isa::scalar:
    case isa::baseline: return true;
#if COLLX_HOST_MULTIVERSION
    case isa::avx2: {
      __builtin_cpu_init();
      unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // F16C: CPUID.1:ECX bit 29
      const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
      return __builtin_cpu_supports("avx2") && f16c;
    }
    case isa::avx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    case isa::avx2:
    case isa::avx512: return false;
#endif
  }
  return false;
}

/// The widest instruction set of this CPU that the kernels are compiled for;
/// decided once per process.
inline isa best_isa() noexcept {
  static const isa best = [] {
    if (isa_supported(isa::avx512)) return isa::avx512;
    if (isa_supported(isa::avx2)) return isa::avx2;
    return isa::baseline;
  }();
  return best;
}

// ---------------------------------------------------------------------------
// Branch-free conversions of the narrow float formats, bit-identical to
// lowp::decode<F> and lowp::encode<F> (from binary32); every step is a select
// or a fixed shift, so a loop of them vectorizes.
// ---------------------------------------------------------------------------

template <class D, class F>
F format_of(const lowp_value::base<D, F>*);

/// The detail::lowp format of a narrow float type; void for other types.
template <class T>
struct lowp_format {
  using type = void;
};
template <class T>
  requires requires(const T* p) { format_of(p); }
struct lowp_format<T> {
  using type = decltype(format_of(static_cast<const T*>(nullptr)));
};
template <class T>
inline constexpr bool is_lowp = !std::is_void_v<typename lowp_format<T>::type>;

/// c ? x : y, as bit masks: a conditional expression lets the compiler move a
/// floating-point operation that feeds only one side into a branch, and a
/// branch whose operation may raise a flag (-ftrapping-math, the default) is
/// not if-converted, so the loop would not vectorize.
COLLX_ALWAYS_INLINE std::uint32_t select_bits(bool c, std::uint32_t x, std::uint32_t y) noexcept {
  return y ^ ((x ^ y) & (0u - static_cast<std::uint32_t>(c)));
}

/// The binary32 value of the F-encoded bits b (as lowp::decode<F>).
template <class F>
COLLX_ALWAYS_INLINE float widen_bits(std::uint32_t b) noexcept {
  constexpr int E = F::exp_bits, M = F::mant;
  if constexpr (E == 8) {
    return lowp::bit_cast<float>(b << (23 - M));
  } else {
    constexpr std::uint32_t exp_ones = (1u << E) - 1, mant_ones = (1u << M) - 1;
    const std::uint32_t sign = ((b >> (E + M)) & 1u) << 31;
    const std::uint32_t exp = (b >> M) & exp_ones;
    const std::uint32_t man = b & mant_ones;
    const std::uint32_t normal = ((exp + std::uint32_t(127 - F::bias)) << 23) | (man << (23 - M));
    // Subnormal: float(man) is exact; lowering its exponent field scales it by
    // 2^(1 - bias - mant). Used only where man != 0.
    const std::uint32_t sub =
        lowp::bit_cast<std::uint32_t>(float(std::int32_t(man))) - (std::uint32_t(F::bias + M - 1) << 23);
    std::uint32_t out = select_bits(exp != 0, normal, select_bits(man != 0, sub, 0u));
    if constexpr (F::ieee) out = select_bits(exp == exp_ones, 0x7F800000u | (man << (23 - M)), out);
    else out = select_bits(exp == exp_ones && man == mant_ones, 0x7FC00000u, out);
    return lowp::bit_cast<float>(sign | out);
  }
}

/// The F encoding of f, nearest-even (as lowp::encode<F> of its bits). The
/// subnormal range of formats narrower than binary32's exponent rounds with
/// one float addition, so this assumes the default rounding mode; it gives the
/// same bits with denormals flushed or treated as zero.
template <class F>
COLLX_ALWAYS_INLINE std::uint32_t narrow_bits(float f) noexcept {
  constexpr int E = F::exp_bits, M = F::mant, S = 23 - M;
  const std::uint32_t x = lowp::bit_cast<std::uint32_t>(f);
  const std::uint32_t a = x & 0x7FFFFFFFu;
  const std::uint32_t sign = (x >> 31) << (E + M);
  // A target normal: rebias the exponent and round the mantissa to M bits,
  // nearest-even; a carry out of the mantissa moves into the exponent.
  std::uint32_t mag =
      (a + (std::uint32_t(F::bias - 127) << 23) + ((1u << (S - 1)) - 1) + ((a >> S) & 1u)) >> S;
  if constexpr (E != 8) {
    // A target subnormal (or zero): adding 2^k, whose ulp is the target's
    // subnormal step, rounds |f| to that step; the low bits are then the
    // count of steps (the smallest normal when it rounds up to it).
    constexpr std::uint32_t magic = std::uint32_t(127 - F::bias + S + 1) << 23;
    const std::uint32_t sub =
        lowp::bit_cast<std::uint32_t>(lowp::bit_cast<float>(a) + lowp::bit_cast<float>(magic)) - magic;
    mag = select_bits(a < (std::uint32_t(128 - F::bias) << 23), sub, mag);
  }
  // (E == 8: the rounding above is exact for binary32 subnormals too.)
  mag = select_bits(mag > F::max_finite, F::overflow, mag);
  mag = select_bits(a >= 0x7F800000u, a == 0x7F800000u ? F::overflow : F::nan, mag);
  return sign | mag;
}

// ---------------------------------------------------------------------------
// The element operation of the kernels: reducer<T, Op>, with the narrow
// floats converted by the functions above and integer avg's division done
// with vector instructions where that is exact.
// ---------------------------------------------------------------------------

/// Division of uint32 values by a run-time constant d >= 1 as a multiplication
/// and shifts (Granlund and Montgomery, "Division by invariant integers using
/// multiplication", fig. 4.1): exact for every dividend.
struct u32_divider {
  std::uint32_t m = 1;
  int sh1 = 0, sh2 = 0;

  u32_divider() = default;
  explicit u32_divider(std::uint32_t d) {
    int l = 0;  // ceil(log2(d))
    while (l < 32 && (std::uint64_t(1) << l) < d) ++l;
    m = static_cast<std::uint32_t>((((std::uint64_t(1) << l) - d) << 32) / d + 1);
    sh1 = l < 1 ? l : 1;
    sh2 = l > 0 ? l - 1 : 0;
  }
  COLLX_ALWAYS_INLINE std::uint32_t divide(std::uint32_t n) const {
    const auto t = static_cast<std::uint32_t>((std::uint64_t(m) * n) >> 32);
    return (t + ((n - t) >> sh1)) >> sh2;
  }
};

template <class T, reduce_op Op>
struct elem_op {
  static constexpr bool has_post = reducer<T, Op>::has_post;
  using F = typename lowp_format<T>::type;
  // How integer avg's post-op divides: 8-bit values in float, int32 in
  // double, uint32 by multiplication; 64-bit values keep the division.
  static constexpr bool int_div = has_post && std::is_integral_v<T> && sizeof(T) != 8;
  static constexpr bool u32_div = int_div && std::is_same_v<T, std::uint32_t>;
  using fp_div = std::conditional_t<sizeof(T) == 1, float, double>;

  std::uint32_t nranks = 1;
  u32_divider u32;

  explicit elem_op(std::uint32_t n) : nranks(n) {
    if constexpr (u32_div) {
      if (n != 0) u32 = u32_divider(n);
    }
  }

  /// Whether the kernels compute post() with this divisor; otherwise the
  /// plain loop runs (an integer type too narrow to hold the rank count).
  bool vectorizable() const {
    if constexpr (int_div)
      return nranks != 0 && nranks <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
    else return true;
  }

  COLLX_ALWAYS_INLINE T operator()(T a, T b) const {
    if constexpr (is_lowp<T>) {
      const float r = reducer<float, Op>{}(widen_bits<F>(a.bits), widen_bits<F>(b.bits));
      return T::from_bits(static_cast<typename F::storage>(narrow_bits<F>(r)));
    } else {
      return reducer<T, Op>{nranks}(a, b);
    }
  }

  COLLX_ALWAYS_INLINE T post(T v) const {
    if constexpr (!has_post) {
      return v;
    } else if constexpr (is_lowp<T>) {
      const float r = reducer<float, Op>{nranks}.post(widen_bits<F>(v.bits));
      return T::from_bits(static_cast<typename F::storage>(narrow_bits<F>(r)));
    } else if constexpr (u32_div) {
      return u32.divide(v);
    } else if constexpr (int_div) {
      // v / d, d = T(nranks) > 0, in floating point: an exact quotient that is
      // not an integer is at least 1/d from the next integer toward zero,
      // and the division errs by at most |v|/d * 2^-24 (float) or 2^-53
      // (double), less than 1/d for |v| < 2^8 (2^32); so truncation gives
      // the integer quotient.
      const fp_div q = static_cast<fp_div>(v) / static_cast<fp_div>(static_cast<T>(nranks));
      return static_cast<T>(static_cast<std::int32_t>(q));
    } else {
      return reducer<T, Op>{nranks}.post(v);
    }
  }
};

// ---------------------------------------------------------------------------
// The loops.
// ---------------------------------------------------------------------------

// Each element is read (a[i], b[i]) before it is written (d0[i], d1[i]), and
// no iteration touches another's elements: the loop has no loop-carried
// dependence as long as each input is either an output itself or disjoint
// from the outputs, which the kernel checks before it runs the loop. The
// pragma tells the compiler so; it then vectorizes without run-time alias
// checks, in place too.
#if defined(__clang__)
// (With instrumentation such as a sanitizer's the loop may not vectorize, and
// clang warns about a pragma it could not honour; loop() silences that.)
#define COLLX_NO_LOOP_CARRIED_DEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define COLLX_NO_LOOP_CARRIED_DEP _Pragma("GCC ivdep")
#else
#define COLLX_NO_LOOP_CARRIED_DEP
#endif

#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
template <bool Reduce, bool Post, int NDst, class T, class Op>
COLLX_ALWAYS_INLINE void loop(const T* a, const T* b, T* d0, T* d1, std::size_t n, const Op& op) {
  COLLX_NO_LOOP_CARRIED_DEP
  for (std::size_t i = 0; i < n; ++i) {
    T v = a[i];
    if constexpr (Reduce) v = op(v, b[i]);
    if constexpr (Post) v = op.post(v);
    d0[i] = v;
    if constexpr (NDst == 2) d1[i] = v;
  }
}
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

/// The plain loop of reduce_copy() on one host thread: the reference the
/// kernels are checked and measured against (isa::scalar).
template <class T, reduce_op Op, bool Reduce, bool Post, int NDst>
void scalar_kernel(const void* a, const void* b, void* d0, void* d1, std::size_t n, std::uint32_t nranks) {
  struct one {
    static constexpr int size() { return 1; }
    static constexpr int index() { return 0; }
  };
  const reducer<T, Op> red{nranks};
  constexpr bool P = Post && reducer<T, Op>::has_post;
  reduce_copy<Reduce, P, NDst>(one{}, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(d0),
                               static_cast<T*>(d1), n, red);
}

/// The kernels' fallback: the plain loop's arithmetic, one element after the
/// other, for buffers that overlap other than in place (which collx does not
/// produce) and divisors the vector post-op does not take. Kept scalar: the
/// order matters when buffers overlap, and its vector code would only cost
/// compile time.
template <class T, reduce_op Op, bool Reduce, bool Post, int NDst>
COLLX_NOINLINE void sequential_kernel(const T* a, const T* b, T* d0, T* d1, std::size_t n,
                                      std::uint32_t nranks) {
  const reducer<T, Op> red{nranks};
  for (std::size_t i = 0; i < n; ++i) {
    T v = a[i];
    if constexpr (Reduce) v = red(v, b[i]);
    if constexpr (Post) v = red.post(v);
    d0[i] = v;
    if constexpr (NDst == 2) d1[i] = v;
#if defined(__GNUC__) || defined(__clang__)
    __asm__ volatile("" ::: "memory");
#endif
  }
}

inline bool disjoint(const void* p, const void* q, std::size_t bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(p), y = reinterpret_cast<std::uintptr_t>(q);
  return x + bytes <= y || y + bytes <= x;
}

#if COLLX_HOST_MULTIVERSION
// ---------------------------------------------------------------------------
// half_t with F16C / AVX-512: 8 or 16 elements at a time through float, with
// the same float operations as reducer<float, Op> and the conversions of
// numeric/float16.hpp: vcvtph2ps is exact (a signaling NaN comes back quiet,
// which no result can tell: every NaN leaves as the quiet NaN of its sign),
// vcvtps2ph rounds to nearest-even with overflow to infinity once NaN is made
// the quiet NaN of its sign (it would keep payload bits). The last partial
// vector goes through a zero-padded copy (AVX2) or masked loads and stores
// (AVX-512).
// ---------------------------------------------------------------------------

COLLX_TARGET_AVX2 inline __m128i half8_narrow(__m256 x) {
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 quiet = _mm256_or_ps(_mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN))),
                                    _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
  return _mm256_cvtps_ph(_mm256_blendv_ps(x, quiet, nan), _MM_FROUND_TO_NEAREST_INT);
}
/// post?(a ⊕ b), or post(a), for 8 elements.
template <reduce_op Op, bool Reduce, bool Post>
COLLX_TARGET_AVX2 inline __m128i half8_step(__m128i ha, __m128i hb, __m256 div) {
  const __m256 x = _mm256_cvtph_ps(ha);
  if constexpr (!Reduce) return half8_narrow(_mm256_div_ps(x, div));
  const __m256 y = _mm256_cvtph_ps(hb);
  __m256 r;
  if constexpr (Op == reduce_op::sum || Op == reduce_op::avg) r = _mm256_add_ps(x, y);
  else if constexpr (Op == reduce_op::prod) r = _mm256_mul_ps(x, y);
  // reducer<float, Op>: (y < x || y != y) ? y : x, and (x < y || y != y) ? y : x.
  else if constexpr (Op == reduce_op::min)
    r = _mm256_blendv_ps(x, y,
                         _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_LT_OQ), _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
  else
    r = _mm256_blendv_ps(x, y,
                         _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ), _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
  const __m128i h = half8_narrow(r);
  if constexpr (Post) return half8_narrow(_mm256_div_ps(_mm256_cvtph_ps(h), div));
  return h;
}
template <reduce_op Op, bool Reduce, bool Post, int NDst>
COLLX_TARGET_AVX2 void half_kernel_avx2(const half_t* a, const half_t* b, half_t* d0, half_t* d1,
                                        std::size_t n, std::uint32_t nranks) {
  const __m256 div = _mm256_set1_ps(static_cast<float>(nranks));
  const auto load = [](const half_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = half8_step<Op, Reduce, Post>(load(a + i), Reduce ? load(b + i) : __m128i{}, div);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d0 + i), h);
    if constexpr (NDst == 2) _mm_storeu_si128(reinterpret_cast<__m128i*>(d1 + i), h);
  }
  if (i < n) {
    const std::size_t bytes = (n - i) * sizeof(half_t);
    alignas(16) half_t ta[8] = {}, tb[8] = {}, td[8];
    std::memcpy(ta, a + i, bytes);
    if constexpr (Reduce) std::memcpy(tb, b + i, bytes);
    _mm_store_si128(reinterpret_cast<__m128i*>(td), half8_step<Op, Reduce, Post>(load(ta), load(tb), div));
    std::memcpy(d0 + i, td, bytes);
    if constexpr (NDst == 2) std::memcpy(d1 + i, td, bytes);
  }
}

COLLX_TARGET_AVX512 inline __m256i half16_narrow(__m512 x) {
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512i xi = _mm512_castps_si512(x);
  const __m512i quiet =
      _mm512_or_si512(_mm512_and_si512(xi, _mm512_set1_epi32(INT32_MIN)), _mm512_set1_epi32(0x7FC00000));
  // The zero-masking forms of the conversions: GCC 12 warns
  // (-Wmaybe-uninitialized) on the plain ones' undefined pass-through.
  return _mm512_maskz_cvtps_ph(0xFFFF, _mm512_castsi512_ps(_mm512_mask_mov_epi32(xi, nan, quiet)),
                               _MM_FROUND_TO_NEAREST_INT);
}
/// post?(a ⊕ b), or post(a), for 16 elements.
template <reduce_op Op, bool Reduce, bool Post>
COLLX_TARGET_AVX512 inline __m256i half16_step(__m256i ha, __m256i hb, __m512 div) {
  const __m512 x = _mm512_maskz_cvtph_ps(0xFFFF, ha);
  if constexpr (!Reduce) return half16_narrow(_mm512_div_ps(x, div));
  const __m512 y = _mm512_maskz_cvtph_ps(0xFFFF, hb);
  __m512 r;
  if constexpr (Op == reduce_op::sum || Op == reduce_op::avg) r = _mm512_add_ps(x, y);
  else if constexpr (Op == reduce_op::prod) r = _mm512_mul_ps(x, y);
  else if constexpr (Op == reduce_op::min)
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, x, _CMP_LT_OQ) | _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), x,
                             y);
  else
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_LT_OQ) | _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), x,
                             y);
  const __m256i h = half16_narrow(r);
  if constexpr (Post) return half16_narrow(_mm512_div_ps(_mm512_maskz_cvtph_ps(0xFFFF, h), div));
  return h;
}
template <reduce_op Op, bool Reduce, bool Post, int NDst>
COLLX_TARGET_AVX512 void half_kernel_avx512(const half_t* a, const half_t* b, half_t* d0, half_t* d1,
                                            std::size_t n, std::uint32_t nranks) {
  const __m512 div = _mm512_set1_ps(static_cast<float>(nranks));
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i ha = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i hb = Reduce ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)) : __m256i{};
    const __m256i h = half16_step<Op, Reduce, Post>(ha, hb, div);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d0 + i), h);
    if constexpr (NDst == 2) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d1 + i), h);
  }
  if (i < n) {
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256i ha = _mm256_maskz_loadu_epi16(m, a + i);
    const __m256i hb = Reduce ? _mm256_maskz_loadu_epi16(m, b + i) : __m256i{};
    const __m256i h = half16_step<Op, Reduce, Post>(ha, hb, div);
    _mm256_mask_storeu_epi16(d0 + i, m, h);
    if constexpr (NDst == 2) _mm256_mask_storeu_epi16(d1 + i, m, h);
  }
}
#endif

template <isa I, class T, reduce_op Op, bool Reduce, bool Post, int NDst>
COLLX_ALWAYS_INLINE void kernel_body(const void* av, const void* bv, void* d0v, void* d1v, std::size_t n,
                                     std::uint32_t nranks) {
  constexpr bool P = Post && reducer<T, Op>::has_post;
  const T* a = static_cast<const T*>(av);
  const T* b = static_cast<const T*>(bv);
  T* d0 = static_cast<T*>(d0v);
  T* d1 = static_cast<T*>(d1v);
  if constexpr (!Reduce && !P) {
    // A copy: the C library's memcpy picks the widest moves the CPU has.
    if (n == 0) return;
    if (d0 != a) std::memcpy(d0, a, n * sizeof(T));
    if constexpr (NDst == 2) std::memcpy(d1, a, n * sizeof(T));
  } else {
    const elem_op<T, Op> op{nranks};
    const std::size_t bytes = n * sizeof(T);
    // Each input is an output or apart from both; the second output is apart
    // from everything.
    const auto apart = [&](const void* in) {
      return (in == d0v || disjoint(in, d0v, bytes)) && (NDst == 1 || disjoint(in, d1v, bytes));
    };
    bool ok = op.vectorizable() && apart(av) && (!Reduce || apart(bv));
    if constexpr (NDst == 2) ok = ok && disjoint(d0v, d1v, bytes);
    if (ok) {
#if COLLX_HOST_MULTIVERSION
      if constexpr (std::is_same_v<T, half_t> && I == isa::avx2)
        return half_kernel_avx2<Op, Reduce, P, NDst>(a, b, d0, d1, n, nranks);
      else if constexpr (std::is_same_v<T, half_t> && I == isa::avx512)
        return half_kernel_avx512<Op, Reduce, P, NDst>(a, b, d0, d1, n, nranks);
      else
#endif
        return loop<Reduce, P, NDst>(a, b, d0, d1, n, op);
    }
    sequential_kernel<T, Op, Reduce, P, NDst>(a, b, d0, d1, n, nranks);
  }
}

template <class T, reduce_op Op, bool Reduce, bool Post, int NDst>
COLLX_NOINLINE void baseline_kernel(const void* a, const void* b, void* d0, void* d1, std::size_t n,
                                    std::uint32_t nranks) {
  kernel_body<isa::baseline, T, Op, Reduce, Post, NDst>(a, b, d0, d1, n, nranks);
}

#if COLLX_HOST_MULTIVERSION
template <class T, reduce_op Op, bool Reduce, bool Post, int NDst>
COLLX_NOINLINE COLLX_TARGET_AVX2 void avx2_kernel(const void* a, const void* b, void* d0, void* d1,
                                                  std::size_t n, std::uint32_t nranks) {
  kernel_body<isa::avx2, T, Op, Reduce, Post, NDst>(a, b, d0, d1, n, nranks);
}
template <class T, reduce_op Op, bool Reduce, bool Post, int NDst>
COLLX_NOINLINE COLLX_TARGET_AVX512 void avx512_kernel(const void* a, const void* b, void* d0, void* d1,
                                                      std::size_t n, std::uint32_t nranks) {
  kernel_body<isa::avx512, T, Op, Reduce, Post, NDst>(a, b, d0, d1, n, nranks);
}
#endif

using kernel_fn = void (*)(const void* a, const void* b, void* d0, void* d1, std::size_t n,
                           std::uint32_t nranks);

template <isa I, class T, reduce_op Op, bool Reduce, bool Post, int NDst>
constexpr kernel_fn kernel_for();

/// Two outputs (a reduction both kept and sent): the one-output kernel
/// writes d1 (the protocol's send slot, apart from the other buffers), then
/// d1 is copied, still in cache, to d0. One loop less to compile per kernel.
template <isa I, class T, reduce_op Op, bool Reduce, bool Post>
void two_outputs(const void* a, const void* b, void* d0, void* d1, std::size_t n, std::uint32_t nranks) {
  const std::size_t bytes = n * sizeof(T);
  if (n == 0) return;
  if (disjoint(d1, a, bytes) && (!Reduce || disjoint(d1, b, bytes)) && disjoint(d1, d0, bytes)) {
    kernel_for<I, T, Op, Reduce, Post, 1>()(a, b, d1, nullptr, n, nranks);
    std::memcpy(d0, d1, bytes);
  } else {
    sequential_kernel<T, Op, Reduce, Post, 2>(static_cast<const T*>(a), static_cast<const T*>(b),
                                              static_cast<T*>(d0), static_cast<T*>(d1), n, nranks);
  }
}

/// The kernel of (T, Op, Reduce, Post, NDst) compiled for I (baseline where
/// this build has no such variant). Kernels that compute the same bits share
/// one instantiation: a post-op only avg has; avg before its post-op is sum;
/// wrapping and bitwise integer ops are the same on signed and unsigned types;
/// two outputs are one and a copy.
template <isa I, class T, reduce_op Op, bool Reduce, bool Post, int NDst>
constexpr kernel_fn kernel_for() {
  constexpr bool P = Post && reducer<T, Op>::has_post;
  constexpr reduce_op O = Op == reduce_op::avg && !P ? reduce_op::sum : Op;
  constexpr bool wraps = O == reduce_op::sum || O == reduce_op::prod || is_bitwise(O);
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && wraps) {
    return kernel_for<I, std::make_unsigned_t<T>, O, Reduce, P, NDst>();
  } else if constexpr (O != Op || P != Post) {
    return kernel_for<I, T, O, Reduce, P, NDst>();
  } else if constexpr (I == isa::scalar) {
    return &scalar_kernel<T, Op, Reduce, Post, NDst>;
  } else if constexpr (NDst == 2 && (Reduce || Post)) {
    return &two_outputs<I, T, Op, Reduce, Post>;
#if COLLX_HOST_MULTIVERSION
  } else if constexpr (I == isa::avx2) {
    return &avx2_kernel<T, Op, Reduce, Post, NDst>;
  } else if constexpr (I == isa::avx512) {
    return &avx512_kernel<T, Op, Reduce, Post, NDst>;
#endif
  } else {
    return &baseline_kernel<T, Op, Reduce, Post, NDst>;
  }
}

}  // namespace collx::detail::host
