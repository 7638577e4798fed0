// collx/exec/host_team.hpp — a rank run as W host threads with the semantics
// of a CUDA thread block: how device behaviour is tested on CPUs.
//
// exec::host_team gives protocol and schedule code exactly the worker group
// that exec::cuda gives it on a GPU: W workers split every slot, only the
// leader polls counters and posts, team operations (sync, broadcast, any,
// all) are collective, and a worker's slot accesses reach the leader's
// release store only through a team sync. Code that is only correct with one
// worker per rank (a counter every worker re-reads after the leader stored
// it, a branch taken by some workers and not others) fails here as it would
// on a block: with wrong values (the payload goes to the wrong slot), a data
// race that ThreadSanitizer reports, or a team barrier that times out.
//
// To make such interleavings likely rather than possible, every worker sleeps
// or yields for a random moment at each sync, post and wait verdict (the
// "jitter"); a seed makes a run repeatable.
//
// Each worker thread holds its own host_team (same team, its own lane).
// The leader's waits are exec::host's (deadline, abort word, periodic check,
// doorbells); the team's barrier has its own deadline and aborts the process
// with a message naming the lane, because a barrier that some workers never
// reach is a bug in the code under test, not a recoverable condition.
#pragma once

#include <collx/detail/doorbell.hpp>
#include <collx/error.hpp>
#include <collx/exec/host.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sched.h>

namespace collx::exec {

/// What the W workers of one rank share. Lives as long as the workers use it.
class team_state {
 public:
  /// `jitter_ns`: longest injected pause (0: none); `barrier_timeout_ns`:
  /// how long a worker waits at a team barrier before the process aborts.
  team_state(int workers, std::uint64_t seed, std::uint32_t jitter_ns = 2000,
             std::uint64_t barrier_timeout_ns = 60'000'000'000ull)
      : workers_(workers), jitter_ns_(jitter_ns), barrier_timeout_ns_(barrier_timeout_ns) {
    if (workers < 1 || workers > max_workers)
      throw_error(status::invalid_argument, "team_state: " + std::to_string(workers) +
                                                " workers; a team has 1 to " + std::to_string(max_workers));
    for (int i = 0; i < max_workers; ++i) rng_[i].state = seed * 0x9e3779b97f4a7c15ull + 2 * i + 1;
  }
  team_state(const team_state&) = delete;
  team_state& operator=(const team_state&) = delete;

  static constexpr int max_workers = 64;

  int workers() const { return workers_; }

  /// A sense-reversing barrier: arrivals happen before departures (acq_rel on
  /// the counter, acquire on the generation), which is the ordering
  /// __syncthreads gives a block's threads.
  void sync(int lane) {
    jitter(lane);
    const std::uint32_t gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == workers_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(gen + 1, std::memory_order_release);
      detail::ring(&bell_);
      return;
    }
    auto passed = [&] { return generation_.load(std::memory_order_acquire) != gen; };
    std::uint64_t deadline = 0;
    for (std::uint32_t polls = 0; !passed(); ++polls) {
      if (polls < 128) {
        cpu_relax();
        continue;
      }
      if ((polls & 7u) == 0) {
        const std::uint64_t now = monotonic_ns();
        if (deadline == 0) deadline = now + barrier_timeout_ns_;
        if (now > deadline) {
          std::fprintf(stderr,
                       "collx host_team: lane %d waited %.1f s at a team barrier that the other lanes "
                       "never reached (a sync inside a branch not every worker takes?)\n",
                       lane, double(barrier_timeout_ns_) * 1e-9);
          std::abort();
        }
      }
      // More workers than CPUs is the rule here: after a few yields, sleep
      // until the last arrival rings (bounded, so the deadline is still seen).
      if (polls < 128 + 16) sched_yield();
      else detail::sleep_on(&bell_, passed, 1'000'000);
    }
  }

  /// Shared words for broadcast and votes: call k of a team operation uses
  /// word k % 3, and the leader clears word (k + 1) % 3 before its barrier,
  /// whose last readers (call k − 2) are all past call k − 1's barrier.
  std::atomic<std::uint64_t>& word(std::uint32_t k) { return words_[k % 3]; }
  /// Lane `lane`'s count of team operations (every lane counts the same
  /// calls); kept here, not in an executor copy, so that it runs on across
  /// primitives objects exactly as the shared words do.
  std::uint32_t& calls(int lane) { return rng_[lane].calls; }

  /// A random pause: nothing, a few spins, a yield or a sleep of up to
  /// jitter_ns (each worker has its own generator; no shared state).
  void jitter(int lane) {
    if (jitter_ns_ == 0) return;
    const std::uint64_t r = rng_[lane].next();
    switch (r & 7u) {
      case 0:
      case 1:
      case 2: return;
      case 3:
      case 4:
        for (std::uint64_t i = (r >> 8) % 64; i > 0; --i) cpu_relax();
        return;
      case 5:
      case 6: sched_yield(); return;
      default: {
        const timespec ts{0, static_cast<long>((r >> 16) % jitter_ns_)};
        nanosleep(&ts, nullptr);
      }
    }
  }

 private:
  struct alignas(64) rng {
    std::uint64_t state;
    std::uint32_t calls = 0;
    std::uint64_t next() {  // xorshift64*
      state ^= state >> 12;
      state ^= state << 25;
      state ^= state >> 27;
      return state * 0x2545f4914f6cdd1dull;
    }
  };

  const int workers_;
  const std::uint32_t jitter_ns_;
  const std::uint64_t barrier_timeout_ns_;
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  alignas(64) std::atomic<std::uint64_t> words_[3] = {};
  detail::doorbell bell_{};
  rng rng_[max_workers];
};

/// The worker group of host_team: one lane of the team's W (see host_group
/// for the team operations' contract). Its size is a run-time value, as a
/// block's blockDim.x is, so code that assumes a compile-time team size fails
/// to compile here as it would for exec::cuda.
class host_team_group : public host_lanes {  // lanes are threads: tiles of one, batched work
 public:
  host_team_group(team_state* team, int lane) : team_(team), lane_(lane) {}

  int size() const { return team_->workers(); }
  int index() const { return lane_; }
  bool leader() const { return lane_ == 0; }
  void sync() const { team_->sync(lane_); }

  template <class T>
  T broadcast(T v) const {
    static_assert(sizeof(T) <= sizeof(std::uint64_t), "broadcast carries one word");
    const std::uint32_t k = team_->calls(lane_)++;
    if (leader()) {
      team_->word(k + 1).store(0, std::memory_order_relaxed);
      team_->word(k).store(static_cast<std::uint64_t>(v), std::memory_order_relaxed);
    }
    sync();
    return static_cast<T>(team_->word(k).load(std::memory_order_relaxed));
  }
  bool any(bool b) const { return vote(b) != 0; }
  bool all(bool b) const { return vote(!b) == 0; }

 private:
  std::uint64_t vote(bool b) const {
    const std::uint32_t k = team_->calls(lane_)++;
    if (leader()) team_->word(k + 1).store(0, std::memory_order_relaxed);
    if (b) team_->word(k).fetch_or(1, std::memory_order_relaxed);
    sync();
    return team_->word(k).load(std::memory_order_relaxed);
  }

  team_state* team_;
  int lane_;
};

/// The executor: a rank is W host threads (1 ≤ W ≤ team_state::max_workers,
/// W = team_state::workers()).
struct host_team {
  using group = host_team_group;

  host base;  // the leader's waits: deadline, abort word, periodic check, doorbells
  team_state* team = nullptr;
  int lane = 0;

  group workers() const { return group(team, lane); }

  void notify(int q) const { base.notify(q); }

  /// The leader polls; every worker returns its verdict (as exec::cuda::wait).
  template <class Pred>
  status wait(Pred&& done) const {
    status v = status::ok;
    if (lane == 0) v = base.wait(static_cast<Pred&&>(done));
    team->jitter(lane);
    return workers().broadcast(v);
  }

  /// A wait by one worker on its own condition, without the team.
  template <class Pred>
  status wait_own(Pred&& done) const {
    team->jitter(lane);
    return base.wait_own(static_cast<Pred&&>(done));
  }

  /// The team's verdict after workers waited on their own (as exec::cuda).
  status agree(status s) const {
    const group g = workers();
    const bool timed_out = g.any(s == status::timeout);
    const bool failed = g.any(s != status::ok);
    if (timed_out) return status::timeout;
    return failed ? (s != status::ok ? s : status::aborted) : status::ok;
  }

  /// On a block every thread fences before the leader's release store; the
  /// team sync before it already orders the workers' stores here. The pause
  /// widens the window between the sync and the leader's post.
  void fence_before_post() const { team->jitter(lane); }
};

}  // namespace collx::exec
