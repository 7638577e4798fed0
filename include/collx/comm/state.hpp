// collx/comm/state.hpp — what one rank's communicator holds between calls.
//
// One state per rank, owned through a shared_ptr by the communicator handle
// (so handles move cheaply and a thread group's vector can be resized). It
// keeps the transport's view of the shared memory alive (`memory`), the
// options, the error state, the automatic choice remembered per collective,
// the queued point-to-point transfers of an open group, and the reliability
// watch's sequence numbers (comm/watch.hpp).
//
// Thread-safety: a state is used by one thread at a time (the communicator's
// contract); only the shared memory it points into is touched by peers.
// Errors: live() throws status::invalid_argument for a default-constructed,
// moved-from or destroyed communicator, naming the operation.
#pragma once

#include <collx/coll.hpp>
#include <collx/comm/measured_choice.hpp>
#include <collx/comm/p2p_group.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/memory_kind.hpp>
#include <collx/detail/sched_stat.hpp>
#include <collx/error.hpp>
#include <collx/options.hpp>
#include <collx/transport/symmetric.hpp>

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace collx::comm {

template <class Transport>
struct state {
  std::shared_ptr<void> memory;  // owns what `view` points into (the shm segment)
  typename Transport::view view{};
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
    double contention = 0;
    bool in_place = false;
    bool mapped = false;  // the buffers were symmetric memory (comm/dispatch.hpp, priced_mapped)
  };
  remembered_choice choice_memo[coll_count];
  /// The measured choice's size classes (comm_options::tune_online).
  measured_choices measured;
  /// Contention as the ranks agreed it (comm/contention.hpp): the weight of
  /// the calls since the last decision point, the points passed, the agreed
  /// share, and this rank's last run-queue sample.
  struct contention_state {
    double weight = 0;
    std::uint64_t point = 0;
    double share = 0;
    detail::sched_sample sample{};
  } contention;
  /// Buffers already found to be CPU-reachable (comm_options::check_pointers).
  detail::pointer_memo<detail::memory_kind> host_buffers;
  int group_depth = 0;              // open group_start() calls
  std::vector<p2p_op> pending;      // transfers queued in the open group
  peer_scratch scratch;             // per-call arrays of groups and all_to_allv, reused
  std::uint64_t spin_ns = 0;        // resolved comm_options::spin
  bool oversubscribed = false;      // more ranks than this host's online CPUs
  double cpu_share = 1;             // CPUs / ranks of this host when oversubscribed (tune::problem)
  int host_cpus = 1;                // this host's online CPUs (tune::scheduler_slice_us)
  std::shared_ptr<void> keepalive;  // e.g. the bootstrap session of process ranks
  /// Peers' symmetric memory this rank mapped (communicator::alloc_symmetric;
  /// the view points at it), and the number of the next allocation.
  std::shared_ptr<transport::symmetric_table> symmetric;
  std::uint64_t symmetric_serial = 0;
  /// Every rank is a thread of this process (create_thread_group): peers'
  /// buffers are loads wherever they lie, priced as symmetric memory is.
  /// Known at creation; the fences use loads_peers (some rank in this
  /// process, read from the published identities at the first call).
  bool peers_in_process = false;
  /// Whether another rank runs in this process and loads this rank's buffers
  /// (comm/watch.hpp, loads_peers): -1 until the first call decides.
  std::int8_t loads_peers = -1;
  /// Inside a send/recv group whose peers may load this rank's buffers
  /// (comm/watch.hpp, begin_call: groups are not numbered calls).
  bool in_group = false;
  // Reliability watch (comm/watch.hpp): this rank's call sequence, and the
  // state of the periodic check run from slow waits.
  std::uint64_t seq = 0;
  std::uint64_t checked = 0;            // calls up to here compared with the previous rank's
  std::uint64_t next_checked_seen = 0;  // the next rank's `checked` as last loaded
  std::uint64_t probe_at = 0;           // the first call whose end compares again
  std::uint64_t pid_ns = 0;
  int watch_next = 0;      // next peer the periodic check looks at
  std::string watch_what;  // detail of the failure the check found

  /// What follows from `ranks_here` of this communicator's ranks sharing
  /// this host: whether they outnumber its online CPUs (not this process's
  /// affinity, which a launcher may have narrowed to one CPU; the count is
  /// the same on every rank of the host, so the automatic choice that depends
  /// on it is too), the model's CPU share, and the default spin — long only
  /// if the ranks fit on the CPUs; none otherwise (a waiting rank then hands
  /// its core at once to the peer it waits for). Needs `opt` set.
  void place_on_host(int ranks_here) {
    const long ncpu = ::sysconf(_SC_NPROCESSORS_ONLN);
    oversubscribed = ncpu > 0 && ranks_here > ncpu;
    host_cpus = ncpu > 0 ? static_cast<int>(ncpu) : 1;
    cpu_share = oversubscribed ? double(ncpu) / ranks_here : 1;
    spin_ns = static_cast<std::uint64_t>(opt.spin.count());
    if (spin_ns == 0) spin_ns = oversubscribed ? 0 : 100'000;  // comm_options::spin says why
    contention = {};
    contention.share = opt.contention >= 0 ? opt.contention : 0;
  }

  state() = default;
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  ~state() { depart(); }

  /// A rank that leaves cleanly clears its pid, so peers still finishing
  /// their part (a barrier's last round) do not take its exit for a death.
  void depart() {
    if (memory == nullptr) return;
    auto* rec = view.record(rank);
    if (detail::load_relaxed(&rec->pid) == static_cast<std::int32_t>(::getpid()))
      detail::store_release(&rec->pid, std::int32_t{0});
  }
};

/// The state behind a handle, or an error naming `op` if there is none.
template <class Transport>
state<Transport>& live(const std::shared_ptr<state<Transport>>& s, const char* op) {
  if (s == nullptr)
    throw_error(status::invalid_argument,
                std::string(op) + ": communicator is not initialised (default-constructed or moved-from)");
  if (s->destroyed)
    throw_error(status::invalid_argument, std::string(op) + ": communicator used after destroy()");
  return *s;
}

}  // namespace collx::comm
