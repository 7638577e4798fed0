// collx/comm/contention.hpp — how contended the CPUs are, agreed by every rank,
// so that the automatic choice can price it and still pick the same variant
// everywhere.
//
// Why: a pipelined schedule moves a byte only while both ends of a connection
// are on a CPU; a single-copy one needs only the reader (tune/model.hpp). On a
// machine whose CPUs other tasks also want (data loaders, builds), the first
// slows down several times more than the second, so the choice must know. But
// each rank sees its own CPU, and ranks that choose differently run different
// schedules: the share must be agreed.
//
// Measure: each rank samples its thread's run-queue delay
// (detail/sched_stat.hpp) at decision points: the share of the CPU time it
// wanted since its previous point that it spent waiting for a CPU.
//
// Where: decision points fall on the same calls on every rank: every
// numbered call counts one (whatever its size, so that ranks whose calls
// mismatch still meet at each point and the mismatch check reports them), and
// a point falls at calls 64, 320 and 1344, then every
// comm_options::contention_interval calls (4096 by default): early, because
// before the first point the waits yield after 100 µs and under load each
// yield costs a scheduler tick (4 ms at 250 Hz). send/recv groups involve only
// some ranks and count nothing.
//
// Agree: at point d, rank 0 takes the largest share any rank has published
// (its own now, the others' from their latest point), quantizes it to steps of
// 1/8 with hysteresis (a share under 1/4 is none: a quiet machine measures up
// to about 0.1 while processes start; an agreed share drops only when the
// measurement falls more than half a step below it), and writes (d, share)
// into its record's ring of entries (transport/shm.hpp: contention_history) (release). Every other
// rank publishes its own measurement, waits for rank 0's entry d (a wait with
// the communicator's deadline and abort word), takes its share and says so
// (`taken`). Rank 0 overwrites an entry only after every rank has taken it,
// so however far rank 0 runs ahead no rank misses a decision. The wait costs a
// follower nothing it would not wait for anyway in all but rooted
// collectives, and happens once per point.
//
// COLLX_DEBUG=1 makes rank 0 print each change of the agreed share.
//
// Fixed shares (comm_options::contention >= 0) skip all of this: every rank
// has the same value. Transports whose records are not shared memory
// (proxied, across hosts) use the fixed share, 0 by default.
//
// Memory ordering: the decision entry is stored with release after nothing
// else it guards (the share is in the word itself); `taken` with release,
// read by rank 0 with acquire. Errors: a wait that fails (deadline, abort,
// dead peer) fails the call through comm::fail before any byte moves.
#pragma once

#include <collx/coll.hpp>
#include <collx/comm/state.hpp>
#include <collx/comm/watch.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/debug.hpp>
#include <collx/detail/sched_stat.hpp>
#include <collx/error.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

namespace collx::comm {

namespace contention_detail {
/// Shares are agreed in steps of 1/8 (as ‰), the least step at 100 ‰.
inline constexpr std::uint32_t step_pm = 125, least_pm = 250;

/// The agreed share after `prev_pm` for a measured largest share `pm`:
/// rounded down to a step, none below least_pm, and lowered from prev_pm only
/// when pm falls more than half a step below it (so a measurement that wobbles around
/// a step boundary does not flip choices back and forth). Most 875 ‰.
constexpr std::uint32_t quantize(std::uint32_t pm, std::uint32_t prev_pm) {
  constexpr std::uint32_t max_pm = 875;
  std::uint32_t q = pm < least_pm ? 0 : pm < step_pm ? least_pm : pm / step_pm * step_pm;
  if (q > max_pm) q = max_pm;
  if (q < prev_pm && pm + step_pm / 2 >= prev_pm) q = prev_pm;  // less than half a step below: keep
  return q;
}

/// COLLX_DEBUG set and not "0": rank 0 says when the agreed share changes.
inline bool debug_enabled() {
  static const bool on = collx::detail::debug_enabled();
  return on;
}

constexpr std::uint64_t pack(std::uint64_t point, std::uint32_t pm) { return point << 16 | pm; }
constexpr std::uint64_t point_of(std::uint64_t w) { return w >> 16; }
constexpr std::uint32_t share_of(std::uint64_t w) { return static_cast<std::uint32_t>(w & 0xffff); }
}  // namespace contention_detail

/// This rank's measured share since its previous point, in ‰ (or -1).
template <class Transport>
int measure_contention(state<Transport>& s, std::uint64_t point) {
  if (s.opt.contention_probe != nullptr) {
    const double x = s.opt.contention_probe(s.rank, point);
    return x < 0 ? -1 : static_cast<int>(x * 1000 + 0.5);
  }
  const detail::sched_sample now = detail::read_sched_sample();
  const double x = detail::waiting_share(s.contention.sample, now);
  s.contention.sample = now;
  return x < 0 ? -1 : static_cast<int>(x * 1000 + 0.5);
}

/// Counts call C (one, whatever its size) and,
/// where a decision point falls, measures and agrees the share (see the
/// header comment). After it, s.contention.share is the same on every rank
/// for this call. make_executor() gives the executor whose waits it uses
/// (rank 0's entry; every rank's `taken`), made only at a point.
template <class Transport, class MakeExecutor>
void contention_point(state<Transport>& s, coll c, MakeExecutor&& make_executor) {
  using namespace contention_detail;
  if constexpr (Transport::needs_proxy) {
    return;  // records are forwarded copies, not shared: the fixed share
  } else {
    if (s.opt.contention >= 0) return;
    if (s.opt.contention_probe == nullptr && !s.contention.sample.valid)
      s.contention.sample = detail::read_sched_sample();  // the baseline, on the calling thread
    // One per call, whatever its size: ranks whose calls mismatch (a count)
    // must still reach each point on the same call, or one would wait for a
    // decision before its call is published, where the mismatch check cannot
    // see it, until the deadline.
    s.contention.weight += 1;
    // The first points come sooner (weights 64, 256, 1024, then the interval),
    // so that a communicator on a loaded machine prices it, and its waits
    // spin through a slice instead of yielding, within its first calls.
    const double interval = double(s.opt.contention_interval);
    const double first = s.contention.point < 3 ? double(64u << (2 * s.contention.point)) : interval;
    if (s.contention.weight < (first < interval ? first : interval)) return;
    s.contention.weight = 0;
    using record = std::remove_pointer_t<decltype(s.view.record(0))>;
    constexpr std::uint64_t history = std::extent_v<decltype(std::declval<record&>().contention.decision)>;
    const std::uint64_t d = ++s.contention.point;
    const auto ex = make_executor();
    const int mine = measure_contention(s, d);
    auto& own = s.view.record(s.rank)->contention;
    if (mine >= 0) detail::store_release(&own.measured_pm, static_cast<std::uint32_t>(mine));
    const std::uint32_t prev_pm = static_cast<std::uint32_t>(s.contention.share * 1000 + 0.5);
    std::uint32_t agreed = prev_pm;
    if (s.rank == 0) {
      std::uint32_t largest = mine >= 0 ? static_cast<std::uint32_t>(mine) : 0;
      for (int r = 1; r < s.size; ++r) {
        const std::uint32_t pm = detail::load_acquire(&s.view.record(r)->contention.measured_pm);
        if (pm > largest) largest = pm;
      }
      agreed = s.size > 1 || mine >= 0 ? quantize(largest, prev_pm) : prev_pm;
      if (d > history) {  // the entry to overwrite held point d - history: all must have taken it
        const std::uint64_t need = d - history;
        const status st = ex.wait([&] {
          for (int r = 1; r < s.size; ++r)
            if (detail::load_acquire(&s.view.record(r)->contention.taken) < need) return false;
          return true;
        });
        if (st != status::ok) fail(s, c, st);
      }
      if (agreed != prev_pm && debug_enabled())
        std::fprintf(stderr,
                     "collx: contention: the automatic choice now prices a share of %.3f (was %.3f; largest "
                     "measured %.3f, decision point %llu)\n",
                     agreed / 1000.0, prev_pm / 1000.0, largest / 1000.0, static_cast<unsigned long long>(d));
      detail::store_release(&own.decision[d % history], pack(d, agreed));
      for (int r = 1; r < s.size; ++r) ex.notify(r);
    } else {
      const auto& lead = s.view.record(0)->contention;
      std::uint64_t w = 0;
      const status st = ex.wait([&] {
        w = detail::load_acquire(&lead.decision[d % history]);
        return point_of(w) >= d;
      });
      if (st != status::ok) fail(s, c, st);
      if (point_of(w) != d)  // rank 0 waits for `taken` before overwriting: cannot happen
        throw_error(status::internal_error, std::string(name(c)) + " (rank " + std::to_string(s.rank) +
                                                "): contention decision " + std::to_string(d) +
                                                " was overwritten before this rank took it");
      agreed = share_of(w);
      detail::store_release(&own.taken, d);
      ex.notify(0);
    }
    s.contention.share = agreed / 1000.0;
  }
}

}  // namespace collx::comm
