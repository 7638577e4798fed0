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
// naming both counts (its peers then fail with status::aborted) instead of
// corrupting memory. Counts may also be given as int or int64 arrays, where
// negative values are rejected; the std::span overloads also check that every
// block lies inside the buffer and that the count arrays hold P entries.
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
// Reliability (see also detail/watch.hpp): a wait that has yielded the CPU
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
// thread ranks of this process), init_rank (every rank passes the unique id
// that one process got from collx::get_unique_id()), or from_env (the
// environment of collxrun, torchrun, Open MPI, PMI or Slurm; see
// collx/bootstrap/env.hpp). Process ranks must share one host for now.
#pragma once

#include <collx/bootstrap/env.hpp>
#include <collx/bootstrap/root.hpp>
#include <collx/bootstrap/session.hpp>
#include <collx/coll.hpp>
#include <collx/detail/erased_reducer.hpp>
#include <collx/detail/proc.hpp>
#include <collx/detail/watch.hpp>
#include <collx/dtype.hpp>
#include <collx/error.hpp>
#include <collx/exec/host.hpp>
#include <collx/options.hpp>
#include <collx/prims.hpp>
#include <collx/reduce_op.hpp>
#include <collx/transport/peer_read.hpp>
#include <collx/transport/shm.hpp>
#include <collx/transport/shm_segment.hpp>
#include <collx/variants.hpp>

#include <cstdint>
#include <cstdio>

#include <sched.h>
#include <algorithm>
#include <concepts>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace collx {

class communicator {
 public:
  communicator() = default;

  /// P communicators over one anonymous shared mapping, one per thread rank.
  static std::vector<communicator> create_thread_group(int nranks,
                                                       const comm_options& opt = comm_options::from_env()) {
    require(nranks >= 1 && nranks <= 4096, "create_thread_group",
            "nranks must be in [1, 4096], got " + std::to_string(nranks));
    opt.validate();
    auto seg = transport::shm_segment::create_anonymous(layout_for(nranks, opt));
    if (opt.step_origin != 0) seg->view().reset_counters(opt.step_origin);
    // Thread ranks load each other's buffers directly: no probe needed.
    seg->view().header()->single_copy_min = opt.single_copy_min_bytes;
    seg->view().header()->single_copy_denied = opt.single_copy ? 0 : 1;
    std::vector<communicator> comms;
    comms.reserve(static_cast<std::size_t>(nranks));
    for (int r = 0; r < nranks; ++r) comms.push_back(communicator(seg, r, nranks, opt));
    return comms;
  }

  /// Rank `rank` of `nranks` processes that all pass the same id.
  static communicator init_rank(int nranks, const unique_id& id, int rank,
                                const comm_options& opt = comm_options::from_env()) {
    require(nranks >= 1 && rank >= 0 && rank < nranks, "init_rank",
            "rank " + std::to_string(rank) + " / nranks " + std::to_string(nranks) + " are out of range");
    opt.validate();
    return join(bootstrap::session::connect(id, rank, nranks, opt.timeout), opt);
  }

  /// The rank this process was started as by a launcher (collxrun, torchrun,
  /// mpirun, srun, a PMI launcher); throws if none is detected.
  static communicator from_env(const comm_options& opt = comm_options::from_env()) {
    opt.validate();
    const auto env = bootstrap::detect_launch_env();
    if (!env)
      throw_error(status::invalid_argument,
                  "from_env: no launcher environment found (COLLX_RANK/COLLX_SIZE, RANK/WORLD_SIZE, "
                  "OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS)");
    return join(bootstrap::connect_from_env(*env, opt.timeout), opt);
  }

  /// Wraps an already mapped segment; used by the process-rank initialisers.
  static communicator adopt(std::shared_ptr<transport::shm_segment> seg, int rank, int nranks,
                            const comm_options& opt, std::shared_ptr<void> keepalive = {}) {
    communicator c(std::move(seg), rank, nranks, opt);
    c.s_->keepalive = std::move(keepalive);
    return c;
  }

  static transport::shm_layout layout_for(int nranks, const comm_options& opt) {
    return transport::shm_layout::make(static_cast<std::uint32_t>(nranks), opt.fifo_slots, opt.slot_bytes,
                                       opt.ll_slot_bytes, opt.ll128_slot_bytes);
  }

  bool valid() const { return s_ != nullptr && !s_->destroyed; }
  int rank() const { return live("rank").rank; }
  int size() const { return live("size").size; }
  const comm_options& options() const { return live("options").opt; }
  /// status::ok, or the failure that put the communicator in the error state:
  /// this rank's own, or the one another rank raised (abort(), a dead peer, a
  /// mismatch, a peer's timeout) even while this rank was not in a call.
  status error() const { return sync_error(live("error")).err; }
  const std::string& error_message() const { return sync_error(live("error_message")).err_msg; }
  /// The variant the last collective ran with.
  variant_choice last_variant() const { return live("last_variant").last; }
  /// Whether calls of at least options().single_copy_min_bytes read peers'
  /// buffers in place (single copy). False where the OS refused cross-memory
  /// attach to some rank when the communicator was created, or any rank set
  /// single_copy = false. The same on every rank.
  bool single_copy_enabled() const {
    return live("single_copy_enabled").view.user_buffer_min_bytes() != ~std::uint64_t{0};
  }

  // ---- collectives (type-erased) ------------------------------------------------
  void all_reduce(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op,
                  variant_choice v = {}) {
    run(coll::all_reduce, send, recv, count, dt, op, 0, v);
  }
  void all_gather(const void* send, void* recv, std::size_t sendcount, dtype dt, variant_choice v = {}) {
    run(coll::all_gather, send, recv, sendcount, dt, reduce_op::sum, 0, v);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtype dt, reduce_op op,
                      variant_choice v = {}) {
    run(coll::reduce_scatter, send, recv, recvcount, dt, op, 0, v);
  }
  void broadcast(const void* send, void* recv, std::size_t count, dtype dt, int root, variant_choice v = {}) {
    run(coll::broadcast, send, recv, count, dt, reduce_op::sum, root, v);
  }
  void reduce(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root,
              variant_choice v = {}) {
    run(coll::reduce, send, recv, count, dt, op, root, v);
  }

  void all_to_all(const void* send, void* recv, std::size_t count, dtype dt, variant_choice v = {}) {
    run(coll::all_to_all, send, recv, count, dt, reduce_op::sum, 0, v);
  }
  void all_to_allv(const void* send, const std::size_t* send_counts, const std::size_t* send_displs,
                   void* recv, const std::size_t* recv_counts, const std::size_t* recv_displs, dtype dt,
                   variant_choice v = {}) {
    run_v(buffer_desc{send, send_counts, send_displs, unknown_length},
          buffer_desc{recv, recv_counts, recv_displs, unknown_length}, dt, v);
  }
  /// Counts and displacements as signed integers (MPI's int, PyTorch's int64):
  /// negative entries are rejected.
  template <std::signed_integral I>
  void all_to_allv(const void* send, const I* send_counts, const I* send_displs, void* recv,
                   const I* recv_counts, const I* recv_displs, dtype dt, variant_choice v = {}) {
    const auto sc = to_sizes(send_counts, "send_counts"), sd = to_sizes(send_displs, "send_displs");
    const auto rc = to_sizes(recv_counts, "recv_counts"), rd = to_sizes(recv_displs, "recv_displs");
    all_to_allv(send, sc.data(), sd.data(), recv, rc.data(), rd.data(), dt, v);
  }
  void barrier(variant_choice v = {}) {
    run(coll::barrier, nullptr, nullptr, 0, dtype::uint8, reduce_op::sum, 0, v);
  }

  // ---- point to point -------------------------------------------------------------
  void send(const void* buf, std::size_t count, dtype dt, int peer) {
    post_p2p(const_cast<void*>(buf), count, dt, peer, true);
  }
  void recv(void* buf, std::size_t count, dtype dt, int peer) { post_p2p(buf, count, dt, peer, false); }
  /// Opens a group: sends and receives are queued until the matching group_end().
  void group_start() { ++live("group_start").group_depth; }
  /// Closes a group; the outermost group_end runs every queued transfer.
  void group_end() {
    state& s = live("group_end");
    require(s.group_depth > 0, "group_end", "no group is open (group_end without group_start)");
    if (--s.group_depth == 0) run_group(s);
  }

  // ---- collectives (typed) ------------------------------------------------------
  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, variant_choice v = {}) {
    all_reduce(send, recv, count, dtype_of<T>, op, v);
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t sendcount, variant_choice v = {}) {
    all_gather(send, recv, sendcount, dtype_of<T>, v);
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t recvcount, reduce_op op, variant_choice v = {}) {
    reduce_scatter(send, recv, recvcount, dtype_of<T>, op, v);
  }
  template <class T>
  void broadcast(const T* send, T* recv, std::size_t count, int root, variant_choice v = {}) {
    broadcast(send, recv, count, dtype_of<T>, root, v);
  }
  template <class T>
  void reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root, variant_choice v = {}) {
    reduce(send, recv, count, dtype_of<T>, op, root, v);
  }

  template <class T>
  void all_to_all(const T* send, T* recv, std::size_t count, variant_choice v = {}) {
    all_to_all(send, recv, count, dtype_of<T>, v);
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
    state& s = live("all_to_allv");
    const std::size_t P = static_cast<std::size_t>(s.size);
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
    run_v(buffer_desc{send.data(), send_counts.data(), send_displs.data(), send.size()},
          buffer_desc{recv.data(), recv_counts.data(), recv_displs.data(), recv.size()}, dtype_of<T>, v);
  }
  template <class T>
  void send(const T* buf, std::size_t count, int peer) {
    send(buf, count, dtype_of<T>, peer);
  }
  template <class T>
  void recv(T* buf, std::size_t count, int peer) {
    recv(buf, count, dtype_of<T>, peer);
  }

  /// Runs collective C with the variant <Algo, Proto>, chosen at compile time.
  template <class Algo, class Proto, coll C>
  void execute(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root) {
    static_assert(Algo::implements(C), "this algorithm does not implement the requested collective");
    static_assert(Proto::template check_transport<transport::shm>());
    state& s = live(name(C));
    validate(s, C, send, recv, count, dt, op, root);
    launch<Algo, Proto, C>(s, send, recv, count, dt, op, root);
  }

  /// all_to_allv with the variant <Algo, Proto>, chosen at compile time.
  template <class Algo, class Proto>
  void execute_v(const void* send, const std::size_t* send_counts, const std::size_t* send_displs, void* recv,
                 const std::size_t* recv_counts, const std::size_t* recv_displs, dtype dt) {
    static_assert(Algo::implements(coll::all_to_allv), "this algorithm does not implement all_to_allv");
    static_assert(composable<Algo, Proto, transport::shm>, "this protocol cannot run on the shm transport");
    state& s = live("all_to_allv");
    const buffer_desc sb{send, send_counts, send_displs, unknown_length};
    const buffer_desc rb{recv, recv_counts, recv_displs, unknown_length};
    validate_v(s, sb, rb, dt);
    launch_v<Algo, Proto>(s, sb, rb, dt);
  }

  /// Raises the communicator's abort word: every rank's blocked or future call
  /// fails with status::aborted. Safe from any thread; idempotent.
  void abort() {
    state& s = live("abort");
    raise_abort(s, status::aborted, -1);
  }

  /// Calls this rank has issued (the sequence number the next call publishes, minus one).
  std::uint64_t calls_issued() const { return live("calls_issued").seq; }

  /// Releases this rank's share of the communicator. Later use throws.
  void destroy() {
    state& s = live("destroy");
    s.destroyed = true;
    s.depart();
    s.seg.reset();
    s.keepalive.reset();
  }

 private:
  struct p2p_op {
    void* buf;
    std::size_t count;
    dtype dt;
    int peer;
    bool is_send;
  };

  static constexpr std::size_t unknown_length = ~std::size_t(0);

  /// One side of an all_to_allv: buffer, per-peer counts and displacements
  /// (elements), and the buffer's length in elements where the caller gave it.
  struct buffer_desc {
    const void* buf;
    const std::size_t* counts;
    const std::size_t* displs;
    std::size_t length;
  };

  /// Schedule arguments beyond schedule_args' scalars (all_to_allv, send_recv).
  struct extra_args {
    const peer_layout* layout = nullptr;
    const p2p_plan* plan = nullptr;
    mismatch_report* report = nullptr;
  };

  struct state {
    std::shared_ptr<transport::shm_segment> seg;
    transport::shm_view view{};
    int rank = 0, size = 1;
    comm_options opt{};
    status err = status::ok;
    std::string err_msg;
    bool destroyed = false;
    variant_choice last{};
    /// The last automatic choice per collective: the model's argmin costs
    /// more than a small call itself, and it depends only on the requested
    /// variant and the size (everything else is fixed per communicator).
    struct remembered_choice {
      bool valid = false;
      variant_choice requested{}, chosen{};
      double bytes = 0;
    };
    remembered_choice choice_memo[coll_count];
    int group_depth = 0;              // open group_start() calls
    std::vector<p2p_op> pending;      // transfers queued in the open group
    std::uint64_t spin_ns = 0;        // resolved comm_options::spin
    bool oversubscribed = false;      // more ranks than this host's online CPUs
    std::shared_ptr<void> keepalive;  // e.g. the bootstrap session of process ranks
    // Reliability watch (detail/watch.hpp): this rank's call sequence, and the
    // state of the periodic check run from slow waits.
    std::uint64_t seq = 0;
    std::uint64_t pid_ns = 0;
    int watch_next = 0;      // next peer the periodic check looks at
    std::string watch_what;  // detail of the failure the check found

    state() = default;
    state(const state&) = delete;
    state& operator=(const state&) = delete;
    ~state() { depart(); }

    /// A rank that leaves cleanly clears its pid, so peers still finishing
    /// their part (a barrier's last round) do not take its exit for a death.
    void depart() {
      if (seg == nullptr) return;
      transport::rank_record* rec = view.record(rank);
      if (detail::load_relaxed(&rec->pid) == static_cast<std::int32_t>(::getpid()))
        detail::store_release(&rec->pid, std::int32_t{0});
    }
  };

  // What each process rank tells the others through the bootstrap.
  struct join_info {
    char host[64];
    char boot_id[40];
    char segment[64];  // rank 0's shm object name
    transport::fifo_geometry fifo[transport::channel_count];
    std::uint64_t step_origin;
    std::uint64_t single_copy_min;
  };

  /// Process ranks of one host: rank 0 creates the segment, the others map it,
  /// and rank 0 unlinks the name once all have (nothing left in /dev/shm even
  /// if every process is later killed). The session stays open for later use.
  static communicator join(bootstrap::session s, const comm_options& opt) {
    const int rank = s.rank(), nranks = s.size();
    join_info mine{};
    ::gethostname(mine.host, sizeof mine.host - 1);
    if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      if (std::fgets(mine.boot_id, sizeof mine.boot_id, f) == nullptr) mine.boot_id[0] = '\0';
      std::fclose(f);
    }
    const auto layout = layout_for(nranks, opt);
    for (int c = 0; c < transport::channel_count; ++c) mine.fifo[c] = layout.fifo[c];
    mine.step_origin = opt.step_origin;
    mine.single_copy_min = opt.single_copy_min_bytes;
    std::shared_ptr<transport::shm_segment> seg;
    if (rank == 0) {
      std::random_device rd;
      std::snprintf(mine.segment, sizeof mine.segment, "/collx-%d-%08x%08x", static_cast<int>(::getpid()),
                    rd(), rd());
      seg = transport::shm_segment::create_named(layout, mine.segment);
      if (opt.step_origin != 0) seg->view().reset_counters(opt.step_origin);
    }
    const std::vector<std::byte> all = s.allgather(&mine, sizeof mine);
    std::vector<join_info> infos(static_cast<std::size_t>(nranks));
    std::memcpy(infos.data(), all.data(), all.size());
    for (int r = 0; r < nranks; ++r) {
      const join_info& o = infos[static_cast<std::size_t>(r)];
      if (std::strncmp(o.host, infos[0].host, sizeof o.host) != 0 ||
          std::strncmp(o.boot_id, infos[0].boot_id, sizeof o.boot_id) != 0)
        throw_error(status::not_supported,
                    "init: rank " + std::to_string(r) + " runs on host '" + std::string(o.host) +
                        "', rank 0 on '" + infos[0].host +
                        "': ranks on several hosts need a network transport, which collx does "
                        "not provide yet");
      for (int c = 0; c < transport::channel_count; ++c)
        if (!(o.fifo[c] == infos[0].fifo[c]))
          throw_error(status::mismatch, "init: rank " + std::to_string(r) + " uses " +
                                            name(static_cast<proto_id>(c)) + " FIFOs of " +
                                            std::to_string(o.fifo[c].slots) + " × " +
                                            std::to_string(o.fifo[c].slot_bytes) + " bytes, rank 0 " +
                                            std::to_string(infos[0].fifo[c].slots) + " × " +
                                            std::to_string(infos[0].fifo[c].slot_bytes) +
                                            " (set COLLX_NSLOTS and COLLX_*BUFFSIZE alike on every rank)");
      if (o.step_origin != infos[0].step_origin)
        throw_error(status::mismatch,
                    "init: rank " + std::to_string(r) + " differs from rank 0 in step_origin");
      if (o.single_copy_min != infos[0].single_copy_min)
        throw_error(status::mismatch, "init: rank " + std::to_string(r) + " uses single_copy_min_bytes " +
                                          std::to_string(o.single_copy_min) + ", rank 0 " +
                                          std::to_string(infos[0].single_copy_min) +
                                          " (set COLLX_SINGLE_COPY_MIN alike on every rank)");
    }
    try {
      if (rank != 0) seg = transport::shm_segment::open_named(layout, infos[0].segment);
      const transport::shm_view v = seg->view();
      if (rank == 0) v.header()->single_copy_min = opt.single_copy_min_bytes;
      publish_identity(v, rank);
      s.barrier();  // every rank has mapped the segment and published its identity
      // Single copy needs every rank to read every other process's memory; any
      // rank that may not (or does not want to) makes them all stage.
      if (!opt.single_copy || !can_read_peers(v, rank, nranks))
        detail::store_relaxed(&v.header()->single_copy_denied, std::uint32_t{1});
      s.barrier();  // the verdict is final before any collective
    } catch (...) {
      // Rank 0 may be gone: whoever knows the name removes it (unlinking twice is harmless).
      ::shm_unlink(infos[0].segment);
      throw;
    }
    if (rank == 0) seg->unlink();
    auto keep = std::make_shared<bootstrap::session>(std::move(s));
    return adopt(std::move(seg), rank, nranks, opt, std::move(keep));
  }

  communicator(std::shared_ptr<transport::shm_segment> seg, int rank, int nranks, const comm_options& opt)
      : s_(std::make_shared<state>()) {
    s_->view = seg->view();
    s_->seg = std::move(seg);
    s_->rank = rank;
    s_->size = nranks;
    s_->opt = opt;
    // All ranks of a communicator share this host. The online CPU count (not
    // this process's affinity, which a launcher may have narrowed to one CPU)
    // is the same for every rank, so the automatic choice that depends on it is too.
    const long ncpu = ::sysconf(_SC_NPROCESSORS_ONLN);
    s_->oversubscribed = ncpu > 0 && nranks > ncpu;
    s_->spin_ns = static_cast<std::uint64_t>(opt.spin.count());
    if (s_->spin_ns == 0) {
      // Spin long only if the ranks fit on the CPUs: a waiting rank then hands
      // its core to the peer it waits for.
      s_->spin_ns = s_->oversubscribed ? 2'000 : 100'000;
    }
    s_->pid_ns = detail::pid_namespace_of_self();
    publish_identity(s_->view, rank);
  }

  /// Whether this rank may read the memory of every peer process (cross-memory
  /// attach): reads the segment header through each peer's own mapping.
  static bool can_read_peers(const transport::shm_view& v, int rank, int nranks) {
    const transport::rank_record* me = v.record(rank);
    for (int q = 0; q < nranks; ++q) {
      const transport::rank_record* rec = v.record(q);
      const int pid = detail::load_acquire(&rec->pid);
      if (q == rank || pid == me->pid) continue;                           // a thread rank of this process
      if (detail::load_relaxed(&rec->pid_ns) != me->pid_ns) return false;  // its pid means nothing here
      if (!transport::probe_peer_read(pid, detail::load_relaxed(v.line(q, transport::shm_view::mapping)),
                                      v.header()->magic))
        return false;
    }
    return true;
  }

  /// Writes this rank's process identity into its record (once, at creation).
  static void publish_identity(const transport::shm_view& v, int rank) {
    const detail::proc_identity id = detail::self_identity();
    detail::store_relaxed(v.line(rank, transport::shm_view::mapping),
                          reinterpret_cast<std::uintptr_t>(v.base));
    transport::rank_record* rec = v.record(rank);
    detail::store_relaxed(&rec->start_time, id.start_time);
    detail::store_relaxed(&rec->pid_ns, id.pid_ns);
    detail::store_release(&rec->pid, id.pid);
  }

  state& live(const char* op) const {
    if (s_ == nullptr)
      throw_error(status::invalid_argument,
                  std::string(op) + ": communicator is not initialised (default-constructed or moved-from)");
    if (s_->destroyed)
      throw_error(status::invalid_argument, std::string(op) + ": communicator used after destroy()");
    return *s_;
  }

  static void raise_abort(state& s, status why, int rank) {
    // The first failure wins the cause; later ones only see the word set.
    detail::raise_abort(s.view.header(), detail::abort_cause{why, detail::call_field::none, rank, -1});
  }

  /// Adopts an abort raised elsewhere as this rank's error state.
  static state& sync_error(state& s) {
    if (s.err != status::ok) return s;
    const detail::abort_cause cause = detail::read_abort(s.view.header());
    if (cause.why == status::ok) return s;
    s.err = cause.why == status::peer_dead || cause.why == status::mismatch ? cause.why : status::aborted;
    s.err_msg =
        "rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) + ": " + describe(s, cause);
    return s;
  }

  static std::string describe(const state& s, const detail::abort_cause& c) {
    if (c.rank < 0) return "aborted by communicator::abort()";
    switch (c.why) {
      case status::peer_dead: {
        const int pid = detail::load_relaxed(&s.view.record(c.rank)->pid);
        return "rank " + std::to_string(c.rank) + " (pid " + std::to_string(pid) +
               ") died: its process exited or was killed";
      }
      case status::mismatch:
        return "ranks " + std::to_string(c.rank) + " and " + std::to_string(c.other) +
               " issued mismatched calls (the " + detail::name(c.field) + " differs)";
      default: return "aborted because rank " + std::to_string(c.rank) + " failed (" + to_string(c.why) + ")";
    }
  }

  /// Refuses work on a communicator in the error state, and collectives while
  /// a point-to-point group is open.
  static void check_usable(state& s, const char* cn, bool collective) {
    if (s.err != status::ok || detail::load_relaxed(s.view.abort_word()) != 0) {
      sync_error(s);
      throw_error(s.err, std::string(cn) + " (rank " + std::to_string(s.rank) +
                             "): communicator is in the error state after an earlier failure: " + s.err_msg);
    }
    if (collective && s.group_depth > 0)
      throw_error(status::invalid_argument,
                  std::string(cn) +
                      ": called inside group_start()/group_end(); only send and recv may be "
                      "grouped");
  }

  // ---- reliability watch --------------------------------------------------------

  /// Publishes this call (after validation, before any byte moves). A
  /// send/recv group involves only some ranks, so it is not numbered; the
  /// counts of an all_to_allv differ between ranks by design, so only its
  /// other fields are compared.
  static void begin_call(state& s, coll c, std::size_t count, dtype dt, reduce_op op, int root,
                         variant_choice v) {
    if (c == coll::send_recv) return;
    if (c == coll::all_to_allv) count = 0;
    detail::publish_call(s.view.record(s.rank), ++s.seq,
                         detail::call_desc{c, dt, op, root, v.algo, v.proto, count});
  }

  /// Compares this rank's last `depth` calls with `peer`'s calls of the same
  /// sequence numbers, where the peer has published them (one cache line).
  static status compare_with(state& s, int peer, std::uint64_t depth) {
    for (std::uint64_t k = 0; k < depth && k < s.seq; ++k) {
      const std::uint64_t seq = s.seq - k;
      detail::call_desc mine, theirs;
      if (!detail::read_call(s.view.record(s.rank), seq, mine) ||
          !detail::read_call(s.view.record(peer), seq, theirs))
        continue;
      const detail::call_field f = detail::differing_field(mine, theirs);
      if (f == detail::call_field::none) continue;
      s.watch_what = "call #" + std::to_string(seq) + " differs between ranks: rank " +
                     std::to_string(s.rank) + " called " + mine.str() + ", rank " + std::to_string(peer) +
                     " called " + theirs.str() + " (the " + detail::name(f) + " differs)";
      detail::raise_abort(s.view.header(), detail::abort_cause{status::mismatch, f, s.rank, peer});
      return status::mismatch;
    }
    return status::ok;
  }

  /// After a call: the previous rank's last two calls are compared with this
  /// rank's (its record is one cache line). Every rank comparing with its
  /// neighbour covers any pair that differs; the earlier call catches a
  /// neighbour that had not published the mismatched call when this one ended.
  static void end_call(state& s, coll c) {
    if (c == coll::send_recv) return;
    if (s.opt.check_calls && s.size > 1 && compare_with(s, (s.rank + s.size - 1) % s.size, 2) != status::ok)
      fail(s, c, status::mismatch);
  }

  /// The executor's periodic check (from slow waits only): up to 64 peers per
  /// tick, rotating, are compared for mismatched calls and probed for death.
  static status watch(const void* ctx) {
    state& s = *static_cast<state*>(const_cast<void*>(ctx));
    const int n = s.size < 65 ? s.size : 64;
    const auto me = static_cast<std::int32_t>(::getpid());
    for (int i = 0; i < n; ++i) {
      const int peer = s.watch_next;
      s.watch_next = (s.watch_next + 1) % s.size;
      if (peer == s.rank) continue;
      if (const status st = compare_with(s, peer, transport::call_history); st != status::ok) return st;
      const transport::rank_record* rec = s.view.record(peer);
      detail::proc_identity id;
      id.pid = detail::load_acquire(&rec->pid);
      if (id.pid == 0 || id.pid == me) continue;  // not joined yet, or a thread rank of this process
      id.start_time = detail::load_relaxed(&rec->start_time);
      id.pid_ns = detail::load_relaxed(&rec->pid_ns);
      if (detail::probe(id, s.pid_ns) == detail::proc_state::dead) {
        s.watch_what = "rank " + std::to_string(peer) + " (pid " + std::to_string(id.pid) +
                       ") died: its process exited or was killed";
        detail::raise_abort(s.view.header(),
                            detail::abort_cause{status::peer_dead, detail::call_field::none, peer, -1});
        return status::peer_dead;
      }
    }
    return status::ok;
  }

  static void validate(state& s, coll c, const void* send, const void* recv, std::size_t count, dtype dt,
                       reduce_op op, int root) {
    const char* cn = name(c);
    // Messages are built only on failure: this runs on every call.
    auto where = [&] { return std::string(cn) + " (rank " + std::to_string(s.rank) + ")"; };
    check_usable(s, cn, c != coll::send_recv);
    require(is_valid(dt), cn, [&] {
      return std::string("dtype " + std::to_string(static_cast<int>(dt)) + " is not a collx dtype");
    });
    if (is_reduction(c)) {
      require(is_valid(op), cn, [&] {
        return std::string("reduce_op " + std::to_string(static_cast<int>(op)) + " is not a collx reduce_op");
      });
      if (!is_supported(op, dt))
        throw_error(status::not_supported,
                    where() + ": reduce_op " + name(op) + " is not supported for dtype " + name(dt));
    }
    if (c == coll::broadcast || c == coll::reduce)
      require(root >= 0 && root < s.size, cn, [&] {
        return std::string("root " + std::to_string(root) + " is out of range for " + std::to_string(s.size) +
                           " ranks");
      });
    // Element counts of each buffer, refusing products that overflow.
    const std::size_t esz = size_of(dt), P = static_cast<std::size_t>(s.size);
    const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
    require(count <= limit / esz / P, cn, [&] {
      return std::string("count " + std::to_string(count) + " overflows the addressable byte range");
    });
    std::size_t send_elems = count, recv_elems = count;
    if (c == coll::all_gather) recv_elems = count * P;
    if (c == coll::reduce_scatter) send_elems = count * P;
    if (c == coll::all_to_all) send_elems = recv_elems = count * P;
    const bool reads_send = c != coll::broadcast || s.rank == root;
    const bool writes_recv = c != coll::reduce || s.rank == root;
    if (count > 0) {
      require(!reads_send || send != nullptr, cn,
              [&] { return std::string("send buffer is null with count " + std::to_string(count)); });
      require(!writes_recv || recv != nullptr, cn,
              [&] { return std::string("recv buffer is null with count " + std::to_string(count)); });
    }
    if (count == 0 || !reads_send || !writes_recv) return;
    // Partial overlap of send and recv is never valid; only the in-place layout is.
    const auto* sb = static_cast<const std::byte*>(send);
    const auto* rb = static_cast<const std::byte*>(recv);
    const std::size_t sbytes = send_elems * esz, rbytes = recv_elems * esz;
    const bool overlap = sb < rb + rbytes && rb < sb + sbytes;
    if (!overlap) return;
    const std::size_t own = static_cast<std::size_t>(s.rank) * count * esz;
    bool in_place = false;
    switch (c) {
      case coll::all_gather: in_place = sb == rb + own; break;
      case coll::reduce_scatter: in_place = rb == sb + own; break;
      case coll::all_to_all: in_place = false; break;
      default: in_place = sb == rb; break;
    }
    require(in_place, cn, [&] {
      if (c == coll::all_to_all)
        return std::string("send and recv buffers overlap; all_to_all is out of place only");
      return std::string(
          "send and recv buffers overlap without being the in-place layout (see collx/communicator.hpp)");
    });
  }

  void run(coll c, const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root,
           variant_choice v) {
    state& s = live(name(c));
    validate(s, c, send, recv, count, dt, op, root);
    // The model's problem: the size as nccl-tests counts it, equal on every rank.
    const double per_rank = double(count) * double(size_of(dt));
    const bool whole = c == coll::all_reduce || c == coll::broadcast || c == coll::reduce;
    const double bytes = whole ? per_rank : per_rank * s.size;
    state::remembered_choice& memo = s.choice_memo[static_cast<int>(c)];
    if (memo.valid && memo.bytes == bytes && memo.requested.algo == v.algo &&
        memo.requested.proto == v.proto) {
      v = memo.chosen;
    } else {
      const tune::problem q{c, s.size, bytes, s.size > 1 && bytes >= double(s.view.user_buffer_min_bytes()),
                            s.oversubscribed};
      memo.valid = false;
      memo.requested = v;
      v = resolve(s, c, v, &q);
      memo.chosen = v;
      memo.bytes = bytes;
      memo.valid = true;
    }
    bool found = false;
    visit_variant<transport::shm>(c, v.algo, v.proto, [&]<class A, class Pr>() {
      found = true;
      switch (c) {
#define COLLX_CASE(C)                                                      \
  case coll::C:                                                            \
    found = launch_if<A, Pr, coll::C>(s, send, recv, count, dt, op, root); \
    break;
        COLLX_CASE(all_reduce)
        COLLX_CASE(all_gather)
        COLLX_CASE(reduce_scatter)
        COLLX_CASE(broadcast)
        COLLX_CASE(reduce)
        COLLX_CASE(all_to_all)
        COLLX_CASE(barrier)
#undef COLLX_CASE
        case coll::all_to_allv:  // run_v and run_group are their entry points
        case coll::send_recv: found = false; break;
      }
    });
    if (!found) no_variant(c, v);
  }

  /// launch<A, Pr, C> where A implements C; instantiates nothing otherwise.
  template <class A, class Pr, coll C>
  static bool launch_if(state& s, const void* send, void* recv, std::size_t count, dtype dt, reduce_op op,
                        int root) {
    if constexpr (A::implements(C)) {
      launch<A, Pr, C>(s, send, recv, count, dt, op, root);
      return true;
    } else {
      return false;
    }
  }

  [[noreturn]] static void no_variant(coll c, variant_choice v) {
    throw_error(status::not_supported, std::string(name(c)) + ": no compiled variant " + name(v.algo) + "/" +
                                           name(v.proto) + " serves this collective on the shm transport");
  }

  /// Fills in `automatic`: the call's choice, else the communicator's option
  /// (ignored where its algorithm does not implement c), else the automatic
  /// choice among compiled variants allowed by COLLX_ALGO/COLLX_PROTO (and
  /// deterministic where the options ask for it; see collx/selection.hpp).
  static variant_choice resolve(const state& s, coll c, variant_choice v, const tune::problem* q = nullptr) {
    if (v.algo == algo_id::automatic && implements(s.opt.variant.algo, c)) v.algo = s.opt.variant.algo;
    if (v.proto == proto_id::automatic) v.proto = s.opt.variant.proto;
    if (s.opt.deterministic && c == coll::all_reduce && v.algo != algo_id::automatic &&
        !algo_is_deterministic(v.algo))
      throw_error(status::invalid_argument, std::string(name(c)) + ": algorithm " + name(v.algo) +
                                                " does not give deterministic results, which the "
                                                "communicator's options require (COLLX_DETERMINISTIC)");
    if (v.algo == algo_id::automatic || v.proto == proto_id::automatic) {
      const variant_choice chosen =
          choose_variant<transport::shm>(c, v, s.opt.allowed, s.opt.deterministic, q);
      if (chosen.algo == algo_id::automatic || chosen.proto == proto_id::automatic)
        throw_error(status::not_supported,
                    std::string(name(c)) + ": no compiled variant" +
                        (v.algo != algo_id::automatic ? std::string(" of ") + name(v.algo) : std::string()) +
                        " allowed by COLLX_ALGO/COLLX_PROTO" +
                        (s.opt.deterministic ? " with deterministic results" : "") +
                        " serves this collective on the shm transport");
      v = chosen;
    }
    return v;
  }

  // ---- all_to_allv ------------------------------------------------------------------

  template <std::signed_integral I>
  std::vector<std::size_t> to_sizes(const I* v, const char* what) const {
    std::vector<std::size_t> out;
    if (v == nullptr) return out;  // reported as a null array by validate_v
    const int P = size();
    out.resize(static_cast<std::size_t>(P));
    for (int j = 0; j < P; ++j) {
      require(v[j] >= 0, "all_to_allv", [&] {
        return std::string(what) + "[" + std::to_string(j) + "] is negative (" + std::to_string(v[j]) + ")";
      });
      out[static_cast<std::size_t>(j)] = static_cast<std::size_t>(v[j]);
    }
    return out;
  }

  void run_v(const buffer_desc& sb, const buffer_desc& rb, dtype dt, variant_choice v) {
    state& s = live("all_to_allv");
    validate_v(s, sb, rb, dt);
    v = resolve(s, coll::all_to_allv, v);
    bool found = false;
    visit_variant<transport::shm>(coll::all_to_allv, v.algo, v.proto, [&]<class A, class Pr>() {
      if constexpr (A::implements(coll::all_to_allv)) {
        found = true;
        launch_v<A, Pr>(s, sb, rb, dt);
      }
    });
    if (!found) no_variant(coll::all_to_allv, v);
  }

  static void validate_v(state& s, const buffer_desc& sb, const buffer_desc& rb, dtype dt) {
    const char* cn = "all_to_allv";
    check_usable(s, cn, true);
    require(is_valid(dt), cn, [&] {
      return std::string("dtype " + std::to_string(static_cast<int>(dt)) + " is not a collx dtype");
    });
    const std::size_t esz = size_of(dt), P = static_cast<std::size_t>(s.size);
    const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / esz;
    struct block {
      std::size_t lo, hi;
      std::size_t peer;
    };
    std::vector<block> blocks[2];
    const buffer_desc* sides[2] = {&sb, &rb};
    const char* side_name[2] = {"send", "recv"};
    for (int side = 0; side < 2; ++side) {
      const buffer_desc& b = *sides[side];
      const std::string sn = side_name[side];
      require(b.counts != nullptr, cn, [&] { return sn + "_counts is null"; });
      require(b.displs != nullptr, cn, [&] { return sn + "_displs is null"; });
      for (std::size_t j = 0; j < P; ++j) {
        const std::size_t c = b.counts[j], d = b.displs[j];
        auto entry = [&](const char* what, std::size_t val) {
          return sn + what + "[" + std::to_string(j) + "] = " + std::to_string(val);
        };
        require(c <= limit, cn, [&] {
          return entry("_counts", c) +
                 " overflows the addressable byte range (a negative value cast to "
                 "an unsigned type?)";
        });
        require(d <= limit, cn, [&] {
          return entry("_displs", d) +
                 " overflows the addressable byte range (a negative value cast to "
                 "an unsigned type?)";
        });
        require(d + c <= limit, cn, [&] {
          return entry("_displs", d) + " + " + entry("_counts", c) + " overflows the addressable byte range";
        });
        if (c == 0) continue;
        require(b.buf != nullptr, cn, [&] { return sn + " buffer is null with " + entry("_counts", c); });
        require(b.length == unknown_length || d + c <= b.length, cn, [&] {
          return "block of rank " + std::to_string(j) + " [" + std::to_string(d) + ", " +
                 std::to_string(d + c) + ") lies outside the " + sn + " buffer of " +
                 std::to_string(b.length) + " elements";
        });
        const auto base = reinterpret_cast<std::uintptr_t>(b.buf);
        blocks[side].push_back(block{base + d * esz, base + (d + c) * esz, j});
      }
    }
    // Receive blocks must be disjoint (each byte has one writer), and no send
    // block may overlap a receive block: the exchange is out of place.
    auto by_lo = [](const block& x, const block& y) { return x.lo < y.lo; };
    std::sort(blocks[1].begin(), blocks[1].end(), by_lo);
    for (std::size_t i = 1; i < blocks[1].size(); ++i)
      require(blocks[1][i - 1].hi <= blocks[1][i].lo, cn, [&] {
        return "recv blocks of ranks " + std::to_string(blocks[1][i - 1].peer) + " and " +
               std::to_string(blocks[1][i].peer) + " overlap";
      });
    for (const block& x : blocks[0]) {
      // The first receive block ending after x starts is the only candidate.
      auto it = std::partition_point(blocks[1].begin(), blocks[1].end(),
                                     [&](const block& y) { return y.hi <= x.lo; });
      require(it == blocks[1].end() || it->lo >= x.hi, cn, [&] {
        return "send block of rank " + std::to_string(x.peer) + " overlaps the recv block of rank " +
               std::to_string(it->peer) + "; all_to_allv is out of place only";
      });
    }
  }

  template <class Algo, class Proto>
  static void launch_v(state& s, const buffer_desc& sb, const buffer_desc& rb, dtype dt) {
    // Data movement runs on bytes: scale the layout by the element size.
    const std::size_t esz = size_of(dt), P = static_cast<std::size_t>(s.size);
    std::vector<std::size_t> bytes(4 * P);
    for (std::size_t j = 0; j < P; ++j) {
      bytes[j] = sb.counts[j] * esz;
      bytes[P + j] = sb.displs[j] * esz;
      bytes[2 * P + j] = rb.counts[j] * esz;
      bytes[3 * P + j] = rb.displs[j] * esz;
    }
    const peer_layout layout{bytes.data(), bytes.data() + P, bytes.data() + 2 * P, bytes.data() + 3 * P};
    mismatch_report report{};
    launch<Algo, Proto, coll::all_to_allv>(
        s, sb.buf, const_cast<void*>(rb.buf), 0, dt, reduce_op::sum, 0, extra_args{&layout, nullptr, &report},
        [&] {
          const auto r = std::to_string(s.rank), q = std::to_string(report.peer);
          if (report.peer == s.rank)
            return "send_counts[" + r + "] = " + std::to_string(report.got / esz) + " but recv_counts[" + r +
                   "] = " + std::to_string(report.expected / esz) + " (the block a rank sends itself)";
          return "recv_counts[" + q + "] = " + std::to_string(report.expected / esz) +
                 " on this rank, but rank " + q + " sends " + std::to_string(report.got / esz) +
                 " elements (its send_counts[" + r + "])";
        });
  }

  // ---- point to point ---------------------------------------------------------------

  void post_p2p(void* buf, std::size_t count, dtype dt, int peer, bool is_send) {
    const char* cn = is_send ? "send" : "recv";
    state& s = live(cn);
    check_usable(s, cn, false);
    require(is_valid(dt), cn, [&] {
      return std::string("dtype " + std::to_string(static_cast<int>(dt)) + " is not a collx dtype");
    });
    require(peer >= 0 && peer < s.size, cn, [&] {
      return "peer " + std::to_string(peer) + " is out of range for " + std::to_string(s.size) + " ranks";
    });
    const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
    require(count <= limit / size_of(dt), cn,
            [&] { return "count " + std::to_string(count) + " overflows the addressable byte range"; });
    require(count == 0 || buf != nullptr, cn,
            [&] { return "buffer is null with count " + std::to_string(count); });
    s.pending.push_back(p2p_op{buf, count, dt, peer, is_send});
    if (s.group_depth == 0) run_group(s);
  }

  static void run_group(state& s) {
    std::vector<p2p_op> ops = std::move(s.pending);
    s.pending.clear();
    if (ops.empty()) return;
    const char* cn = "group_end";
    check_usable(s, cn, false);
    // A receive buffer may not overlap any other buffer of the group.
    struct span_ {
      std::uintptr_t lo, hi;
      std::size_t op;
    };
    std::vector<span_> recvs, all;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].count == 0) continue;
      const auto lo = reinterpret_cast<std::uintptr_t>(ops[i].buf);
      const span_ sp{lo, lo + ops[i].count * size_of(ops[i].dt), i};
      all.push_back(sp);
      if (!ops[i].is_send) recvs.push_back(sp);
    }
    auto by_lo = [](const span_& x, const span_& y) { return x.lo < y.lo; };
    std::sort(recvs.begin(), recvs.end(), by_lo);
    auto describe = [&](std::size_t i) {
      return std::string(ops[i].is_send ? "send to " : "recv from ") + std::to_string(ops[i].peer);
    };
    for (const span_& x : all) {
      auto it =
          std::partition_point(recvs.begin(), recvs.end(), [&](const span_& y) { return y.hi <= x.lo; });
      for (; it != recvs.end() && it->lo < x.hi; ++it)
        require(it->op == x.op, cn, [&] {
          return "the buffer of the " + describe(it->op) + " overlaps the buffer of the " + describe(x.op) +
                 " in the same group";
        });
    }
    // Bucket by peer, keeping issue order; counts in bytes.
    const std::size_t P = static_cast<std::size_t>(s.size);
    std::vector<std::uint32_t> begin[2];
    std::vector<p2p_message> msgs[2];
    std::vector<std::size_t> index[2];  // position in ops, for error messages
    for (int side = 0; side < 2; ++side) {
      begin[side].assign(P + 1, 0);
      for (const p2p_op& o : ops)
        if (o.is_send == (side == 0)) ++begin[side][static_cast<std::size_t>(o.peer) + 1];
      for (std::size_t q = 0; q < P; ++q) begin[side][q + 1] += begin[side][q];
      msgs[side].resize(begin[side][P]);
      index[side].resize(begin[side][P]);
      std::vector<std::uint32_t> fill(begin[side].begin(), begin[side].end() - 1);
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const p2p_op& o = ops[i];
        if (o.is_send != (side == 0)) continue;
        const std::uint32_t at = fill[static_cast<std::size_t>(o.peer)]++;
        msgs[side][at] = p2p_message{o.buf, o.count * size_of(o.dt)};
        index[side][at] = i;
      }
    }
    const p2p_plan plan{msgs[0].data(), begin[0].data(), msgs[1].data(), begin[1].data()};
    mismatch_report report{};
    const variant_choice v = resolve(s, coll::send_recv, {algo_id::direct, proto_id::automatic});
    bool found = false;
    visit_variant<transport::shm>(coll::send_recv, v.algo, v.proto, [&]<class A, class Pr>() {
      if constexpr (A::implements(coll::send_recv)) {
        found = true;
        launch<A, Pr, coll::send_recv>(
            s, nullptr, nullptr, 0, dtype::uint8, reduce_op::sum, 0, extra_args{nullptr, &plan, &report},
            [&] {
              const auto q = std::to_string(report.peer);
              const auto r = std::to_string(s.rank);
              if (report.messages)
                return "rank " + q + " sends " + std::to_string(report.got) + " message(s) to rank " + r +
                       " in this group, rank " + r + " posted " + std::to_string(report.expected) +
                       " recv(s) from it";
              return "recv #" + std::to_string(report.message) + " from rank " + q +
                     " (in issue order) posted " + std::to_string(report.expected) + " bytes, but rank " + q +
                     " sends " + std::to_string(report.got) + " bytes";
            });
      }
    });
    if (!found) no_variant(coll::send_recv, v);
  }

  static std::string no_detail() { return {}; }

  /// Runs the schedule of <Algo, Proto, C> on this rank. `mismatch_detail`
  /// explains a status::mismatch from what the schedule put in extra.report.
  template <class Algo, class Proto, coll C, class Detail = decltype(&no_detail)>
  static void launch(state& s, const void* send, void* recv, std::size_t count, dtype dt, reduce_op op,
                     int root, extra_args extra = {}, Detail mismatch_detail = &no_detail) {
    s.last = variant_choice{Algo::id, Proto::id};
    begin_call(s, C, count, dt, op, root, s.last);
    exec::host ex;
    ex.abort_word = s.view.abort_word();
    ex.deadline_ns = 0;  // from the first slow wait on
    ex.timeout_ns = static_cast<std::uint64_t>(s.opt.timeout.count()) * 1000000ull;
    ex.spin_ns = s.spin_ns;
    if (s.oversubscribed) {
      ex.bells = s.view.doorbell(0);
      ex.self = s.rank;
      ex.sleep = s.opt.sleep;
    }
    ex.check = &communicator::watch;
    ex.check_ctx = &s;
    if (s.opt.check_calls && s.size > 1)
      ex.warm = &s.view.record((s.rank + s.size - 1) % s.size)->calls[s.seq % transport::call_history].seq;
    status st = status::ok;
    if constexpr (is_reduction(C)) {
      // One schedule per element size; the (dtype, op) kernels sit behind the erased reducer.
      const auto red = detail::make_erased_reducer(dt, op, static_cast<std::uint32_t>(s.size));
      auto go = [&]<std::size_t N>() {
        using W = detail::word<N>;
        st = run_schedule<Algo, Proto, C>(s, ex, red, static_cast<const W*>(send), static_cast<W*>(recv),
                                          count, root, extra);
      };
      switch (size_of(dt)) {
        case 1: go.template operator()<1>(); break;
        case 2: go.template operator()<2>(); break;
        case 4: go.template operator()<4>(); break;
        default: go.template operator()<8>(); break;
      }
    } else {
      // Data movement only: one instantiation per element size is enough.
      const std::size_t bytes = count * size_of(dt);
      reducer<std::uint8_t, reduce_op::sum> red{};
      st = run_schedule<Algo, Proto, C>(s, ex, red, static_cast<const std::uint8_t*>(send),
                                        static_cast<std::uint8_t*>(recv), bytes, root, extra);
    }
    if (st == status::mismatch) fail(s, C, st, mismatch_detail());
    if (st != status::ok) fail(s, C, st);
    end_call(s, C);
  }

  template <class Algo, class Proto, coll C, class T, class Red>
  static status run_schedule(state& s, const exec::host& ex, const Red& red, const T* send, T* recv,
                             std::size_t count, int root, const extra_args& extra) {
    prims<Proto, exec::host, transport::shm_view, T, Red> p(ex, s.view, s.rank, red);
    schedule_args<T> a{send, recv, count, root, s.rank, s.size, extra.layout, extra.plan, extra.report};
    return Algo::template run<C>(p, a);
  }

  [[noreturn]] static void fail(state& s, coll c, status st, const std::string& extra = {}) {
    std::string msg =
        std::string(name(c)) + " (rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) + "): ";
    if (st == status::aborted) {
      // A dead peer or a mismatch seen by another rank is reported as such here too.
      const detail::abort_cause cause = detail::read_abort(s.view.header());
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
    s.err = st;
    s.err_msg = msg;
    throw_error(st, msg);
  }

  std::shared_ptr<state> s_;
};

// ---- explicit composition ------------------------------------------------------
template <class Algo, class Proto, class T>
void all_reduce(communicator& c, const T* send, T* recv, std::size_t count, reduce_op op) {
  c.execute<Algo, Proto, coll::all_reduce>(send, recv, count, dtype_of<T>, op, 0);
}
template <class Algo, class Proto, class T>
void all_gather(communicator& c, const T* send, T* recv, std::size_t sendcount) {
  c.execute<Algo, Proto, coll::all_gather>(send, recv, sendcount, dtype_of<T>, reduce_op::sum, 0);
}
template <class Algo, class Proto, class T>
void reduce_scatter(communicator& c, const T* send, T* recv, std::size_t recvcount, reduce_op op) {
  c.execute<Algo, Proto, coll::reduce_scatter>(send, recv, recvcount, dtype_of<T>, op, 0);
}
template <class Algo, class Proto, class T>
void broadcast(communicator& c, const T* send, T* recv, std::size_t count, int root) {
  c.execute<Algo, Proto, coll::broadcast>(send, recv, count, dtype_of<T>, reduce_op::sum, root);
}
template <class Algo, class Proto, class T>
void reduce(communicator& c, const T* send, T* recv, std::size_t count, reduce_op op, int root) {
  c.execute<Algo, Proto, coll::reduce>(send, recv, count, dtype_of<T>, op, root);
}
template <class Algo, class Proto, class T>
void all_to_all(communicator& c, const T* send, T* recv, std::size_t count) {
  c.execute<Algo, Proto, coll::all_to_all>(send, recv, count, dtype_of<T>, reduce_op::sum, 0);
}
template <class Algo, class Proto, class T>
void all_to_allv(communicator& c, const T* send, const std::size_t* send_counts,
                 const std::size_t* send_displs, T* recv, const std::size_t* recv_counts,
                 const std::size_t* recv_displs) {
  c.execute_v<Algo, Proto>(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype_of<T>);
}
template <class Algo, class Proto>
void barrier(communicator& c) {
  c.execute<Algo, Proto, coll::barrier>(nullptr, nullptr, 0, dtype::uint8, reduce_op::sum, 0);
}

}  // namespace collx
