// Tests for the host's vectorized reduction kernels (detail/host_kernels.hpp):
// every (dtype, op) and kernel form against a reference computed in double
// (int64 for integers) and against the plain loop, bit for bit, on every
// instruction set this CPU runs; lengths 0..67 and longer (vector bodies and
// tails), misaligned pointers, both in-place forms, and guard elements that
// must stay untouched. And the branch-free conversions against numeric/.
#include <catch2/catch.hpp>

#include <collx/detail/erased_reducer.hpp>
#include <collx/detail/host_kernels.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace host_kernels_test {

using namespace collx;
namespace host = collx::detail::host;
using collx::detail::erased_reducer;

template <class T>
constexpr bool is_lowp = host::is_lowp<T>;

template <class T>
using bits_t =
    std::conditional_t<sizeof(T) == 1, std::uint8_t,
                       std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                          std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

template <class T>
bits_t<T> bits_of(const T& v) {
  bits_t<T> b;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T from_bits(bits_t<T> b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

template <class T>
bool is_nan(const T& v) {
  if constexpr (std::is_integral_v<T>) return false;
  else return std::isnan(static_cast<double>(v));
}

// ---- inputs -----------------------------------------------------------------

/// Values of T that exercise the op: random bit patterns (every class of
/// value for the float formats: NaN, inf, subnormals), values of moderate size
/// (rounding), and the special values at fixed places.
template <class T>
T random_value(std::mt19937_64& rng) {
  const std::uint64_t r = rng();
  if constexpr (std::is_integral_v<T>) {
    // Half of them small, so products and averages are not all wrapped bits.
    return (r & 1) ? static_cast<T>(static_cast<std::int64_t>(r >> 8) % 100) : static_cast<T>(r >> 1);
  } else {
    if (r & 1) return from_bits<T>(static_cast<bits_t<T>>(r >> 1));
    const double x = std::ldexp(static_cast<double>(static_cast<std::int64_t>(r >> 12) % 4096) / 1024.0,
                                static_cast<int>((r >> 2) % 7) - 3);
    return static_cast<T>(x);
  }
}

template <class T>
std::vector<T> specials() {
  if constexpr (std::is_integral_v<T>) {
    return {T(0), T(1), T(-1), std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
  } else {
    const double inf = std::numeric_limits<double>::infinity(),
                 nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<T> v;
    for (double x : {0.0, -0.0, 1.0, -1.0, inf, -inf, nan, -nan, 1e-300, -1e-300, 1e300, 1e-7, 65504.0, 448.0,
                     57344.0, 3.0e38})
      v.push_back(static_cast<T>(x));
    return v;
  }
}

// ---- the reference ----------------------------------------------------------

/// a ⊕ b as the library defines it, computed apart from the library: in
/// (u)int64 for integers, in double for the floating types (rounded to T
/// once, which for +, * and / gives what rounding to float first and then to
/// T gives: float has more than twice the bits of each narrow format).
template <class T, reduce_op Op>
T ref_op(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using W = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
    using U = std::make_unsigned_t<T>;
    const W x = a, y = b;
    switch (Op) {
      case reduce_op::sum:
      case reduce_op::avg:
        return static_cast<T>(static_cast<U>(static_cast<std::uint64_t>(x) + static_cast<std::uint64_t>(y)));
      case reduce_op::prod:
        return static_cast<T>(static_cast<U>(static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(y)));
      case reduce_op::min: return static_cast<T>(y < x ? y : x);
      case reduce_op::max: return static_cast<T>(x < y ? y : x);
      case reduce_op::band: return static_cast<T>(x & y);
      case reduce_op::bor: return static_cast<T>(x | y);
      case reduce_op::bxor: return static_cast<T>(x ^ y);
    }
    return T{};
  } else {
    const double x = static_cast<double>(a), y = static_cast<double>(b);
    if constexpr (Op == reduce_op::min || Op == reduce_op::max) {
      // One of the operands: a NaN one, the second when both are NaN;
      // otherwise the smaller (larger), the first of two equal ones (-0, +0).
      // Its bits as they are (a selection does not quiet a signaling NaN);
      // the narrow formats round every result to T (NaN to the quiet NaN of
      // its sign, e5m2 infinity to max).
      const bool second = std::isnan(y) || (!std::isnan(x) && (Op == reduce_op::min ? y < x : x < y));
      const T r = second ? b : a;
      if constexpr (is_lowp<T>) return static_cast<T>(static_cast<double>(r));
      else return r;
    } else {
      const double r = Op == reduce_op::prod ? x * y : x + y;
      return static_cast<T>(r);
    }
  }
}

template <class T, reduce_op Op>
T ref_post(T v, std::uint32_t nranks) {
  if constexpr (Op != reduce_op::avg) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    using W = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
    return static_cast<T>(static_cast<W>(v) / static_cast<W>(nranks));
  } else {
    return static_cast<T>(static_cast<double>(v) / static_cast<double>(nranks));
  }
}

/// Whether the kernel's value may differ from the reference's in its bits:
/// only NaN from an arithmetic op (which NaN comes out of two is the
/// hardware's choice of operand order).
template <class T, reduce_op Op>
bool same(T got, T want) {
  if (bits_of(got) == bits_of(want)) return true;
  if constexpr (!std::is_integral_v<T>)
    if (Op != reduce_op::min && Op != reduce_op::max) return is_nan(got) && is_nan(want);
  return false;
}

// ---- one kernel call, checked -----------------------------------------------

enum class alias { none, a_in_d0, b_in_d0 };

struct failure {
  std::ostringstream what;
  int count = 0;
};

/// Buffers with guard elements on both sides; `off` elements of misalignment
/// from a 64-byte boundary.
template <class T>
struct guarded {
  static constexpr std::size_t guard = 16;
  std::vector<unsigned char> raw;
  T* p = nullptr;
  std::size_t n = 0;
  bits_t<T> fill;

  guarded(std::size_t count, std::size_t off, bits_t<T> fill_bits) : n(count), fill(fill_bits) {
    raw.resize((count + 2 * guard + off) * sizeof(T) + 64);
    auto base = reinterpret_cast<std::uintptr_t>(raw.data());
    base = (base + 63) & ~std::uintptr_t(63);
    p = reinterpret_cast<T*>(base) + guard + off;
    for (std::size_t i = 0; i < count + 2 * guard; ++i)
      p[static_cast<std::ptrdiff_t>(i - guard)] = from_bits<T>(fill);
  }
  /// Whether the guards, and the elements from `from` up to n, still hold the fill.
  bool intact(std::size_t from) const {
    for (std::size_t i = 0; i < guard; ++i) {
      if (bits_of(p[-1 - static_cast<std::ptrdiff_t>(i)]) != fill) return false;
      if (bits_of(p[n + i]) != fill) return false;
    }
    for (std::size_t i = from; i < n; ++i)
      if (bits_of(p[i]) != fill) return false;
    return true;
  }
};

template <class T, reduce_op Op>
void check_call(const erased_reducer::table* t, const erased_reducer::table* plain, host::isa isa,
                bool reduce, bool post, int ndst, std::size_t n, std::size_t off, alias al,
                std::uint32_t nranks, std::mt19937_64& rng, failure& f) {
  const std::vector<T> sp = specials<T>();
  // One element more than used: no null data() for n == 0 (memcpy).
  std::vector<T> a(n + 1), b(n + 1);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = (i % 7 == 3) ? sp[(i / 7) % sp.size()] : random_value<T>(rng);
    b[i] = (i % 5 == 1) ? sp[(i / 5 + i) % sp.size()] : random_value<T>(rng);
  }
  // Misalignment: each buffer its own (d0 shares a's or b's in place).
  guarded<T> ga(n, off, 0), gb(n, (off + 1) % 4, 0);
  guarded<T> d0(n, (off + 2) % 4, static_cast<bits_t<T>>(0x5A5A5A5A5A5A5A5Aull));
  guarded<T> d1(n, (off + 3) % 4, static_cast<bits_t<T>>(0xA5A5A5A5A5A5A5A5ull));
  std::memcpy(ga.p, a.data(), n * sizeof(T));
  std::memcpy(gb.p, b.data(), n * sizeof(T));
  T* da = ga.p;
  T* db = gb.p;
  T* out0 = d0.p;
  if (al == alias::a_in_d0) out0 = da;
  if (al == alias::b_in_d0) out0 = db;
  T* out1 = ndst == 2 ? d1.p : nullptr;

  // The plain loop on copies, for the bit-for-bit comparison.
  std::vector<T> pa(a), pb(b), p0(n + 1), p1(n + 1);
  T* pout0 = al == alias::a_in_d0 ? pa.data() : al == alias::b_in_d0 ? pb.data() : p0.data();
  plain->k[reduce][post][ndst - 1](pa.data(), pb.data(), pout0, ndst == 2 ? p1.data() : nullptr, n, nranks);

  t->k[reduce][post][ndst - 1](da, db, out0, out1, n, nranks);

  auto fail = [&](const std::string& why) {
    if (f.count++ < 8)
      f.what << name(isa) << " " << name(dtype_of<T>) << " " << name(Op) << " reduce=" << reduce
             << " post=" << post << " ndst=" << ndst << " n=" << n << " off=" << off
             << " alias=" << static_cast<int>(al) << " nranks=" << nranks << ": " << why << "\n";
  };
  const bool has_post = Op == reduce_op::avg && post;
  for (std::size_t i = 0; i < n; ++i) {
    T want = a[i];
    if (reduce) want = ref_op<T, Op>(want, b[i]);
    if (has_post) want = ref_post<T, Op>(want, nranks);
    if (!reduce && !has_post) want = a[i];  // a copy keeps every bit
    const T got = out0[i];
    if (!same<T, Op>(got, want)) {
      std::ostringstream os;
      os << "element " << i << ": got bits " << std::hex << +bits_of(got) << ", reference " << +bits_of(want)
         << " (inputs " << +bits_of(a[i]) << ", " << +bits_of(b[i]) << ")";
      fail(os.str());
      return;
    }
    if (!same<T, Op>(got, pout0[i])) {
      std::ostringstream os;
      os << "element " << i << ": got bits " << std::hex << +bits_of(got) << ", plain loop "
         << +bits_of(pout0[i]);
      fail(os.str());
      return;
    }
    if (ndst == 2 && bits_of(out1[i]) != bits_of(got)) {
      fail("second output differs at element " + std::to_string(i));
      return;
    }
  }
  // Nothing written outside [0, n): guards of every buffer, inputs unchanged.
  if (!d1.intact(ndst == 2 ? n : 0)) fail("d1 written outside its elements");
  if (!d0.intact(al == alias::none ? n : 0)) fail("d0 written outside its elements");
  const bool a_kept = al == alias::a_in_d0 || std::memcmp(ga.p, a.data(), n * sizeof(T)) == 0;
  const bool b_kept = al == alias::b_in_d0 || std::memcmp(gb.p, b.data(), n * sizeof(T)) == 0;
  if (!ga.intact(n) || !a_kept) fail("a changed or written outside");
  if (!gb.intact(n) || !b_kept) fail("b changed or written outside");
}

template <class T, reduce_op Op>
void check_all(failure& f) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(dtype_of<T>) * 131 + static_cast<std::uint64_t>(Op));
  const erased_reducer::table* plain = erased_reducer::table_for<T, Op>(host::isa::scalar);
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 67; ++n) lengths.push_back(n);
  for (std::size_t n : {127, 128, 129, 255, 1000, 4099}) lengths.push_back(n);
  for (host::isa isa : {host::isa::baseline, host::isa::avx2, host::isa::avx512}) {
    if (!host::isa_supported(isa)) continue;
    const erased_reducer::table* t = erased_reducer::table_for<T, Op>(isa);
    for (int form = 0; form < 8; ++form) {
      const bool reduce = form & 4, post = form & 2;
      const int ndst = (form & 1) + 1;
      for (std::size_t n : lengths) {
        const std::size_t off = n % 4;
        for (alias al : {alias::none, alias::a_in_d0, alias::b_in_d0}) {
          if (al == alias::b_in_d0 && !reduce) continue;  // b is not read
          // avg divides by the rank count: 1, typical counts, and counts an
          // 8-bit type cannot hold (200 reads as negative, 256 as zero, 300
          // as 44 when narrowed), which take the scalar fallback.
          for (std::uint32_t nranks : {1u, 3u, 4u, 200u, 256u, 300u}) {
            if (!(Op == reduce_op::avg && post) && nranks != 4) continue;
            check_call<T, Op>(t, plain, isa, reduce, post, ndst, n, off, al, nranks, rng, f);
          }
        }
      }
    }
  }
}

template <class T>
void check_type(failure& f) {
  check_all<T, reduce_op::sum>(f);
  check_all<T, reduce_op::prod>(f);
  check_all<T, reduce_op::min>(f);
  check_all<T, reduce_op::max>(f);
  check_all<T, reduce_op::avg>(f);
  if constexpr (std::is_integral_v<T>) {
    check_all<T, reduce_op::band>(f);
    check_all<T, reduce_op::bor>(f);
    check_all<T, reduce_op::bxor>(f);
  }
}

template <class F, class T>
void check_conversions(failure& f) {
  namespace lowp = collx::detail::lowp;
  constexpr std::uint32_t patterns = 1u << (8 * sizeof(T));
  for (std::uint32_t b = 0; b < patterns; ++b) {
    const float want = lowp::decode<F>(b), got = host::widen_bits<F>(b);
    if (std::memcmp(&want, &got, sizeof(float)) != 0 && f.count++ < 8)
      f.what << name(dtype_of<T>) << ": widen_bits(" << std::hex << b << ") differs\n";
  }
  // Every sign and exponent with mantissas around each rounding position, and
  // random bit patterns.
  std::vector<std::uint32_t> xs;
  for (std::uint32_t se = 0; se < 512; ++se) {
    for (int k = 0; k < 23; ++k)
      for (std::uint32_t m :
           {1u << k, (1u << k) - 1, (1u << k) + 1, (3u << k) & 0x7FFFFFu, (1u << k) ^ 0x7FFFFFu})
        xs.push_back((se << 23) | (m & 0x7FFFFFu));
    xs.push_back((se << 23) | 0x7FFFFFu);
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < (1 << 20); ++i) xs.push_back(static_cast<std::uint32_t>(rng()));
  for (std::uint32_t x : xs) {
    float v;
    std::memcpy(&v, &x, sizeof v);
    const std::uint32_t want = lowp::encode<F>(x), got = host::narrow_bits<F>(v);
    if (want != got && f.count++ < 8)
      f.what << name(dtype_of<T>) << ": narrow_bits(" << std::hex << x << ") = " << got << ", want " << want
             << "\n";
  }
}

}  // namespace host_kernels_test

TEST_CASE("host kernels: the widest instruction set is supported and in the erased table", "[host_kernels]") {
  namespace host = collx::detail::host;
  using collx::detail::erased_reducer;
  REQUIRE(host::isa_supported(host::best_isa()));
  REQUIRE(host::isa_supported(host::isa::baseline));
  const auto r = collx::detail::make_erased_reducer(collx::dtype::float32, collx::reduce_op::sum, 2);
  REQUIRE(r.fns == (erased_reducer::table_for<float, collx::reduce_op::sum>(host::best_isa())));
  INFO("best: " << host::name(host::best_isa()));
  SUCCEED();
}

TEST_CASE("host kernels: branch-free conversions match numeric/", "[host_kernels]") {
  using namespace host_kernels_test;
  namespace lowp = collx::detail::lowp;
  failure f;
  check_conversions<lowp::half_format, collx::half_t>(f);
  check_conversions<lowp::bfloat16_format, collx::bfloat16_t>(f);
  check_conversions<lowp::e4m3_format, collx::float8_e4m3_t>(f);
  check_conversions<lowp::e5m2_format, collx::float8_e5m2_t>(f);
  INFO(f.what.str());
  REQUIRE(f.count == 0);
}

TEST_CASE("host kernels: uint32 division by multiplication is exact", "[host_kernels]") {
  namespace host = collx::detail::host;
  std::mt19937_64 rng(7);
  std::vector<std::uint32_t> divisors;
  for (std::uint32_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int k = 8; k < 32; ++k)
    for (std::uint32_t d : {1u << k, (1u << k) - 1, (1u << k) + 1}) divisors.push_back(d);
  divisors.push_back(0xFFFFFFFFu);
  for (int i = 0; i < 200; ++i) divisors.push_back(static_cast<std::uint32_t>(rng()) | 1u);
  int bad = 0;
  for (std::uint32_t d : divisors) {
    const host::u32_divider div(d);
    for (std::uint32_t v :
         {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 2 * d, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu})
      bad += div.divide(v) != v / d;
    for (int i = 0; i < 2000; ++i) {
      const auto v = static_cast<std::uint32_t>(rng());
      bad += div.divide(v) != v / d;
    }
  }
  REQUIRE(bad == 0);
}

TEST_CASE("host kernels: every dtype and op matches the double reference and the plain loop",
          "[host_kernels]") {
  using namespace host_kernels_test;
  failure f;
  SECTION("integers") {
    check_type<std::int8_t>(f);
    check_type<std::uint8_t>(f);
    check_type<std::int32_t>(f);
    check_type<std::uint32_t>(f);
    check_type<std::int64_t>(f);
    check_type<std::uint64_t>(f);
  }
  SECTION("floating") {
    check_type<float>(f);
    check_type<double>(f);
  }
  SECTION("narrow floating") {
    check_type<collx::half_t>(f);
    check_type<collx::bfloat16_t>(f);
    check_type<collx::float8_e4m3_t>(f);
    check_type<collx::float8_e5m2_t>(f);
  }
  INFO(f.what.str());
  REQUIRE(f.count == 0);
}
