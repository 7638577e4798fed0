// bench/peers/copy_bench.cpp — copy-bench: single-thread memcpy bandwidth in
// collx-perf's table, the physical ceiling the collectives are compared with.
//
//   copy-bench all_reduce -b 8 -e 64M -f 2 -n 20 -w 5 -c 1
//
// Takes collx-perf's flags (the collective only names the sweep; -p, -o, -r
// are accepted and ignored) and, for every size of the sweep, times one
// thread (pinned to its first allowed CPU) copying `size` bytes between two
// page-aligned buffers with memcpy: -w untimed copies, then the mean of -n
// timed ones (doubled until they take 1 ms in all, so that copies of a few
// bytes are timed above the clock's resolution), the fastest of three such
// trials. algbw = busbw = size / time. With -c 1 the first copy of each
// size is checked element by element against collx-perf's input data,
// generated independently (the #wrong column). The in-place block is N/A.
// Exit status: 0 ok, 1 a wrong copy, 2 bad command line.
#include "cpu_set.hpp"
#include "perf_common.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace collx;

void usage(std::FILE* f, const char* prog) {
  std::fprintf(
      f,
      "usage: %s [<collective>] [-b <size>] [-e <size>] [-f <n>] [-n <iters>] [-w <iters>] [-c 0|1]\n"
      "       [-d <type>]\n"
      "\n"
      "Single-thread memcpy of each size of collx-perf's sweep; algbw = busbw = size / time.\n"
      "The collective (default all_reduce) is accepted for symmetry with the other drivers.\n",
      prog);
}

/// Keeps the compiler from dropping copies whose result is never read.
inline void clobber_memory(void* p) { asm volatile("" : : "g"(p) : "memory"); }

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* prog = "copy-bench";
  // The collective is optional here: supply one when the first argument is a flag.
  std::vector<char*> args(argv, argv + argc);
  std::string default_coll = "all_reduce";
  if (argc < 2 || argv[1][0] == '-') {
    bool help = false;
    for (int i = 1; i < argc; ++i)
      help |= std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0;
    if (!help) args.insert(args.begin() + 1, default_coll.data());
  }
  perf::options o;
  const perf::parse_outcome parsed = perf::parse_command_line(static_cast<int>(args.size()), args.data(), o,
                                                              {/*mode=*/false, /*variant=*/false});
  if (const int rc = perf::parse_exit_status(parsed, prog, usage); rc >= 0) return rc;

  if (const std::vector<int> cpus = tools::allowed_cpus(); !cpus.empty()) tools::pin_thread(cpus.front());

  const std::size_t elt = size_of(o.type);
  const std::vector<std::size_t> sizes = perf::sweep_sizes(o);
  const std::size_t max_bytes = sizes.empty() ? 0 : sizes.back();
  perf::page_buffer src = perf::page_alloc(max_bytes);
  perf::page_buffer dst = perf::page_alloc(max_bytes + perf::guard_bytes);
  // The check data of a one-rank broadcast: dst must equal rank 0's input.
  const perf::data_spec spec = perf::make_spec(coll::broadcast, o.type, reduce_op::sum, 1);

  perf::print_header(stdout, o, prog, "memcpy", 1, "thread", "none", -1,
                     "library glibc memcpy (single thread)");

  perf::sweep_totals totals;
  for (std::size_t size : sizes) {
    const std::size_t count = size / elt, bytes = count * elt;
    std::byte* s = src.get();
    std::byte* d = dst.get();
    perf::print_row_start(stdout, bytes, count, name(o.type), "none", -1);
    perf::block_result r;
    if (o.check > 0) {
      visit_dtype(o.type, [&]<class T>(std::type_identity<T>) {
        perf::fill_input<T>(spec, reinterpret_cast<T*>(s), count, 0, 0);
        perf::fill_sentinel(d, bytes + perf::guard_bytes);
        std::memcpy(d, s, bytes);
        clobber_memory(d);
        r.wrong = perf::count_wrong_copied<T>(spec, reinterpret_cast<const T*>(d), count, 0, 0);
      });
      r.out_of_bounds = perf::count_clobbered(d + bytes, perf::guard_bytes);
    }
    for (int i = 0; i < o.warmup_iters; ++i) {
      std::memcpy(d, s, bytes);
      clobber_memory(d);
    }
    // -n copies, doubled until they take 1 ms (a copy of a few bytes takes
    // nanoseconds, below what the table's time column and the clock
    // resolve); the fastest of three such trials, as a ceiling should be.
    long iters = o.iters;
    double sec = 0;
    for (int trial = 0; trial < 3;) {
      const auto t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < iters; ++i) {
        std::memcpy(d, s, bytes);
        clobber_memory(d);
      }
      const auto t1 = std::chrono::steady_clock::now();
      const double total = std::chrono::duration<double>(t1 - t0).count();
      if (total < 1e-3 && iters < (1L << 40)) {
        iters *= 2;
        continue;
      }
      const double mean = total / static_cast<double>(iters);
      sec = trial++ == 0 ? mean : std::min(sec, mean);
    }
    r.usec = sec * 1e6;
    r.algbw = r.busbw = sec > 0 ? static_cast<double>(bytes) / 1e9 / sec : 0.0;
    totals.add(r);
    perf::print_row_block(stdout, r.usec, r.algbw, r.busbw, r.wrong);
    perf::print_row_block(stdout, 0, 0, 0, -1);  // no in-place form
    std::printf("\n");
  }
  perf::print_summary(stdout, totals);
  return totals.failed() ? 1 : 0;
}
