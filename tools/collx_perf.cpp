// tools/collx_perf.cpp — collx-perf: the nccl-tests of collx, on CPU ranks.
//
//   collx-perf all_reduce -b 8 -e 64M -f 2 -p 4            4 thread ranks
//   collx-perf all_gather -d bf16 -p 3 --procs             3 process ranks
//
// Flags, columns, bus-bandwidth factors and the footer follow nccl-tests (see
// tools/perf_common.hpp, shared with the peer drivers in bench/peers/); the
// footer also names the variant (algorithm/protocol) that ran. Exit status:
// 0 all results right, 1 a wrong result, a clobbered guard byte or a collx
// error, 2 a bad command line.
#include "perf_common.hpp"

#include <collx/communicator.hpp>
#include <collx/launch/local.hpp>
#include <collx/process.hpp>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace collx;
using perf::note_variant;
using perf::options;
using perf::parse_id;
using perf::variant_name;
using perf::variant_span;
using perf::variants_line;

// ---- variant names ------------------------------------------------------------

template <class Id>
std::vector<std::string> id_names() {
  std::vector<std::string> v;
  for (int i = 0; i < 256; ++i) {
    const std::string n = name(static_cast<Id>(i));
    if (n != "invalid") v.push_back(n);
  }
  return v;
}

template <class Id>
std::string joined_names() {
  std::string r;
  for (const std::string& n : id_names<Id>()) r += (r.empty() ? "" : ", ") + n;
  return r;
}

void usage(std::FILE* f, const char* prog) {
  std::fprintf(f,
               "usage: %s <all_reduce|all_gather|reduce_scatter|broadcast|reduce|all_to_all|\n"
               "           all_to_allv|send_recv|barrier> [flags]\n"
               "\n"
               "%s"
               "  -o, --op <op>              %s (default sum)\n"
               "  -d, --datatype <type>      int8 uint8 int32 uint32 int64 uint64 half bfloat16 float\n"
               "                             double f8e4m3 f8e5m2 (default float; also float16 fp16\n"
               "                             bf16 float32 fp32 float64 fp64 fp8_e4m3 fp8_e5m2)\n"
               "  -r, --root <rank>          root of broadcast and reduce (default 0)\n"
               "  -p, --nranks <n>           number of ranks (default 2)\n"
               "      --threads              ranks are threads of this process (default)\n"
               "      --procs                ranks are processes started by collx's local launcher\n"
               "      --algo <name>          algorithm: %s\n"
               "      --proto <name>         protocol: %s\n"
               "      --device cuda          run on GPU ranks instead (collx-perf-cuda, built with\n"
               "                             the cuda preset; the flags it takes are its own)\n"
               "  -h, --help                 this text\n"
               "\n"
               "Columns as nccl-tests: size = bytes of the larger of one rank's send and receive\n"
               "buffers, count = the count argument of the call, time = mean microseconds per\n"
               "iteration (-t median: the median of calls timed one by one), the maximum over\n"
               "ranks; algbw = size / time (all_reduce, broadcast,\n"
               "reduce) or count*P*elt / time (all_gather, reduce_scatter, all_to_all, whose count is\n"
               "per peer); busbw = algbw * 2(P-1)/P (all_reduce), (P-1)/P (all_gather,\n"
               "reduce_scatter, all_to_all), 1 (broadcast, reduce). all_to_all has no in-place\n"
               "form: its in-place block reads N/A. all_to_allv: equal packed blocks of count per\n"
               "peer (as all_to_all); send_recv: count to the next rank and from the previous one\n"
               "in one group, busbw = algbw (nccl-tests' sendrecv); barrier: one row of 0 bytes.\n"
               "#wrong = wrong elements over all ranks, checked once per size before timing;\n"
               "'Out of bounds values' = bytes written past a rank's output.\n"
               "\n"
               "COLLX_PERF_SYMMETRIC=1 takes the buffers from communicator::alloc_symmetric\n"
               "(peers of other processes then copy them through their mappings of that memory).\n"
               "\n"
               "Process ranks: with --procs the tool starts -p copies of itself; a copy runs as\n"
               "one rank whenever COLLX_RANK is set in its environment (so it can also be started\n"
               "by collxrun or any launcher that sets COLLX_RANK, COLLX_SIZE and COLLX_UNIQUE_ID),\n"
               "and then takes the number of ranks from COLLX_SIZE. Rank 0 prints the table.\n"
               "\n"
               "Exit status: 0 ok, 1 wrong results or a collx error, 2 bad command line.\n",
               prog, perf::sweep_flags_help, perf::op_choices, joined_names<algo_id>().c_str(),
               joined_names<proto_id>().c_str());
}

// ---- one rank's sweep ------------------------------------------------------------

/// A collective call with the benchmark's collective, type and op.
struct caller {
  communicator& comm;
  const options& o;
  variant_choice want;
  /// all_to_allv: equal blocks of the last count, packed (counts, displacements).
  mutable std::size_t v_count = ~std::size_t{0};
  mutable std::vector<std::size_t> v_counts{}, v_displs{};

  void operator()(const void* send, void* recv, std::size_t count) const {
    switch (o.collective) {
      case coll::all_reduce: comm.all_reduce(send, recv, count, o.type, o.op, want); break;
      case coll::all_gather: comm.all_gather(send, recv, count, o.type, want); break;
      case coll::reduce_scatter: comm.reduce_scatter(send, recv, count, o.type, o.op, want); break;
      case coll::broadcast: comm.broadcast(send, recv, count, o.type, o.root, want); break;
      case coll::reduce: comm.reduce(send, recv, count, o.type, o.op, o.root, want); break;
      case coll::all_to_all: comm.all_to_all(send, recv, count, o.type, want); break;
      case coll::all_to_allv:
        if (count != v_count) {
          const auto P = static_cast<std::size_t>(comm.size());
          v_counts.assign(P, count);
          v_displs.resize(P);
          for (std::size_t j = 0; j < P; ++j) v_displs[j] = j * count;
          v_count = count;
        }
        comm.all_to_allv(send, v_counts.data(), v_displs.data(), recv, v_counts.data(), v_displs.data(),
                         o.type, want);
        break;
      case coll::send_recv: {
        const int P = comm.size(), r = comm.rank();
        comm.group_start();
        comm.send(send, count, o.type, (r + 1) % P);
        comm.recv(recv, count, o.type, (r + P - 1) % P);
        comm.group_end();
        break;
      }
      case coll::barrier: comm.barrier(want); break;
    }
  }
};

/// What perf::run_sweep needs from collx: NCCL's in-place pointers, the
/// communicator's reductions for the maximum time and the counts, and the
/// variant that ran each block.
struct collx_driver {
  communicator& comm;
  caller call;
  std::vector<variant_span>& spans;
  double largest_contention = 0;  // the largest share the choice priced during the timed calls

  const void* in_place_send(perf::call_plan&, const std::byte* input) const { return input; }
  void barrier() {
    std::int32_t x = 0;
    comm.all_reduce(&x, &x, 1, dtype::int32, reduce_op::sum);
  }
  static std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }
  void after_timing(std::size_t bytes) {
    note_variant(spans, comm.last_variant(), bytes);
    largest_contention = std::max(largest_contention, comm.contention());
  }
  void max_over_ranks(double& v) { comm.all_reduce(&v, &v, 1, dtype::float64, reduce_op::max); }
  void sum_over_ranks(long long* v, int n) {
    static_assert(sizeof(long long) == sizeof(std::int64_t));
    comm.all_reduce(v, v, static_cast<std::size_t>(n), dtype::int64, reduce_op::sum);
  }
};

/// Runs the sweep on one rank. Rank 0 prints when `print` is set. Returns the
/// totals (identical on every rank: the counts and times are all-reduced).
perf::sweep_totals run_rank(communicator& comm, const options& o, variant_choice want, const char* mode,
                            bool print) {
  const int P = comm.size(), rank = comm.rank();
  const caller call{comm, o, want};

  // Fails here, before any output, on every rank alike, if the variant does
  // not serve the collective: a zero-count call checks everything but bytes.
  call(nullptr, nullptr, 0);

  // COLLX_PERF_SYMMETRIC=1: the buffers are symmetric memory
  // (communicator::alloc_symmetric), which peers of other processes copy
  // through their mappings instead of by cross-memory attach.
  const char* sym = std::getenv("COLLX_PERF_SYMMETRIC");
  const bool symmetric = sym != nullptr && std::strcmp(sym, "1") == 0;
  perf::sweep_buffers heap;
  symmetric_buffer sym_send, sym_recv;
  std::byte *send = nullptr, *recv = nullptr;
  if (symmetric) {
    const perf::buffer_bytes need = perf::buffers_for(o, P);
    sym_send = comm.alloc_symmetric(need.send);
    sym_recv = comm.alloc_symmetric(need.recv);
    send = sym_send.as<std::byte>(), recv = sym_recv.as<std::byte>();
  } else {
    heap = perf::alloc_buffers(o, P);
    send = heap.send.get(), recv = heap.recv.get();
  }
  std::FILE* out = stdout;
  if (print)
    perf::print_header(out, o, "collx-perf", name(o.collective), P, mode, perf::op_column(o.collective, o.op),
                       perf::root_column(o.collective, o.root),
                       "variant " + variant_name(want) + (symmetric ? "  buffers symmetric" : ""));

  std::vector<variant_span> spans;
  collx_driver driver{comm, call, spans};
  perf::sweep_totals totals;
  visit_dtype(o.type, [&]<class T>(std::type_identity<T>) {
    totals = perf::run_sweep<T>(o, rank, P, send, recv, driver, print ? out : nullptr);
  });

  if (print) {
    perf::print_footer(out, totals.out_of_bounds, totals.avg_busbw());
    std::fprintf(out, "# variant: %s\n", variants_line(spans).c_str());
    std::fprintf(out, "# contention priced: %.3f at the end, %.3f at most (%s)\n", comm.contention(),
                 driver.largest_contention, comm.options().contention < 0 ? "measured" : "fixed");
    perf::print_wrong_total(out, totals);
    std::fprintf(out, "#\n");
    std::fflush(out);
  }
  return totals;
}

struct rank_failure {
  bool failed = false;
  status code = status::ok;
  std::string what;
};

rank_failure describe(const std::exception_ptr& e) {
  rank_failure f;
  f.failed = true;
  try {
    std::rethrow_exception(e);
  } catch (const collx::error& x) {
    f.code = x.code();
    f.what = x.what();
  } catch (const std::exception& x) {
    f.code = status::internal_error;
    f.what = x.what();
  } catch (...) {
    f.code = status::internal_error;
    f.what = "unknown exception";
  }
  return f;
}

// ---- thread ranks ------------------------------------------------------------------

int run_threads(const options& o, variant_choice want) {
  std::vector<communicator> comms = communicator::create_thread_group(o.nranks);
  std::vector<rank_failure> failures(static_cast<std::size_t>(o.nranks));
  std::vector<perf::sweep_totals> totals(static_cast<std::size_t>(o.nranks));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(o.nranks));
  for (int r = 0; r < o.nranks; ++r) {
    threads.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      try {
        totals[i] = run_rank(comms[i], o, want, "threads", r == 0);
      } catch (...) {
        failures[i] = describe(std::current_exception());
        try {
          comms[i].abort();  // the other ranks fail promptly instead of timing out
        } catch (...) {
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  // Report the root cause: a rank's own failure rather than the aborts it caused.
  const rank_failure* first = nullptr;
  for (const rank_failure& f : failures)
    if (f.failed && (first == nullptr || (first->code == status::aborted && f.code != status::aborted)))
      first = &f;
  if (first != nullptr) {
    std::fflush(stdout);
    std::fprintf(stderr, "collx-perf: %s\n", first->what.c_str());
    return 1;
  }
  return totals[0].failed() ? 1 : 0;
}

// ---- process ranks -----------------------------------------------------------------

bool is_child_process() { return std::getenv("COLLX_RANK") != nullptr; }

int run_child(const options& o, variant_choice want) {
  communicator comm;
  try {
    comm = collx::from_env();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collx-perf: %s\n", e.what());
    return 1;
  }
  const int rank = comm.rank();
  if ((o.collective == coll::broadcast || o.collective == coll::reduce) && o.root >= comm.size()) {
    if (rank == 0)
      std::fprintf(stderr, "collx-perf: root %d is out of range for %d ranks\n", o.root, comm.size());
    return 2;
  }
  try {
    const perf::sweep_totals t = run_rank(comm, o, want, "processes", rank == 0);
    return t.failed() ? 1 : 0;
  } catch (...) {
    const rank_failure f = describe(std::current_exception());
    // Argument errors are the same on every rank: each rank meets its own
    // (aborting here would race with rank 0 reaching it), and rank 0 says it
    // once. A rank's own failure aborts the others and is printed where it
    // happened.
    const bool symmetric = f.code == status::invalid_argument || f.code == status::not_supported;
    if (!symmetric) {
      try {
        comm.abort();
      } catch (...) {
      }
    }
    if (rank == 0 || (!symmetric && f.code != status::aborted)) {
      std::fflush(stdout);
      std::fprintf(stderr, "collx-perf: %s\n", f.what.c_str());
    }
    // The launcher gives the other ranks a grace period to exit on their own
    // after one fails, so rank 0 has the time to say why.
    return 1;
  }
}

}  // namespace

/// `--device cuda`: the GPU sweep is collx-perf-cuda (nvcc-built), next to
/// this binary; it gets the other arguments. Returns only on failure.
int run_on_gpu(int argc, char** argv, const char* prog) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device") {
      ++i;
      continue;
    }
    if (a.rfind("--device=", 0) == 0) continue;
    args.push_back(a);
  }
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = ".";
  if (n > 0) {
    self[n] = '\0';
    dir = std::string(self);
    dir = dir.substr(0, dir.rfind('/'));
  }
  const std::string gpu = dir + "/collx-perf-cuda";
  std::vector<char*> cargv{const_cast<char*>(gpu.c_str())};
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execv(gpu.c_str(), cargv.data());
  std::fprintf(stderr, "%s: --device cuda needs %s (build the cuda preset): %s\n", prog, gpu.c_str(),
               std::strerror(errno));
  return 2;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* prog = "collx-perf";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string dev;
    if (a == "--device" && i + 1 < argc) dev = argv[i + 1];
    else if (a.rfind("--device=", 0) == 0) dev = a.substr(9);
    else if (a == "--device") dev = "";
    else continue;
    if (dev == "cuda") return run_on_gpu(argc, argv, prog);
    if (dev != "cpu") {
      std::fprintf(stderr, "%s: unknown device '%s' (cpu or cuda)\n", prog, dev.c_str());
      return 2;
    }
    // --device cpu: the default; drop it before the shared parser sees it.
    for (int k = i; k + (a == "--device" ? 2 : 1) <= argc; ++k) argv[k] = argv[k + (a == "--device" ? 2 : 1)];
    argc -= a == "--device" ? 2 : 1;
    break;
  }

  options o;
  const perf::parse_outcome parsed =
      perf::parse_command_line(argc, argv, o, {/*mode=*/true, /*variant=*/true});
  if (const int rc = perf::parse_exit_status(parsed, prog, usage); rc >= 0) return rc;

  variant_choice want;
  if (!parse_id(o.algo, want.algo)) {
    std::fprintf(stderr, "%s: unknown algorithm '%s'; valid names: %s\n", prog, o.algo.c_str(),
                 joined_names<algo_id>().c_str());
    return 2;
  }
  if (!parse_id(o.proto, want.proto)) {
    std::fprintf(stderr, "%s: unknown protocol '%s'; valid names: %s\n", prog, o.proto.c_str(),
                 joined_names<proto_id>().c_str());
    return 2;
  }
  if (o.collective == coll::send_recv &&
      (want.algo != algo_id::automatic || want.proto != proto_id::automatic)) {
    std::fprintf(stderr, "%s: send_recv takes no --algo or --proto (point to point has one schedule)\n",
                 prog);
    return 2;
  }

  try {
    if (is_child_process()) return run_child(o, want);
    if ((o.collective == coll::broadcast || o.collective == coll::reduce) && o.root >= o.nranks) {
      std::fprintf(stderr, "%s: root %d is out of range for %d ranks (-p)\n", prog, o.root, o.nranks);
      return 2;
    }
    if (o.mode == perf::rank_mode::procs) {
      // The children are copies of this very binary, whatever argv[0] says.
      std::vector<std::string> args(argv, argv + argc);
      char self[4096];
      const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
      if (n > 0) args[0].assign(self, static_cast<std::size_t>(n));
      launch::launch_options lo;
      lo.prefix_output = false;  // rank 0's table comes out as is
      lo.name = prog;
      return launch::run_local(o.nranks, args, lo);
    }
    return run_threads(o, want);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 1;
  }
}
