// collx/comm/watch.hpp — the reliability watch of a host communicator: what
// ranks publish about their calls, the encoding of an abort's cause, and the
// checks that turn a dead peer or mismatched calls into an error on every rank.
//
// Every collective call gets a per-communicator sequence number. Before moving
// data a rank publishes (seq, signature, count) in its own record of the
// transport's shared memory (rank_record in transport/shm.hpp), seqlock style
// without fences (which ThreadSanitizer does not model): the entry's seq is
// invalidated, the fields stored with release, then seq stored with release. A
// peer loads seq, the fields with acquire, and seq again; a field from a newer
// call carries the invalidation with it, so a torn entry fails the second check
// and is never compared.
//
// The call window. Rank r compares each of its calls with rank r − 1's call
// of the same number (the chain of neighbours covers every pair), in order,
// at the end of the call if r − 1 has published it, else later; r publishes
// how far it got (`check.checked`). Entries are kept for the last
// call_history (64) calls, and a rank publishes call k, overwriting call
// k − 64, only once (1) it has compared call k − 64 itself and (2) rank
// r + 1 has compared it too (it reads this entry). So a rank that runs ahead
// (a broadcast root filling its FIFO credits; a reduce's leaves) is held at
// 64 calls and every call is compared, never lost to an overwritten entry.
// A rank that finds its previous rank behind fetches that rank's record
// again only every 16 calls (not every call: the fetch is a cross-core miss),
// so a mismatch on such a pair is reported by the rank behind at the end of
// its call, and by the rank ahead at its next look after the rank behind
// published the call (or, at the latest, before it gets 64 calls ahead). Where a
// neighbour's record is a proxy's copy (a rank on another host, transport/
// proxied.hpp) the window is not held (no wait on a record the network
// fills): calls are compared while the copy still has them.
//
// What this catches: ranks whose n-th collective calls differ in collective,
// count (not for all_to_allv, whose counts differ by design), dtype, op
// (reductions), root (broadcast/reduce), algorithm or protocol; a peer process
// that died (pid + start time published at creation). send/recv groups involve
// only some ranks and are not numbered. What it cannot catch: different buffers
// or buffer contents, calls that agree in every published field but diverge in
// data-dependent ways, and a rank that issues fewer calls than the others (it
// looks like a slow rank and ends in the deadline).
//
// The abort cause is one 64-bit word so the first failure sets it atomically:
//   bits 0-7 status, 8-15 differing field, 16-39 rank+1, 40-63 other rank+1.
// Errors: fail() throws collx::error with the call's name, the rank, and the
// cause (the dead rank and its pid, both ranks and the differing field, …).
//
// Host only. The record and header types come from the transport's view
// (record(r), header()); only a failed cross-memory read (single copy,
// transport/peer_read.hpp) is named here.
#pragma once

#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/comm/state.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/proc.hpp>
#include <collx/dtype.hpp>
#include <collx/error.hpp>
#include <collx/proto/ids.hpp>
#include <collx/reduce_op.hpp>
#include <collx/transport/peer_read.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace collx::comm {

/// The published fields of one call.
struct call_desc {
  coll c = coll::all_reduce;
  dtype dt = dtype::float32;
  reduce_op op = reduce_op::sum;
  int root = 0;
  algo_id algo = algo_id::ring;
  proto_id proto = proto_id::simple;
  std::uint64_t count = 0;
  /// all_gather in place (the automatic choice prices it). Recorded, not
  /// compared: ranks may differ in it, but where that made their automatic
  /// choices differ, the mismatch message says so.
  bool in_place = false;

  /// The in-place bit of a signature, which comparisons mask.
  static constexpr std::uint64_t in_place_bit = std::uint64_t{1} << 63;
  /// The root's bits (40-62): every root of a communicator fits (collx::rank_limit).
  static constexpr std::uint64_t root_mask = 0x7fffff;
  static_assert(root_mask + 1 >= std::uint64_t(rank_limit), "a root must fit its field of the call record");

  /// Everything but the count in one word. Fields a collective ignores are
  /// zeroed so they cannot differ.
  std::uint64_t signature() const {
    const bool rooted = c == coll::broadcast || c == coll::reduce;
    const std::uint64_t o = is_reduction(c) ? static_cast<std::uint64_t>(op) : 0;
    const std::uint64_t r = rooted ? static_cast<std::uint32_t>(root) : 0;
    return static_cast<std::uint64_t>(c) | static_cast<std::uint64_t>(dt) << 8 | o << 16 |
           static_cast<std::uint64_t>(algo) << 24 | static_cast<std::uint64_t>(proto) << 32 |
           (r & root_mask) << 40 | (in_place && c == coll::all_gather ? in_place_bit : 0);
  }
  static call_desc from(std::uint64_t sig, std::uint64_t count) {
    call_desc d;
    d.c = static_cast<coll>(sig & 0xff);
    d.dt = static_cast<dtype>(sig >> 8 & 0xff);
    d.op = static_cast<reduce_op>(sig >> 16 & 0xff);
    d.algo = static_cast<algo_id>(sig >> 24 & 0xff);
    d.proto = static_cast<proto_id>(sig >> 32 & 0xff);
    d.root = static_cast<int>(sig >> 40 & root_mask);
    d.in_place = (sig & in_place_bit) != 0;
    d.count = count;
    return d;
  }

  COLLX_COLD std::string str() const {
    std::string s = std::string(name(c)) + "(count " + std::to_string(count) + ", " + name(dt);
    if (is_reduction(c)) s += std::string(", ") + name(op);
    if (c == coll::broadcast || c == coll::reduce) s += ", root " + std::to_string(root);
    if (in_place) s += ", in place";
    return s + ", " + name(algo) + "/" + name(proto) + ")";
  }
};

/// Which field of two calls differs first (the order of the message).
enum class call_field : std::uint8_t { none, collective, count, dtype, op, root, algorithm, protocol };

inline const char* name(call_field f) {
  switch (f) {
    case call_field::none: return "nothing";
    case call_field::collective: return "collective";
    case call_field::count: return "count";
    case call_field::dtype: return "dtype";
    case call_field::op: return "reduce_op";
    case call_field::root: return "root";
    case call_field::algorithm: return "algorithm";
    case call_field::protocol: return "protocol";
  }
  return "field";
}

inline call_field differing_field(const call_desc& a, const call_desc& b) {
  if (a.c != b.c) return call_field::collective;
  if (a.count != b.count) return call_field::count;
  if (a.dt != b.dt) return call_field::dtype;
  if ((a.signature() | call_desc::in_place_bit) == (b.signature() | call_desc::in_place_bit))
    return call_field::none;
  if (is_reduction(a.c) && a.op != b.op) return call_field::op;
  if (a.root != b.root) return call_field::root;
  if (a.algo != b.algo) return call_field::algorithm;
  return call_field::protocol;
}

/// Calls a record remembers (the length of its `calls` array).
template <class Record>
inline constexpr std::size_t history_of = std::extent_v<decltype(Record::calls)>;

/// Publishes call `seq` of the rank owning `rec`. Only that rank writes it.
template <class Record>
void publish_call(Record* rec, std::uint64_t seq, const call_desc& d) {
  constexpr std::size_t h = history_of<Record>;
  auto& e = rec->calls[seq % h];
  detail::store_relaxed(&e.seq, std::uint64_t{0});  // invalid while the fields change
  detail::store_release(&e.signature, d.signature());
  detail::store_release(&e.count, d.count);
  detail::store_release(&e.seq, seq);
  // Take the next call's line now: its stores then hit this core's cache
  // instead of waiting for a peer's copy to be invalidated, and under TSO
  // that wait would hold back the call's first data store too.
  detail::prefetch_for_write(&rec->calls[(seq + 1) % h]);
}

/// One published entry as stored: the signature and the count.
struct call_words {
  std::uint64_t signature = 0, count = 0;
  bool operator==(const call_words&) const = default;
};

/// The entry of call number `seq` of the rank owning `rec`, if it has
/// published it and not yet overwritten it.
template <class Record>
COLLX_ALWAYS_INLINE bool read_words(const Record* rec, std::uint64_t seq, call_words& out) {
  const auto& e = rec->calls[seq % history_of<Record>];
  if (detail::load_acquire(&e.seq) != seq) return false;
  const std::uint64_t sig = detail::load_acquire(&e.signature), count = detail::load_acquire(&e.count);
  if (detail::load_relaxed(&e.seq) != seq) return false;  // ordered after the acquire loads
  out = {sig, count};
  return true;
}

/// Why a communicator was aborted.
struct abort_cause {
  status why = status::ok;
  call_field field = call_field::none;
  int rank = -1;   // the rank that failed, died, or first saw the mismatch (-1: abort())
  int other = -1;  // mismatch: the rank whose call differed

  std::uint64_t pack() const {
    return static_cast<std::uint64_t>(why) | static_cast<std::uint64_t>(field) << 8 |
           (static_cast<std::uint64_t>(rank + 1) & 0xffffff) << 16 |
           (static_cast<std::uint64_t>(other + 1) & 0xffffff) << 40;
  }
  static abort_cause unpack(std::uint64_t w) {
    abort_cause c;
    c.why = static_cast<status>(w & 0xff);
    c.field = static_cast<call_field>(w >> 8 & 0xff);
    c.rank = static_cast<int>(w >> 16 & 0xffffff) - 1;
    c.other = static_cast<int>(w >> 40 & 0xffffff) - 1;
    return c;
  }
};

/// Raises the abort word of `h`; the first caller's cause is kept. Safe from
/// any thread or process mapping the segment.
template <class Header>
void raise_abort(Header* h, const abort_cause& cause) {
  std::uint64_t expected = 0;
  detail::compare_exchange(&h->abort_cause, expected, cause.pack());  // loses quietly to an earlier cause
  std::uint32_t zero = 0;
  detail::compare_exchange(&h->abort, zero, 1u);  // after the cause: whoever sees the word sees a cause
}

/// The cause, or {ok} when the word is not raised.
template <class Header>
abort_cause read_abort(const Header* h) {
  if (detail::load_acquire(&h->abort) == 0) return {};
  return abort_cause::unpack(detail::load_acquire(&h->abort_cause));
}

// ---- the communicator's side ---------------------------------------------------

template <class Transport>
void raise_abort(state<Transport>& s, status why, int rank) {
  // The first failure wins the cause; later ones only see the word set.
  raise_abort(s.view.header(), abort_cause{why, call_field::none, rank, -1});
}

template <class Transport>
COLLX_COLD std::string describe(const state<Transport>& s, const abort_cause& c) {
  if (c.rank < 0) return "aborted by communicator::abort()";
  // A mismatch is named as such even where a transport saw more of rank
  // c.rank: the rank that found it fails and closes its connections, and
  // what a proxy saw of that (a goodbye with steps unread) is a consequence.
  if (c.why == status::mismatch)
    return "ranks " + std::to_string(c.rank) + " and " + std::to_string(c.other) +
           " issued mismatched calls (the " + name(c.field) + " differs)";
  // A network transport knows more than a pid: the peer's address and what
  // its connection did (transport/proxied.hpp).
  if constexpr (requires { s.view.transport_failure(c.rank); }) {
    if (std::string t = s.view.transport_failure(c.rank); !t.empty()) return t;
    if (c.why == status::peer_dead)
      return "rank " + std::to_string(c.rank) + " died or lost its connections (reported by another rank)";
  }
  if (c.why == status::peer_dead) {
    const int pid = detail::load_relaxed(&s.view.record(c.rank)->pid);
    return "rank " + std::to_string(c.rank) + " (pid " + std::to_string(pid) +
           ") died: its process exited or was killed";
  }
  return "aborted because rank " + std::to_string(c.rank) + " failed (" + to_string(c.why) + ")";
}

/// Adopts an abort raised elsewhere as this rank's error state.
template <class Transport>
state<Transport>& sync_error(state<Transport>& s) {
  if (s.err != status::ok) return s;
  const abort_cause cause = read_abort(s.view.header());
  if (cause.why == status::ok) return s;
  s.err = cause.why == status::peer_dead || cause.why == status::mismatch ? cause.why : status::aborted;
  s.err_msg = "rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) + ": " + describe(s, cause);
  return s;
}

/// Whether rank r's record, as `s` reads it, is the one r writes (shared
/// memory), not a copy a proxy fills: only then can a rank wait on it.
template <class Transport>
bool record_in_memory(const state<Transport>& s, int r) {
  if constexpr (requires { s.view.through_memory(r); }) return r == s.rank || s.view.through_memory(r);
  else return (void)s, (void)r, true;
}

// ---- ranks that load each other's buffers ------------------------------------------
// Thread ranks load a peer's user buffer through its pointer (nvls's single
// copy, direct's message streams), which is safe only while that peer is in
// the call: a peer that failed and returned may have freed it. So a rank
// marks every call it leaves (leave_call) and every send/recv group it is in
// (groups are not numbered), and a rank that fails, once the abort word is
// up, waits until every rank of its process that entered its last call, or
// is inside a group, has left it (wait_for_loaders) before it returns. The
// readers' half is shm_view::may_load_peers: a rank checks the abort word
// after the buffers' barrier (a stream: before each read), before it loads;
// the fences on both sides make sure that either the failing rank sees the
// reader inside, or the reader sees the word. Ranks of other processes are
// read by the transport, which fails cleanly on a bad address, and are never
// waited for.

/// Whether some other rank runs in this process (decided at the first call:
/// every rank published its identity when the communicator was created).
template <class Transport>
bool loads_peers(state<Transport>& s) {
  if constexpr (requires { s.view.loads_from(0, 0); }) {
    if (s.loads_peers < 0) {
      s.loads_peers = 0;
      for (int q = 0; q < s.size; ++q)
        if (q != s.rank && s.view.loads_from(s.rank, q)) s.loads_peers = 1;
    }
    return s.loads_peers == 1;
  } else {
    return (void)s, false;
  }
}

/// This rank enters a send/recv group: until leave_call, a failing rank of
/// its process waits for it (its call records do not say it is inside).
template <class Transport>
void enter_group(state<Transport>& s) {
  if constexpr (requires { s.view.loads_from(0, 0); })
    if (loads_peers(s)) {
      detail::store_release(s.view.line(s.rank, Transport::view::in_group), std::uint64_t{1});
      s.in_group = true;
    }
}

/// This rank has left call s.seq (or its group): no load of a peer's buffer follows.
template <class Transport>
void leave_call(state<Transport>& s) {
  if constexpr (requires { s.view.loads_from(0, 0); }) {
    if (!loads_peers(s)) return;
    detail::store_release(s.view.line(s.rank, Transport::view::left_call), s.seq);
    if (s.in_group) {
      detail::store_release(s.view.line(s.rank, Transport::view::in_group), std::uint64_t{0});
      s.in_group = false;
    }
  }
}

/// After the abort word is raised: waits (at most the timeout) until no rank
/// of this process is inside call s.seq, the last this rank entered, or
/// inside a send/recv group. Returns the first rank still inside when the
/// deadline passed, else -1.
template <class Transport>
int wait_for_loaders(state<Transport>& s) {
  if constexpr (requires { s.view.loads_from(0, 0); }) {
    if (!loads_peers(s)) return -1;
    leave_call(s);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with shm_view::may_load_peers
    using record = std::remove_pointer_t<decltype(s.view.record(0))>;
    const std::uint64_t n = s.seq;
    const auto deadline = std::chrono::steady_clock::now() + s.opt.timeout;
    int stuck = -1;
    for (int q = 0; q < s.size; ++q) {
      if (q == s.rank || !s.view.loads_from(s.rank, q)) continue;
      auto inside = [&] {
        if (detail::load_acquire(s.view.line(q, Transport::view::in_group)) != 0) return true;
        return n > 0 && detail::load_acquire(&s.view.record(q)->calls[n % history_of<record>].seq) == n &&
               detail::load_acquire(s.view.line(q, Transport::view::left_call)) < n;
      };
      while (inside() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      if (stuck < 0 && inside()) stuck = q;
    }
    return stuck;
  } else {
    return (void)s, -1;
  }
}

/// Records why call #seq differs from `peer`'s and raises the abort word.
template <class Transport>
COLLX_COLD status report_mismatch(state<Transport>& s, int peer, std::uint64_t seq, const call_desc& mine,
                                  const call_desc& theirs, call_field f) {
  s.watch_what = "call #" + std::to_string(seq) + " differs between ranks: rank " + std::to_string(s.rank) +
                 " called " + mine.str() + ", rank " + std::to_string(peer) + " called " + theirs.str() +
                 " (the " + name(f) + " differs)";
  if (mine.in_place != theirs.in_place && (f == call_field::algorithm || f == call_field::protocol))
    s.watch_what += std::string("; they also differ in whether the call was in place, which the automatic ") +
                    "choice prices: call " + name(mine.c) +
                    " in place on every rank or on none, or name the variant";
  // Symmetric memory is priced per rank too (comm/dispatch.hpp, priced_mapped).
  if ((f == call_field::algorithm || f == call_field::protocol) && s.symmetric != nullptr &&
      s.symmetric->has_own())
    s.watch_what += std::string("; this rank's buffers of its last ") + name(mine.c) + " were " +
                    (s.choice_memo[static_cast<int>(mine.c)].mapped ? "" : "not ") +
                    "in symmetric memory (alloc_symmetric), which the automatic choice prices: use symmetric "
                    "buffers on every rank or on none, or name the variant";
  raise_abort(s.view.header(), abort_cause{status::mismatch, f, s.rank, peer});
  return status::mismatch;
}

/// Compares this rank's last `depth` calls with `peer`'s calls of the same
/// sequence numbers, where the peer has published them (one cache line).
template <class Transport>
status compare_with(state<Transport>& s, int peer, std::uint64_t depth) {
  for (std::uint64_t k = 0; k < depth && k < s.seq; ++k) {
    const std::uint64_t seq = s.seq - k;
    // Equal words are equal calls (signature() zeroes the fields a collective
    // ignores); only a difference is decoded, to name the field.
    call_words mine, theirs;
    if (!read_words(s.view.record(s.rank), seq, mine) || !read_words(s.view.record(peer), seq, theirs) ||
        mine == theirs)
      continue;
    const call_desc a = call_desc::from(mine.signature, mine.count),
                    b = call_desc::from(theirs.signature, theirs.count);
    if (const call_field f = differing_field(a, b); f != call_field::none)
      return report_mismatch(s, peer, seq, a, b, f);
  }
  return status::ok;
}

/// The call check's progress. Compares this rank's calls after s.checked
/// with the previous rank's calls of the same numbers, in order, as far as
/// that rank has published them, and publishes how far it got (the previous
/// rank reads it before overwriting an entry). An entry already overwritten
/// (only where the window does not hold: a previous rank on another host) is
/// passed over unchecked.
template <class Transport>
status advance_checks(state<Transport>& s) {
  using record = std::remove_pointer_t<decltype(s.view.record(0))>;
  constexpr std::size_t h = history_of<record>;
  const int prev = (s.rank + s.size - 1) % s.size;
  auto* mine_rec = s.view.record(s.rank);
  const record* prev_rec = s.view.record(prev);
  std::uint64_t done = s.checked;
  while (done < s.seq) {
    const std::uint64_t seq = done + 1;
    const auto& e = prev_rec->calls[seq % h];
    const std::uint64_t published = detail::load_acquire(&e.seq);
    if (published > seq) {  // overwritten: too late to compare
      done = seq;
      continue;
    }
    call_words mine, theirs;
    if (published != seq || !read_words(prev_rec, seq, theirs)) break;  // not yet (or being written)
    if (read_words(mine_rec, seq, mine) && mine != theirs) {
      const call_desc a = call_desc::from(mine.signature, mine.count),
                      b = call_desc::from(theirs.signature, theirs.count);
      if (const call_field f = differing_field(a, b); f != call_field::none)
        return report_mismatch(s, prev, seq, a, b, f);
    }
    done = seq;
  }
  if (done != s.checked) {
    s.checked = done;
    detail::store_release(&mine_rec->check.checked, done);
  }
  return status::ok;
}

/// Puts the communicator in the error state, raises the abort word for every
/// rank, and throws the call's error with the cause spelled out.
template <class Transport>
[[noreturn]] COLLX_COLD void fail(state<Transport>& s, coll c, status st, const std::string& extra = {}) {
  std::string msg =
      std::string(name(c)) + " (rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) + "): ";
  if (st == status::aborted) {
    // A dead peer or a mismatch seen by another rank is reported as such here too.
    const abort_cause cause = read_abort(s.view.header());
    if (cause.why == status::peer_dead || cause.why == status::mismatch) st = cause.why;
    msg += describe(s, cause);
  } else if (st == status::mismatch && !extra.empty()) {
    msg += std::string(to_string(st)) + ": " + extra;  // a count header the schedule refused
  } else if (st == status::peer_dead || st == status::mismatch) {
    msg += s.watch_what;
  } else if (st == status::system_error && transport::last_peer_read_failure.rank >= 0) {
    const transport::peer_read_failure f = std::exchange(transport::last_peer_read_failure, {});
    msg += "reading rank " + std::to_string(f.rank) + "'s buffer (pid " + std::to_string(f.pid) +
           ") by cross-memory attach failed: " + std::strerror(f.err);
  } else if (st == status::timeout) {
    msg += "timed out after " + std::to_string(s.opt.timeout.count()) +
           " ms waiting for a peer (raise COLLX_TIMEOUT if the peers are merely slow)";
  } else {
    msg += to_string(st);
    if (!extra.empty()) msg += ": " + extra;
  }
  raise_abort(s, st, s.rank);
  // No rank of this process loads this call's buffers after it returns.
  if (const int q = wait_for_loaders(s); q >= 0)
    msg += "; rank " + std::to_string(q) + " of this process was still inside its call when the deadline " +
           "passed: do not free this call's buffers before that rank has returned";
  s.err = st;
  s.err_msg = msg;
  throw_error(st, msg);
}

/// Whether every rank has begun (and so published) a call of collective c
/// once any rank has finished it: each rank's result depends on every
/// rank's input (or, for barrier, on every rank's arrival).
constexpr bool finishes_after_every_rank_began(coll c) {
  return c == coll::all_reduce || c == coll::all_gather || c == coll::reduce_scatter ||
         c == coll::all_to_all || c == coll::barrier;
}

/// After a call: the calls not yet compared with the previous rank's are
/// compared where that rank has published them. Where it has not (it lags
/// behind: a broadcast root running ahead), the next comparisons wait a
/// quarter of the window instead of fetching its record at every call; the
/// window (begin_call) still has every call compared before this rank gets
/// call_history calls ahead of it, and the lagging rank compares its own
/// calls as it makes them. A call that finishes only after every rank began
/// it compares at once whatever the wait: the previous rank has published
/// every call up to it, so a mismatch of a call that ran ahead (roots that
/// differ) is found by the end of the next such call.
template <class Transport>
void end_call(state<Transport>& s, coll c) {
  if (c == coll::send_recv || !s.opt.check_calls || s.size == 1) return;
  if (s.seq < s.probe_at && !finishes_after_every_rank_began(c)) return;
  if (advance_checks(s) != status::ok) fail(s, c, status::mismatch);
  using record = std::remove_pointer_t<decltype(s.view.record(0))>;
  s.probe_at = s.checked == s.seq ? s.seq + 1 : s.seq + history_of<record> / 4;
}

/// Calls of each peer the periodic check compares: the ones a stalled call
/// can disagree with (the window compares every call with the previous rank's).
inline constexpr std::uint64_t watch_depth = 4;

/// The executor's periodic check (from slow waits only): up to 64 peers per
/// tick, rotating, are compared for mismatched calls and probed for death.
template <class Transport>
status watch_tick(const void* ctx) {
  auto& s = *static_cast<state<Transport>*>(const_cast<void*>(ctx));
  using record = std::remove_pointer_t<decltype(s.view.record(0))>;
  // A rank stuck in a wait still compares its calls, so a neighbour held by
  // the window (begin_call) goes on.
  if (s.opt.check_calls && s.size > 1)
    if (const status st = advance_checks(s); st != status::ok) return st;
  const int n = s.size < 65 ? s.size : 64;
  const auto me = static_cast<std::int32_t>(::getpid());
  for (int i = 0; i < n; ++i) {
    const int peer = s.watch_next;
    s.watch_next = (s.watch_next + 1) % s.size;
    if (peer == s.rank) continue;
    if (const status st = compare_with(s, peer, watch_depth); st != status::ok) return st;
    const record* rec = s.view.record(peer);
    detail::proc_identity id;
    id.pid = detail::load_acquire(&rec->pid);
    if (id.pid == 0 || id.pid == me) continue;  // not joined yet, or a thread rank of this process
    id.start_time = detail::load_relaxed(&rec->start_time);
    id.pid_ns = detail::load_relaxed(&rec->pid_ns);
    if (detail::probe(id, s.pid_ns) == detail::proc_state::dead) {
      s.watch_what = "rank " + std::to_string(peer) + " (pid " + std::to_string(id.pid) +
                     ") died: its process exited or was killed";
      raise_abort(s.view.header(), abort_cause{status::peer_dead, call_field::none, peer, -1});
      return status::peer_dead;
    }
  }
  return status::ok;
}

/// Waits until publishing call s.seq + 1 may overwrite the entry of call
/// `oldest` (= s.seq + 1 − call_history): (1) this rank has compared that
/// call with the previous rank's, and (2) the next rank, which compares its
/// calls with this rank's entries, has too. Both hold unless a rank runs
/// call_history calls ahead of a neighbour; the wait is then the executor's
/// from `make_exec()` (the communicator's host executor: deadline, abort
/// word, periodic check), and compares as the previous rank publishes. A
/// neighbour whose record is a proxy's copy (another host) is never waited
/// for: there calls are compared as long as the copy still holds them.
template <class Transport, class MakeExec>
void hold_call_window(state<Transport>& s, coll c, std::uint64_t oldest, const MakeExec& make_exec) {
  const int prev = (s.rank + s.size - 1) % s.size, next = (s.rank + 1) % s.size;
  const bool compare_prev = s.opt.check_calls && record_in_memory(s, prev);
  // Nothing to guard through memory: never look again.
  if (!record_in_memory(s, next)) s.next_checked_seen = ~std::uint64_t{0};
  const std::uint64_t* next_checked = &s.view.record(next)->check.checked;
  status found = status::ok;
  auto ready = [&] {
    if (compare_prev && s.checked < oldest) {
      if ((found = advance_checks(s)) != status::ok) return true;
      if (s.checked < oldest) return false;
    }
    if (s.next_checked_seen < oldest) {
      s.next_checked_seen = detail::load_acquire(next_checked);
      if (s.next_checked_seen < oldest) return false;
    }
    return true;
  };
  status st = ready() ? status::ok : make_exec().wait(ready);
  if (found != status::ok) st = found;
  if (st != status::ok) fail(s, c, st);
}

/// Publishes this call (after validation, before any byte moves), once the
/// call window allows it (hold_call_window; `make_exec` makes the executor
/// of its wait). A send/recv group involves only some ranks, so it is not
/// numbered (only marked: enter_group); the counts of an all_to_allv differ between ranks by design, so
/// only its other fields are compared.
template <class Transport, class MakeExec>
void begin_call(state<Transport>& s, coll c, std::size_t count, dtype dt, reduce_op op, int root,
                variant_choice v, bool in_place, const MakeExec& make_exec) {
  if (c == coll::send_recv) return enter_group(s);
  if (c == coll::all_to_allv) count = 0;
  auto* me = s.view.record(s.rank);
  // A rank that does not check lets its previous rank overwrite at will.
  if (s.seq == 0 && !s.opt.check_calls) detail::store_release(&me->check.checked, ~std::uint64_t{0});
  using record = std::remove_pointer_t<decltype(s.view.record(0))>;
  constexpr std::size_t h = history_of<record>;
  if (s.size > 1 && s.seq + 1 > h) {
    const std::uint64_t oldest = s.seq + 1 - h;
    if ((s.opt.check_calls && s.checked < oldest && record_in_memory(s, (s.rank + s.size - 1) % s.size)) ||
        s.next_checked_seen < oldest)
      hold_call_window(s, c, oldest, make_exec);
  }
  publish_call(me, ++s.seq, call_desc{c, dt, op, root, v.algo, v.proto, count, in_place});
}

}  // namespace collx::comm
