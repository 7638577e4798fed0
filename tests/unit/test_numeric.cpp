// Tests for the low-precision float types against independent references:
// values decoded from the bit fields with ldexp, and rounding by nearest
// search in the sorted list of every representable value.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "collx/numeric/float16.hpp"
#include "collx/numeric/float8.hpp"
#include "collx/reduce_op.hpp"

using collx::bfloat16_t;
using collx::float8_e4m3_t;
using collx::float8_e5m2_t;
using collx::half_t;

// ---- compile-time properties ----------------------------------------------

template <class T, std::size_t N>
constexpr bool layout_ok = sizeof(T) == N&& std::is_trivially_copyable_v<T>&& std::is_standard_layout_v<
                                            T>&& std::is_trivially_default_constructible_v<T>;
static_assert(layout_ok<half_t, 2>);
static_assert(layout_ok<bfloat16_t, 2>);
static_assert(layout_ok<float8_e4m3_t, 1>);
static_assert(layout_ok<float8_e5m2_t, 1>);

// Four distinct types (dtype and compute_type specialize on each), with only
// explicit conversions, no comparison, and the factories returning the type.
template <class T, class U>
concept has_equality = requires(const T& a, const U& b) {
  a == b;
};
template <class T>
constexpr bool value_type_ok =
    std::is_same_v<decltype(T::from_bits(0)), T>&& std::is_same_v<decltype(T::max()), T>&&
        std::is_same_v<decltype(T::lowest()), T>&& std::is_same_v<decltype(T::epsilon()), T>&&
            std::is_constructible_v<T, float> &&
    !std::is_convertible_v<float, T> && std::is_constructible_v<T, double> &&
    !std::is_convertible_v<double, T> && std::is_constructible_v<float, T> &&
    !std::is_convertible_v<T, float> && std::is_constructible_v<double, T> &&
    !std::is_convertible_v<T, double> && !has_equality<T, T>;
static_assert(value_type_ok<half_t> && value_type_ok<bfloat16_t> && value_type_ok<float8_e4m3_t> &&
              value_type_ok<float8_e5m2_t>);
static_assert(!std::is_same_v<half_t, bfloat16_t> && !std::is_same_v<float8_e4m3_t, float8_e5m2_t>);
static_assert(!std::is_constructible_v<half_t, bfloat16_t> &&
              !std::is_constructible_v<float8_e4m3_t, float8_e5m2_t> &&
              !std::is_constructible_v<bfloat16_t, half_t>);
static_assert(std::is_same_v<decltype(half_t{}.bits), std::uint16_t> &&
              std::is_same_v<decltype(bfloat16_t{}.bits), std::uint16_t> &&
              std::is_same_v<decltype(float8_e4m3_t{}.bits), std::uint8_t> &&
              std::is_same_v<decltype(float8_e5m2_t{}.bits), std::uint8_t>);
static_assert(half_t{}.bits == 0 && float8_e5m2_t{}.bits == 0);
static_assert(half_t::lowest().bits == 0xFBFF && half_t::epsilon().bits == 0x1400);
static_assert(bfloat16_t::lowest().bits == 0xFF7F && bfloat16_t::epsilon().bits == 0x3C00);
static_assert(float8_e4m3_t::lowest().bits == 0xFE && float8_e4m3_t::epsilon().bits == 0x20);
static_assert(float8_e5m2_t::lowest().bits == 0xFB && float8_e5m2_t::epsilon().bits == 0x34);
static_assert(float(bfloat16_t::from_bits(0x0001)) == 0x1p-133f);  // subnormal widens exactly

// The format parameters the encoder derives: largest finite, quiet NaN, and
// what overflow and infinity become.
template <class F>
constexpr bool patterns(std::uint32_t max_finite, std::uint32_t nan, std::uint32_t overflow) {
  return F::max_finite == max_finite && F::nan == nan && F::overflow == overflow;
}
namespace lowp = collx::detail::lowp;
static_assert(patterns<lowp::half_format>(0x7BFF, 0x7E00, 0x7C00));
static_assert(patterns<lowp::bfloat16_format>(0x7F7F, 0x7FC0, 0x7F80));
static_assert(patterns<lowp::e4m3_format>(0x7E, 0x7F, 0x7E));
static_assert(patterns<lowp::e5m2_format>(0x7B, 0x7E, 0x7B));

static_assert(half_t::from_bits(0x3C00).bits == 0x3C00);
static_assert(half_t::max().bits == 0x7BFF);
static_assert(float(half_t::max()) == 65504.0f);
static_assert(half_t(1.0).bits == 0x3C00 && half_t(-2.0f).bits == 0xC000);
static_assert(bfloat16_t::max().bits == 0x7F7F);
static_assert(bfloat16_t(1.0f).bits == 0x3F80 && float(bfloat16_t::from_bits(0x4000)) == 2.0f);
static_assert(float8_e4m3_t::max().bits == 0x7E && float(float8_e4m3_t::max()) == 448.0f);
static_assert(float8_e4m3_t(1.0f).bits == 0x38 && float8_e4m3_t(1e9).bits == 0x7E);
static_assert(float8_e5m2_t::max().bits == 0x7B && float(float8_e5m2_t::max()) == 57344.0f);
static_assert(float8_e5m2_t(1.0).bits == 0x3C && float8_e5m2_t(-1e9f).bits == 0xFB);

// ---- independent format description and reference --------------------------

template <class T>
struct fmt;
template <>
struct fmt<half_t> {
  static constexpr int E = 5, M = 10, bias = 15;
  static constexpr bool has_inf = true, saturate = false;
  using bits_t = std::uint16_t;
};
template <>
struct fmt<bfloat16_t> {
  static constexpr int E = 8, M = 7, bias = 127;
  static constexpr bool has_inf = true, saturate = false;
  using bits_t = std::uint16_t;
};
template <>
struct fmt<float8_e4m3_t> {
  static constexpr int E = 4, M = 3, bias = 7;
  static constexpr bool has_inf = false, saturate = true;  // only S.1111.111 is NaN
  using bits_t = std::uint8_t;
};
template <>
struct fmt<float8_e5m2_t> {
  static constexpr int E = 5, M = 2, bias = 15;
  static constexpr bool has_inf = true, saturate = true;  // inf exists, conversion saturates
  using bits_t = std::uint8_t;
};

template <class T>
constexpr unsigned n_patterns = 1u << (8 * sizeof(T));
template <class T>
constexpr unsigned sign_bit = 1u << (fmt<T>::E + fmt<T>::M);

// Value of a bit pattern from its fields, in double.
template <class T>
double ref_value(unsigned b) {
  using F = fmt<T>;
  const unsigned s = (b >> (F::E + F::M)) & 1, e = (b >> F::M) & ((1u << F::E) - 1),
                 m = b & ((1u << F::M) - 1);
  const unsigned e_ones = (1u << F::E) - 1, m_ones = (1u << F::M) - 1;
  double v;
  if (F::has_inf && e == e_ones)
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else if (!F::has_inf && e == e_ones && m == m_ones) v = std::numeric_limits<double>::quiet_NaN();
  else if (e == 0) v = std::ldexp(double(m), 1 - F::bias - F::M);
  else v = std::ldexp(double(m + (1u << F::M)), int(e) - F::bias - F::M);
  return s ? -v : v;
}

template <class T>
struct reference {
  // Non-negative finite values with their bits, ascending. Non-saturating
  // formats get one more entry: the next power of two past max standing for
  // +inf, so "nearest, ties to even" also yields IEEE overflow (the inf
  // pattern has an even mantissa).
  std::vector<std::pair<double, unsigned>> pos;
  double max = 0, next_past_max = 0;
  unsigned max_bits = 0, inf_bits = 0;

  reference() {
    for (unsigned b = 0; b < n_patterns<T>; ++b) {
      const double v = ref_value<T>(b);
      if (std::isnan(v)) continue;
      if (std::isinf(v)) {
        if (v > 0) inf_bits = b;
        continue;
      }
      if (v > 0 || (v == 0 && !std::signbit(v))) pos.emplace_back(v, b);
    }
    std::sort(pos.begin(), pos.end());
    max = pos.back().first;
    max_bits = pos.back().second;
    next_past_max = max + (max - pos[pos.size() - 2].first);
    if (!fmt<T>::saturate) pos.emplace_back(next_past_max, inf_bits);
  }

  // Expected bits for a non-NaN input.
  unsigned round(double v) const {
    const unsigned s = std::signbit(v) ? sign_bit<T> : 0;
    const double a = std::fabs(v);
    if (a > pos.back().first) return s | (fmt<T>::saturate ? max_bits : inf_bits);
    auto hi =
        std::lower_bound(pos.begin(), pos.end(), a, [](const auto& p, double x) { return p.first < x; });
    if (hi->first == a) return s | hi->second;
    const auto lo = hi - 1;
    const double mid = (lo->first + hi->first) / 2;  // exact: both have few bits
    unsigned r;
    if (a < mid) r = lo->second;
    else if (a > mid) r = hi->second;
    else r = (lo->second & 1) == 0 ? lo->second : hi->second;
    return s | r;
  }
};

template <class T>
const reference<T>& ref() {
  static const reference<T> r;
  return r;
}

// Records mismatches; the message holds the first few.
struct mismatches {
  std::size_t count = 0;
  std::ostringstream first;
  template <class V>
  void add(V input, unsigned got, const char* what) {
    if (count++ < 8)
      first << what << ": input " << std::hexfloat << input << " got 0x" << std::hex << got << std::dec
            << "\n";
  }
};

// Checks the conversion of one input against the reference.
template <class T, class V>
void check_round(V v, mismatches& bad) {
  const T x(v);
  if (std::isnan(v)) {
    const float back = static_cast<float>(x);
    if (!std::isnan(back) || std::signbit(back) != std::signbit(v)) bad.add(v, x.bits, "NaN");
    return;
  }
  const unsigned want = ref<T>().round(double(v));
  if (x.bits != want) bad.add(v, x.bits, "round");
}

// Inputs for the rounding tests, all in double: every representable value,
// every midpoint and its double neighbours, random values across and beyond
// the range, and specials.
template <class T>
std::vector<double> double_inputs() {
  const auto& r = ref<T>();
  std::vector<double> in;
  auto pos = r.pos;
  if (fmt<T>::saturate) pos.emplace_back(r.next_past_max, 0);  // midpoint above max too
  const double inf = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i + 1 < pos.size(); ++i) {
    const double lo = pos[i].first, hi = pos[i + 1].first, mid = (lo + hi) / 2;
    for (double v : {lo, mid, std::nextafter(mid, inf), std::nextafter(mid, -inf), lo + (hi - lo) / 4,
                     hi - (hi - lo) / 4})
      in.push_back(v);
  }
  std::mt19937_64 rng(0xC011C7);
  const int lo_exp = 1 - fmt<T>::bias - fmt<T>::M - 3, hi_exp = (1 << fmt<T>::E) - fmt<T>::bias + 2;
  std::uniform_int_distribution<int> exp_d(lo_exp, hi_exp);
  std::uniform_real_distribution<double> frac_d(1.0, 2.0);
  std::uniform_real_distribution<double> lin_d(0.0, 2 * r.next_past_max);
  for (int i = 0; i < 200000; ++i) {
    in.push_back(std::ldexp(frac_d(rng), exp_d(rng)));  // log-uniform, full double precision
    in.push_back(lin_d(rng));
  }
  const double min_sub = pos[1].first;
  for (double v :
       {0.0, min_sub / 2, std::nextafter(min_sub / 2, inf), min_sub / 4, min_sub * 0.75, min_sub * 1.5,
        2 * r.max, r.next_past_max, 1e300, inf, std::numeric_limits<double>::max(),
        std::numeric_limits<double>::min(), std::numeric_limits<double>::denorm_min(),
        double(std::numeric_limits<float>::max()), double(std::numeric_limits<float>::min()),
        double(std::numeric_limits<float>::denorm_min()), std::numeric_limits<double>::quiet_NaN()})
    in.push_back(v);
  const std::size_t n = in.size();
  for (std::size_t i = 0; i < n; ++i) in.push_back(-in[i]);
  return in;
}

// ---- tests ------------------------------------------------------------------

TEMPLATE_TEST_CASE("every bit pattern widens to the value of its fields", "[numeric]", half_t, bfloat16_t,
                   float8_e4m3_t, float8_e5m2_t) {
  mismatches bad;
  for (unsigned b = 0; b < n_patterns<TestType>; ++b) {
    const auto x = TestType::from_bits(typename fmt<TestType>::bits_t(b));
    const double want = ref_value<TestType>(b);
    const float f = static_cast<float>(x);
    const double d = static_cast<double>(x);
    const bool ok = std::isnan(want)
                        ? std::isnan(f) && std::isnan(d)
                        : double(f) == want && d == want && std::signbit(f) == std::signbit(want);
    if (!ok) bad.add(b, b, "widen");
  }
  INFO(bad.first.str());
  REQUIRE(bad.count == 0);
}

TEMPLATE_TEST_CASE("every non-NaN bit pattern survives a round trip", "[numeric]", half_t, bfloat16_t,
                   float8_e4m3_t, float8_e5m2_t) {
  mismatches bad;
  unsigned checked = 0;
  for (unsigned b = 0; b < n_patterns<TestType>; ++b) {
    const auto x = TestType::from_bits(typename fmt<TestType>::bits_t(b));
    const float f = static_cast<float>(x);
    if (std::isnan(f)) continue;
    ++checked;
    const unsigned from_f = TestType(f).bits, from_d = TestType(static_cast<double>(x)).bits;
    // e5m2 conversions saturate, so its infinities come back as ±max.
    const unsigned want =
        std::isinf(f) && fmt<TestType>::saturate ? (b & sign_bit<TestType>) | ref<TestType>().max_bits : b;
    if (from_f != want) bad.add(b, from_f, "float");
    if (from_d != want) bad.add(b, from_d, "double");
  }
  INFO(bad.first.str());
  REQUIRE(bad.count == 0);
  // Guards against the loop skipping everything: NaN count per format.
  const unsigned nans = n_patterns<TestType> - checked;
  const unsigned want_nans = std::is_same_v<TestType, half_t>          ? 2 * 1023
                             : std::is_same_v<TestType, bfloat16_t>    ? 2 * 127
                             : std::is_same_v<TestType, float8_e5m2_t> ? 2 * 3
                                                                       : 2;
  REQUIRE(nans == want_nans);
}

TEMPLATE_TEST_CASE("conversion from double rounds once, nearest-even, with the overflow rule", "[numeric]",
                   half_t, bfloat16_t, float8_e4m3_t, float8_e5m2_t) {
  mismatches bad;
  const auto in = double_inputs<TestType>();
  for (double v : in) check_round<TestType>(v, bad);
  INFO(bad.first.str());
  REQUIRE(bad.count == 0);
}

TEMPLATE_TEST_CASE("conversion from float rounds nearest-even, with the overflow rule", "[numeric]", half_t,
                   bfloat16_t, float8_e4m3_t, float8_e5m2_t) {
  mismatches bad;
  std::size_t n = 0;
  // The double inputs that are exactly floats (midpoints are), plus their
  // float neighbours, which double rounding through a wider step would miss.
  for (double v : double_inputs<TestType>()) {
    const float f = float(v);
    if (!(double(f) == v || std::isnan(v))) continue;
    for (float g : {f, std::nextafter(f, INFINITY), std::nextafter(f, -INFINITY)}) {
      check_round<TestType>(g, bad);
      ++n;
    }
  }
  // A strided sweep over all binary32 bit patterns (every class: subnormal,
  // normal, inf, NaN payloads).
  for (std::uint64_t b = 0; b < (std::uint64_t(1) << 32); b += 4093) {
    float f;
    const auto u = std::uint32_t(b);
    std::memcpy(&f, &u, sizeof f);
    check_round<TestType>(f, bad);
    ++n;
  }
  INFO(bad.first.str());
  REQUIRE(n > 1000000);
  REQUIRE(bad.count == 0);
}

TEST_CASE("double inputs are not rounded through float first", "[numeric]") {
  // Just above the midpoint between 1 and the next value: through float the
  // excess is lost, the midpoint ties to even (down); rounded once it goes up.
  const double above = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  REQUIRE(half_t(above).bits == 0x3C01);
  REQUIRE(half_t(float(above)).bits == 0x3C00);
  REQUIRE(bfloat16_t(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)).bits == 0x3F81);
  REQUIRE(float8_e4m3_t(1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -40)).bits == 0x39);
  REQUIRE(float8_e5m2_t(1.0 + std::ldexp(1.0, -3) + std::ldexp(1.0, -40)).bits == 0x3D);
}

TEST_CASE("limits have the documented values", "[numeric]") {
  CHECK(float(half_t::max()) == 65504.0f);
  CHECK(float(half_t::lowest()) == -65504.0f);
  CHECK(float(half_t::epsilon()) == std::ldexp(1.0f, -10));
  CHECK(float(bfloat16_t::max()) == std::ldexp(255.0f, 120));
  CHECK(float(bfloat16_t::lowest()) == -std::ldexp(255.0f, 120));
  CHECK(float(bfloat16_t::epsilon()) == std::ldexp(1.0f, -7));
  CHECK(float(float8_e4m3_t::max()) == 448.0f);
  CHECK(float(float8_e4m3_t::lowest()) == -448.0f);
  CHECK(float(float8_e4m3_t::epsilon()) == 0.125f);
  CHECK(float(float8_e5m2_t::max()) == 57344.0f);
  CHECK(float(float8_e5m2_t::lowest()) == -57344.0f);
  CHECK(float(float8_e5m2_t::epsilon()) == 0.25f);
  // Overflow: IEEE for half/bf16, saturation for fp8.
  CHECK(std::isinf(float(half_t(65520.0f))));
  CHECK(float(half_t(65519.0f)) == 65504.0f);
  CHECK(std::isinf(float(bfloat16_t(std::numeric_limits<double>::max()))));
  CHECK(float(float8_e4m3_t(-INFINITY)) == -448.0f);
  CHECK(float(float8_e5m2_t(INFINITY)) == 57344.0f);
  CHECK(float8_e4m3_t(-NAN).bits == 0xFF);
  CHECK(float8_e4m3_t(NAN).bits == 0x7F);
}

// A GPU sums and multiplies two halves or two bfloat16s with one packed
// instruction (add/mul .f16x2, .bf16x2: collx/numeric/hardware.hpp), which
// rounds the exact result once. The reducer computes in float and rounds that
// to the format; this checks that the two agree, so that both paths give the
// same bits: the exact sum or product (in double, rounded once more only where
// it cannot change the outcome) rounded by the reference.
TEMPLATE_TEST_CASE("a reducer's sum and product of two values are the exact result rounded once", "[numeric]",
                   half_t, bfloat16_t) {
  using T = TestType;
  const auto& r = ref<T>();
  std::vector<unsigned> values;  // every finite pattern of interest, both signs
  for (const auto& [v, b] : r.pos)
    if (!std::isinf(v) && b != r.inf_bits) values.push_back(b);
  const std::size_t n = values.size();
  for (std::size_t i = 0; i < n; ++i) values.push_back(values[i] | sign_bit<T>);
  const unsigned inf = r.inf_bits;
  for (unsigned s : {inf, inf | sign_bit<T>}) values.push_back(s);

  std::mt19937_64 rng(0x5EED);
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  // Partners: random values, and values close in exponent (ties and carries
  // into the next binade are likeliest there).
  mismatches bad;
  std::size_t checked = 0;
  collx::reducer<T, collx::reduce_op::sum> sum{};
  collx::reducer<T, collx::reduce_op::prod> prod{};
  auto check = [&](unsigned ab, unsigned bb) {
    const T a = T::from_bits(typename fmt<T>::bits_t(ab)), b = T::from_bits(typename fmt<T>::bits_t(bb));
    const double x = ref_value<T>(ab), y = ref_value<T>(bb);
    for (int p = 0; p < 2; ++p) {
      const double exact = p ? x * y : x + y;
      const unsigned got = (p ? prod(a, b) : sum(a, b)).bits;
      if (std::isnan(exact)) {
        if (!std::isnan(ref_value<T>(got))) bad.add(exact, got, p ? "prod NaN" : "sum NaN");
      } else if (got != r.round(exact)) {
        bad.add(exact, got, p ? "prod" : "sum");
      }
      ++checked;
    }
  };
  for (int i = 0; i < 400000; ++i) check(values[pick(rng)], values[pick(rng)]);
  for (std::size_t i = 0; i + 1 < values.size(); i += 7) {
    check(values[i], values[i + 1]);
    check(values[i], values[i + 1] ^ sign_bit<T>);
    check(values[i], values[i]);
  }
  INFO(bad.first.str());
  REQUIRE(checked > 800000);
  REQUIRE(bad.count == 0);
}
