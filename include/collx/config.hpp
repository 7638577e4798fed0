// collx/config.hpp — compiler and target macros shared by every collx header.
//
// COLLX_HOST_DEVICE marks functions that must compile for both the host and a
// CUDA device. Code under it must not use exceptions, I/O, std::thread or
// allocating containers; it reports failures through collx::status.
#pragma once

#if defined(__CUDACC__)
#define COLLX_HOST_DEVICE __host__ __device__
#define COLLX_DEVICE __device__
#else
#define COLLX_HOST_DEVICE
#define COLLX_DEVICE
#endif

#if defined(__CUDA_ARCH__)
#define COLLX_DEVICE_CODE 1
#else
#define COLLX_DEVICE_CODE 0
#endif

// Unrolls the loop that follows completely in device code, where an array
// indexed by a loop that stays rolled lives in local memory (a stack frame)
// instead of registers; the host compilers decide for themselves.
#if COLLX_DEVICE_CODE
#define COLLX_UNROLL _Pragma("unroll")
#else
#define COLLX_UNROLL
#endif

#if defined(__GNUC__) || defined(__clang__)
#define COLLX_ALWAYS_INLINE inline __attribute__((always_inline))
#define COLLX_RESTRICT __restrict__
#define COLLX_LIKELY(x) __builtin_expect(!!(x), 1)
#define COLLX_UNLIKELY(x) __builtin_expect(!!(x), 0)
// Host code that runs once per process or only on failure (loading a profile,
// parsing options, building an error message): the compiler optimizes it for
// size and keeps it out of hot paths, which also keeps every translation unit
// that includes it quicker to compile.
#define COLLX_COLD __attribute__((cold))
#else
#define COLLX_ALWAYS_INLINE inline
#define COLLX_RESTRICT
#define COLLX_LIKELY(x) (x)
#define COLLX_UNLIKELY(x) (x)
#define COLLX_COLD
#endif

// libcu++ gives one memory model for host and device; without the CUDA
// toolkit the std:: equivalents are used instead.
#if defined(__has_include)
#if __has_include(<cuda/atomic>) && !defined(COLLX_NO_LIBCUDACXX)
#define COLLX_HAS_LIBCUDACXX 1
#endif
#endif
#ifndef COLLX_HAS_LIBCUDACXX
#define COLLX_HAS_LIBCUDACXX 0
#endif

namespace collx {
/// The most ranks one communicator may have: each call's record carries a
/// broadcast's or reduce's root in 23 bits (comm/watch.hpp), so that two
/// roots never alias in the mismatch check. The bootstrap refuses more.
inline constexpr int rank_limit = 1 << 23;
}  // namespace collx

#define COLLX_VERSION_MAJOR 0
#define COLLX_VERSION_MINOR 1
#define COLLX_VERSION_PATCH 0
