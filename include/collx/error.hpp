// collx/error.hpp — status codes (host and device) and the host exception.
//
// Device-compatible code (algorithms, protocols, primitives) returns a
// collx::status; the host API turns a non-ok status into collx::error, whose
// what() names the operation, the argument or peer at fault, and the cause.
#pragma once

#include <collx/config.hpp>

#ifndef __CUDACC_RTC__
#include <stdexcept>
#include <string>
#include <type_traits>
#endif

/// Returns the status of `expr` from the enclosing function unless it is ok.
#define COLLX_TRY(expr)                                             \
  do {                                                              \
    const ::collx::status collx_try_st_ = (expr);                   \
    if (collx_try_st_ != ::collx::status::ok) return collx_try_st_; \
  } while (0)

namespace collx {

enum class status : int {
  ok = 0,
  invalid_argument,  // bad pointer, count, root, dtype/op combination
  not_supported,     // composition or feature that collx does not provide
  timeout,           // a wait passed its deadline
  aborted,           // the communicator's abort flag was raised
  peer_failure,      // a peer died or reported an error
  mismatch,          // ranks issued inconsistent calls
  system_error,      // an OS call failed
  internal_error,
  peer_dead,  // a peer's process died (killed, crashed or exited) during a call
};

COLLX_HOST_DEVICE constexpr const char* to_string(status s) noexcept {
  switch (s) {
    case status::ok: return "ok";
    case status::invalid_argument: return "invalid argument";
    case status::not_supported: return "not supported";
    case status::timeout: return "timeout";
    case status::aborted: return "aborted";
    case status::peer_failure: return "peer failure";
    case status::mismatch: return "mismatched call across ranks";
    case status::system_error: return "system error";
    case status::internal_error: return "internal error";
    case status::peer_dead: return "peer process died";
  }
  return "unknown status";
}

#ifndef __CUDACC_RTC__
/// Host-side exception carrying a status and a message naming what failed.
class error : public std::runtime_error {
 public:
  error(status code, const std::string& what)
      : std::runtime_error(std::string("collx: ") + what), code_(code) {}
  status code() const noexcept { return code_; }

 private:
  status code_;
};

[[noreturn]] COLLX_COLD inline void throw_error(status code, const std::string& what) {
  throw error(code, what);
}

/// Throws collx::error(invalid_argument) naming the argument when cond is false.
inline void require(bool cond, const char* op, const std::string& detail) {
  if (!cond) [[unlikely]]
    throw_error(status::invalid_argument, std::string(op) + ": " + detail);
}

namespace error_detail {
template <class MakeDetail>
[[noreturn]] COLLX_COLD void refuse(const char* op, MakeDetail& detail) {
  throw_error(status::invalid_argument, std::string(op) + ": " + detail());
}
}  // namespace error_detail

/// Same with a fixed message: nothing is built unless cond is false (a
/// literal would otherwise become a std::string, a heap allocation past 15
/// characters, at every call).
inline void require(bool cond, const char* op, const char* detail) {
  if (!cond) [[unlikely]]
    throw_error(status::invalid_argument, std::string(op) + ": " + detail);
}

/// Same, with the message built only on failure (for per-call checks on hot paths).
template <class MakeDetail>
  requires std::is_invocable_r_v<std::string, MakeDetail>
inline void require(bool cond, const char* op, MakeDetail&& detail) {
  if (!cond) [[unlikely]]
    error_detail::refuse(op, detail);
}
#endif

}  // namespace collx
