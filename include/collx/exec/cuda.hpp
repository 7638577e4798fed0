// collx/exec/cuda.hpp — the CUDA executor: a rank is one thread block.
//
// The block is the worker group: its threads split each slot's elements, and
// sync() is __syncthreads(). wait() is done by thread 0 alone (one poller per
// rank keeps the FIFO counters' cache lines quiet) and the verdict is shared
// through shared memory. Deadlines use the %globaltimer nanosecond clock; the
// abort word is polled on every iteration. fence_before_post() is a system
// fence so that peers on other devices or the host see the slot before the
// counter that publishes it. Only meaningful in nvcc device code.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/error.hpp>

#include <cstdint>

#if defined(__CUDACC__)

namespace collx::exec {

struct cuda_block_group {
  __device__ int size() const { return static_cast<int>(blockDim.x); }
  __device__ int index() const { return static_cast<int>(threadIdx.x); }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ void sync() const { __syncthreads(); }
};

__device__ inline std::uint64_t globaltimer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct cuda {
  using group = cuda_block_group;

  const std::uint32_t* abort_word = nullptr;
  std::uint64_t deadline_ns = ~0ull;  // absolute %globaltimer value

  __device__ group workers() const { return {}; }

  template <class Pred>
  __device__ status wait(Pred&& done) const {
    __shared__ int verdict;
    if (threadIdx.x == 0) {
      int v = static_cast<int>(status::ok);
      for (std::uint32_t polls = 0;; ++polls) {
        if (done()) break;
        if (abort_word && detail::load_relaxed(abort_word) != 0) {
          v = static_cast<int>(status::aborted);
          break;
        }
        if ((polls & 255u) == 0 && globaltimer_ns() > deadline_ns) {
          v = static_cast<int>(done() ? status::ok : status::timeout);
          break;
        }
      }
      verdict = v;
    }
    __syncthreads();
    const int v = verdict;
    __syncthreads();  // nobody may overwrite verdict before all have read it
    return static_cast<status>(v);
  }

  /// A wait by one thread on its own condition (an LL line), with the same
  /// deadline and abort check; no block-wide synchronisation.
  template <class Pred>
  __device__ status wait_own(Pred&& done) const {
    for (std::uint32_t polls = 0;; ++polls) {
      if (done()) return status::ok;
      if (abort_word && detail::load_relaxed(abort_word) != 0) return status::aborted;
      if ((polls & 255u) == 0 && globaltimer_ns() > deadline_ns) return done() ? status::ok : status::timeout;
    }
  }

  /// Block-wide verdict after threads waited on their own: ok only if every
  /// thread's was; a timeout anywhere wins over an abort. Synchronises the block.
  __device__ static status agree(status s) {
    const int timed_out = __syncthreads_or(s == status::timeout);
    const int failed = __syncthreads_or(s != status::ok);
    if (timed_out) return status::timeout;
    return failed ? (s != status::ok ? s : status::aborted) : status::ok;
  }

  __device__ static void fence_before_post() { __threadfence_system(); }
  /// Device waits poll; nobody sleeps, so nobody needs waking.
  __device__ static void notify(int) {}
};

}  // namespace collx::exec

#endif  // __CUDACC__
