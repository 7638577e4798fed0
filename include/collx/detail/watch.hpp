// collx/detail/watch.hpp — what ranks publish about their calls, and the
// encoding of an abort's cause (host only).
//
// Every collective call gets a per-communicator sequence number. Before moving
// data a rank publishes (seq, signature, count) in its own rank_record (see
// transport/shm.hpp), seqlock style without fences (which ThreadSanitizer does
// not model): the entry's seq is invalidated, the fields stored with release,
// then seq stored with release. A peer loads seq, the fields with acquire, and
// seq again; a field from a newer call carries the invalidation with it, so a
// torn entry fails the second check and is never compared.
// Entries are kept for the last call_history calls, so a peer that finished a
// mismatched call early and moved on can still be compared.
//
// What this catches: ranks whose n-th collective calls differ in collective,
// count (not for all_to_allv, whose counts differ by design), dtype, op
// (reductions), root (broadcast/reduce), algorithm or protocol. send/recv
// groups involve only some ranks and are not numbered.
// What it cannot catch: different buffers or buffer contents, calls that
// agree in every published field but diverge in data-dependent ways, and a
// rank that issues fewer calls than the others (it looks like a slow rank
// and ends in the deadline).
//
// The abort cause is one 64-bit word so the first failure sets it atomically:
//   bits 0-7 status, 8-15 differing field, 16-39 rank+1, 40-63 other rank+1.
#pragma once

#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/dtype.hpp>
#include <collx/error.hpp>
#include <collx/proto/ids.hpp>
#include <collx/reduce_op.hpp>
#include <collx/transport/shm.hpp>

#include <cstdint>
#include <string>

namespace collx::detail {

/// The published fields of one call.
struct call_desc {
  coll c = coll::all_reduce;
  dtype dt = dtype::float32;
  reduce_op op = reduce_op::sum;
  int root = 0;
  algo_id algo = algo_id::ring;
  proto_id proto = proto_id::simple;
  std::uint64_t count = 0;

  /// Everything but the count in one word. Fields a collective ignores are
  /// zeroed so they cannot differ.
  std::uint64_t signature() const {
    const bool rooted = c == coll::broadcast || c == coll::reduce;
    const std::uint64_t o = is_reduction(c) ? static_cast<std::uint64_t>(op) : 0;
    const std::uint64_t r = rooted ? static_cast<std::uint32_t>(root) : 0;
    return static_cast<std::uint64_t>(c) | static_cast<std::uint64_t>(dt) << 8 | o << 16 |
           static_cast<std::uint64_t>(algo) << 24 | static_cast<std::uint64_t>(proto) << 32 |
           (r & 0xffffff) << 40;
  }
  static call_desc from(std::uint64_t sig, std::uint64_t count) {
    call_desc d;
    d.c = static_cast<coll>(sig & 0xff);
    d.dt = static_cast<dtype>(sig >> 8 & 0xff);
    d.op = static_cast<reduce_op>(sig >> 16 & 0xff);
    d.algo = static_cast<algo_id>(sig >> 24 & 0xff);
    d.proto = static_cast<proto_id>(sig >> 32 & 0xff);
    d.root = static_cast<int>(sig >> 40 & 0xffffff);
    d.count = count;
    return d;
  }

  std::string str() const {
    std::string s = std::string(name(c)) + "(count " + std::to_string(count) + ", " + name(dt);
    if (is_reduction(c)) s += std::string(", ") + name(op);
    if (c == coll::broadcast || c == coll::reduce) s += ", root " + std::to_string(root);
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
  if (a.signature() == b.signature()) return call_field::none;
  if (is_reduction(a.c) && a.op != b.op) return call_field::op;
  if (a.root != b.root) return call_field::root;
  if (a.algo != b.algo) return call_field::algorithm;
  return call_field::protocol;
}

/// Publishes call `seq` of the rank owning `rec`. Only that rank writes it.
inline void publish_call(transport::rank_record* rec, std::uint64_t seq, const call_desc& d) {
  auto& e = rec->calls[seq % transport::call_history];
  store_relaxed(&e.seq, std::uint64_t{0});  // invalid while the fields change
  store_release(&e.signature, d.signature());
  store_release(&e.count, d.count);
  store_release(&e.seq, seq);
  // Take the next call's line now: its stores then hit this core's cache
  // instead of waiting for a peer's copy to be invalidated, and under TSO
  // that wait would hold back the call's first data store too.
  prefetch_for_write(&rec->calls[(seq + 1) % transport::call_history]);
}

/// The peer's call number `seq`, if it has published it and not yet
/// overwritten it.
inline bool read_call(const transport::rank_record* rec, std::uint64_t seq, call_desc& out) {
  const auto& e = rec->calls[seq % transport::call_history];
  if (load_acquire(&e.seq) != seq) return false;
  const std::uint64_t sig = load_acquire(&e.signature), count = load_acquire(&e.count);
  if (load_relaxed(&e.seq) != seq) return false;  // ordered after the acquire loads
  out = call_desc::from(sig, count);
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
inline void raise_abort(transport::shm_header* h, const abort_cause& cause) {
  std::uint64_t expected = 0;
  compare_exchange(&h->abort_cause, expected, cause.pack());  // loses quietly to an earlier cause
  std::uint32_t zero = 0;
  compare_exchange(&h->abort, zero, 1u);  // after the cause: whoever sees the word sees a cause
}

/// The cause, or nullopt-like {ok} when the word is not raised.
inline abort_cause read_abort(const transport::shm_header* h) {
  if (load_acquire(&h->abort) == 0) return {};
  return abort_cause::unpack(load_acquire(&h->abort_cause));
}

}  // namespace collx::detail
