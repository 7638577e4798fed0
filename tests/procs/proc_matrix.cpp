// Process ranks: each rank is a process started by a launcher (collxrun, or a
// torchrun/Open MPI-style environment); they share the segment through a
// POSIX shm object. Runs a representative subset of the matrix and exits
// non-zero, naming every failed case, if anything is wrong.
//
//   proc_matrix [quick]      (also quick when COLLX_TEST_SCALE=quick)
//
// Besides the values, every case checks
//  * the algorithm that ran: where COLLX_ALGO names one algorithm for a
//    collective ("allreduce:tree;allgather:bruck"), every automatic call of it
//    must report that algorithm (last_variant()), and each such collective must
//    have been checked at least once;
//  * the bytes read from peers by cross-memory attach
//    (transport::peer_read_counters): exactly what nvls's single-copy schedule
//    reads when single copy is on and nvls ran, none otherwise.
// COLLX_EXPECT_SINGLE_COPY=1: single copy must be on. Where it is off the test
// probes process_vm_readv itself: EPERM (not permitted here: ptrace access
// rules such as Yama's ptrace_scope, or a seccomp filter) skips with exit 77
// and prints it; any other errno, or a probe that succeeds, fails.
#include "../support/run_case.hpp"

#include <collx/communicator.hpp>
#include <collx/process.hpp>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

using namespace collx;
using namespace collx::test;

namespace {

/// The one algorithm COLLX_ALGO names for each collective, from clauses of
/// the form "collective:algorithm" (others name no single algorithm).
std::map<coll, std::string> expected_algorithms() {
  std::map<coll, std::string> out;
  const char* env = std::getenv("COLLX_ALGO");
  if (env == nullptr) return out;
  const std::map<std::string, coll> colls{{"allreduce", coll::all_reduce},
                                          {"allgather", coll::all_gather},
                                          {"reducescatter", coll::reduce_scatter},
                                          {"broadcast", coll::broadcast},
                                          {"reduce", coll::reduce}};
  const std::string all = env;
  for (std::size_t pos = 0; pos <= all.size();) {
    const std::size_t end = std::min(all.find(';', pos), all.size());
    const std::string clause = all.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t colon = clause.find(':');
    if (colon == std::string::npos) continue;
    const auto c = colls.find(clause.substr(0, colon));
    const std::string algo = clause.substr(colon + 1);
    if (c != colls.end() && !algo.empty() && algo.find_first_of(",^") == std::string::npos)
      out[c->second] = algo;
  }
  return out;
}

/// Bytes an in-place single-copy broadcast root writes into each other rank's
/// recv (algo::nvls): 1/P of the call (broadcast moves bytes, whatever the
/// element); the others read the rest. Written where cross-memory attach may
/// read, which the kernel permits exactly where it permits writes (the
/// communicator probes both).
std::uint64_t broadcast_pushed(const case_desc& c, int P) {
  return c.kind == coll::broadcast && c.in_place ? c.count * size_of(c.dt) / static_cast<std::uint64_t>(P)
                                                 : 0;
}

/// Bytes rank r reads from peers by cross-memory attach when nvls runs case c
/// (every peer a separate process). Single copy from `min_bytes` on (the
/// vector for all_reduce and broadcast, all P blocks otherwise): all_reduce
/// reduces its slice from P-1 peers, then reads the other slices;
/// reduce_scatter reads its block from P-1 peers; all_gather and all_to_all
/// one block from each peer; broadcast the root's vector (not on the root),
/// less what an in-place root writes.
std::uint64_t single_copy_bytes(const case_desc& c, int r, int P, std::uint64_t min_bytes) {
  const std::uint64_t n = c.count, Pz = static_cast<std::uint64_t>(P), rz = static_cast<std::uint64_t>(r);
  const bool whole = c.kind == coll::all_reduce || c.kind == coll::broadcast;
  if (P == 1 || n * size_of(c.dt) * (whole ? 1 : Pz) < min_bytes) return 0;  // staged
  std::uint64_t elems = 0;
  switch (c.kind) {
    case coll::all_reduce: {
      const std::uint64_t mine = n * (rz + 1) / Pz - n * rz / Pz;
      elems = (Pz - 1) * mine + (n - mine);
      break;
    }
    case coll::reduce_scatter:
    case coll::all_gather:
    case coll::all_to_all: elems = (Pz - 1) * n; break;
    case coll::broadcast: return r == c.root ? 0 : n * size_of(c.dt) - broadcast_pushed(c, P);
    default: break;
  }
  return elems * size_of(c.dt);
}

/// Bytes rank r writes into peers by cross-memory attach when nvls runs case
/// c: an in-place broadcast root, its share into each of the P-1 others.
std::uint64_t single_copy_written(const case_desc& c, int r, int P, std::uint64_t min_bytes) {
  if (P == 1 || c.kind != coll::broadcast || r != c.root || c.count * size_of(c.dt) < min_bytes) return 0;
  return (static_cast<std::uint64_t>(P) - 1) * broadcast_pushed(c, P);
}

/// 0 if this rank may read every peer's memory by process_vm_readv, else the
/// errno of the first refused read (EFAULT for a read that returned other
/// bytes than the peer holds). Peers' pids and addresses travel by ring/simple.
int probe_cross_memory_attach(communicator& comm) {
  static std::uint64_t magic = 0;
  magic = 0xC011'0000'0000'0000ull + static_cast<std::uint64_t>(comm.rank());
  const int P = comm.size();
  std::uint64_t mine[2] = {static_cast<std::uint64_t>(::getpid()),
                           static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&magic))};
  std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(P));
  collx::all_gather<algo::ring, proto::simple>(comm, mine, all.data(), 2);
  for (int q = 0; q < P; ++q) {
    if (q == comm.rank()) continue;
    std::uint64_t got = 0;
    iovec local{&got, sizeof got};
    iovec far{reinterpret_cast<void*>(static_cast<std::uintptr_t>(all[2 * static_cast<std::size_t>(q) + 1])),
              sizeof got};
    const ssize_t n =
        ::process_vm_readv(static_cast<pid_t>(all[2 * static_cast<std::size_t>(q)]), &local, 1, &far, 1, 0);
    if (n < 0) return errno;
    if (n != static_cast<ssize_t>(sizeof got) ||
        got != 0xC011'0000'0000'0000ull + static_cast<std::uint64_t>(q))
      return EFAULT;
  }
  return 0;
}

}  // namespace

/// COLLX_TEST_NO_PIDFD_GETFD=1: this process's pidfd_getfd fails with ENOSYS,
/// as on a kernel before Linux 5.6 (a seccomp filter, installed before any
/// thread starts), so alloc_symmetric must hand its parts over by socket.
/// Returns false where the filter could not be installed.
bool refuse_pidfd_getfd() {
#if defined(SYS_pidfd_getfd) && (defined(__x86_64__) || defined(__aarch64__))
#if defined(__x86_64__)
  constexpr std::uint32_t arch = AUDIT_ARCH_X86_64;
#else
  constexpr std::uint32_t arch = AUDIT_ARCH_AARCH64;
#endif
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_getfd, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return false;
  // The filter took: the call now fails as on an old kernel.
  errno = 0;
  return ::syscall(SYS_pidfd_getfd, -1, 0, 0) == -1 && errno == ENOSYS;
#else
  return false;
#endif
}

int main(int argc, char** argv) {
  if (const char* e = std::getenv("COLLX_TEST_NO_PIDFD_GETFD"); e != nullptr && std::strcmp(e, "1") == 0)
    if (!refuse_pidfd_getfd()) {
      std::fprintf(stderr, "proc_matrix: could not make pidfd_getfd fail here (seccomp): %s\n",
                   std::strerror(errno));
      return 1;
    }
  const char* scale = std::getenv("COLLX_TEST_SCALE");  // "quick" under sanitizers
  const bool quick = (argc > 1 && std::strcmp(argv[1], "quick") == 0) ||
                     (scale != nullptr && std::strcmp(scale, "quick") == 0);
  comm_options opt = comm_options::from_env();
  opt.timeout = std::chrono::seconds(60);
  communicator comm;
  try {
    comm = collx::from_env(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "proc_matrix: %s\n", e.what());
    return 1;
  }
  // The single-copy runs must really read peers by cross-memory attach.
  if (const char* e = std::getenv("COLLX_EXPECT_SINGLE_COPY");
      e != nullptr && std::strcmp(e, "1") == 0 && comm.size() > 1) {
    int err = 0;
    try {
      const std::int32_t own = probe_cross_memory_attach(comm);
      std::int32_t worst = 0;  // a rank's errno, so that every rank decides alike
      collx::all_reduce<algo::ring, proto::simple>(comm, &own, &worst, 1, reduce_op::max);
      err = worst;
    } catch (const std::exception& x) {
      std::fprintf(stderr, "proc_matrix: FAILED probing cross-memory attach: %s\n", x.what());
      return 1;
    }
    if (!comm.single_copy_enabled()) {
      if (err == EPERM) {
        if (comm.rank() == 0)
          std::printf(
              "proc_matrix: SKIP: cross-memory attach is not permitted here (process_vm_readv: %s, "
              "errno %d)\n",
              std::strerror(err), err);
        return 77;
      }
      std::fprintf(stderr,
                   "proc_matrix: FAILED: single copy is off, but process_vm_readv of every peer %s%s\n",
                   err == 0 ? "works" : "fails with ", err == 0 ? "" : std::strerror(err));
      return 1;
    }
    if (err != 0) {
      std::fprintf(stderr, "proc_matrix: FAILED: single copy is on, but process_vm_readv fails here: %s\n",
                   std::strerror(err));
      return 1;
    }
  }
  const int P = comm.size();
  std::vector<case_desc> cases;
  const coll colls[] = {coll::all_reduce, coll::all_gather, coll::reduce_scatter, coll::broadcast,
                        coll::reduce};
  const std::vector<std::size_t> counts =
      quick ? std::vector<std::size_t>{0, 1, static_cast<std::size_t>(P + 1), 1009}
            : std::vector<std::size_t>{0,
                                       1,
                                       static_cast<std::size_t>(P - 1),
                                       static_cast<std::size_t>(P),
                                       static_cast<std::size_t>(P + 1),
                                       1009,
                                       262147};
  const std::pair<dtype, reduce_op> pairs[] = {
      {dtype::float32, reduce_op::sum},    {dtype::float16, reduce_op::sum},
      {dtype::bfloat16, reduce_op::max},   {dtype::int32, reduce_op::prod},
      {dtype::uint8, reduce_op::min},      {dtype::float64, reduce_op::avg},
      {dtype::int64, reduce_op::bxor},     {dtype::float8_e4m3, reduce_op::sum},
      {dtype::float8_e5m2, reduce_op::max}};
  int k = 0;
  for (coll kind : colls)
    for (auto [dt, op] : pairs) {
      if (quick && k % 3 != 0 && kind != coll::all_reduce) {
        ++k;
        continue;
      }
      add_counts(cases, make_case(kind, dt, op, 0), counts, [&] { return k % P; });
      ++k;
    }
  // The direct algorithm: all_to_all, and one-shot/two-shot all_reduce.
  for (std::size_t n : {std::size_t(0), std::size_t(1), static_cast<std::size_t>(P + 1), std::size_t(70001)})
    for (auto [dt, op] : {std::pair{dtype::float32, reduce_op::sum}, std::pair{dtype::int8, reduce_op::max},
                          std::pair{dtype::bfloat16, reduce_op::avg}}) {
      case_desc c = make_case(coll::all_to_all, dt, reduce_op::sum, n);
      cases.push_back(c);
      c.kind = coll::all_reduce;
      c.op = op;
      c.in_place = n % 2 == 1;
      c.variant = {algo_id::direct, proto_id::simple};
      cases.push_back(c);
    }
  // COLLX_TEST_SYMMETRIC=1: every guarded buffer (the cases' send and recv)
  // is symmetric memory (communicator::alloc_symmetric), so what nvls reads and
  // writes of peers must go through the mappings, none of it by cross-memory
  // attach. Every rank allocates the same buffers in the same order (the
  // cases are the same on every rank), as the collective allocation needs.
  const char* sym_env = std::getenv("COLLX_TEST_SYMMETRIC");
  const bool symmetric = sym_env != nullptr && std::strcmp(sym_env, "1") == 0;
  int symmetric_unmapped = 0;  // allocations some peer of another process could not map
  if (symmetric)
    guarded_storage() = [&comm, &symmetric_unmapped](std::size_t bytes) {
      auto buf = std::make_shared<symmetric_buffer>(comm.alloc_symmetric(bytes));
      if (buf->mapped_peers() != comm.size() - 1) ++symmetric_unmapped;
      return std::shared_ptr<unsigned char>(buf, buf->as<unsigned char>());
    };
  int failed = 0;
  const auto expected = expected_algorithms();
  std::map<coll, int> algo_checks;
  const bool single_copy = comm.single_copy_enabled();
  auto& counters = transport::peer_read_counters;
  const std::uint64_t reads_before = counters.reads.load(), bytes_before = counters.bytes.load();
  std::uint64_t nvls_single_copy_bytes = 0;
  std::uint64_t nvls_written = 0;
  auto& mapped = transport::symmetric_counters;
  for (const auto& c : cases) {
    const std::uint64_t before = counters.bytes.load(), before_written = counters.bytes_written.load();
    const std::uint64_t mapped_before = mapped.bytes_read.load(),
                        mapped_written_before = mapped.bytes_written.load();
    std::string e = run_case(comm, c);
    const std::uint64_t read = counters.bytes.load() - before;
    const std::uint64_t written = counters.bytes_written.load() - before_written;
    const std::uint64_t mapped_read = mapped.bytes_read.load() - mapped_before;
    const std::uint64_t mapped_written = mapped.bytes_written.load() - mapped_written_before;
    const variant_choice ran = comm.last_variant();
    if (e.empty() && c.variant.algo == algo_id::automatic) {
      if (const auto want = expected.find(c.kind); want != expected.end()) {
        ++algo_checks[c.kind];
        if (want->second != name(ran.algo) && want->second != name(family(ran.algo)))
          e = c.str(P) + " — COLLX_ALGO asks for " + want->second + ", " + name(ran.algo) + " ran";
      }
    }
    // What nvls's single-copy schedule moves by cross-memory attach, none otherwise.
    const bool counted = single_copy && ran.algo == algo_id::nvls;
    const std::uint64_t min_bytes = comm.options().single_copy_min_for(false);
    const std::uint64_t want_read = counted ? single_copy_bytes(c, comm.rank(), P, min_bytes) : 0;
    const std::uint64_t want_written = counted ? single_copy_written(c, comm.rank(), P, min_bytes) : 0;
    // With symmetric buffers the same bytes move through the mappings instead.
    const std::uint64_t cma_read = symmetric ? 0 : want_read, cma_written = symmetric ? 0 : want_written;
    const std::uint64_t map_read = symmetric ? want_read : 0, map_written = symmetric ? want_written : 0;
    for (auto [what, how, got, want] :
         {std::tuple{"read", "by cross-memory attach", read, cma_read},
          std::tuple{"wrote", "by cross-memory attach", written, cma_written},
          std::tuple{"read", "through symmetric mappings", mapped_read, map_read},
          std::tuple{"wrote", "through symmetric mappings", mapped_written, map_written}})
      if (e.empty() && got != want)
        e = c.str(P) + " — " + name(ran.algo) + " " + what + " " + std::to_string(got) +
            " bytes of peers' buffers " + how + ", expected " + std::to_string(want);
    if (ran.algo == algo_id::nvls) nvls_single_copy_bytes += want_read, nvls_written += want_written;
    if (!e.empty()) {
      ++failed;
      std::fprintf(stderr, "FAILED %s\n", e.c_str());
    }
  }
  for (const auto& [kind, algo] : expected)
    if (algo_checks[kind] == 0) {
      ++failed;
      std::fprintf(stderr, "FAILED: no automatic %s call checked against COLLX_ALGO's %s\n", name(kind),
                   algo.c_str());
    }
  // Single copy asked for: the reads must have happened (not a matrix whose
  // nvls cases all had nothing to read).
  if (const char* x = std::getenv("COLLX_EXPECT_SINGLE_COPY");
      x != nullptr && std::strcmp(x, "1") == 0 && P > 1 && nvls_single_copy_bytes == 0) {
    ++failed;
    std::fprintf(stderr, "FAILED: no nvls case read peers' buffers by cross-memory attach\n");
  }
  // …and an in-place broadcast root wrote its share (on some rank: the root's).
  if (const char* x = std::getenv("COLLX_EXPECT_SINGLE_COPY_WRITES");
      x != nullptr && std::strcmp(x, "1") == 0 && P > 1) {
    std::uint64_t total = 0;
    collx::all_reduce<algo::ring, proto::simple>(comm, &nvls_written, &total, 1, reduce_op::sum);
    if (total == 0) {
      ++failed;
      std::fprintf(stderr, "FAILED: no in-place nvls broadcast wrote into peers by cross-memory attach\n");
    }
  }
  // The automatic choice prices symmetric buffers as loads
  // (tune::problem::mapped_peers): under the built-in preset (this test runs
  // with COLLX_TUNE_FILE=builtin) an all_to_all of 1 MiB per rank runs nvls on
  // symmetric memory and not on the heap, with the same values.
  if (symmetric && P > 1) {
    const std::size_t count = (std::size_t{1} << 18) / static_cast<std::size_t>(P);
    const std::size_t total = count * static_cast<std::size_t>(P);
    symmetric_buffer sa = comm.alloc_symmetric(total * 4), sb = comm.alloc_symmetric(total * 4);
    std::vector<std::int32_t> ha(total), hb(total);
    for (int kind = 0; kind < 2; ++kind) {
      std::int32_t* a = kind == 0 ? sa.as<std::int32_t>() : ha.data();
      std::int32_t* b = kind == 0 ? sb.as<std::int32_t>() : hb.data();
      for (std::size_t i = 0; i < total; ++i)
        a[i] = static_cast<std::int32_t>(i * 3 + static_cast<std::size_t>(comm.rank()));
      std::fill(b, b + total, -1);
      comm.all_to_all(a, b, count);
      const variant_choice ran = comm.last_variant();
      bool right = true;
      for (int q = 0; q < P; ++q)
        for (std::size_t i = 0; i < count; ++i)
          right &= b[static_cast<std::size_t>(q) * count + i] ==
                   static_cast<std::int32_t>((static_cast<std::size_t>(comm.rank()) * count + i) * 3 +
                                             static_cast<std::size_t>(q));
      const bool nvls = ran.algo == algo_id::nvls;
      if (!right || nvls != (kind == 0)) {
        ++failed;
        std::fprintf(stderr, "FAILED automatic all_to_all on %s buffers: %s, ran %s\n",
                     kind == 0 ? "symmetric" : "heap", right ? "values right" : "values wrong",
                     name(ran.algo));
      }
    }
  }
  if (symmetric) {
    guarded_storage() = nullptr;
    if (symmetric_unmapped > 0) {
      ++failed;
      std::fprintf(stderr, "FAILED: %d symmetric allocations were not mapped by every peer\n",
                   symmetric_unmapped);
    }
  }
  std::printf("rank %d/%d: %llu reads, %llu bytes from peers by cross-memory attach\n", comm.rank(), P,
              static_cast<unsigned long long>(counters.reads.load() - reads_before),
              static_cast<unsigned long long>(counters.bytes.load() - bytes_before));
  // Messages of a stream (send/recv, all_to_allv) from single_copy_min_bytes
  // up, and above what rides in a header call, are read from the sender's
  // buffer by cross-memory attach (algo/direct.hpp).
  // Asked after the call: a decision point at its start may change the share.
  auto read_in_place = [&](std::size_t elems, std::size_t elem_bytes) {
    const std::uint64_t bytes = elems * elem_bytes;
    const std::uint64_t from =
        stream_read_in_place_bytes(comm.options().single_copy_min_for(false), comm.contention() > 0);
    return single_copy && bytes > algo::direct::inline_bytes && bytes >= from;
  };
  auto check_stream_reads = [&](const char* what, std::uint64_t before, std::uint64_t want) {
    const std::uint64_t got = counters.bytes.load() - before;
    if (got == want) return;
    ++failed;
    std::fprintf(stderr,
                 "FAILED %s: read %llu bytes of peers' buffers by cross-memory attach, expected %llu\n", what,
                 static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
  };
  // Point to point across processes: a ring in both directions in one group,
  // larger than a FIFO, then a barrier.
  try {
    const std::size_t n = 300007;
    const std::uint64_t before = counters.bytes.load();
    const int right = (comm.rank() + 1) % P, left = (comm.rank() + P - 1) % P;
    std::vector<std::int32_t> to_r(n), to_l(n), from_l(n, -1), from_r(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      to_r[i] = static_cast<std::int32_t>(i * 7 + static_cast<std::size_t>(comm.rank()));
      to_l[i] = static_cast<std::int32_t>(i * 11 + static_cast<std::size_t>(comm.rank()));
    }
    comm.group_start();
    comm.recv(from_l.data(), n, left);
    comm.send(to_r.data(), n, right);
    comm.recv(from_r.data(), n, right);
    comm.send(to_l.data(), n, left);
    comm.group_end();
    if (P > 1) check_stream_reads("send/recv ring", before, read_in_place(n, 4) ? 2 * n * 4 : 0);
    comm.barrier();
    for (std::size_t i = 0; i < n; ++i)
      if (from_l[i] != static_cast<std::int32_t>(i * 7 + static_cast<std::size_t>(left)) ||
          from_r[i] != static_cast<std::int32_t>(i * 11 + static_cast<std::size_t>(right))) {
        ++failed;
        std::fprintf(stderr, "FAILED send/recv ring: element %zu is wrong\n", i);
        break;
      }
  } catch (const std::exception& e) {
    ++failed;
    std::fprintf(stderr, "FAILED send/recv ring: %s\n", e.what());
  }
  // all_to_allv with uneven blocks, zeros and short ones included, so that
  // some ride in their headers, some go through the FIFOs (below the
  // threshold) and some are read in place.
  try {
    const int r = comm.rank();
    auto count = [](int src, int dst) {
      const std::size_t sizes[] = {0, 5, 28, 29, 1000, 70001, 300007};
      return sizes[static_cast<std::size_t>(src * 3 + dst * 5) % 7];
    };
    auto value = [](int src, int dst, std::size_t i) {
      return static_cast<std::int32_t>(i * 2654435761u + static_cast<std::size_t>(src * 131 + dst));
    };
    const std::size_t Pz = static_cast<std::size_t>(P), gap = 3;  // elements between blocks, never written
    std::vector<std::size_t> sc(Pz), sd(Pz), rc(Pz), rd(Pz);
    std::size_t slen = 0, rlen = 0;
    for (int q = 0; q < P; ++q) {
      const std::size_t qz = static_cast<std::size_t>(q);
      sc[qz] = count(r, q), sd[qz] = slen, slen += sc[qz] + gap;
      rc[qz] = count(q, r), rd[qz] = rlen, rlen += rc[qz] + gap;
    }
    // With COLLX_TEST_SYMMETRIC=1 the send buffer is symmetric memory: what
    // is read in place must then come through the mappings.
    symmetric_buffer sym;
    std::vector<std::int32_t> heap, recv(rlen, -9);
    std::int32_t* send = nullptr;
    if (symmetric) {
      sym = comm.alloc_symmetric(slen * sizeof(std::int32_t));
      send = sym.as<std::int32_t>();
    } else {
      heap.resize(slen);
      send = heap.data();
    }
    std::fill(send, send + slen, -7);
    for (int q = 0; q < P; ++q)
      for (std::size_t i = 0; i < sc[static_cast<std::size_t>(q)]; ++i)
        send[sd[static_cast<std::size_t>(q)] + i] = value(r, q, i);
    const std::uint64_t before = counters.bytes.load(), mapped_before = mapped.bytes_read.load();
    comm.all_to_allv(send, sc.data(), sd.data(), recv.data(), rc.data(), rd.data());
    std::uint64_t want = 0;
    for (int q = 0; q < P; ++q)
      if (q != r && read_in_place(rc[static_cast<std::size_t>(q)], 4))
        want += rc[static_cast<std::size_t>(q)] * 4;
    check_stream_reads("all_to_allv", before, symmetric ? 0 : want);
    if (const std::uint64_t got = mapped.bytes_read.load() - mapped_before; got != (symmetric ? want : 0)) {
      ++failed;
      std::fprintf(stderr, "FAILED all_to_allv: read %llu bytes through symmetric mappings, expected %llu\n",
                   static_cast<unsigned long long>(got),
                   static_cast<unsigned long long>(symmetric ? want : 0));
    }
    std::vector<std::int32_t> expect(rlen, -9);
    for (int q = 0; q < P; ++q)
      for (std::size_t i = 0; i < rc[static_cast<std::size_t>(q)]; ++i)
        expect[rd[static_cast<std::size_t>(q)] + i] = value(q, r, i);
    if (recv != expect) {
      ++failed;
      const auto at = std::mismatch(recv.begin(), recv.end(), expect.begin()).first - recv.begin();
      std::fprintf(stderr, "FAILED all_to_allv: element %td of recv is wrong (gaps included)\n", at);
    }
  } catch (const std::exception& e) {
    ++failed;
    std::fprintf(stderr, "FAILED all_to_allv: %s\n", e.what());
  }
  // Last, since it leaves the communicator failed: the choice prices symmetric
  // buffers per rank, so where rank 0's are symmetric and the others' on the
  // heap, an automatic all_to_all of 1 MiB (nvls on symmetric memory, another
  // schedule on the heap under the built-in preset, as checked above) must
  // fail the call check on every rank, not hang or corrupt, and the reporting
  // rank says why.
  if (symmetric && P > 1) {
    const std::size_t count = (std::size_t{1} << 18) / static_cast<std::size_t>(P);
    const std::size_t total = count * static_cast<std::size_t>(P);
    symmetric_buffer sa = comm.alloc_symmetric(total * 4), sb = comm.alloc_symmetric(total * 4);
    std::vector<std::int32_t> ha(total, 1), hb(total);
    status got = status::ok;
    std::string what;
    try {
      if (comm.rank() == 0) comm.all_to_all(sa.as<std::int32_t>(), sb.as<std::int32_t>(), count);
      else comm.all_to_all(ha.data(), hb.data(), count);
      comm.barrier();
    } catch (const error& e) {
      got = e.code();
      what = e.what();
    }
    const bool reporter =
        what.find("differs between ranks: rank " + std::to_string(comm.rank())) != std::string::npos;
    const bool hint = what.find("in symmetric memory (alloc_symmetric), which the automatic choice prices") !=
                      std::string::npos;
    if (got != status::mismatch || (reporter && !hint)) {
      ++failed;
      std::fprintf(stderr, "FAILED mixed symmetric/heap all_to_all: %s: %s\n", to_string(got), what.c_str());
    }
    std::printf("rank %d/%d: mixed symmetric/heap all_to_all: %s\n", comm.rank(), P, what.c_str());
  }
  std::printf("rank %d/%d: %zu cases, %d failed\n", comm.rank(), P, cases.size() + 2, failed);
  return failed == 0 ? 0 : 1;
}
