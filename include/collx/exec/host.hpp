// collx/exec/host.hpp — the host executor: a rank is one CPU thread.
//
// Supplies the two things protocol code needs from where it runs: a worker
// group (here: one worker) and a bounded wait. wait() busy-polls for spin_ns,
// then yields the CPU on every poll so that more ranks than cores still progress
// (with doorbells, it sleeps on a futex after a few yields until a peer that
// published something wakes it), and returns status::timeout at the deadline or status::aborted as soon as
// the communicator's shared abort word is non-zero. Never waits unboundedly. While yielding it also runs an
// optional periodic check (the communicator's watch for dead peers and mismatched calls) and returns its
// status if not ok.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/doorbell.hpp>
#include <collx/error.hpp>

#include <cstdint>
#include <ctime>

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace collx::exec {

/// A tile of one lane: a host worker votes and exchanges values with nobody.
struct solo_tile {
  static void sync() {}
  static bool any(bool b) { return b; }
  static bool all(bool b) { return b; }
  template <class T>
  static T broadcast(T v, int) {
    return v;
  }
};

/// One worker: a host thread moves a whole slice by itself. The team
/// operations of a worker group (see collx/concepts.hpp) are trivial here:
/// every worker calls them together, in the same order, and
///   sync()          returns once every worker has arrived (a barrier; the
///                   workers' earlier memory accesses happen before the
///                   others' later ones),
///   broadcast(v)    returns the leader's v to every worker (and syncs),
///   any(b) / all(b) returns the OR / AND of every worker's b (and syncs).
/// Sub-teams (host_lanes: a host worker is a thread, so its tiles have one
/// lane): tile<N>() is the tile of N consecutive lanes holding this
/// worker, with sync/any/all and broadcast(v, src) among its lanes only;
/// max_tile is the largest N the group offers. `sequential` says that a
/// worker is a sequential thread that should take work in batches (a CPU
/// thread), not one lane of many running in lockstep (a GPU warp).
struct host_lanes {
  static constexpr int max_tile = 1;
  static constexpr bool sequential = true;
  template <int N>
  static solo_tile tile() {
    static_assert(N == 1, "host workers form tiles of one lane");
    return {};
  }
};

struct host_group : host_lanes {
  static constexpr int size() { return 1; }
  static constexpr int index() { return 0; }
  static constexpr bool leader() { return true; }
  static void sync() {}
  template <class T>
  static T broadcast(T v) {
    return v;
  }
  static bool any(bool b) { return b; }
  static bool all(bool b) { return b; }
};

inline std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

struct host {
  using group = host_group;

  const std::uint32_t* abort_word = nullptr;  // shared by all ranks of the communicator
  /// Absolute CLOCK_MONOTONIC deadline of every wait; 0: timeout_ns after
  /// the first wait of this copy that has to spin (so a call that never waits
  /// long never reads the clock, which costs tens of ns in a VM). A call's
  /// primitives object holds the call's only copy, so the call fails at most
  /// timeout_ns after its first slow wait began.
  mutable std::uint64_t deadline_ns = ~0ull;
  std::uint64_t timeout_ns = 0;
  std::uint64_t spin_ns = 2000;  // busy-poll this long before yielding the CPU
  /// Run every check_interval_ns while yielding (first after a fifth of it, so
  /// short waits never pay for it); a non-ok status ends the wait with it.
  status (*check)(const void* ctx) = nullptr;
  const void* check_ctx = nullptr;
  std::uint64_t check_interval_ns = 50'000'000;

  /// Futex sleeping (set when ranks outnumber CPUs): `bells` is an array of
  /// one doorbell per rank (in the shm segment), `self` this rank. A wait
  /// that has yielded a few times then sleeps on its own doorbell, and
  /// notify(q) wakes rank q after this rank published something q may wait
  /// for. nullptr: yield only, and notify() does nothing.
  detail::doorbell* bells = nullptr;
  int self = 0;
  bool sleep = true;  // false: ring peers' doorbells but only yield here
  /// Longest single sleep: bounds the reaction to an abort raised elsewhere.
  std::uint64_t max_sleep_ns = 1'000'000;

  /// A word loaded on every busy poll (nullptr: none): keeps a line the
  /// caller reads after its waits (the previous rank's call record, compared
  /// at the end of each call) fresh in this core's cache, so that fetching it
  /// from the core that wrote it overlaps a wait instead of following it.
  const std::uint64_t* warm = nullptr;

  static constexpr group workers() { return {}; }

  /// Wakes rank q if it sleeps. Call after the release store that publishes
  /// (detail/doorbell.hpp says why no wake-up is lost).
  void notify(int q) const {
    if (bells != nullptr) detail::ring(bells + q);
  }

  /// Polls done() until it returns true: busy for spin_ns (a peer that is
  /// running answers within that), then yielding the CPU on every poll (a peer
  /// that needs this core gets it). Memory ordering is done()'s business (it
  /// loads with acquire); wait itself adds none.
  template <class Pred>
  status wait(Pred&& done) const {
    // Without a spin budget (ranks outnumber CPUs: the peer waited for most
    // likely needs this core) only a few polls come before the first yield:
    // a PAUSE takes ~25 ns on current x86 cores, so 64 polls and a clock read
    // would already be a 2 µs spin.
    const int first_polls = spin_ns == 0 ? 4 : 64;
    for (int i = 0; i < first_polls; ++i) {
      if (done()) return status::ok;
      keep_warm();
      cpu_relax();
    }
    const std::uint64_t start = monotonic_ns();
    if (deadline_ns == 0) deadline_ns = start + timeout_ns;
    const std::uint64_t spin_until = start + spin_ns < deadline_ns ? start + spin_ns : deadline_ns;
    for (std::uint32_t polls = 1; spin_ns > 0; ++polls) {
      if (done()) return status::ok;
      if ((polls & 63u) == 0) {
        if (abort_word && detail::load_relaxed(abort_word) != 0) return status::aborted;
        if (monotonic_ns() >= spin_until) break;
      }
      keep_warm();
      cpu_relax();
    }
    std::uint64_t next_check = monotonic_ns() + check_interval_ns / 5;
    for (std::uint32_t polls = 0;; ++polls) {
      if (done()) return status::ok;
      if (abort_word && detail::load_relaxed(abort_word) != 0) return status::aborted;
      if ((polls & 15u) == 0) {
        const std::uint64_t now = monotonic_ns();
        if (now > deadline_ns) return done() ? status::ok : status::timeout;
        if (check != nullptr && now >= next_check) {
          const status st = check(check_ctx);
          if (st != status::ok) return done() ? status::ok : st;
          next_check = now + check_interval_ns;
        }
      }
      if (bells != nullptr && sleep && polls >= yields_before_sleep) sleep_until_notified(done, deadline_ns);
      else sched_yield();
    }
  }

  COLLX_ALWAYS_INLINE void keep_warm() const {
    if (warm != nullptr) (void)detail::load_relaxed(warm);
  }

  /// Yields before sleeping: a peer that shares this core usually answers
  /// within a few time slices, and a yield is cheaper than a sleep and wake.
  static constexpr std::uint32_t yields_before_sleep = 16;

  template <class Pred>
  void sleep_until_notified(Pred& done, std::uint64_t deadline) const {
    const std::uint64_t now = monotonic_ns();
    const std::uint64_t left = deadline > now ? deadline - now : 0;
    detail::sleep_on(bells + self, done, left < max_sleep_ns ? left : max_sleep_ns);
  }

  /// A wait by one worker on its own condition (LL lines): the same as wait()
  /// for a single-thread group.
  template <class Pred>
  status wait_own(Pred&& done) const {
    return wait(static_cast<Pred&&>(done));
  }

  /// The group's verdict after workers waited on their own: with one worker,
  /// its own status.
  static status agree(status s) { return s; }

  /// Makes the preceding plain stores of this worker group visible before a
  /// release store by the leader. A single host thread needs nothing extra.
  static void fence_before_post() {}
};

}  // namespace collx::exec
