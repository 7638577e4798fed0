// collx/net.hpp — communicators whose ranks are processes on different hosts,
// over TCP sockets or InfiniBand verbs, each behind a per-communicator proxy
// (transport/proxied.hpp, net/).
//
//   collx::net::init_rank(P, id, rank, opts)   as collx::init_rank, over sockets
//   collx::net::from_env(opts)                 as collx::from_env, over sockets
//
// Both return a net_communicator (basic_communicator<transport::proxied,
// exec::host>) with the same API as the shared-memory communicator. A
// separate header rather than a `transport=` option: the transport is a
// template argument of the communicator, so the choice changes the type a
// program holds, and a program of one host does not compile epoll, the
// proxy and the connection code.
//
// Ranks of one host (equal host ids, net/host_id.hpp) move their steps
// through shared memory: each rank's FIFOs are a POSIX shm object the others
// of its host map, and the receiver reads the sender's FIFO in place, as on
// the shm transport (transport/proxied.hpp); the proxy carries only their
// control traffic (aborts, goodbyes, call records) and sees their deaths.
// COLLX_NET_SHM=0 (net_options::peers_on_host) sends them over the network
// too; where one rank of a host cannot map another's memory (containers
// with separate /dev/shm), every rank of that host falls back to the network
// (COLLX_DEBUG=1 says which and why). Every other peer is reached over the
// network; hierarchical schedules are collx/hier.hpp's. Algorithms: those that
// need only FIFOs (ring, tree, rhd, rabenseifner, bruck, bruck_a2a, direct) with the
// Simple and LL protocols (a proxy delivers a step whole before its tail, so
// LL's reader waits for the tail and then checks its lines' flags; a host
// mate's lines it polls as they land); LL128 is refused by the composition
// gate (no in-order 128-byte lines across hosts), nvls for want of peer
// memory. The automatic choice prices the socket variants with the profile a
// communicator loads (by default the shared-memory preset: no network
// preset exists yet), restricted to what composes on this transport; where
// the ranks fill hosts of equal size numbered host by host, that profile is
// placed on them (ranks_per_node, and tune::cpu_nodes_tcp's inter link if
// it has none: comm/dispatch.hpp, model_for) and the tree and rhd take
// their node shapes (schedule_args::node_ranks).
//
// Environment (read by net_options::from_env):
//   COLLX_NET_SHM           1 (default): ranks of one host through shared memory; 0: over the network
//   COLLX_NET               socket (default) or ib (net/ib_proxy.hpp; needs
//                           rdma-core, collx::ibverbs, unless a provider is given)
//   COLLX_IB_HCA, COLLX_IB_GID_INDEX, COLLX_IB_QPS_PER_CONNECTION,
//   COLLX_IB_TIMEOUT, COLLX_IB_RETRY_CNT   the ib transport (net/ib_proxy.hpp)
//   COLLX_SOCKET_IFNAME     interfaces, NCCL's syntax (net/ifname.hpp)
//   COLLX_SOCKET_FAMILY     AF_INET or AF_INET6
//   COLLX_SOCKET_NSTREAMS   TCP streams per peer, 1..16 (default 1); equal on every rank
//   COLLX_SOCKET_SPIN_US    how long the proxy busy-polls before sleeping (default 0)
// Simple's slots default to 512 KiB here (socket_options::simple_slot_bytes)
// unless COLLX_BUFFSIZE or comm_options set them; the FIFO geometry must be
// equal on every rank (checked when connecting).
//
// Errors: as collx/process.hpp's, plus status::not_supported for COLLX_NET=ib
// without rdma-core, no RDMA device or no matching interface, status::mismatch for ranks that disagree on the
// stream count, status::timeout naming the ranks whose connections are
// missing or the FIFO geometry differs. During calls, a peer that dies or
// closes its connections fails the pending call on every surviving rank
// with status::peer_dead naming it (with its address where this rank's own
// connection saw it go); a failure on one host (timeout, abort()) reaches
// the others; calls that differ between neighbouring ranks fail with
// status::mismatch (the proxies forward call records).
#pragma once

#include <collx/bootstrap/env.hpp>
#include <collx/bootstrap/root.hpp>
#include <collx/bootstrap/session.hpp>
#include <collx/comm/watch.hpp>
#include <collx/communicator.hpp>
#include <collx/detail/debug.hpp>
#include <collx/error.hpp>
#include <collx/net/connect.hpp>
#include <collx/net/host_id.hpp>
#include <collx/net/ib_proxy.hpp>
#include <collx/net/ifname.hpp>
#include <collx/net/proxy.hpp>
#include <collx/net/verbs_rdma.hpp>
#include <collx/options.hpp>
#include <collx/transport/proxied.hpp>
#include <collx/transport/shm_segment.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace collx {

/// A communicator whose ranks reach each other over TCP.
using net_communicator = basic_communicator<transport::proxied, exec::host>;

namespace net {

/// The socket transport's settings.
struct socket_options {
  int nstreams = 1;
  /// Simple's slot bytes over the network when comm_options keeps the
  /// shared-memory default (64 KiB) and COLLX_BUFFSIZE is unset: 8 slots of
  /// 64 KiB let 256 KiB per connection be in flight (half the FIFO per
  /// chunk), below a network's bandwidth × delay; 512 KiB slots make it
  /// 4 MiB per FIFO, NCCL's network buffer size. 0: keep comm_options'.
  std::uint32_t simple_slot_bytes = 512 * 1024;
  /// How long the proxy busy-polls after its last progress before it sleeps
  /// (the rank wakes it through an eventfd). 0 by default: on a host whose
  /// CPUs are shared, a spinning proxy takes the CPU its rank needs
  /// (all_reduce of 8 B over veth on 2 busy CPUs: 850 us with 100 us of
  /// spinning, 140 us without, bench/results/net_allreduce_veth.md).
  std::chrono::microseconds proxy_spin{0};
  std::string ifname;  // empty: the default filter (net/ifname.hpp)
  std::string family;  // empty: any

  static socket_options from_env() {
    socket_options o;
    if (const char* v = std::getenv("COLLX_SOCKET_NSTREAMS"); v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      require(*end == '\0' && n >= 1 && n <= 16, "COLLX_SOCKET_NSTREAMS",
              "'" + std::string(v) + "' is not a stream count in [1, 16]");
      o.nstreams = static_cast<int>(n);
    }
    if (const char* v = std::getenv("COLLX_SOCKET_SPIN_US"); v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long us = std::strtol(v, &end, 10);
      require(*end == '\0' && us >= 0 && us <= 1'000'000, "COLLX_SOCKET_SPIN_US",
              "'" + std::string(v) + "' is not a number of microseconds in [0, 1000000]");
      o.proxy_spin = std::chrono::microseconds(us);
    }
    if (const char* v = std::getenv("COLLX_SOCKET_IFNAME")) o.ifname = v;
    if (const char* v = std::getenv("COLLX_SOCKET_FAMILY")) o.family = v;
    return o;
  }
};

/// Which network a communicator uses, and its settings.
struct net_options {
  enum class kind : std::uint8_t { socket, ib };
  kind transport = kind::socket;
  socket_options socket;
  ib_options ib;
  /// How ranks of one host reach each other: through shared memory (their
  /// FIFOs mapped by each other, no proxy, as on the shm transport; the
  /// default) or over the network like every other peer (COLLX_NET_SHM=0).
  enum class same_host : std::uint8_t { shared_memory, network };
  same_host peers_on_host = same_host::shared_memory;
  /// The host this rank counts as being on; ranks with equal ids are one
  /// host (oversubscription, shared memory). Empty: net::host_id()
  /// (COLLX_HOSTID, else host name and boot id). Set it to play several
  /// hosts with the thread ranks of one process.
  std::string host;

  net_options() = default;
  net_options(const socket_options& so) : socket(so) {}  // NOLINT: the socket transport with these settings
  net_options(const ib_options& io) : transport(kind::ib), ib(io) {}  // NOLINT: the ib transport

  /// COLLX_NET (socket | ib) and the chosen transport's variables.
  static net_options from_env() {
    net_options o;
    if (const char* m = std::getenv("COLLX_NET_SHM"); m != nullptr && *m != '\0') {
      const std::string f = m;
      require(f == "0" || f == "1", "COLLX_NET_SHM", "'" + f + "' is not 0 or 1");
      o.peers_on_host = f == "0" ? same_host::network : same_host::shared_memory;
    }
    const char* v = std::getenv("COLLX_NET");
    const std::string name = v != nullptr ? v : "";
    if (name.empty() || name == "socket") {
      o.socket = socket_options::from_env();
      return o;
    }
    if (name != "ib")
      throw_error(status::invalid_argument, "COLLX_NET='" + name + "': expected socket or ib");
    o.transport = kind::ib;
    auto number = [](const char* var, long lo, long hi, long& out) {
      const char* t = std::getenv(var);
      if (t == nullptr || *t == '\0') return;
      char* end = nullptr;
      const long n = std::strtol(t, &end, 10);
      require(*end == '\0' && n >= lo && n <= hi, var,
              "'" + std::string(t) + "' is not in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      out = n;
    };
    long qps = o.ib.qps, gid = o.ib.gid_index, timeout = o.ib.timeout, retry = o.ib.retry_cnt;
    number("COLLX_IB_QPS_PER_CONNECTION", 1, 16, qps);
    number("COLLX_IB_GID_INDEX", 0, 255, gid);
    number("COLLX_IB_TIMEOUT", 1, 31, timeout);
    number("COLLX_IB_RETRY_CNT", 0, 7, retry);
    o.ib.qps = static_cast<int>(qps);
    o.ib.gid_index = static_cast<int>(gid);
    o.ib.timeout = static_cast<std::uint8_t>(timeout);
    o.ib.retry_cnt = static_cast<std::uint8_t>(retry);
    if (const char* h = std::getenv("COLLX_IB_HCA")) o.ib.hca = h;
    if (o.ib.hca.size() > 0) (void)parse_if_filter(o.ib.hca, "COLLX_IB_HCA");  // malformed: refused now
    return o;
  }
};

}  // namespace net

namespace comm {

/// The door from network creation into basic_communicator's private members.
struct net_access {
  /// What a socket communicator's state owns: its private FIFO memory, the
  /// step sizes the proxy reads, and the proxy (stopped first).
  struct holder {
    std::shared_ptr<transport::shm_segment> seg;
    std::vector<std::uint32_t> step_bytes;
    /// The FIFO memory of every peer on this host, mapped here, and its view
    /// per rank (base null for the others): proxied_view::on_host.
    std::vector<std::shared_ptr<transport::shm_segment>> host_segs;
    std::vector<transport::shm_view> on_host;
    std::unique_ptr<net::proxy_base> px;
    std::chrono::milliseconds drain{2000};
    std::string why_network;  // why the ranks of this host do not share memory, for COLLX_DEBUG
    ~holder() {
      if (px) px->stop(drain);
    }
  };

  static net_communicator join(bootstrap::session s, const bootstrap::secret_bytes& secret,
                               const comm_options& opt_in, const net::net_options& no) {
    const net::socket_options& so = no.socket;
    const bool ib = no.transport == net::net_options::kind::ib;
    const int rank = s.rank(), nranks = s.size();
    const auto deadline = bootstrap::clock::now() + opt_in.timeout;
    comm_options opt = opt_in;
    // The ranks of this host (host ids through the bootstrap).
    int local_ranks = 0;
    std::vector<std::uint8_t> same_host(static_cast<std::size_t>(nranks), 0);
    std::vector<std::uint64_t> hosts(static_cast<std::size_t>(nranks));
    {
      const std::uint64_t mine = net::host_hash(no.host.empty() ? net::host_id() : no.host);
      const std::vector<std::byte> all = s.allgather(&mine, sizeof mine);
      std::memcpy(hosts.data(), all.data(), hosts.size() * sizeof mine);
      for (int r = 0; r < nranks; ++r) {
        const std::uint64_t h = hosts[static_cast<std::size_t>(r)];
        local_ranks += h == mine;
        same_host[static_cast<std::size_t>(r)] = h == mine && r != rank;
      }
    }
    if (so.simple_slot_bytes != 0 && std::getenv(proto::simple::channel.fifo_bytes_env) == nullptr &&
        opt.slot_bytes_of<proto::simple>() == proto::simple::channel.default_slot_bytes)
      opt.slot_bytes_of<proto::simple>() = so.simple_slot_bytes;
    opt.validate();
    auto h = std::make_shared<holder>();
    const transport::shm_layout layout = net_communicator::layout_for(nranks, opt);
    const bool share = share_host_memory(s, *h, layout, same_host, local_ranks,
                                         no.peers_on_host == net::net_options::same_host::shared_memory);
    const transport::shm_view local = h->seg->view();
    if (opt.step_origin != 0) local.reset_counters(opt.step_origin);
    local.header()->single_copy_denied = 1;
    local.header()->single_copy_min = ~std::uint64_t{0};
    h->step_bytes.assign(std::size_t(nranks) * local.layout.nchannels * opt.fifo_slots, 0);
    h->drain = std::min<std::chrono::milliseconds>(opt.timeout, std::chrono::milliseconds(2000));

    transport::shm_header* hdr = local.header();
    net::proxy::hooks hooks;
    hooks.raise = [hdr](status why, int peer) {
      raise_abort(hdr, abort_cause{why, call_field::none, peer, -1});
    };
    hooks.adopt = [hdr](std::uint64_t packed) {
      std::uint64_t expected = 0;
      detail::compare_exchange(&hdr->abort_cause, expected, packed);
      std::uint32_t zero = 0;
      detail::compare_exchange(&hdr->abort, zero, 1u);
    };
    hooks.cause = [hdr] { return detail::load_acquire(&hdr->abort_cause); };
    detail::doorbell* bells = nullptr;
    if (share) {
      // The lowest rank of this host lends its doorbells to every rank here.
      int low = rank;
      for (int q = 0; q < rank; ++q)
        if (same_host[static_cast<std::size_t>(q)]) low = std::min(low, q);
      bells = (low == rank ? local : h->on_host[static_cast<std::size_t>(low)]).doorbell(0);
      hooks.bell = bells + rank;
      hooks.through_memory = same_host;
    }
    const auto spin = static_cast<std::uint64_t>(std::chrono::nanoseconds(so.proxy_spin).count());
    bool (*progress)(const void*) = nullptr;
    bool (*receive)(const void*) = nullptr;
    if (ib) {
      net::ib_options io = no.ib;
      if (io.provider == nullptr) io.provider = &net::verbs::system_provider();
      s.set_timeout(std::chrono::duration_cast<std::chrono::milliseconds>(std::max(
          deadline - bootstrap::clock::now(), bootstrap::clock::duration(std::chrono::milliseconds(1)))));
      h->px = std::make_unique<net::ib_proxy>(local, layout.total_bytes(), rank, s, io, h->step_bytes.data(),
                                              spin, std::move(hooks));
      progress = &net::ib_proxy::try_progress_of;
      receive = &net::ib_proxy::try_receive_of;
    } else {
      const net::if_address ifa =
          net::pick_interface(so.ifname.empty() ? nullptr : so.ifname.c_str(),
                              so.family.empty() ? nullptr : so.family.c_str(), net::list_interfaces());
      std::vector<net::peer_link> links = net::connect_mesh(s, secret, ifa, so.nstreams, layout, deadline);
      h->px = std::make_unique<net::proxy>(local, rank, std::move(links), so.nstreams, h->step_bytes.data(),
                                           spin, std::move(hooks));
      progress = &net::proxy::try_progress_of;
      receive = &net::proxy::try_receive_of;
    }
    transport::proxied_view v{local,
                              rank,
                              h->step_bytes.data(),
                              h->px.get(),
                              &net::proxy_base::failure_text_of,
                              progress,
                              h->px->idle_flag(),
                              h->px->wake_fd()};
    v.receive = receive;
    v.net_deferred = h->px->deferred_flag();
    if (share) {
      v.on_host = h->on_host.data();
      v.bells = bells;
    }
    v.node_ranks = net::ranks_per_host(hosts);
    v.peer_left = h->px->left_flags();
    v.on_departed = &net::proxy_base::departed_of;
    net_communicator c(h, v, rank, nranks, opt);
    // Oversubscription is per host: the ranks that share this one (the
    // constructor counted every rank of the communicator).
    c.s_->place_on_host(local_ranks);
    c.s_->keepalive = std::make_shared<bootstrap::session>(std::move(s));
    if (debug_on() && local_ranks > 1)
      std::fprintf(stderr, "collx: net rank %d: %s\n", rank,
                   share ? ("the " + std::to_string(local_ranks - 1) +
                            " other rank(s) of this host through shared memory, the rest over the network")
                               .c_str()
                         : ("every peer over the network (" + h->why_network + ")").c_str());
    return c;
  }

  /// The ranks whose steps reach this one through shared memory (its host's).
  static std::vector<int> peers_through_memory(const net_communicator& c) {
    std::vector<int> out;
    const transport::proxied_view& v = c.s_->view;
    for (int q = 0; q < c.size(); ++q)
      if (q != c.rank() && v.through_memory(q)) out.push_back(q);
    return out;
  }
  /// Steps this rank's proxy has sent over the network so far.
  static std::uint64_t steps_over_network(const net_communicator& c) {
    return std::static_pointer_cast<holder>(c.s_->memory)->px->steps_sent();
  }
  static std::uint64_t sends_over_network(const net_communicator& c) {
    return std::static_pointer_cast<holder>(c.s_->memory)->px->sends();
  }

 private:
  static bool debug_on() { return collx::detail::debug_enabled(); }

  /// This rank's FIFO memory, and (when `want` and it has peers on its host)
  /// that of every peer of its host mapped here: true when the ranks of this
  /// host share memory. Every rank of a host decides alike: they share only
  /// if each of them mapped every other's memory (two containers of one
  /// machine have one host id but may not share /dev/shm); otherwise all of
  /// them use the network, and h.why_network says why.
  static bool share_host_memory(bootstrap::session& s, holder& h, const transport::shm_layout& layout,
                                const std::vector<std::uint8_t>& same_host, int local_ranks, bool want) {
    const int rank = s.rank(), nranks = s.size();
    // Every rank takes part in the exchanges below (they are collective).
    struct shared_name {
      char name[64];
    } mine{};
    if (want && local_ranks > 1) {
      std::random_device rd;
      std::snprintf(mine.name, sizeof mine.name, "/collx-net-%d-%08x%08x", static_cast<int>(::getpid()), rd(),
                    rd());
      try {
        h.seg = transport::shm_segment::create_named(layout, mine.name);
      } catch (const error& e) {
        mine.name[0] = '\0';  // the peers of this host learn it through the exchange below
        h.why_network = std::string("its shared memory could not be made: ") + e.what();
      }
    }
    if (!h.seg) {
      h.seg = transport::shm_segment::create_anonymous(layout);
      if (h.why_network.empty()) h.why_network = want ? "no other rank on this host" : "COLLX_NET_SHM=0";
    }
    const std::vector<std::byte> names = s.allgather(&mine, sizeof mine);
    std::uint8_t mapped = mine.name[0] != '\0';
    std::string why;
    h.on_host.assign(static_cast<std::size_t>(nranks), transport::shm_view{});
    h.host_segs.assign(static_cast<std::size_t>(nranks), nullptr);
    for (int q = 0; q < nranks && mapped; ++q) {
      if (!same_host[static_cast<std::size_t>(q)]) continue;
      shared_name theirs;
      std::memcpy(&theirs, names.data() + std::size_t(q) * sizeof theirs, sizeof theirs);
      theirs.name[sizeof theirs.name - 1] = '\0';
      if (theirs.name[0] == '\0') {
        mapped = 0;
        why =
            "rank " + std::to_string(q) + " of this host does not share its memory (COLLX_NET_SHM=0 there?)";
        break;
      }
      try {
        h.host_segs[static_cast<std::size_t>(q)] = transport::shm_segment::open_named(layout, theirs.name);
        h.on_host[static_cast<std::size_t>(q)] = h.host_segs[static_cast<std::size_t>(q)]->view();
      } catch (const error& e) {
        mapped = 0;
        why = "rank " + std::to_string(rank) + " cannot map the memory of rank " + std::to_string(q) +
              ", which has the same host id: " + e.what();
      }
    }
    const std::vector<std::byte> all = s.allgather(&mapped, sizeof mapped);
    // Every rank has mapped what it could: the names may go.
    h.seg->unlink();
    bool share = mapped != 0;
    for (int q = 0; q < nranks; ++q)
      if (same_host[static_cast<std::size_t>(q)] && all[static_cast<std::size_t>(q)] == std::byte{0}) {
        share = false;
        if (why.empty())
          why = "rank " + std::to_string(q) + " of this host could not map every peer's memory";
      }
    if (!share) {
      h.on_host.assign(static_cast<std::size_t>(nranks), transport::shm_view{});
      h.host_segs.clear();
      if (!why.empty()) h.why_network = why;
    }
    return share;
  }
};

}  // namespace comm

namespace net {

/// The ranks whose steps reach this rank through shared memory: those of its
/// host, unless COLLX_NET_SHM=0 (net_options::peers_on_host) or one of them
/// could not map the others' memory. Ascending.
inline std::vector<int> peers_through_memory(const net_communicator& c) {
  return comm::net_access::peers_through_memory(c);
}

/// Steps this rank's proxy has sent over the network since the communicator
/// was made (every step to a peer that is not on this host), for tests and
/// diagnostics.
inline std::uint64_t steps_over_network(const net_communicator& c) {
  return comm::net_access::steps_over_network(c);
}

/// Send system calls this rank's proxy (or the rank on its behalf) made to
/// carry frames since the communicator was made: with credits and call
/// records riding the steps (net/proxy.hpp), about one per small call per
/// peer sent to. Socket transport; 0 for ib. For tests and diagnostics.
inline std::uint64_t sends_over_network(const net_communicator& c) {
  return comm::net_access::sends_over_network(c);
}

/// Rank `rank` of `nranks` processes, on any hosts, that all pass the same id.
inline net_communicator init_rank(int nranks, const unique_id& id, int rank,
                                  const comm_options& opt = comm_options::from_env(),
                                  const net_options& no = net_options::from_env()) {
  require(nranks >= 1 && rank >= 0 && rank < nranks, "net::init_rank",
          "rank " + std::to_string(rank) + " / nranks " + std::to_string(nranks) + " are out of range");
  opt.validate();
  const bootstrap::root_info info = bootstrap::decode_unique_id(id);
  return comm::net_access::join(bootstrap::session::connect(id, rank, nranks, opt.timeout), info.secret, opt,
                                no);
}

/// The rank a launcher started this process as (see collx::from_env); the
/// root address must be one every host reaches (COLLX_ROOT_ADDR or
/// MASTER_ADDR/MASTER_PORT, or a unique id in COLLX_UNIQUE_ID).
inline net_communicator from_env(const comm_options& opt = comm_options::from_env(),
                                 const net_options& no = net_options::from_env()) {
  opt.validate();
  const auto env = bootstrap::detect_launch_env();
  if (!env)
    throw_error(status::invalid_argument,
                "net::from_env: no launcher environment found (COLLX_RANK/COLLX_SIZE, RANK/WORLD_SIZE, "
                "OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS)");
  const bootstrap::secret_bytes secret = env->id ? bootstrap::decode_unique_id(*env->id).secret : env->secret;
  return comm::net_access::join(bootstrap::connect_from_env(*env, opt.timeout), secret, opt, no);
}

}  // namespace net
}  // namespace collx
