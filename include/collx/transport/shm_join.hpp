// collx/transport/shm_join.hpp — process ranks of one host joining one shm
// segment, and the identity every rank publishes in it.
//
// join_shm: rank 0 creates a named POSIX shm object, every rank tells the
// others (through the caller's rendezvous: allgather + barrier, e.g. a
// bootstrap::session) its host, boot id, FIFO geometry and options that must
// agree; the others map the object; each publishes its identity; the ranks
// agree whether single copy (cross-memory attach) works between all of them;
// rank 0 unlinks the name once all have mapped it, so nothing is left in
// /dev/shm even if every process is later killed.
//
// Memory ordering: a rank's identity (mapping address, start time, pid
// namespace) is stored relaxed before its pid is stored with release; a peer
// loads the pid with acquire first. The rendezvous' barriers order the
// single-copy verdict before any collective.
// Errors: status::not_supported when ranks run on different hosts,
// status::mismatch naming the rank and field when FIFO geometry, step origin
// or single_copy_min differ from rank 0's; the segment's own errors
// (shm_segment.hpp) and the rendezvous' pass through. On any failure the
// segment name is unlinked.
//
// Host only.
#pragma once

#include <collx/detail/atomic.hpp>
#include <collx/detail/proc.hpp>
#include <collx/error.hpp>
#include <collx/transport/peer_read.hpp>
#include <collx/transport/shm.hpp>
#include <collx/transport/shm_segment.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace collx::transport {

/// Writes this rank's process identity into its record (once, at creation).
inline void publish_identity(const shm_view& v, int rank) {
  const detail::proc_identity id = detail::self_identity();
  detail::store_relaxed(v.line(rank, shm_view::mapping), reinterpret_cast<std::uintptr_t>(v.base));
  rank_record* rec = v.record(rank);
  detail::store_relaxed(&rec->start_time, id.start_time);
  detail::store_relaxed(&rec->pid_ns, id.pid_ns);
  detail::store_release(&rec->pid, id.pid);
}

/// Whether `probe` (probe_peer_read or probe_peer_write) succeeds on every
/// peer process: it reads, or writes unchanged, the segment header's magic
/// word through each peer's own mapping (thread ranks of this process skip).
template <class Probe>
bool can_reach_peers(const shm_view& v, int rank, int nranks, Probe probe) {
  const rank_record* me = v.record(rank);
  for (int q = 0; q < nranks; ++q) {
    const rank_record* rec = v.record(q);
    const int pid = detail::load_acquire(&rec->pid);
    if (q == rank || pid == me->pid) continue;                           // a thread rank of this process
    if (detail::load_relaxed(&rec->pid_ns) != me->pid_ns) return false;  // its pid means nothing here
    if (!probe(pid, detail::load_relaxed(v.line(q, shm_view::mapping)), v.header()->magic)) return false;
  }
  return true;
}

/// What a process rank needs to agree on with the others to join.
struct shm_join_params {
  shm_layout layout{};
  /// Who owns each channel, for messages (the transport knows channels by number).
  const char* const* channel_names = nullptr;
  std::uint64_t step_origin = 0;
  std::uint64_t single_copy_min = 0;
  bool single_copy = true;
};

/// What each process rank tells the others through the rendezvous.
struct join_info {
  char host[64];
  char boot_id[40];
  char segment[64];  // rank 0's shm object name
  std::uint32_t nchannels;
  fifo_geometry fifo[max_channels];
  std::uint64_t step_origin;
  std::uint64_t single_copy_min;
};

/// Joins `r.size()` process ranks of this host in one segment (see the header
/// comment). Rendezvous: rank(), size(), allgather(const void*, size_t) →
/// std::vector<std::byte> of size() contributions, barrier().
template <class Rendezvous>
std::shared_ptr<shm_segment> join_shm(Rendezvous& r, const shm_join_params& p) {
  const int rank = r.rank(), nranks = r.size();
  join_info mine{};
  ::gethostname(mine.host, sizeof mine.host - 1);
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (std::fgets(mine.boot_id, sizeof mine.boot_id, f) == nullptr) mine.boot_id[0] = '\0';
    std::fclose(f);
  }
  mine.nchannels = p.layout.nchannels;
  for (std::uint32_t c = 0; c < p.layout.nchannels; ++c) mine.fifo[c] = p.layout.fifo[c];
  mine.step_origin = p.step_origin;
  mine.single_copy_min = p.single_copy_min;
  std::shared_ptr<shm_segment> seg;
  if (rank == 0) {
    std::random_device rd;
    std::snprintf(mine.segment, sizeof mine.segment, "/collx-%d-%08x%08x", static_cast<int>(::getpid()), rd(),
                  rd());
    seg = shm_segment::create_named(p.layout, mine.segment);
    if (p.step_origin != 0) seg->view().reset_counters(p.step_origin);
  }
  const std::vector<std::byte> all = r.allgather(&mine, sizeof mine);
  std::vector<join_info> infos(static_cast<std::size_t>(nranks));
  std::memcpy(infos.data(), all.data(), all.size());
  for (int q = 0; q < nranks; ++q) {
    const join_info& o = infos[static_cast<std::size_t>(q)];
    if (std::strncmp(o.host, infos[0].host, sizeof o.host) != 0 ||
        std::strncmp(o.boot_id, infos[0].boot_id, sizeof o.boot_id) != 0)
      throw_error(status::not_supported,
                  "init: rank " + std::to_string(q) + " runs on host '" + std::string(o.host) +
                      "', rank 0 on '" + infos[0].host +
                      "': ranks on several hosts need the socket transport (collx/net.hpp: "
                      "collx::net::init_rank, collx::net::from_env)");
    if (o.nchannels != infos[0].nchannels)
      throw_error(status::mismatch, "init: rank " + std::to_string(q) + " has " +
                                        std::to_string(o.nchannels) + " protocol channels, rank 0 " +
                                        std::to_string(infos[0].nchannels) +
                                        " (ranks built with different protocol lists)");
    for (std::uint32_t c = 0; c < o.nchannels; ++c)
      if (!(o.fifo[c] == infos[0].fifo[c]))
        throw_error(status::mismatch,
                    "init: rank " + std::to_string(q) + " uses " +
                        (p.channel_names ? std::string(p.channel_names[c]) : "channel " + std::to_string(c)) +
                        " FIFOs of " + std::to_string(o.fifo[c].slots) + " × " +
                        std::to_string(o.fifo[c].slot_bytes) + " bytes, rank 0 " +
                        std::to_string(infos[0].fifo[c].slots) + " × " +
                        std::to_string(infos[0].fifo[c].slot_bytes) +
                        " (set COLLX_NSLOTS and COLLX_*BUFFSIZE alike on every rank)");
    if (o.step_origin != infos[0].step_origin)
      throw_error(status::mismatch,
                  "init: rank " + std::to_string(q) + " differs from rank 0 in step_origin");
    if (o.single_copy_min != infos[0].single_copy_min)
      throw_error(status::mismatch, "init: rank " + std::to_string(q) + " uses single_copy_min_bytes " +
                                        std::to_string(o.single_copy_min) + ", rank 0 " +
                                        std::to_string(infos[0].single_copy_min) +
                                        " (set COLLX_SINGLE_COPY_MIN alike on every rank)");
  }
  try {
    if (rank != 0) seg = shm_segment::open_named(p.layout, infos[0].segment);
    const shm_view v = seg->view();
    if (rank == 0) v.header()->single_copy_min = p.single_copy_min;
    publish_identity(v, rank);
    r.barrier();  // every rank has mapped the segment and published its identity
    // Single copy needs every rank to read every other process's memory; any
    // rank that may not (or does not want to) makes them all stage.
    if (!p.single_copy || !can_reach_peers(v, rank, nranks, probe_peer_read))
      detail::store_relaxed(&v.header()->single_copy_denied, std::uint32_t{1});
    else if (!can_reach_peers(v, rank, nranks, probe_peer_write))
      detail::store_relaxed(&v.header()->single_copy_write_denied, std::uint32_t{1});
    r.barrier();  // the verdict is final before any collective
  } catch (...) {
    // Rank 0 may be gone: whoever knows the name removes it (unlinking twice is harmless).
    ::shm_unlink(infos[0].segment);
    throw;
  }
  if (rank == 0) seg->unlink();
  return seg;
}

}  // namespace collx::transport
