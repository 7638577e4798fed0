// collx/comm/dispatch.hpp — from a call's requested variant to the schedule
// that runs on this rank: resolve (and remember) the variant, visit the
// compiled variants that serve the collective, and launch the schedule on the
// executor. One path for every entry point: collectives, all_to_allv and
// send/recv groups.
//
// Compile-time shape: dispatch<Transport, Exec, C, Elem> instantiates only
// algorithms that implement C and protocols composable with them on Transport
// (visit_serving below, on the type lists of variants.hpp): each algorithm's
// schedule once, over proto::runtime<its serving protocols> (proto/runtime.hpp),
// whose engine runs the protocol resolved for the call; each protocol's steps
// are compiled once per primitive shape. An algorithm without a protocol axis
// (peer memory) runs under Simple only, also when composed explicitly with
// another protocol (launch). A typed reduction
// passes its element type: one schedule width (word<sizeof(T)>) and the
// reduction kernels of T alone. The type-erased entry points pass any_dtype:
// four widths and the kernels of every dtype, chosen at run time. Collectives
// without a reduction move bytes: one instantiation whatever the element.
//
// The automatic choice prices variants with the profile of tune/active.hpp
// (loaded once per process; a bad profile fails the call before any byte
// moves, naming the file).
//
// Memory ordering: none of its own; the schedule's primitives publish and
// acquire through the transport (proto/, transport/). Errors: status::
// not_supported when no compiled variant serves the call (naming it),
// status::invalid_argument when the options' determinism refuses the named
// algorithm, and every failure of the schedule through comm::fail (watch.hpp),
// which leaves the communicator in the error state and aborts the peers.
#pragma once

#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/comm/contention.hpp>
#include <collx/comm/measured_choice.hpp>
#include <collx/comm/state.hpp>
#include <collx/comm/watch.hpp>
#include <collx/composition.hpp>
#include <collx/detail/erased_reducer.hpp>
#include <collx/dtype.hpp>
#include <collx/error.hpp>
#include <collx/exec/host.hpp>
#include <collx/prims.hpp>
#include <collx/proto/ids.hpp>
#include <collx/proto/list.hpp>
#include <collx/proto/runtime.hpp>
#include <collx/reduce_op.hpp>
#include <collx/selection.hpp>
#include <collx/tune/active.hpp>
#include <collx/tune/model.hpp>
#include <collx/tune/select.hpp>
#include <collx/variants.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <type_traits>

namespace collx::comm {

/// A call's scalar arguments as the caller gave them (NCCL's conventions).
struct call_args {
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  dtype dt = dtype::uint8;
  reduce_op op = reduce_op::sum;
  int root = 0;
};

/// Schedule arguments beyond schedule_args' scalars (all_to_allv, send_recv).
struct extra_args {
  const peer_layout* layout = nullptr;
  const p2p_plan* plan = nullptr;
  mismatch_report* report = nullptr;
};

/// The element type of a type-erased call: chosen at run time from the dtype.
using any_dtype = void;

/// The erased reducer of (T, op): the kernel tables of T only, where
/// detail::make_erased_reducer compiles those of every dtype.
template <class T>
detail::erased_reducer erased_reducer_for(reduce_op op, std::uint32_t nranks) {
  detail::erased_reducer r;
  r.nranks = nranks;
  visit_reduce_op(op, [&]<reduce_op Op>(std::integral_constant<reduce_op, Op>) {
    if constexpr (!is_bitwise(Op) || std::is_integral_v<T>)
      r.fns = detail::erased_reducer::table_for<T, Op>();
  });
  return r;
}

/// Whether variant <A, P> may run on Transport with Exec: the composition
/// gate (composition.hpp), the same that explicit composition checks.
template <class A, class P, class Transport, class Exec>
inline constexpr bool serves = composable<A, P, Transport, Exec>;

namespace dispatch_detail {
template <class A, class Transport, class Exec>
struct serving_of {
  template <class P>
  using keep = std::bool_constant<serves<A, P, Transport, Exec>>;
};
/// The protocols with which A serves on Transport for Exec, in list order.
template <class A, class Transport, class Exec>
using serving_protocols = filter_t<serving_of<A, Transport, Exec>::template keep, protocols_of<A>>;

/// The protocol type a launch of A uses: the one serving protocol, or
/// proto::runtime over all of them.
template <class L>
struct launch_protocol;
template <class P>
struct launch_protocol<type_list<P>> {
  using type = P;
};
template <class... Ps>
struct launch_protocol<type_list<Ps...>> {
  using type = proto::runtime<Ps...>;
};

template <class Transport, class Exec, class A, class F>
bool visit_protocols(proto_id p, F& f) {
  using serving = serving_protocols<A, Transport, Exec>;
  if constexpr (serving::size == 0) {
    return false;
  } else {
    const bool served = [&]<class... Ps>(type_list<Ps...>) { return ((Ps::id == p) || ...); }(serving{});
    if (!served) return false;
    f.template operator()<A, typename launch_protocol<serving>::type>(p);
    return true;
  }
}
}  // namespace dispatch_detail

/// Calls f.template operator()<Algo, Proto>(p) for the compiled variant named
/// (a, p) if it serves collective C on Transport; returns whether one did.
/// Proto is p's protocol, or proto::runtime over every protocol that serves
/// Algo (one schedule instantiation for all of them), which runs p.
/// Only algorithms implementing C are instantiated (visit_variant in
/// variants.hpp instantiates every algorithm for a collective known at run time).
template <class Transport, class Exec, coll C, class F>
bool visit_serving(algo_id a, proto_id p, F&& f) {
  return [&]<class... As>(type_list<As...>) {
    return ([&] {
      if constexpr (As::implements(C))
        return As::id == a && dispatch_detail::visit_protocols<Transport, Exec, As>(p, f);
      else return false;
    }() || ...);
  }(algorithms{});
}

template <class Transport>
[[noreturn]] void no_variant(coll c, variant_choice v) {
  throw_error(status::not_supported, std::string(name(c)) + ": no compiled variant " + name(v.algo) + "/" +
                                         name(v.proto) + " serves this collective on the " + Transport::name +
                                         " transport");
}

/// The profile a communicator's automatic choice prices with: the one this
/// process loaded (tune/active.hpp: COLLX_TUNE_FILE, the default location,
/// or the transport's preset), placed on the communicator's hosts where its
/// view knows them (node_ranks: hosts of equal size, numbered host by host)
/// and the profile describes one node: then ranks_per_node is the host's
/// rank count and, where the profile has no inter link, the one of
/// tune::cpu_nodes_tcp (TCP measured over veth), so that schedules are
/// priced by what crosses hosts (bench/results/hier_allreduce_2x2.md).
template <class Transport>
tune::profile model_for(const state<Transport>& s) {
  tune::profile m = tune::profile_for(s.opt.tune_file, tune::preset_for<Transport>).model;
  if constexpr (requires { s.view.node_ranks; }) {
    if (s.view.node_ranks > 0 && m.ranks_per_node == 0) {
      m.ranks_per_node = s.view.node_ranks;
      if (!(m.inter.gbps > 0)) m.inter = tune::cpu_nodes_tcp.inter;
    }
  }
  return m;
}

/// The call's variant with what the options fix filled in: the call's choice,
/// else the communicator's option (ignored where its algorithm does not
/// implement c); the protocol of an algorithm without a protocol axis is
/// Simple (variants.hpp). Throws where the options' determinism refuses the
/// algorithm named.
template <class Transport>
variant_choice requested_variant(const state<Transport>& s, coll c, variant_choice v) {
  if (v.algo == algo_id::automatic && implements(s.opt.variant.algo, c)) v.algo = s.opt.variant.algo;
  if (v.proto == proto_id::automatic) v.proto = s.opt.variant.proto;
  if (v.algo != algo_id::automatic) v.proto = protocol_of_id(v.algo, v.proto);
  if (s.opt.deterministic && c == coll::all_reduce && v.algo != algo_id::automatic &&
      !algo_is_deterministic(v.algo))
    throw_error(status::invalid_argument, std::string(name(c)) + ": algorithm " + name(v.algo) +
                                              " does not give deterministic results, which the "
                                              "communicator's options require (COLLX_DETERMINISTIC)");
  return v;
}

inline bool is_automatic(variant_choice v) {
  return v.algo == algo_id::automatic || v.proto == proto_id::automatic;
}

/// Fails a call for which no compiled variant is allowed (v as requested).
template <class Transport>
[[noreturn]] void nothing_allowed(const state<Transport>& s, coll c, variant_choice v) {
  throw_error(status::not_supported,
              std::string(name(c)) + ": no compiled variant" +
                  (v.algo != algo_id::automatic ? std::string(" of ") + name(v.algo) : std::string()) +
                  " allowed by COLLX_ALGO/COLLX_PROTO" +
                  (s.opt.deterministic ? " with deterministic results" : "") +
                  " serves this collective on the " + Transport::name + " transport");
}

/// Fills in `automatic` (requested_variant, then the automatic choice among
/// compiled variants allowed by COLLX_ALGO/COLLX_PROTO, and deterministic
/// where the options ask for it): with a problem the fastest
/// (tune/select.hpp), without one the first allowed.
template <class Transport, class Exec = exec::host>
variant_choice resolve(const state<Transport>& s, coll c, variant_choice v,
                       const tune::problem* q = nullptr) {
  v = requested_variant(s, c, v);
  if (is_automatic(v)) {
    const tune::request r{v, s.opt.allowed, s.opt.deterministic};
    // The same constexpr argmin as a compile-time pick, over the profile this
    // process loaded (tune/active.hpp: COLLX_TUNE_FILE, the default location,
    // or the transport's preset).
    const variant_choice chosen = q != nullptr ? tune::fastest<Transport, Exec>(model_for(s), *q, r)
                                               : tune::first_allowed<Transport, Exec>(c, r);
    if (is_automatic(chosen)) nothing_allowed(s, c, v);
    v = chosen;
  }
  return v;
}

/// A call's size as the model counts it (nccl-tests' bytes, equal on every
/// rank); 0 for all_to_allv and send/recv, whose sizes differ per rank.
template <coll C, class Transport>
double model_bytes(const state<Transport>& s, const call_args& a) {
  if constexpr (C == coll::all_to_allv || C == coll::send_recv) {
    return 0;
  } else {
    const double per_rank = double(a.count) * double(size_of(a.dt));
    constexpr bool whole = C == coll::all_reduce || C == coll::broadcast || C == coll::reduce;
    return whole ? per_rank : per_rank * s.size;
  }
}

/// The registered buffer each rank stages peer-memory schedules through (0:
/// the view has none, or does not say).
template <class View>
double peer_buffer_bytes_of(const View& v) {
  if constexpr (requires { v.peer_buffer_bytes(); }) return double(v.peer_buffer_bytes());
  else return 0;
}

/// Whether some peer's steps reach this rank whole through a proxy
/// (tune::problem::whole_steps and the granules): not where every peer is a
/// host mate whose lines land in this rank's memory (a network communicator
/// on one host). The same on every rank: the ranks of a host share memory
/// all or none (net.hpp agrees it per host), so when one rank has only host
/// mates, so has every other.
template <class Transport>
bool steps_arrive_whole(const state<Transport>& s) {
  if constexpr (transport_offers<Transport>::whole_steps && requires { s.view.whole_steps_from(0); }) {
    for (int q = 0; q < s.size; ++q)
      if (q != s.rank && s.view.whole_steps_from(q)) return true;
  }
  return false;
}

/// Whether the automatic choice prices the call as in place
/// (tune::problem::in_place): all_gather whose send is this rank's block of
/// recv. Per rank: a rank that differs may choose differently, which the call
/// check reports (comm/watch.hpp).
template <coll C, class Transport>
bool priced_in_place(const state<Transport>& s, const call_args& a) {
  if constexpr (C != coll::all_gather) {
    return (void)s, (void)a, false;
  } else {
    const std::size_t block = a.count * size_of(a.dt);
    return a.count > 0 && a.send == static_cast<const unsigned char*>(a.recv) + std::size_t(s.rank) * block;
  }
}

/// Whether the automatic choice prices single-copy reads as loads
/// (tune::problem::mapped_peers): every buffer this rank's part of the call
/// uses lies in symmetric memory every peer mapped (communicator::alloc_symmetric),
/// or every rank is a thread of this process and loads peers' buffers anyway
/// (the same on every rank; such loads are fenced against aborts and
/// mismatched counts: comm/watch.hpp, shm_view::may_load_peers). Otherwise
/// per rank, like priced_in_place: ranks that differ may choose differently,
/// which the call check reports.
template <coll C, class Transport>
bool priced_mapped(const state<Transport>& s, const call_args& a) {
  if (s.peers_in_process) return true;  // thread ranks load every peer's buffer
  if (s.symmetric == nullptr || !s.symmetric->has_own()) return false;
  const std::size_t e = size_of(a.dt), n = a.count * e, all = n * static_cast<std::size_t>(s.size);
  auto in = [&](const void* p, std::size_t bytes) { return s.symmetric->mapped_by_peers(p, bytes); };
  const bool root = a.root == s.rank;
  switch (C) {
    case coll::all_reduce: return in(a.send, n) && in(a.recv, n);
    case coll::all_gather: return in(a.send, n) && in(a.recv, all);
    case coll::reduce_scatter: return in(a.send, all) && in(a.recv, n);
    case coll::all_to_all: return in(a.send, all) && in(a.recv, all);
    case coll::broadcast: return (!root || in(a.send, n)) && in(a.recv, n);  // only the root's send is read
    case coll::reduce: return in(a.send, n) && (!root || in(a.recv, n));  // only the root's recv is written
    default: return false;
  }
}

/// The model's problem for call a of collective C (one size on every rank).
template <coll C, class Transport>
tune::problem problem_for(const state<Transport>& s, const measured_key& k) {
  // The FIFO geometry the schedules see, so that a cost that depends on it
  // (direct's one-shot when the vector fits one chunk) decides as they do.
  const bool whole = steps_arrive_whole(s);
  const auto chunks = tune::chunk_table_of([&](int ch) { return s.view.fifo_slots(ch); },
                                           [&](int ch) { return s.view.fifo_slot_bytes(ch); });
  return tune::problem{C,
                       s.size,
                       k.bytes,
                       s.size > 1 && k.bytes >= double(s.view.user_buffer_min_bytes()),
                       s.oversubscribed,
                       chunks,
                       s.cpu_share,
                       k.contention,
                       tune::scheduler_slice_us(s.host_cpus),
                       peer_buffer_bytes_of(s.view),
                       tune::granule_table_of([&](int ch) { return s.view.fifo_slot_bytes(ch); }, whole),
                       whole,
                       k.in_place,
                       k.mapped};
}

/// A call's resolved variant and, while its size class is being measured
/// (comm/measured_choice.hpp), the class and the turn this call is.
struct resolved_call {
  variant_choice v{};
  measured_class* exploring = nullptr;
  measured_class::turn turn{};
};

/// The measured choice for a memo miss of class k (v as the call gave it):
/// the class's choice once agreed, else the candidate whose turn this call is.
template <class Transport, class Exec, coll C>
resolved_call resolve_measured(state<Transport>& s, variant_choice v, const measured_key& k) {
  measured_class* m = s.measured.find(k);
  if (m == nullptr) {
    const variant_choice req = requested_variant(s, C, v);
    const tune::request r{req, s.opt.allowed, s.opt.deterministic};
    const auto best =
        tune::ranked<measured_class::max_candidates, Transport, Exec>(model_for(s), problem_for<C>(s, k), r);
    if (best.size == 0) nothing_allowed(s, C, req);
    m = &s.measured.add(k);
    m->candidates = static_cast<std::uint32_t>(std::min<std::size_t>(best.size, s.opt.tune_online));
    m->timed = measured_class::timed_per_block(k.bytes);
    std::copy(best.variant, best.variant + m->candidates, m->candidate);
    if (m->candidates == 1) m->decide(best.us);  // nothing to compare
  }
  if (m->decided) return {m->chosen};
  const measured_class::turn t = m->next_turn();
  return {m->candidate[t.candidate], m, t};
}

/// resolve() with the model's problem for collectives that have one size on
/// every rank, remembered per collective: the argmin costs more than a small
/// call, and it depends only on the requested variant, the size and the
/// agreed contention (comm/contention.hpp). With the measured choice on
/// (comm_options::tune_online), an automatic call whose size class is still
/// being measured returns the class and its turn instead of remembering.
template <class Transport, class Exec, coll C>
resolved_call resolve_remembered(state<Transport>& s, variant_choice v, const call_args& a) {
  if constexpr (C == coll::all_to_allv || C == coll::send_recv) {
    return {resolve<Transport, Exec>(s, C, v)};  // sizes differ per rank: no problem for the model
  } else {
    const measured_key k{
        C, v, model_bytes<C>(s, a), s.contention.share, priced_in_place<C>(s, a), priced_mapped<C>(s, a)};
    auto& memo = s.choice_memo[static_cast<int>(C)];
    if (memo.valid && memo.bytes == k.bytes && memo.contention == k.contention &&
        memo.in_place == k.in_place && memo.mapped == k.mapped && memo.requested.algo == v.algo &&
        memo.requested.proto == v.proto)
      return {memo.chosen};
    memo.valid = false;
    memo.mapped = k.mapped;  // the mismatch check's message reads it (comm/watch.hpp)
    resolved_call out;
    if (s.opt.tune_online >= 2 && !s.measured.agreeing && is_automatic(requested_variant(s, C, v))) {
      out = resolve_measured<Transport, Exec, C>(s, v, k);
      if (out.exploring != nullptr) return out;  // not remembered: the next call may run another
    } else {
      const tune::problem q = problem_for<C>(s, k);
      out.v = resolve<Transport, Exec>(s, C, v, &q);
    }
    memo.requested = v;
    memo.chosen = out.v;
    memo.bytes = k.bytes;
    memo.contention = k.contention;
    memo.in_place = k.in_place;
    memo.mapped = k.mapped;
    memo.valid = true;
    return out;
  }
}

/// How a communicator's state becomes the executor of one call. The primary
/// template fails loudly: every executor a communicator runs on says here how
/// its waits reach the abort word, deadline and watch.
template <class Exec>
struct executor_for {
  static_assert(sizeof(Exec) == 0,
                "collx: no executor_for<Exec> specialization: how does this executor wait?");
};

template <>
struct executor_for<exec::host> {
  template <class Transport>
  static exec::host make(state<Transport>& s) {
    exec::host ex;
    ex.abort_word = s.view.abort_word();
    ex.deadline_ns = 0;  // from the first slow wait on
    ex.timeout_ns = static_cast<std::uint64_t>(s.opt.timeout.count()) * 1000000ull;
    ex.spin_ns = s.spin_ns;
    // Under contention (agreed, comm/contention.hpp) a wait that yields gives
    // the rest of its time slice to the task that contends for the CPU and
    // comes back a whole slice later, and the peer it waited for has usually
    // been descheduled by then: each synchronisation costs a slice instead
    // of what is left of the peer's off time. Spinning past a slice instead
    // leaves it to the scheduler to take the CPU when the slice is spent.
    // Not where the options chose the spin (COLLX_SPIN_US), nor when the
    // ranks outnumber the CPUs or a proxy thread moves the bytes (there the
    // peer or the proxy needs this CPU).
    if (s.contention.share > 0 && s.opt.spin.count() == 0 && !s.oversubscribed && !Transport::needs_proxy)
      ex.spin_ns = static_cast<std::uint64_t>(2 * tune::scheduler_slice_us(s.host_cpus) * 1000);
    // Sleep on the doorbell once spinning and a few yields are over when the
    // ranks outnumber the CPUs, and always on a proxied transport: there a
    // yielding rank would take the CPU its own proxy needs to move the bytes
    // it waits for (the proxy rings the doorbell when they arrive).
    if (s.oversubscribed || Transport::needs_proxy) {
      ex.bells = s.view.doorbell(0);
      ex.self = s.rank;
      ex.sleep = s.opt.sleep;
    }
    ex.check = &watch_tick<Transport>;
    ex.check_ctx = &s;
    if (s.opt.check_calls && s.size > 1 && s.seq >= s.probe_at) {
      auto* prev = s.view.record((s.rank + s.size - 1) % s.size);
      ex.warm = &prev->calls[s.seq % std::size(prev->calls)].seq;
    }
    return ex;
  }
};

template <class Algo, class Proto, coll C, class Transport, class Exec, class T, class Red>
status run_schedule(state<Transport>& s, int channel, const Exec& ex, const Red& red, const T* send, T* recv,
                    std::size_t count, int root, const extra_args& extra) {
  prims<Proto, Exec, typename Transport::view, T, Red> p(ex, s.view, s.rank, red, channel);
  schedule_args<T> a{send, recv, count, root, s.rank, s.size, extra.layout, extra.plan, extra.report};
  if constexpr (requires { s.view.node_ranks; }) a.node_ranks = s.view.node_ranks;
  if constexpr ((C == coll::all_to_allv || C == coll::send_recv) &&
                requires { s.view.user_buffer_min_bytes(); })
    a.read_in_place_bytes =
        stream_read_in_place_bytes(s.view.user_buffer_min_bytes(), s.contention.share > 0);
  return Algo::template run<C>(p, a);
}

inline std::string no_detail() { return {}; }

/// Runs <Algo, protocol `pid`> with primitives on Proto: pid's protocol, or a
/// proto::runtime list that contains it.
template <class Algo, class Proto, coll C, class Elem, class Transport, class Exec, class Detail>
void launch_variant(state<Transport>& s, proto_id pid, const call_args& a, const extra_args& extra,
                    Detail mismatch_detail) {
  s.last = variant_choice{Algo::id, pid};
  begin_call(s, C, a.count, a.dt, a.op, a.root, s.last, priced_in_place<C>(s, a),
             [&] { return executor_for<exec::host>::make(s); });
  const Exec ex = executor_for<Exec>::make(s);
  const int channel = proto::channel_of_id(pid);
  status st = status::ok;
  if constexpr (is_reduction(C)) {
    // One schedule per element size; the (dtype, op) kernels sit behind the erased reducer.
    auto go = [&]<std::size_t N>(const detail::erased_reducer& red) {
      using word = detail::word<N>;
      st = run_schedule<Algo, Proto, C>(s, channel, ex, red, static_cast<const word*>(a.send),
                                        static_cast<word*>(a.recv), a.count, a.root, extra);
    };
    const auto nranks = static_cast<std::uint32_t>(s.size);
    if constexpr (!std::is_void_v<Elem>) {
      go.template operator()<sizeof(Elem)>(erased_reducer_for<dtype_type<dtype_of<Elem>>>(a.op, nranks));
    } else {
      const auto red = detail::make_erased_reducer(a.dt, a.op, nranks);
      switch (size_of(a.dt)) {
        case 1: go.template operator()<1>(red); break;
        case 2: go.template operator()<2>(red); break;
        case 4: go.template operator()<4>(red); break;
        default: go.template operator()<8>(red); break;
      }
    }
  } else {
    // Data movement only: one instantiation for every element size.
    const std::size_t bytes = a.count * size_of(a.dt);
    reducer<std::uint8_t, reduce_op::sum> red{};
    st = run_schedule<Algo, Proto, C>(s, channel, ex, red, static_cast<const std::uint8_t*>(a.send),
                                      static_cast<std::uint8_t*>(a.recv), bytes, a.root, extra);
  }
  leave_call(s);
  if (st == status::mismatch) {
    const std::string detail = mismatch_detail();
    // Refused before loading a peer's buffers of other bytes (shm_view::
    // may_load_peers): the call records, all published by now, name the field.
    if (detail.empty())
      for (int q = 0; q < s.size; ++q)
        if (q != s.rank && compare_with(s, q, 1) != status::ok) break;
    fail(s, C, st, detail);
  }
  if (st != status::ok) fail(s, C, st);
  end_call(s, C);
}

/// Runs the schedule of <Algo, Proto, C> on this rank for elements of type
/// Elem (any_dtype: a.dt's, chosen at run time). `mismatch_detail` explains a
/// status::mismatch from what the schedule put in extra.report.
template <class Algo, class Proto, coll C, class Elem, class Transport, class Exec,
          class Detail = decltype(&no_detail)>
void launch(state<Transport>& s, const call_args& a, const extra_args& extra = {},
            Detail mismatch_detail = &no_detail) {
  // Where Algo has no protocol axis, explicit composition may still name any
  // protocol: the variant that runs (and is reported) is the one with Simple.
  using P = protocol_of<Algo, Proto>;
  launch_variant<Algo, P, C, Elem, Transport, Exec>(s, P::id, a, extra, mismatch_detail);
}

/// Launches the compiled variant v names, or fails with not_supported.
template <class Transport, class Exec, coll C, class Elem, class Detail>
void launch_resolved(state<Transport>& s, variant_choice v, const call_args& a, const extra_args& extra,
                     Detail mismatch_detail) {
  const bool found = visit_serving<Transport, Exec, C>(v.algo, v.proto, [&]<class A, class P>(proto_id p) {
    launch_variant<A, P, C, Elem, Transport, Exec>(s, p, a, extra, mismatch_detail);
  });
  if (!found) no_variant<Transport>(C, v);
}

template <class Transport, class Exec, coll C, class Elem, class Detail = decltype(&no_detail)>
void dispatch(state<Transport>& s, variant_choice v, const call_args& a, const extra_args& extra = {},
              Detail mismatch_detail = &no_detail);

/// The end of a measured size class's exploration (comm/measured_choice.hpp):
/// the ranks all_reduce (max) each candidate's median, and every rank keeps
/// the same argmin. One numbered all_reduce of n doubles on every rank,
/// priced by the model (not itself measured).
template <class Transport, class Exec>
void agree_measured(state<Transport>& s, coll c, measured_class& m, double bytes) {
  double slowest[measured_class::max_candidates];
  m.medians(slowest);
  const variant_choice ran = s.last;
  s.measured.agreeing = true;
  try {
    const call_args a{slowest, slowest, m.candidates, dtype::float64, reduce_op::max, 0};
    dispatch<Transport, Exec, coll::all_reduce, double>(s, variant_choice{}, a);
  } catch (...) {
    s.measured.agreeing = false;
    throw;
  }
  s.measured.agreeing = false;
  s.last = ran;  // last_variant() names the user's call
  const variant_choice chosen = m.decide(slowest);
  if (s.rank == 0 && contention_detail::debug_enabled()) {
    std::string others;
    for (std::uint32_t i = 0; i < m.candidates; ++i) {
      char t[96];
      std::snprintf(t, sizeof t, "%s%s/%s %.2f", i ? ", " : "", name(m.candidate[i].algo),
                    name(m.candidate[i].proto), slowest[i]);
      others += t;
    }
    // The class's bytes: [2^(k-1), 2^k), or 0 for class 0.
    const std::uint32_t k = measured_key::size_class(bytes);
    const double lo = k == 0 ? 0 : double(std::uint64_t{1} << (k - 1)), hi = k == 0 ? 0 : 2 * lo - 1;
    std::fprintf(
        stderr,
        "collx: measured choice: %s of %.0f-%.0f B on %d ranks: %s/%s (µs, slowest rank's median: %s)\n",
        name(c), lo, hi, s.size, name(chosen.algo), name(chosen.proto), others.c_str());
  }
}

/// The one dispatch path: resolve `v` (remembered per size where the call has
/// one, or measured: comm/measured_choice.hpp), then launch the compiled
/// variant it names, or fail with not_supported.
template <class Transport, class Exec, coll C, class Elem, class Detail>
void dispatch(state<Transport>& s, variant_choice v, const call_args& a, const extra_args& extra,
              Detail mismatch_detail) {
  // Where a decision point falls, the ranks agree on the contention the
  // choice prices (a wait at most once per point; nothing on other calls).
  if constexpr (C != coll::send_recv) contention_point(s, C, [&] { return executor_for<Exec>::make(s); });
  const resolved_call r = resolve_remembered<Transport, Exec, C>(s, v, a);
  if (r.exploring == nullptr)
    return launch_resolved<Transport, Exec, C, Elem>(s, r.v, a, extra, mismatch_detail);
  const auto t0 = std::chrono::steady_clock::now();
  launch_resolved<Transport, Exec, C, Elem>(s, r.v, a, extra, mismatch_detail);
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (r.turn.timed && s.opt.tune_online_time != nullptr) us = s.opt.tune_online_time(s.rank, r.v, us);
  if (r.exploring->record(r.turn, us))
    agree_measured<Transport, Exec>(s, C, *r.exploring, model_bytes<C>(s, a));
}

}  // namespace collx::comm
