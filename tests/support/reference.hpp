// Test support: deterministic inputs and references computed in double.
//
// Inputs are a function of (dtype, op, rank, index) chosen so every rank's
// value is exactly representable in the element type and integer results never
// overflow. The reference combines those exact inputs in double (bitwise ops in
// uint64, which double cannot hold).
//
// Floating sums and products are compared exactly: sum/avg inputs are integers
// whose absolute values add up to at most 2^digits of the element type, so
// every partial sum, in whatever order an algorithm combines the ranks, is an
// integer the format holds exactly; prod inputs are ±1 and ±2 with one ±2 per
// element, so every partial product is ±1 or ±2. For the narrow formats this
// bounds the inputs (float8_e5m2, 3 significant bits: |sum| ≤ 8, so at P ≥ 8
// each element takes ±1 or 0 from at most 8 ranks; see input()). avg divides
// the exact sum once: its reference is the quotient rounded to nearest in the
// element type's precision (round_to_precision, computed here, not by the
// library's conversions). A tolerance larger than zero — the rounding of P-1
// operations, as nccl-tests uses — is left only for inputs where exactness is
// not guaranteed, which the inputs below never produce; with it an fp8 result
// of 0, or one that misses a rank's input, would pass.
#pragma once

#include <collx/coll.hpp>
#include <collx/dtype.hpp>
#include <collx/reduce_op.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace collx::test {

inline std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

template <class T>
constexpr bool is_float_like = !std::is_integral_v<T>;

template <class T>
double to_double(T v) {
  if constexpr (std::is_arithmetic_v<T>) return static_cast<double>(v);
  else return static_cast<double>(v);  // the narrow formats convert to double exactly
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_integral_v<T> || std::is_same_v<T, float> || std::is_same_v<T, double>)
    return static_cast<T>(v);
  else return T(static_cast<float>(v));
}

/// Significant bits of a floating element type (the implicit one included).
template <class T>
constexpr int precision_digits() {
  if constexpr (std::is_same_v<T, double>) return 53;
  else if constexpr (std::is_same_v<T, float>) return 24;
  else if constexpr (std::is_same_v<T, half_t>) return 11;
  else if constexpr (std::is_same_v<T, bfloat16_t>) return 8;
  else if constexpr (std::is_same_v<T, float8_e4m3_t>) return 4;
  else return 3;  // e5m2
}

/// Exponent of the smallest normal number of a floating element type.
template <class T>
constexpr int min_normal_exponent() {
  if constexpr (std::is_same_v<T, double>) return -1022;
  else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>) return -126;
  else if constexpr (std::is_same_v<T, half_t> || std::is_same_v<T, float8_e5m2_t>) return -14;
  else return -6;  // e4m3
}

/// Largest integer N such that every integer of magnitude ≤ N is exact in T.
template <class T>
constexpr double exact_integer_bound() {
  if constexpr (std::is_integral_v<T>) return 0;
  else return static_cast<double>(std::uint64_t{1} << precision_digits<T>());
}

/// x rounded to nearest (ties to even) in T's precision, subnormals included
/// (no overflow handling: the test values are far from the largest finite).
template <class T>
double round_to_precision(double x) {
  if (x == 0 || std::isnan(x)) return x;
  const int e = std::max(std::ilogb(x), min_normal_exponent<T>());
  const double quantum = std::ldexp(1.0, e - precision_digits<T>() + 1);
  return std::nearbyint(x / quantum) * quantum;  // both scalings by a power of two are exact
}

/// Unit roundoff of the element type (0 for integers).
template <class T>
constexpr double unit_roundoff() {
  if constexpr (std::is_integral_v<T>) return 0;
  else if constexpr (std::is_same_v<T, double>) return 0x1p-53;
  else if constexpr (std::is_same_v<T, float>) return 0x1p-24;
  else if constexpr (std::is_same_v<T, half_t>) return 0x1p-11;
  else if constexpr (std::is_same_v<T, bfloat16_t>) return 0x1p-8;
  else if constexpr (std::is_same_v<T, float8_e4m3_t>) return 0x1p-4;
  else return 0x1p-3;  // e5m2
}

/// The input element of `rank` at `index` for a reduction with `op`.
template <class T>
T input(reduce_op op, int rank, std::size_t index, int nranks) {
  const std::uint64_t h = mix(index * 1315423911ull + static_cast<std::uint64_t>(rank) * 2654435761ull + 7);
  constexpr bool is_signed = !std::is_integral_v<T> || std::is_signed_v<T>;
  if (is_bitwise(op)) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(h);
    else return T{};
  }
  double v = 0;
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg:
      if constexpr (is_float_like<T>) {
        // Integers in [-m, m] from the K ranks of a window that rotates with
        // the index (every rank when K = P), other ranks 0: K·m ≤ 2^digits, so
        // every partial sum is exact (for all but the fp8 formats: m = 10, K = P).
        const auto p = static_cast<std::size_t>(nranks);
        const double bound = exact_integer_bound<T>();
        const std::size_t K = static_cast<double>(p) < bound ? p : static_cast<std::size_t>(bound);
        const auto m = static_cast<int>(std::min(10.0, bound / static_cast<double>(K)));
        const std::size_t slot = (static_cast<std::size_t>(rank) + p - index % p) % p;
        v = slot < K ? static_cast<double>(static_cast<int>(h % static_cast<std::uint64_t>(2 * m + 1)) - m)
                     : 0.0;
      } else {
        v = is_signed ? static_cast<double>(static_cast<int>(h % 21) - 10) : static_cast<double>(h % 21);
      }
      break;
    case reduce_op::prod: {
      // |product| ≤ 2: one rank per index contributes 2, the others ±1.
      const bool two = static_cast<std::size_t>(rank) == index % static_cast<std::size_t>(nranks);
      const double sign = (is_signed && (h & 1)) ? -1.0 : 1.0;
      v = sign * (two ? 2.0 : 1.0);
      break;
    }
    default:  // min, max
      v = is_signed ? static_cast<double>(static_cast<int>(h % 101) - 50) : static_cast<double>(h % 101);
      break;
  }
  return from_double<T>(v);
}

/// Input for data-movement collectives: distinct per (rank, index) so a
/// misplaced block is caught; exact in every type.
template <class T>
T movement_input(int rank, std::size_t index) {
  const std::uint64_t h = mix(index * 40503ull + static_cast<std::uint64_t>(rank) * 977ull + 3);
  if constexpr (std::is_integral_v<T>) return static_cast<T>(h);
  else return from_double<T>(static_cast<double>(static_cast<int>(h % 15) - 7));
}

/// Reference result of reducing element `index` over all ranks, and whether
/// `got` is within tolerance of it. Integer bitwise ops are compared exactly in
/// uint64; everything else in double.
template <class T>
struct reference_element {
  double value = 0;
  double tolerance = 0;
  std::uint64_t bits = 0;  // bitwise ops
};

template <class T>
reference_element<T> reduce_reference(reduce_op op, std::size_t index, int nranks) {
  reference_element<T> ref;
  if (is_bitwise(op)) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      U acc = static_cast<U>(input<T>(op, 0, index, nranks));
      for (int r = 1; r < nranks; ++r) {
        const U x = static_cast<U>(input<T>(op, r, index, nranks));
        acc = op == reduce_op::band ? U(acc & x) : op == reduce_op::bor ? U(acc | x) : U(acc ^ x);
      }
      ref.bits = acc;
    }
    return ref;
  }
  double acc = to_double(input<T>(op, 0, index, nranks)), mag = std::fabs(acc);
  for (int r = 1; r < nranks; ++r) {
    const double x = to_double(input<T>(op, r, index, nranks));
    mag += std::fabs(x);
    switch (op) {
      case reduce_op::sum:
      case reduce_op::avg: acc += x; break;
      case reduce_op::prod: acc *= x; break;
      case reduce_op::min: acc = x < acc ? x : acc; break;
      case reduce_op::max: acc = x > acc ? x : acc; break;
      default: break;
    }
  }
  const double u = unit_roundoff<T>();
  // Integer inputs whose magnitudes add up to at most 2^digits: every partial
  // sum is exact in T, so the sum is too, in any order. Partial products of
  // prod's inputs (±1, one ±2) are ±1 or ±2, exact in every format.
  const bool exact_sum = mag <= exact_integer_bound<T>();
  if (op == reduce_op::avg) {
    if constexpr (std::is_integral_v<T>) acc = std::trunc(acc / nranks);
    else acc = exact_sum ? round_to_precision<T>(acc / nranks) : acc / nranks;
  }
  ref.value = acc;
  if constexpr (is_float_like<T>) {
    if (!exact_sum && op == reduce_op::sum) ref.tolerance = (nranks - 1) * u * mag + u * std::fabs(acc);
    else if (!exact_sum && op == reduce_op::avg)
      ref.tolerance = ((nranks - 1) * u * mag) / nranks + 2 * u * std::fabs(acc);
  }
  return ref;
}

template <class T>
bool matches(const reference_element<T>& ref, reduce_op op, T got) {
  if (is_bitwise(op)) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<T>>(got)) == ref.bits;
    else return false;
  }
  const double g = to_double(got);
  if (std::isnan(g)) return false;
  return std::fabs(g - ref.value) <= ref.tolerance;
}

/// A buffer with guard bytes on both sides, to catch writes outside the range.
/// Where guarded buffers take their memory: the heap, unless a test installs
/// another source (proc_matrix: a communicator's symmetric memory). A source
/// returns at least the bytes asked for, owned by the pointer it returns.
using guarded_source = std::function<std::shared_ptr<unsigned char>(std::size_t)>;
inline guarded_source& guarded_storage() {
  static guarded_source source;
  return source;
}

class guarded_buffer {
 public:
  static constexpr std::size_t guard = 256;
  static constexpr unsigned char pattern = 0xA5;

  /// `misalign` shifts the start by that many bytes from a 64-byte boundary.
  explicit guarded_buffer(std::size_t bytes, std::size_t misalign = 0) : bytes_(bytes), misalign_(misalign) {
    const std::size_t total = bytes + 2 * guard + 64 + misalign;
    if (guarded_storage()) {
      owner_ = guarded_storage()(total);
      begin_ = owner_.get();
    } else {
      storage_.resize(total);
      begin_ = storage_.data();
    }
    end_ = begin_ + total;
    std::fill(begin_, end_, pattern);
    auto addr = reinterpret_cast<std::uintptr_t>(begin_) + guard;
    addr = (addr + 63) / 64 * 64 + misalign;
    data_ = reinterpret_cast<unsigned char*>(addr);
  }
  void* data() { return data_; }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }
  bool guards_intact() const {
    for (const unsigned char* p = begin_; p < data_; ++p)
      if (*p != pattern) return false;
    for (const unsigned char* p = data_ + bytes_; p < end_; ++p)
      if (*p != pattern) return false;
    return true;
  }

 private:
  std::size_t bytes_, misalign_;
  std::vector<unsigned char> storage_;
  std::shared_ptr<unsigned char> owner_;
  unsigned char* begin_ = nullptr;
  unsigned char* end_ = nullptr;
  unsigned char* data_;
};

}  // namespace collx::test
