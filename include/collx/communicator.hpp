// collx/communicator.hpp — the host API: a rank's handle on a group of ranks.
//
// A communicator knows its rank and size, owns (a share of) the shared-memory
// segment holding its connections, and runs collectives on host buffers with
// NCCL's argument conventions:
//
//   all_reduce(send, recv, count, dtype, op)        in place: send == recv
//   all_gather(send, recv, sendcount, dtype)        in place: send == recv + rank·sendcount
//   reduce_scatter(send, recv, recvcount, dtype, op) in place: recv == send + rank·recvcount
//   broadcast(send, recv, count, dtype, root)       send read on root only; in place: send == recv
//   reduce(send, recv, count, dtype, op, root)      recv written on root only
//   all_to_all(send, recv, count, dtype)            block j of send (count elements at j·count)
//                                                   goes to rank j; block j of recv comes from j
//   all_to_allv(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype)
//                                                   per-peer counts and displacements in elements
//   barrier()                                       returns once every rank has entered it
//   send(buf, count, dtype, peer) / recv(buf, count, dtype, peer)   point to point
//   group_start() … group_end()                     a group of sends and receives
//
// Every collective is called by all ranks in the same order with matching
// arguments. Calls block until this rank's part is done. Arguments are checked
// before any byte moves (collx::error with status::invalid_argument naming the
// argument). A failure while moving data (timeout, abort) raises the shared
// abort word so every rank's pending call fails promptly; the communicator then
// stays in the error state (error() != ok) and later calls fail at once.
//
// all_to_all and all_to_allv are out of place only (as NCCL's): send and recv
// blocks must not overlap at all. In all_to_allv any count may be 0; the recv
// blocks must not overlap each other; send blocks may. recv_counts[j] on rank i
// must equal send_counts[i] on rank j: every block travels with a count header,
// and a disagreement fails the call on the receiving rank with status::mismatch
// naming both counts instead of corrupting memory; its peers fail with
// status::aborted, in this call or, where every block they received agreed
// and they finished it (short blocks ride in their headers), in their next.
// Counts may also be given as int or int64 arrays, where negative values are
// rejected; the std::span overloads also check that every block lies inside
// the buffer and that the count arrays hold P entries.
//
// Single copy in all_to_allv and send/recv: where peers' memory is readable
// (single_copy_enabled()), a block or message to another rank that is long
// enough (stream_read_in_place_bytes in collx/coll.hpp: 8 times
// single_copy_min_bytes() on a quiet machine, the threshold itself
// when the agreed contention share is above 0) is read by its receiver
// straight from the sender's buffer (thread ranks: a load; process ranks:
// process_vm_readv), one copy instead of two through shared memory. The
// sender's call returns only once every such receiver has said it read, so
// its buffers are never read after it returned.
//
// Point to point: send and recv between group_start() and group_end() are
// queued (buffers must stay valid until group_end) and run together at
// group_end, which returns once all of this rank's transfers are done. Any set
// of transfers completes regardless of the order they were issued in — every
// rank sending to its right and receiving from its left, arbitrary pairings,
// messages to self. Messages between two ranks match in issue order and must
// agree in size (bytes), and both sides must agree on how many messages the
// group carries between them: a disagreement fails with status::mismatch on
// the receiver. A send or recv outside a group is a group of one, so two ranks
// that exchange must use a group (or the first blocks until its deadline once
// the message is larger than the connection's FIFO). Groups nest; collectives
// may not be called inside a group. Only the ranks named by the transfers take
// part; the others need not call anything.
//
// Reliability (see also comm/watch.hpp): a wait that has yielded the CPU
// for a while checks, every ~50 ms, that the peer processes still run (pid +
// start time published at join) and that the peers' calls with the same
// sequence number match this rank's; each call also compares itself with the
// previous rank's call when it ends. A dead peer fails every surviving rank
// with status::peer_dead naming it, a mismatch with status::mismatch naming
// both ranks and the differing field; a rank that already returned from the
// mismatched call fails at its next call. Different buffers, or calls that
// match in collective, count, dtype, op, root and variant but diverge in what
// they mean, cannot be detected.
//
// Thread-safety: one communicator object is used by one thread at a time;
// abort() may be called from any thread. Creation: create_thread_group (P
// thread ranks of this process) here; process ranks through collx/process.hpp:
// collx::init_rank (every rank passes the unique id that one process got from
// collx::get_unique_id()) or collx::from_env (the environment of collxrun,
// torchrun, Open MPI, PMI or Slurm). Process ranks must share one host for now.
//
// Layout: this facade holds creation, the API and its typed overloads; the
// work is in comm/ (state, validate, p2p_group, dispatch, watch). The class is
// basic_communicator<Transport, Exec>; `communicator` is its host/shm instance.
// Compile time: a typed call instantiates only its collective's algorithms at
// its element width; with COLLX_SEPARATE_COMPILATION defined (CMake target
// collx::compiled), the host/shm instance is compiled once in
// src/communicator.cpp and typed calls forward to its type-erased entry points.
#pragma once

#include <collx/bootstrap/fd_exchange.hpp>
#include <collx/coll.hpp>
#include <collx/comm/dispatch.hpp>
#include <collx/comm/p2p_group.hpp>
#include <collx/comm/state.hpp>
#include <collx/comm/validate.hpp>
#include <collx/comm/watch.hpp>
#include <collx/dtype.hpp>
#include <collx/error.hpp>
#include <collx/exec/host.hpp>
#include <collx/options.hpp>
#include <collx/reduce_op.hpp>
#include <collx/symmetric_buffer.hpp>
#include <collx/transport/shm.hpp>
#include <collx/transport/shm_join.hpp>
#include <collx/transport/shm_segment.hpp>
#include <collx/variants.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace collx {

namespace comm {
struct access;      // collx/process.hpp's door to the private creation members
struct net_access;  // collx/net.hpp's (socket transport)
}  // namespace comm

/// A rank's handle on a group of ranks whose connections live in Transport's
/// memory and whose waits run on Exec. Generic parts: the API, validation,
/// dispatch (prims<Proto, Exec, Transport::view, …>, variants filtered by
/// composability on Transport), the watch. Still shm-specific: creation (the
/// segment, its layout from comm_options, publish_identity) and the records
/// and abort word the watch reads through Transport::view.
template <class Transport, class Exec>
class basic_communicator {
 public:
  using transport_type = Transport;
  using executor_type = Exec;

  basic_communicator() = default;

  /// P communicators over one anonymous shared mapping, one per thread rank
  /// (shm only: thread ranks share the process's memory).
  static std::vector<basic_communicator> create_thread_group(
      int nranks,
      const comm_options& opt = comm_options::from_env()) requires std::same_as<Transport, transport::shm> {
    require(nranks >= 1 && nranks <= 4096, "create_thread_group",
            "nranks must be in [1, 4096], got " + std::to_string(nranks));
    opt.validate();
    auto seg = transport::shm_segment::create_anonymous(layout_for(nranks, opt));
    const transport::shm_view view = seg->view();
    if (opt.step_origin != 0) view.reset_counters(opt.step_origin);
    // Thread ranks load each other's buffers directly: no probe needed.
    view.header()->single_copy_min = opt.single_copy_min_for(true);
    view.header()->single_copy_denied = opt.single_copy ? 0 : 1;
    std::vector<basic_communicator> comms;
    comms.reserve(static_cast<std::size_t>(nranks));
    for (int r = 0; r < nranks; ++r) {
      comms.push_back(basic_communicator(seg, view, r, nranks, opt));
      comms.back().s_->peers_in_process = true;
    }
    return comms;
  }

  bool valid() const { return s_ != nullptr && !s_->destroyed; }
  int rank() const { return live("rank").rank; }
  int size() const { return live("size").size; }
  const comm_options& options() const { return live("options").opt; }
  /// status::ok, or the failure that put the communicator in the error state:
  /// this rank's own, or the one another rank raised (abort(), a dead peer, a
  /// mismatch, a peer's timeout) even while this rank was not in a call.
  status error() const { return comm::sync_error(live("error")).err; }
  const std::string& error_message() const { return comm::sync_error(live("error_message")).err_msg; }
  /// The variant the last collective ran with.
  variant_choice last_variant() const { return live("last_variant").last; }
  /// The share of CPU time lost to other tasks that the automatic choice
  /// prices now: agreed by every rank at the last decision point
  /// (comm/contention.hpp), or options().contention where that is fixed.
  double contention() const { return live("contention").contention.share; }
  /// Whether calls of at least single_copy_min_bytes() read peers'
  /// buffers in place (single copy). False where the OS refused cross-memory
  /// attach to some rank when the communicator was created, or any rank set
  /// single_copy = false. The same on every rank.
  bool single_copy_enabled() const { return single_copy_min_bytes() != ~std::uint64_t{0}; }
  /// The single-copy threshold in effect (comm_options::single_copy_min_for:
  /// 256 KiB by default on process ranks, 0 on thread ranks), or UINT64_MAX
  /// where single copy is off. The same on every rank.
  std::uint64_t single_copy_min_bytes() const {
    return live("single_copy_min_bytes").view.user_buffer_min_bytes();
  }

  /// Collective: every rank gets `bytes` (at least one page; sizes may
  /// differ between ranks) of memory that every other process rank of this
  /// host maps too, so that peers' single-copy schedules copy buffers that lie
  /// in it with loads instead of cross-memory attach, and the automatic choice
  /// prices calls on it so (collx/symmetric_buffer.hpp). Returns once every
  /// rank has mapped every part (the ranks exchange and agree through two
  /// ring/Simple calls of this communicator, numbered like any collective).
  /// Errors: status::system_error on every rank, naming the rank and the call,
  /// where some rank could not create its part (no memfd, no memory). Parts
  /// are handed over with pidfd_getfd; where that fails on some rank (no such
  /// call before Linux 5.6; ptrace rules), every rank serves its part over a
  /// UNIX socket for one more exchange (SCM_RIGHTS; two more ring/Simple
  /// calls). A part a peer still could not map is no error: its calls read
  /// that part the ordinary way (symmetric_buffer::mapped_peers says how many
  /// it mapped), and no call on this allocation is priced as loads.
  symmetric_buffer alloc_symmetric(std::size_t bytes) requires std::same_as<Transport, transport::shm>;

  // ---- collectives (type-erased: every element width compiled in) --------------
  void all_reduce(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op,
                  variant_choice v = {});
  void all_gather(const void* send, void* recv, std::size_t sendcount, dtype dt, variant_choice v = {});
  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtype dt, reduce_op op,
                      variant_choice v = {});
  void broadcast(const void* send, void* recv, std::size_t count, dtype dt, int root, variant_choice v = {});
  void reduce(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root,
              variant_choice v = {});
  void all_to_all(const void* send, void* recv, std::size_t count, dtype dt, variant_choice v = {});
  void all_to_allv(const void* send, const std::size_t* send_counts, const std::size_t* send_displs,
                   void* recv, const std::size_t* recv_counts, const std::size_t* recv_displs, dtype dt,
                   variant_choice v = {});
  /// Counts and displacements as signed integers (MPI's int, PyTorch's int64):
  /// negative entries are rejected.
  template <std::signed_integral I>
  void all_to_allv(const void* send, const I* send_counts, const I* send_displs, void* recv,
                   const I* recv_counts, const I* recv_displs, dtype dt, variant_choice v = {}) {
    // Converted into the communicator's scratch (no allocation once warm).
    std::vector<std::size_t>& w = live("all_to_allv").scratch.sizes;
    const std::size_t P = static_cast<std::size_t>(size());
    w.resize(4 * P);
    const std::size_t* sc = to_sizes(send_counts, "send_counts", w.data());
    const std::size_t* sd = to_sizes(send_displs, "send_displs", w.data() + P);
    const std::size_t* rc = to_sizes(recv_counts, "recv_counts", w.data() + 2 * P);
    const std::size_t* rd = to_sizes(recv_displs, "recv_displs", w.data() + 3 * P);
    all_to_allv(send, sc, sd, recv, rc, rd, dt, v);
  }
  void barrier(variant_choice v = {});

  // ---- point to point -------------------------------------------------------------
  void send(const void* buf, std::size_t count, dtype dt, int peer);
  void recv(void* buf, std::size_t count, dtype dt, int peer);
  /// Opens a group: sends and receives are queued until the matching group_end().
  void group_start() { ++live("group_start").group_depth; }
  /// Closes a group; the outermost group_end runs every queued transfer.
  void group_end();

  // ---- collectives (typed) ------------------------------------------------------
  // Reductions instantiate only T's width and kernels (header-only mode); the
  // others move bytes and share the type-erased path.
  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, variant_choice v = {}) {
    reduction<coll::all_reduce, T>(send, recv, count, op, 0, v);
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t sendcount, variant_choice v = {}) {
    all_gather(static_cast<const void*>(send), recv, sendcount, dtype_of<T>, v);
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t recvcount, reduce_op op, variant_choice v = {}) {
    reduction<coll::reduce_scatter, T>(send, recv, recvcount, op, 0, v);
  }
  template <class T>
  void broadcast(const T* send, T* recv, std::size_t count, int root, variant_choice v = {}) {
    broadcast(static_cast<const void*>(send), recv, count, dtype_of<T>, root, v);
  }
  template <class T>
  void reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root, variant_choice v = {}) {
    reduction<coll::reduce, T>(send, recv, count, op, root, v);
  }
  template <class T>
  void all_to_all(const T* send, T* recv, std::size_t count, variant_choice v = {}) {
    all_to_all(static_cast<const void*>(send), recv, count, dtype_of<T>, v);
  }
  template <class T>
  void all_to_allv(const T* send, const std::size_t* send_counts, const std::size_t* send_displs, T* recv,
                   const std::size_t* recv_counts, const std::size_t* recv_displs, variant_choice v = {}) {
    all_to_allv(static_cast<const void*>(send), send_counts, send_displs, static_cast<void*>(recv),
                recv_counts, recv_displs, dtype_of<T>, v);
  }
  template <class T, std::signed_integral I>
  void all_to_allv(const T* send, const I* send_counts, const I* send_displs, T* recv, const I* recv_counts,
                   const I* recv_displs, variant_choice v = {}) {
    all_to_allv(static_cast<const void*>(send), send_counts, send_displs, static_cast<void*>(recv),
                recv_counts, recv_displs, dtype_of<T>, v);
  }
  /// Bounds-checked: every block must lie inside its span, and the count and
  /// displacement spans must hold exactly size() entries.
  template <class T>
  void all_to_allv(std::span<const T> send, std::span<const std::size_t> send_counts,
                   std::span<const std::size_t> send_displs, std::span<T> recv,
                   std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                   variant_choice v = {}) {
    const std::size_t P = static_cast<std::size_t>(live("all_to_allv").size);
    auto need_p = [&](std::size_t n, const char* what) {
      require(n == P, "all_to_allv", [&] {
        return std::string(what) + " has " + std::to_string(n) + " entries, expected one per rank (" +
               std::to_string(P) + ")";
      });
    };
    need_p(send_counts.size(), "send_counts");
    need_p(send_displs.size(), "send_displs");
    need_p(recv_counts.size(), "recv_counts");
    need_p(recv_displs.size(), "recv_displs");
    run_v(comm::buffer_desc{send.data(), send_counts.data(), send_displs.data(), send.size()},
          comm::buffer_desc{recv.data(), recv_counts.data(), recv_displs.data(), recv.size()}, dtype_of<T>,
          v);
  }
  template <class T>
  void send(const T* buf, std::size_t count, int peer) {
    send(static_cast<const void*>(buf), count, dtype_of<T>, peer);
  }
  template <class T>
  void recv(T* buf, std::size_t count, int peer) {
    recv(static_cast<void*>(buf), count, dtype_of<T>, peer);
  }

  /// Runs collective C with the variant <Algo, Proto>, chosen at compile time,
  /// for elements of type Elem (comm::any_dtype: dt's, chosen at run time).
  template <class Algo, class Proto, coll C, class Elem = comm::any_dtype>
  void execute(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root) {
    static_assert(Algo::implements(C), "this algorithm does not implement the requested collective");
    static_assert(check_composable<Algo, Proto, Transport, Exec>());
    comm::state<Transport>& s = live(name(C));
    comm::validate(s, C, send, recv, count, dt, op, root);
    comm::launch<Algo, Proto, C, Elem, Transport, Exec>(s, comm::call_args{send, recv, count, dt, op, root});
  }

  /// all_to_allv with the variant <Algo, Proto>, chosen at compile time.
  template <class Algo, class Proto>
  void execute_v(const void* send, const std::size_t* send_counts, const std::size_t* send_displs, void* recv,
                 const std::size_t* recv_counts, const std::size_t* recv_displs, dtype dt) {
    static_assert(Algo::implements(coll::all_to_allv), "this algorithm does not implement all_to_allv");
    static_assert(check_composable<Algo, Proto, Transport, Exec>());
    comm::state<Transport>& s = live("all_to_allv");
    const comm::buffer_desc sb{send, send_counts, send_displs, comm::buffer_desc::unknown_length};
    const comm::buffer_desc rb{recv, recv_counts, recv_displs, comm::buffer_desc::unknown_length};
    comm::validate_v(s, sb, rb, dt);
    const comm::byte_layout bytes(sb, rb, dt, s.size, s.scratch.bytes);
    mismatch_report report{};
    comm::launch<Algo, Proto, coll::all_to_allv, comm::any_dtype, Transport, Exec>(
        s, comm::call_args{send, recv, 0, dt}, comm::extra_args{&bytes.layout(), nullptr, &report},
        [&] { return bytes.mismatch_detail(report, s.rank); });
  }

  /// Raises the communicator's abort word: every rank's blocked or future call
  /// fails with status::aborted. Safe from any thread; idempotent.
  void abort() { comm::raise_abort(live("abort"), status::aborted, -1); }

  /// Calls this rank has issued (the sequence number the next call publishes, minus one).
  std::uint64_t calls_issued() const { return live("calls_issued").seq; }

  /// Releases this rank's share of the communicator. Later use throws.
  void destroy() {
    comm::state<Transport>& s = live("destroy");
    s.destroyed = true;
    s.depart();
    s.memory.reset();
    s.keepalive.reset();
  }

 private:
  friend struct comm::access;
  friend struct comm::net_access;

  basic_communicator(std::shared_ptr<void> memory, typename Transport::view view, int rank, int nranks,
                     const comm_options& opt);

  /// Wraps an already mapped segment (process ranks: collx/process.hpp).
  static basic_communicator adopt(std::shared_ptr<transport::shm_segment> seg, int rank, int nranks,
                                  const comm_options& opt, std::shared_ptr<void> keepalive) {
    const auto view = seg->view();
    basic_communicator c(std::move(seg), view, rank, nranks, opt);
    c.s_->keepalive = std::move(keepalive);
    return c;
  }

  /// The segment's layout for nranks with the options' FIFO geometry.
  static transport::shm_layout layout_for(int nranks, const comm_options& opt) {
    static_assert(proto::channel_count <= transport::max_channels,
                  "more compiled protocols than the shm segment has channels (transport::max_channels)");
    return transport::shm_layout::make(static_cast<std::uint32_t>(nranks), opt.fifo_slots,
                                       opt.slot_bytes.data(), proto::channel_count);
  }

  comm::state<Transport>& live(const char* op) const { return comm::live(s_, op); }

  /// A collective through the one dispatch path, for elements of type Elem.
  template <coll C, class Elem>
  void run(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root,
           variant_choice v) {
    comm::state<Transport>& s = live(name(C));
    comm::validate(s, C, send, recv, count, dt, op, root);
    comm::dispatch<Transport, Exec, C, Elem>(s, v, comm::call_args{send, recv, count, dt, op, root});
  }

  /// Whether this instance's type-erased entry points are compiled once, in
  /// src/communicator.cpp (COLLX_SEPARATE_COMPILATION), rather than here.
#ifdef COLLX_SEPARATE_COMPILATION
  static constexpr bool compiled_separately =
      std::is_same_v<Transport, transport::shm> && std::is_same_v<Exec, exec::host>;
#else
  static constexpr bool compiled_separately = false;
#endif

  /// A typed reduction: only T's width and kernels are instantiated here,
  /// unless the type-erased entry point is already compiled elsewhere.
  template <coll C, class T>
  void reduction(const T* send, T* recv, std::size_t count, reduce_op op, int root, variant_choice v) {
    if constexpr (!compiled_separately) run<C, T>(send, recv, count, dtype_of<T>, op, root, v);
    else if constexpr (C == coll::all_reduce)
      all_reduce(static_cast<const void*>(send), recv, count, dtype_of<T>, op, v);
    else if constexpr (C == coll::reduce_scatter)
      reduce_scatter(static_cast<const void*>(send), recv, count, dtype_of<T>, op, v);
    else reduce(static_cast<const void*>(send), recv, count, dtype_of<T>, op, root, v);
  }

  void run_v(const comm::buffer_desc& sb, const comm::buffer_desc& rb, dtype dt, variant_choice v);
  void post_p2p(void* buf, std::size_t count, dtype dt, int peer, bool is_send);
  static void run_group(comm::state<Transport>& s);

  /// v's P entries as sizes in out[0, P), or null where v is null (validate_v
  /// reports a null array).
  template <std::signed_integral I>
  const std::size_t* to_sizes(const I* v, const char* what, std::size_t* out) const {
    if (v == nullptr) return nullptr;
    const int P = size();
    for (int j = 0; j < P; ++j) {
      require(v[j] >= 0, "all_to_allv", [&] {
        return std::string(what) + "[" + std::to_string(j) + "] is negative (" + std::to_string(v[j]) + ")";
      });
      out[static_cast<std::size_t>(j)] = static_cast<std::size_t>(v[j]);
    }
    return out;
  }

  std::shared_ptr<comm::state<Transport>> s_;
};

/// The host API: CPU ranks (threads or processes of one host) over shared memory.
using communicator = basic_communicator<transport::shm, exec::host>;

// ---- member definitions ---------------------------------------------------------
// Out of the class body so that, with COLLX_SEPARATE_COMPILATION, the extern
// template below keeps them out of every translation unit but one.

template <class Transport, class Exec>
basic_communicator<Transport, Exec>::basic_communicator(std::shared_ptr<void> memory,
                                                        typename Transport::view view, int rank, int nranks,
                                                        const comm_options& opt)
    : s_(std::make_shared<comm::state<Transport>>()) {
  comm::state<Transport>& s = *s_;
  s.view = view;
  s.memory = std::move(memory);
  s.rank = rank;
  s.size = nranks;
  s.opt = opt;
  // All ranks of a shared-memory communicator share this host (a network
  // communicator places itself again with the ranks of its own host).
  s.place_on_host(nranks);
  s.pid_ns = detail::pid_namespace_of_self();
  publish_identity(s.view, rank);  // the transport's (found by ADL): the rank's record
}

template <class Transport, class Exec>
symmetric_buffer basic_communicator<Transport, Exec>::alloc_symmetric(
    std::size_t bytes) requires std::same_as<Transport, transport::shm> {
  comm::state<Transport>& s = live("alloc_symmetric");
  symmetric_buffer out;
  out.serial_ = s.symmetric_serial++;
  // A rank whose part failed still joins the exchange (with no part), so that
  // every rank learns of it and fails alike instead of waiting.
  std::string failure;
  try {
    out.own_ = transport::symmetric_own::create(bytes);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  transport::symmetric_share mine{};
  if (out.own_.address != nullptr)
    mine = {static_cast<std::uint64_t>(::getpid()),
            static_cast<std::uint64_t>(out.own_.fd),
            out.own_.inode,
            out.own_.bytes,
            static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(out.own_.address)),
            out.serial_};
  constexpr std::size_t words = sizeof(transport::symmetric_share) / sizeof(std::uint64_t);
  std::vector<transport::symmetric_share> all(static_cast<std::size_t>(s.size));
  // Through the FIFOs (ring/Simple): a few words need no single copy.
  all_gather(&mine, all.data(), words, dtype::uint64, {algo_id::ring, proto_id::simple});
  for (int q = 0; q < s.size; ++q)
    if (all[static_cast<std::size_t>(q)].bytes == 0)
      throw_error(status::system_error, "alloc_symmetric(" + std::to_string(bytes) + " bytes): rank " +
                                            std::to_string(q) + " could not create its part" +
                                            (q == s.rank ? ": " + failure : std::string()));
  if (s.symmetric == nullptr) {
    s.symmetric = std::make_shared<transport::symmetric_table>();
    s.view.symmetric = s.symmetric.get();
  }
  out.table_ = s.symmetric;  // from here on, out's release unmaps what follows
  // The ranks of another process, which this rank must map (thread ranks of
  // this process load each other's parts anyway).
  std::vector<bool> wanted(static_cast<std::size_t>(s.size));
  int others = 0;
  for (int q = 0; q < s.size; ++q) {
    const bool other_process = q != s.rank && all[static_cast<std::size_t>(q)].pid != mine.pid;
    wanted[static_cast<std::size_t>(q)] = other_process;
    others += other_process ? 1 : 0;
  }
  auto take = [&](int q, std::byte* local) {
    const transport::symmetric_share& sh = all[static_cast<std::size_t>(q)];
    s.symmetric->add(
        {q, out.serial_, static_cast<std::uintptr_t>(sh.address), static_cast<std::size_t>(sh.bytes), local});
    wanted[static_cast<std::size_t>(q)] = false;
    ++out.mapped_peers_;
  };
  for (int q = 0; q < s.size; ++q)
    if (wanted[static_cast<std::size_t>(q)])
      if (std::byte* local = transport::map_symmetric_share(all[static_cast<std::size_t>(q)])) take(q, local);
  // Whether every rank mapped every part of another process. The exchange is
  // also the barrier that keeps a rank from releasing its part (closing the
  // descriptor peers fetch) before every peer has mapped it. Only then are
  // calls on this memory priced as loads, alike on every rank.
  auto everyone_mapped = [&] {
    const std::int32_t mapped_all = out.mapped_peers_ == others ? 1 : 0;
    std::int32_t everyone = 0;
    all_reduce(&mapped_all, &everyone, 1, dtype::int32, reduce_op::min, {algo_id::ring, proto_id::simple});
    return everyone == 1;
  };
  bool mapped = everyone_mapped();
  if (!mapped) {
    // Some rank could not take a descriptor with pidfd_getfd (a kernel before
    // Linux 5.6, or ptrace rules): every rank serves its part over a UNIX
    // socket (SCM_RIGHTS, no ptrace check) until every rank has tried again.
    transport::symmetric_socket_offer offer{};
    std::unique_ptr<bootstrap::fd_server> server;
    try {
      offer.token = bootstrap::random_secret();
      server = std::make_unique<bootstrap::fd_server>(out.own_.fd, offer.token);
      std::snprintf(offer.path, sizeof offer.path, "%s", server->path().c_str());
    } catch (const std::exception&) {
      offer = {};  // no server here: peers keep reading this part the ordinary way
    }
    std::vector<transport::symmetric_socket_offer> offers(static_cast<std::size_t>(s.size));
    all_gather(&offer, offers.data(), sizeof offer / sizeof(std::uint64_t), dtype::uint64,
               {algo_id::ring, proto_id::simple});
    for (int q = 0; q < s.size; ++q) {
      const auto& o = offers[static_cast<std::size_t>(q)];
      if (!wanted[static_cast<std::size_t>(q)] || o.path[0] == '\0') continue;
      int fd = -1;
      try {
        // Its server was up before the offers were exchanged: a fetch that
        // takes long finds a server gone wrong, so it gives up well before
        // the peers waiting in the closing all_reduce would.
        fd = bootstrap::fetch_fd(std::string(o.path, ::strnlen(o.path, sizeof o.path)), o.token,
                                 std::min(s.opt.timeout / 4, std::chrono::milliseconds(10'000)));
      } catch (const std::exception&) {
        continue;  // that part stays unmapped: read the ordinary way
      }
      std::byte* local = transport::map_symmetric_fd(fd, all[static_cast<std::size_t>(q)]);
      ::close(fd);
      if (local != nullptr) take(q, local);
    }
    mapped = everyone_mapped();  // also keeps every server up until every rank is done
  }
  out.bytes_ = out.own_.bytes;
  if (mapped)
    s.symmetric->add_own(reinterpret_cast<std::uintptr_t>(out.own_.address), out.own_.bytes, out.serial_);
  return out;
}

template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::all_reduce(const void* send, void* recv, std::size_t count,
                                                     dtype dt, reduce_op op, variant_choice v) {
  run<coll::all_reduce, comm::any_dtype>(send, recv, count, dt, op, 0, v);
}
template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::all_gather(const void* send, void* recv, std::size_t sendcount,
                                                     dtype dt, variant_choice v) {
  run<coll::all_gather, comm::any_dtype>(send, recv, sendcount, dt, reduce_op::sum, 0, v);
}
template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::reduce_scatter(const void* send, void* recv, std::size_t recvcount,
                                                         dtype dt, reduce_op op, variant_choice v) {
  run<coll::reduce_scatter, comm::any_dtype>(send, recv, recvcount, dt, op, 0, v);
}
template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::broadcast(const void* send, void* recv, std::size_t count, dtype dt,
                                                    int root, variant_choice v) {
  run<coll::broadcast, comm::any_dtype>(send, recv, count, dt, reduce_op::sum, root, v);
}
template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::reduce(const void* send, void* recv, std::size_t count, dtype dt,
                                                 reduce_op op, int root, variant_choice v) {
  run<coll::reduce, comm::any_dtype>(send, recv, count, dt, op, root, v);
}
template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::all_to_all(const void* send, void* recv, std::size_t count,
                                                     dtype dt, variant_choice v) {
  run<coll::all_to_all, comm::any_dtype>(send, recv, count, dt, reduce_op::sum, 0, v);
}
template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::barrier(variant_choice v) {
  run<coll::barrier, comm::any_dtype>(nullptr, nullptr, 0, dtype::uint8, reduce_op::sum, 0, v);
}

template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::all_to_allv(const void* send, const std::size_t* send_counts,
                                                      const std::size_t* send_displs, void* recv,
                                                      const std::size_t* recv_counts,
                                                      const std::size_t* recv_displs, dtype dt,
                                                      variant_choice v) {
  run_v(comm::buffer_desc{send, send_counts, send_displs, comm::buffer_desc::unknown_length},
        comm::buffer_desc{recv, recv_counts, recv_displs, comm::buffer_desc::unknown_length}, dt, v);
}

template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::run_v(const comm::buffer_desc& sb, const comm::buffer_desc& rb,
                                                dtype dt, variant_choice v) {
  comm::state<Transport>& s = live("all_to_allv");
  comm::validate_v(s, sb, rb, dt);
  const comm::byte_layout bytes(sb, rb, dt, s.size, s.scratch.bytes);
  mismatch_report report{};
  comm::dispatch<Transport, Exec, coll::all_to_allv, comm::any_dtype>(
      s, v, comm::call_args{sb.buf, const_cast<void*>(rb.buf), 0, dt},
      comm::extra_args{&bytes.layout(), nullptr, &report},
      [&] { return bytes.mismatch_detail(report, s.rank); });
}

template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::send(const void* buf, std::size_t count, dtype dt, int peer) {
  post_p2p(const_cast<void*>(buf), count, dt, peer, true);
}
template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::recv(void* buf, std::size_t count, dtype dt, int peer) {
  post_p2p(buf, count, dt, peer, false);
}

template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::group_end() {
  comm::state<Transport>& s = live("group_end");
  require(s.group_depth > 0, "group_end", "no group is open (group_end without group_start)");
  if (--s.group_depth == 0) run_group(s);
}

template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::post_p2p(void* buf, std::size_t count, dtype dt, int peer,
                                                   bool is_send) {
  const char* cn = is_send ? "send" : "recv";
  comm::state<Transport>& s = live(cn);
  comm::validate_p2p(s, cn, buf, count, dt, peer);
  s.pending.push_back(comm::p2p_op{buf, count, dt, peer, is_send});
  if (s.group_depth == 0) run_group(s);
}

template <class Transport, class Exec>
void basic_communicator<Transport, Exec>::run_group(comm::state<Transport>& s) {
  // The group moves to the scratch; the queue keeps the capacity of the last one.
  std::vector<comm::p2p_op>& ops = s.scratch.ops;
  ops.swap(s.pending);
  s.pending.clear();
  if (ops.empty()) return;
  comm::check_usable(s, "group_end", false);
  comm::validate_group(ops, "group_end", s.scratch);
  const p2p_plan plan = comm::plan_group(ops, s.size, s.scratch);
  mismatch_report report{};
  comm::dispatch<Transport, Exec, coll::send_recv, comm::any_dtype>(
      s, variant_choice{algo_id::direct, proto_id::automatic}, comm::call_args{},
      comm::extra_args{nullptr, &plan, &report}, [&] { return comm::p2p_mismatch_detail(report, s.rank); });
}

#ifdef COLLX_SEPARATE_COMPILATION
// Compiled once, in src/communicator.cpp (CMake: collx::compiled).
extern template class basic_communicator<transport::shm, exec::host>;
#endif

// ---- explicit composition ------------------------------------------------------
// The variant is a template argument: only <Algo, Proto> for T is
// instantiated, in the caller's translation unit, in either compilation mode.
template <class Algo, class Proto, class T, class Tr, class Ex>
void all_reduce(basic_communicator<Tr, Ex>& c, const T* send, T* recv, std::size_t count, reduce_op op) {
  c.template execute<Algo, Proto, coll::all_reduce, T>(send, recv, count, dtype_of<T>, op, 0);
}
template <class Algo, class Proto, class T, class Tr, class Ex>
void all_gather(basic_communicator<Tr, Ex>& c, const T* send, T* recv, std::size_t sendcount) {
  c.template execute<Algo, Proto, coll::all_gather>(send, recv, sendcount, dtype_of<T>, reduce_op::sum, 0);
}
template <class Algo, class Proto, class T, class Tr, class Ex>
void reduce_scatter(basic_communicator<Tr, Ex>& c, const T* send, T* recv, std::size_t recvcount,
                    reduce_op op) {
  c.template execute<Algo, Proto, coll::reduce_scatter, T>(send, recv, recvcount, dtype_of<T>, op, 0);
}
template <class Algo, class Proto, class T, class Tr, class Ex>
void broadcast(basic_communicator<Tr, Ex>& c, const T* send, T* recv, std::size_t count, int root) {
  c.template execute<Algo, Proto, coll::broadcast>(send, recv, count, dtype_of<T>, reduce_op::sum, root);
}
template <class Algo, class Proto, class T, class Tr, class Ex>
void reduce(basic_communicator<Tr, Ex>& c, const T* send, T* recv, std::size_t count, reduce_op op,
            int root) {
  c.template execute<Algo, Proto, coll::reduce, T>(send, recv, count, dtype_of<T>, op, root);
}
template <class Algo, class Proto, class T, class Tr, class Ex>
void all_to_all(basic_communicator<Tr, Ex>& c, const T* send, T* recv, std::size_t count) {
  c.template execute<Algo, Proto, coll::all_to_all>(send, recv, count, dtype_of<T>, reduce_op::sum, 0);
}
template <class Algo, class Proto, class T, class Tr, class Ex>
void all_to_allv(basic_communicator<Tr, Ex>& c, const T* send, const std::size_t* send_counts,
                 const std::size_t* send_displs, T* recv, const std::size_t* recv_counts,
                 const std::size_t* recv_displs) {
  c.template execute_v<Algo, Proto>(send, send_counts, send_displs, recv, recv_counts, recv_displs,
                                    dtype_of<T>);
}
template <class Algo, class Proto, class Tr, class Ex>
void barrier(basic_communicator<Tr, Ex>& c) {
  c.template execute<Algo, Proto, coll::barrier>(nullptr, nullptr, 0, dtype::uint8, reduce_op::sum, 0);
}

}  // namespace collx
