// bench/peers/gloo_bench.cpp — gloo-bench: collx-perf's table for Gloo's allreduce.
//
//   gloo-bench all_reduce -p 2 --algo ring_chunked -b 8 -e 64M -f 2 -d float -o sum
//   gloo-bench all_reduce -p 4 --algo halving_doubling
//
// Starts -p processes itself (fork; rank r is pinned to the r-th allowed CPU
// when the ranks fit, as collx-perf's launcher does), which meet through a
// gloo::rendezvous::FileStore in a fresh temporary directory and connect over
// loopback TCP (127.0.0.1). --algo picks Gloo's algorithm: ring_chunked
// (gloo::AllreduceRingChunked, the default) or halving_doubling
// (gloo::AllreduceHalvingDoubling).
//
// Same flags, sizes, columns, bus-bandwidth factors, timing policy and
// correctness check as collx-perf (tools/perf_common.hpp). Gloo's algorithms
// reduce in place: the in-place block is Gloo alone; out of place copies the
// send buffer into the receive buffer and runs the in-place algorithm there
// (the copy is part of the timed call, as it is for a Gloo user with separate
// buffers). An algorithm object is built once per (buffer, count) and reused
// by the checked, warm-up and timed calls of that size. all_reduce only;
// float/double; sum, prod, min, max. Exit status: 0 ok, 1 wrong results or a
// failed rank, 2 bad command line.
//
// One rank of a job on several hosts (bench/netns_allreduce.sh): with
// GLOO_BENCH_RANK set, this process runs only that rank of -p, connects from
// GLOO_BENCH_HOST (its address) and meets the others through the FileStore
// directory GLOO_BENCH_STORE, which every rank must see (a shared file system,
// or network namespaces of one host).
#include "cpu_set.hpp"
#include "perf_common.hpp"

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace collx;
using perf::options;

void usage(std::FILE* f, const char* prog) {
  std::fprintf(f,
               "usage: %s all_reduce [-p <ranks>] [--algo ring_chunked|halving_doubling] [flags]\n"
               "\n"
               "  -p, --nranks <n>           processes to start (default 2)\n"
               "      --algo <name>          ring_chunked (default) or halving_doubling\n"
               "%s"
               "  -o, --op <op>              sum prod min max (default sum)\n"
               "  -d, --datatype <type>      float double (default float)\n"
               "  -h, --help                 this text\n"
               "\n"
               "Columns, bus-bandwidth factors and the check are those of collx-perf (see its --help).\n"
               "Out of place copies the send buffer into the receive buffer, then reduces there.\n",
               prog, perf::sweep_flags_help);
}

enum class gloo_algo { ring_chunked, halving_doubling };

const char* algo_name(gloo_algo a) {
  return a == gloo_algo::ring_chunked ? "ring_chunked" : "halving_doubling";
}

template <class T>
const gloo::ReductionFunction<T>* gloo_fn(reduce_op op) {
  switch (op) {
    case reduce_op::prod: return gloo::ReductionFunction<T>::product;
    case reduce_op::min: return gloo::ReductionFunction<T>::min;
    case reduce_op::max: return gloo::ReductionFunction<T>::max;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

/// What perf::run_sweep needs from Gloo. The helpers (barrier, max and sum
/// over ranks) are Gloo algorithms on small scratch buffers, built once.
template <class T>
struct gloo_driver {
  const options& o;
  gloo_algo algo;
  std::shared_ptr<gloo::Context> ctx;
  std::size_t elt = sizeof(T);

  // The measured algorithm of the current (buffer, count).
  std::unique_ptr<gloo::Algorithm> current;
  void* current_buf = nullptr;
  std::size_t current_count = 0;

  gloo::BarrierAllToOne barrier_algo;
  double max_scratch = 0;
  gloo::AllreduceRing<double> max_algo;
  double sum_scratch[2] = {0, 0};
  gloo::AllreduceRing<double> sum_algo;

  gloo_driver(const options& opts, gloo_algo a, std::shared_ptr<gloo::Context> c)
      : o(opts),
        algo(a),
        ctx(std::move(c)),
        barrier_algo(ctx),
        max_algo(ctx, {&max_scratch}, 1, gloo::ReductionFunction<double>::max),
        sum_algo(ctx, {sum_scratch}, 2, gloo::ReductionFunction<double>::sum) {}

  gloo::Algorithm& algorithm_for(void* buf, std::size_t count) {
    if (!current || buf != current_buf || count != current_count) {
      current.reset();  // its inboxes go before the next one's are allocated
      std::vector<T*> ptrs{static_cast<T*>(buf)};
      const int n = static_cast<int>(count);
      if (algo == gloo_algo::ring_chunked)
        current = std::make_unique<gloo::AllreduceRingChunked<T>>(ctx, ptrs, n, gloo_fn<T>(o.op));
      else current = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(ctx, ptrs, n, gloo_fn<T>(o.op));
      current_buf = buf;
      current_count = count;
    }
    return *current;
  }

  /// One all_reduce. send == nullptr means in place (recv holds the input).
  void call(const void* send, void* recv, std::size_t count) {
    if (count == 0) return;
    if (send != nullptr && send != recv) std::memcpy(recv, send, count * elt);
    algorithm_for(recv, count).run();
  }
  const void* in_place_send(perf::call_plan&, const std::byte*) const { return nullptr; }
  void barrier() { barrier_algo.run(); }
  static std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }
  void max_over_ranks(double& v) {
    max_scratch = v;
    max_algo.run();
    v = max_scratch;
  }
  void sum_over_ranks(long long* v, int n) {  // n == 2; counts stay far below 2^53
    for (int i = 0; i < n; ++i) sum_scratch[i] = static_cast<double>(v[i]);
    sum_algo.run();
    for (int i = 0; i < n; ++i) v[i] = static_cast<long long>(sum_scratch[i]);
  }
};

/// One rank: rendezvous, the sweep, the table on rank 0. Returns the exit status.
int run_rank(const options& o, gloo_algo algo, int rank, int P, const std::string& store_dir,
             const std::string& host = "127.0.0.1") {
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, P);
  ctx->setTimeout(std::chrono::seconds(300));
  ctx->connectFullMesh(store, dev);

  const bool print = rank == 0;
  std::FILE* out = stdout;
  const perf::sweep_buffers bufs = perf::alloc_buffers(o, P);
  if (print)
    perf::print_header(out, o, "gloo-bench", name(o.collective), P, "processes",
                       perf::op_column(o.collective, o.op), -1,
                       std::string("library Gloo (tcp, ") + host + ")  algorithm " + algo_name(algo));

  perf::sweep_totals totals;
  auto sweep = [&]<class T>(std::type_identity<T>) {
    gloo_driver<T> driver(o, algo, ctx);
    totals = perf::run_sweep<T>(o, rank, P, bufs.send.get(), bufs.recv.get(), driver, print ? out : nullptr);
    // Every measurement is done and checked. Gloo can report the first rank
    // to leave as "Connection closed by peer" on a rank still finishing this
    // barrier (seen with halving_doubling, whose pairs keep receives
    // posted): that is teardown, not a result, so it is reported and ignored.
    try {
      driver.barrier();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gloo-bench: rank %d: after the sweep (ignored): %s\n", rank, e.what());
    }
  };
  if (o.type == dtype::float64) sweep(std::type_identity<double>{});
  else sweep(std::type_identity<float>{});

  if (print) perf::print_summary(out, totals, algo_name(algo));
  return totals.failed() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* prog = "gloo-bench";
  options o;
  o.algo = "ring_chunked";
  perf::parse_outcome parsed = perf::parse_command_line(argc, argv, o, {/*mode=*/false, /*variant=*/true});
  gloo_algo algo = gloo_algo::ring_chunked;
  auto refuse = [&](std::string why) { parsed = {perf::parse_outcome::error, std::move(why)}; };
  if (parsed.what == perf::parse_outcome::ok) {
    if (o.collective != coll::all_reduce)
      refuse(std::string("collective ") + name(o.collective) + " is not measured (all_reduce only)");
    else if (o.type != dtype::float32 && o.type != dtype::float64)
      refuse(std::string("datatype ") + name(o.type) + " is not measured (float, double)");
    else if (o.op != reduce_op::sum && o.op != reduce_op::prod && o.op != reduce_op::min &&
             o.op != reduce_op::max)
      refuse(std::string("op ") + name(o.op) + " has no Gloo equivalent (sum, prod, min, max)");
    else if (o.algo == "ring_chunked" || o.algo == "auto") algo = gloo_algo::ring_chunked;
    else if (o.algo == "halving_doubling") algo = gloo_algo::halving_doubling;
    else refuse("unknown --algo '" + o.algo + "' (ring_chunked, halving_doubling)");
    if (parsed.what == perf::parse_outcome::ok && o.proto != "auto")
      refuse("--proto is not a gloo-bench flag");
  }
  if (const int rc = perf::parse_exit_status(parsed, prog, usage); rc >= 0) return rc;
  const int P = o.nranks;
  if (const char* r = std::getenv("GLOO_BENCH_RANK")) {  // one rank of a job on several hosts
    const char* host = std::getenv("GLOO_BENCH_HOST");
    const char* store = std::getenv("GLOO_BENCH_STORE");
    const int rank = std::atoi(r);
    if (host == nullptr || store == nullptr || rank < 0 || rank >= P) {
      std::fprintf(stderr,
                   "gloo-bench: GLOO_BENCH_RANK needs GLOO_BENCH_HOST, GLOO_BENCH_STORE and a rank < -p\n");
      return 2;
    }
    try {
      return run_rank(o, algo, rank, P, store, host);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gloo-bench: rank %d: %s\n", rank, e.what());
      return 1;
    }
  }

  // The rendezvous directory, shared by the ranks and removed at the end.
  std::string tmpl = (std::filesystem::temp_directory_path() / "gloo-bench.XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror("gloo-bench: mkdtemp");
    return 1;
  }
  const std::string store_dir = tmpl;

  std::vector<int> cpus = tools::allowed_cpus();
  if (static_cast<int>(cpus.size()) < P) cpus.clear();  // oversubscribed: no binding

  std::fflush(nullptr);
  const pid_t parent = getpid();
  std::vector<pid_t> kids;
  for (int r = 0; r < P; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("gloo-bench: fork");
      for (pid_t k : kids) kill(k, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      if (!cpus.empty()) tools::pin_thread(cpus[static_cast<std::size_t>(r)]);
      int rc = 1;
      try {
        rc = run_rank(o, algo, r, P, store_dir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo-bench: rank %d: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    kids.push_back(pid);
  }

  // Wait for every rank; the first failure ends the others.
  int rc = 0;
  for (std::size_t left = kids.size(); left > 0; --left) {
    int status = 0;
    const pid_t pid = wait(&status);
    if (pid < 0) break;
    int r = 0;
    while (r < P && kids[static_cast<std::size_t>(r)] != pid) ++r;
    int code = 0;
    if (WIFEXITED(status)) code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) code = 128 + WTERMSIG(status);
    if (code != 0 && rc == 0) {
      rc = code == 2 ? 1 : code;
      // Exit code 1 (wrong results, or an error the rank printed) needs no word.
      if (WIFSIGNALED(status) || code != 1)
        std::fprintf(stderr, "gloo-bench: rank %d (pid %d) %s %d; ending the other ranks\n", r,
                     static_cast<int>(pid), WIFSIGNALED(status) ? "killed by signal" : "exited with code",
                     WIFSIGNALED(status) ? WTERMSIG(status) : code);
      for (pid_t k : kids)
        if (k != pid) kill(k, SIGTERM);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  return rc;
}
