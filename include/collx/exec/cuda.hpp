// collx/exec/cuda.hpp — the CUDA executor: a rank's worker group is one
// thread block.
//
// The block is the worker group: its threads split each slot's elements, and
// sync() is __syncthreads(). wait() is done by thread 0 alone (one poller per
// rank keeps the FIFO counters' cache lines quiet) and the verdict is shared
// through shared memory. Deadlines use the %globaltimer nanosecond clock; the
// abort word and the clock are checked together every `check_every` polls (an
// abort word in host-mapped memory costs a PCIe round trip per load).
// fence_before_post() is a system fence in every thread where
// fence_each_thread is on (off by default: the leader's release store after
// the block barrier already publishes the slot before the counter). Fences
// and release stores are at system scope, or at GPU scope where one_gpu says
// every rank of the group runs on this GPU.
//
// Every wait is bounded: deadline_ns == 0 (the default) means timeout_ns after
// the first wait of this thread's copy, and timeout_ns defaults to 10 s, so a
// kernel that sets nothing still ends. Only meaningful in nvcc device code.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/error.hpp>

#include <cstdint>

#if defined(__CUDACC__)

#include <cuda/atomic>

namespace collx::exec {

/// N consecutive lanes of a warp (N divides 32): warp-level sync, votes and
/// shuffles among them only. Every lane of the tile must call each operation.
template <int N>
struct cuda_tile {
  static_assert(N >= 1 && N <= 32 && 32 % N == 0, "a tile is a power-of-two part of a warp");
  unsigned mask;
  __device__ void sync() const { __syncwarp(mask); }
  __device__ bool any(bool b) const { return __any_sync(mask, b) != 0; }
  __device__ bool all(bool b) const { return __all_sync(mask, b) != 0; }
  /// Lane `src`'s (index within the tile) v, for values of at most 4 bytes.
  template <class T>
  __device__ T broadcast(T v, int src) const {
    static_assert(sizeof(T) <= sizeof(int), "a tile broadcast carries one 32-bit word");
    return static_cast<T>(__shfl_sync(mask, static_cast<int>(v), src, N));
  }
};

/// The threads of one block, with the team operations of a worker group
/// (host.hpp's host_group documents them). Every thread of the block must
/// call each of them.
struct cuda_block_group {
  static constexpr int max_tile = 32;
  static constexpr bool sequential = false;
  template <int N>
  __device__ cuda_tile<N> tile() const {
    const unsigned lane = threadIdx.x & 31u;
    return {N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (lane & ~unsigned(N - 1))};
  }
  __device__ int size() const { return static_cast<int>(blockDim.x); }
  __device__ int index() const { return static_cast<int>(threadIdx.x); }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ void sync() const { __syncthreads(); }
  template <class T>
  __device__ T broadcast(T v) const {
    static_assert(sizeof(T) <= sizeof(unsigned long long), "broadcast carries one word");
    __shared__ unsigned long long word;
    __syncthreads();  // nobody still reads the previous broadcast's word
    if (threadIdx.x == 0) word = static_cast<unsigned long long>(v);
    __syncthreads();
    return static_cast<T>(word);
  }
  __device__ bool any(bool b) const { return __syncthreads_or(b) != 0; }
  __device__ bool all(bool b) const { return __syncthreads_and(b) != 0; }
};

__device__ inline std::uint64_t globaltimer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct cuda {
  using group = cuda_block_group;

  const std::uint32_t* abort_word = nullptr;
  /// Absolute %globaltimer deadline; 0: timeout_ns after this copy's first
  /// wait (the host cannot read the device's clock, so it sends a budget).
  mutable std::uint64_t deadline_ns = 0;
  std::uint64_t timeout_ns = 10'000'000'000ull;
  /// Polls between two checks of the abort word and the clock.
  static constexpr std::uint32_t check_every = 256;

  __device__ group workers() const { return {}; }

  /// Polls done() (thread 0 only) until it holds, the deadline passes or the
  /// abort word is raised; every thread returns thread 0's verdict. done()
  /// may read with relaxed loads (detail::load_polled): once it holds, thread
  /// 0 runs one acquire fence (fence_acquire) before the block barrier, so
  /// every thread's later accesses come after the loads that satisfied it.
  template <class Pred>
  __device__ status wait(Pred&& done) const {
    status v = status::ok;
    if (threadIdx.x == 0) {
      v = poll(done);
      if (v == status::ok) fence_acquire();
    }
    return workers().broadcast(v);
  }

  /// A wait by one thread on its own condition (an LL line), with the same
  /// deadline and abort check; no block-wide synchronisation.
  template <class Pred>
  __device__ status wait_own(Pred&& done) const {
    return poll(done);
  }

  /// Block-wide verdict after threads waited on their own: ok only if every
  /// thread's was; a timeout anywhere wins over an abort. Synchronises the block.
  __device__ static status agree(status s) {
    const group g{};
    const bool timed_out = g.any(s == status::timeout);
    const bool failed = g.any(s != status::ok);
    if (timed_out) return status::timeout;
    return failed ? (s != status::ok ? s : status::aborted) : status::ok;
  }

  /// Whether every thread runs a system fence before a post, or none does
  /// (the default; a receiver then frees its slots with a relaxed store:
  /// post_freed). Every post is the leader's store after a block barrier; a
  /// send's is a release, which orders the block's stores for every observer
  /// (bar.sync synchronises the block; a release is cumulative), as NCCL's
  /// primitives rely on. The per-thread fence cost every thread a membar.sys
  /// per step: 17 % of an 8 B call on an H200 (gpu::options::fence_each_thread
  /// has the measurements).
  bool fence_each_thread = false;
  /// Every rank of the group runs on this GPU and its FIFOs are in device
  /// memory: the fences and release stores that order a step need GPU scope
  /// only (fence.acq_rel.gpu, st.release.gpu), not system scope, which also
  /// orders against other GPUs and the host. The communicator sets it
  /// (gpu::options::scope); the abort word and the status words, which the
  /// host reads, keep system scope.
  bool one_gpu = false;
  __device__ void fence_before_post() const {
    if (!fence_each_thread) return;
    if (one_gpu) __threadfence();
    else __threadfence_system();
  }
  /// The leader's post that publishes a written slot (proto::post_tail): a
  /// release store at the group's scope.
  template <class Word>
  __device__ void post(Word* word, Word value) const {
    // ::cuda is libcu++; plain `cuda` names this executor here.
    if (one_gpu)
      ::cuda::atomic_ref<Word, ::cuda::thread_scope_device>(*word).store(value,
                                                                         ::cuda::std::memory_order_release);
    else detail::store_release(word, value);
  }
  /// A receiver's post that frees slots (proto::post_head), by the leader
  /// after the block barrier: a release store by default; with
  /// fence_each_thread off a relaxed one, the barrier ordering the block's
  /// reads of the slot before it (NCCL's receivers post with a plain store).
  template <class Word>
  __device__ void post_freed(Word* head, Word value) const {
    if (fence_each_thread) post(head, value);
    else detail::store_relaxed(head, value);
  }
  /// What the polling thread runs once a wait is over: an acquire fence at
  /// the group's scope (the polls were relaxed: detail::load_polled).
  __device__ void fence_acquire() const {
    if (one_gpu) ::cuda::atomic_thread_fence(::cuda::std::memory_order_acquire, ::cuda::thread_scope_device);
    else detail::fence_acquire();
  }
  /// Device waits poll; nobody sleeps, so nobody needs waking.
  __device__ static void notify(int) {}

  /// For a caller that runs its own polling loop (LL128's lane teams): on
  /// every check_every-th poll, aborted or timeout if the wait must end, else
  /// ok. `polls` counts from 1.
  __device__ status check(std::uint32_t polls) const {
    if (polls % check_every != 0) return status::ok;
    if (abort_word && detail::load_relaxed(abort_word) != 0) return status::aborted;
    const std::uint64_t now = globaltimer_ns();
    if (deadline_ns == 0) deadline_ns = now + timeout_ns;
    return now > deadline_ns ? status::timeout : status::ok;
  }

 private:
  template <class Pred>
  __device__ status poll(Pred& done) const {
    for (std::uint32_t polls = 1;; ++polls) {
      if (done()) return status::ok;
      if (const status st = check(polls); st != status::ok) return done() ? status::ok : st;
    }
  }
};

}  // namespace collx::exec

#endif  // __CUDACC__
