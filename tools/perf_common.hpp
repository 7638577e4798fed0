// tools/perf_common.hpp — what collx-perf and the peer drivers (bench/peers/)
// share, so that their tables can be compared line by line:
//
//   * the nccl-tests command line (-b -e -f -i -n -w -c -o -d -r -p, -h),
//   * byte counts per collective and the bus-bandwidth factors, as nccl-tests
//     defines them (size = max(send, recv) bytes of one rank; count = the
//     count argument of the call; algbw = count·elt·(P for all_gather and
//     reduce_scatter and the all-to-alls) / time; busbw = algbw · 2(P−1)/P
//     for all_reduce, (P−1)/P for all_gather, reduce_scatter and the
//     all-to-alls, 1 for broadcast, reduce and send_recv),
//   * every collective is measured: all_to_allv with equal blocks of `count`
//     elements per peer, packed (OSU's osu_alltoallv); send_recv as
//     nccl-tests' sendrecv (`count` elements to the next rank and from the
//     previous one, in one group); barrier as one row of 0 bytes, whatever
//     the sweep,
//   * the usage text of those flags and what main does with a parse outcome,
//   * the table format (header, columns, units, time precision, the footer),
//   * the check data: inputs are a deterministic function of (rank, element
//     index) chosen so that every result is exact in the element type (small
//     integers for arithmetic, bit patterns for bitwise ops and integer copies);
//     the expected value is folded in double (uint64 for bit patterns) and
//     compared with a per-dtype tolerance × max(1, P−1), as nccl-tests does,
//   * the size sweep and its timing policy (run_sweep), with the library's
//     calls, clock and reductions supplied by a small driver object,
//   * binding ranks to the allowed CPUs.
//
// Depends only on collx's dtype/op/collective enumerations (and POSIX), never
// on the communicator, so a driver built against another library can include it.
#pragma once

#include <collx/coll.hpp>
#include <collx/dtype.hpp>
#include <collx/reduce_op.hpp>
#include <collx/variants.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace collx::perf {

// ---------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------

/// Whether the collective has an in-place form (the all-to-alls have none, as
/// NCCL's; a send_recv's two buffers are distinct; a barrier moves nothing).
inline bool has_in_place(coll c) {
  return c != coll::all_to_all && c != coll::all_to_allv && c != coll::send_recv && c != coll::barrier;
}

/// Whether the collective's count is per peer and both buffers hold P blocks.
inline bool per_peer_blocks(coll c) { return c == coll::all_to_all || c == coll::all_to_allv; }

inline bool parse_coll(std::string_view s, coll& out) {
  for (int i = 0; i < coll_count; ++i) {
    const auto c = static_cast<coll>(i);
    if (s == name(c)) {
      out = c;
      return true;
    }
  }
  // nccl-tests binary names, for muscle memory: all_reduce_perf → all_reduce.
  if (s.size() > 5 && s.substr(s.size() - 5) == "_perf") return parse_coll(s.substr(0, s.size() - 5), out);
  return false;
}

inline bool parse_dtype(std::string_view s, dtype& out) {
  struct alias {
    const char* n;
    dtype d;
  };
  static constexpr alias table[] = {
      {"int8", dtype::int8},
      {"char", dtype::int8},
      {"uint8", dtype::uint8},
      {"int32", dtype::int32},
      {"int", dtype::int32},
      {"uint32", dtype::uint32},
      {"int64", dtype::int64},
      {"uint64", dtype::uint64},
      {"half", dtype::float16},
      {"float16", dtype::float16},
      {"fp16", dtype::float16},
      {"bfloat16", dtype::bfloat16},
      {"bf16", dtype::bfloat16},
      {"float", dtype::float32},
      {"float32", dtype::float32},
      {"fp32", dtype::float32},
      {"double", dtype::float64},
      {"float64", dtype::float64},
      {"fp64", dtype::float64},
      {"f8e4m3", dtype::float8_e4m3},
      {"fp8_e4m3", dtype::float8_e4m3},
      {"float8_e4m3", dtype::float8_e4m3},
      {"f8e5m2", dtype::float8_e5m2},
      {"fp8_e5m2", dtype::float8_e5m2},
      {"float8_e5m2", dtype::float8_e5m2},
  };
  for (const alias& a : table)
    if (s == a.n) {
      out = a.d;
      return true;
    }
  return false;
}

inline constexpr const char* dtype_choices =
    "int8 uint8 int32 uint32 int64 uint64 half|float16|fp16 bfloat16|bf16 float|float32|fp32 "
    "double|float64|fp64 f8e4m3|fp8_e4m3 f8e5m2|fp8_e5m2";

inline bool parse_op(std::string_view s, reduce_op& out) {
  for (int i = 0; i < reduce_op_count; ++i) {
    const auto op = static_cast<reduce_op>(i);
    if (s == name(op)) {
      out = op;
      return true;
    }
  }
  return false;
}

inline constexpr const char* op_choices = "sum prod min max avg band bor bxor";

/// nccl-tests' size syntax: a number with an optional K, M or G (powers of 1024).
inline bool parse_size(const char* s, std::size_t& out) {
  if (s == nullptr || *s == '\0' || *s == '-') return false;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || !(v >= 0)) return false;
  double unit = 1;
  if (*end != '\0') {
    switch (*end) {
      case 'k':
      case 'K': unit = 1024.0; break;
      case 'm':
      case 'M': unit = 1024.0 * 1024; break;
      case 'g':
      case 'G': unit = 1024.0 * 1024 * 1024; break;
      default: return false;
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
    if (*end != '\0') return false;
  }
  const double bytes = v * unit;
  if (bytes > 1e15) return false;
  out = static_cast<std::size_t>(bytes);
  return true;
}

inline bool parse_int(const char* s, long lo, long hi, long& out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 0);
  if (*end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

enum class rank_mode { threads, procs };

struct options {
  coll collective = coll::all_reduce;
  std::size_t min_bytes = 8;
  std::size_t max_bytes = 64u << 20;
  std::size_t step_factor = 2;
  std::size_t step_bytes = 1u << 20;  // used when step_factor is 1, as nccl-tests' -i
  int iters = 20;
  int warmup_iters = 5;
  int check = 1;
  reduce_op op = reduce_op::sum;
  dtype type = dtype::float32;
  int root = 0;
  int nranks = 2;
  bool nranks_given = false;
  rank_mode mode = rank_mode::threads;
  std::string algo = "auto", proto = "auto";
  /// The time column: the mean over the timed calls (nccl-tests'), or the
  /// median of each call timed alone, which a call that waited for a
  /// descheduled peer does not move (a loaded machine).
  bool median_timing = false;
  /// Before each timed call every rank stores to each cache line of its input
  /// (outside the timed region, then a barrier), as a producer of fresh data
  /// would: peers cannot reuse copies of those lines an earlier call left in
  /// their caches, which single-copy reads of an input that never changes do.
  bool rewrite_input = false;
  /// Each size's timed calls last at least this long (ms; 0: exactly
  /// `iters` calls): where `iters` calls took less (the slowest rank's, so
  /// every rank runs as many), as many as fill it are timed again. A few timed
  /// calls of a short collective measure how the ranks leave the barrier
  /// before them, not the collective: on 4 process ranks of 2 CPUs a 256 KiB
  /// all_gather took 56-63 us as the mean of 10 calls and 32-33 us as the
  /// mean of 200.
  int min_time_ms = 0;
};

/// Which of the optional flags a program takes.
struct flag_set {
  bool mode = false;     // --threads / --procs
  bool variant = false;  // --algo / --proto
};

struct parse_outcome {
  enum kind { ok, help, error } what = ok;
  std::string message;
};

/// Parses `prog <collective> [flags]`. Flags take their value as the next
/// argument, attached (-b8) or after '=' (--minbytes=8).
inline parse_outcome parse_command_line(int argc, char** argv, options& o, flag_set allowed) {
  bool have_coll = false;
  auto fail = [](std::string m) { return parse_outcome{parse_outcome::error, std::move(m)}; };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return {parse_outcome::help, {}};
    if (arg.empty() || arg[0] != '-' || arg == "-") {
      if (have_coll) return fail("unexpected argument '" + arg + "'");
      if (!parse_coll(arg, o.collective))
        return fail("unknown collective '" + arg +
                    "' (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, "
                    "all_to_allv, send_recv, barrier)");
      have_coll = true;
      continue;
    }
    // Split into a key and an optional attached value.
    std::string key, value;
    bool has_value = false;
    if (arg.rfind("--", 0) == 0) {
      const auto eq = arg.find('=');
      key = arg.substr(0, eq);
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        has_value = true;
      }
    } else {
      key = arg.substr(0, 2);
      if (arg.size() > 2) {
        value = arg.substr(2);
        has_value = true;
      }
    }
    if (key == "--rewrite-input") {
      if (has_value) return fail("'" + key + "' takes no value");
      o.rewrite_input = true;
      continue;
    }
    if (allowed.mode && (key == "--threads" || key == "--procs")) {
      if (has_value) return fail("'" + key + "' takes no value");
      o.mode = key == "--threads" ? rank_mode::threads : rank_mode::procs;
      continue;
    }
    struct flag {
      const char* s;
      const char* l;
    };
    static constexpr flag valued[] = {{"-b", "--minbytes"},  {"-e", "--maxbytes"}, {"-f", "--stepfactor"},
                                      {"-i", "--stepbytes"}, {"-n", "--iters"},    {"-w", "--warmup_iters"},
                                      {"-c", "--check"},     {"-o", "--op"},       {"-d", "--datatype"},
                                      {"-r", "--root"},      {"-p", "--nranks"},   {"", "--algo"},
                                      {"", "--proto"},       {"-t", "--timing"},   {"-T", "--min-time"}};
    char which = 0;
    for (const flag& f : valued) {
      if (key == f.s || key == f.l) {
        which = f.s[0] != '\0' ? f.s[1] : (std::string_view(f.l) == "--algo" ? 'A' : 'P');
        break;
      }
    }
    if (which == 0) return fail("unknown flag '" + arg + "'");
    if ((which == 'A' || which == 'P') && !allowed.variant) return fail("unknown flag '" + arg + "'");
    if (!has_value) {
      if (i + 1 >= argc) return fail("flag '" + key + "' needs a value");
      value = argv[++i];
    }
    const char* v = value.c_str();
    long n = 0;
    // The flags whose value is an int of options, with its range.
    struct int_flag {
      char which;
      const char* name;
      long lo, hi;
      const char* range;
      int options::*field;
    };
    static constexpr int_flag ints[] = {
        {'n', "iters", 1, 1L << 30, "an integer >= 1", &options::iters},
        {'w', "warmup_iters", 0, 1L << 30, "an integer >= 0", &options::warmup_iters},
        {'c', "check", 0, 1L << 30, "0 or 1", &options::check},
        {'r', "root", 0, 4095, "an integer >= 0", &options::root},
        {'p', "nranks", 1, 4096, "an integer in [1, 4096]", &options::nranks},
        {'T', "min-time", 0, 3'600'000, "milliseconds, an integer in [0, 3600000]", &options::min_time_ms},
    };
    if (const auto* f = std::find_if(std::begin(ints), std::end(ints),
                                     [&](const int_flag& x) { return x.which == which; });
        f != std::end(ints)) {
      if (!parse_int(v, f->lo, f->hi, n))
        return fail(std::string("invalid ") + f->name + " '" + value + "' (" + f->range + ")");
      o.*(f->field) = static_cast<int>(n);
      o.nranks_given |= which == 'p';
      continue;
    }
    switch (which) {
      case 'b':
        if (!parse_size(v, o.min_bytes)) return fail("invalid size for minbytes: '" + value + "'");
        break;
      case 'e':
        if (!parse_size(v, o.max_bytes)) return fail("invalid size for maxbytes: '" + value + "'");
        break;
      case 'f':
        if (!parse_int(v, 1, 1 << 20, n)) return fail("invalid stepfactor '" + value + "' (an integer >= 1)");
        o.step_factor = static_cast<std::size_t>(n);
        break;
      case 'i':
        if (!parse_size(v, o.step_bytes) || o.step_bytes == 0)
          return fail("invalid stepbytes '" + value + "'");
        break;
      case 'o':
        if (!parse_op(value, o.op)) return fail("unknown op '" + value + "' (" + op_choices + ")");
        break;
      case 'd':
        if (!parse_dtype(value, o.type))
          return fail("unknown datatype '" + value + "' (" + dtype_choices + ")");
        break;
      case 't':
        if (value != "mean" && value != "median")
          return fail("invalid timing '" + value + "' (mean or median)");
        o.median_timing = value == "median";
        break;
      case 'A': o.algo = value; break;
      case 'P': o.proto = value; break;
      default: return fail("unknown flag '" + arg + "'");
    }
  }
  if (!have_coll)
    return fail(
        "missing the collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, "
        "all_to_allv, send_recv, barrier)");
  if (o.rewrite_input && !o.median_timing)
    return fail("--rewrite-input needs -t median (each call is timed alone, after the rewrite)");
  if (o.min_bytes > o.max_bytes)
    return fail("minbytes (" + std::to_string(o.min_bytes) + ") is larger than maxbytes (" +
                std::to_string(o.max_bytes) + ")");
  if (is_reduction(o.collective) && !is_supported(o.op, o.type))
    return fail(std::string("op ") + name(o.op) + " needs an integer datatype, not " + name(o.type));
  return {};
}

/// The sizes of the sweep: min, min·f, … ≤ max (or min, min+i, … with -f 1).
inline std::vector<std::size_t> sweep_sizes(const options& o) {
  if (o.collective == coll::barrier) return {0};  // no size: one row
  std::vector<std::size_t> sizes;
  for (std::size_t s = o.min_bytes; s <= o.max_bytes;) {
    sizes.push_back(s);
    const std::size_t next = o.step_factor > 1 ? s * o.step_factor : s + o.step_bytes;
    if (next <= s) break;  // 0 · factor, or overflow
    s = next;
  }
  return sizes;
}

// ---------------------------------------------------------------------------
// Byte counts and bandwidth (nccl-tests' *GetCollByteCount and *GetBw)
// ---------------------------------------------------------------------------

/// Element counts of one rank for a sweep size of `bytes`.
struct coll_counts {
  std::size_t send = 0;          // elements of the send buffer
  std::size_t recv = 0;          // elements of the receive buffer
  std::size_t param = 0;         // the count argument of the call
  std::size_t send_inplace = 0;  // in place: send = recvbuf + rank·send_inplace
  std::size_t recv_inplace = 0;  // in place: recv = recvbuf + rank·recv_inplace
  std::size_t bytes(std::size_t elt) const { return std::max(send, recv) * elt; }
};

inline coll_counts counts_for(coll c, std::size_t bytes, std::size_t elt, int nranks) {
  const std::size_t count = bytes / elt, P = static_cast<std::size_t>(nranks);
  coll_counts k;
  switch (c) {
    case coll::all_gather:
      k.param = k.send = count / P;
      k.recv = k.send * P;
      k.send_inplace = k.send;
      break;
    case coll::reduce_scatter:
      k.param = k.recv = count / P;
      k.send = k.recv * P;
      k.recv_inplace = k.recv;
      break;
    case coll::all_to_all:  // count per peer; both buffers hold P blocks
    case coll::all_to_allv:
      k.param = count / P;
      k.send = k.recv = k.param * P;
      break;
    default: k.param = k.send = k.recv = count; break;
  }
  return k;
}

inline double busbw_factor(coll c, int nranks) {
  const double P = nranks;
  switch (c) {
    case coll::all_reduce: return 2 * (P - 1) / P;
    case coll::all_gather:
    case coll::reduce_scatter:
    case coll::all_to_all:
    case coll::all_to_allv: return (P - 1) / P;
    case coll::broadcast:
    case coll::reduce:
    case coll::send_recv:
    case coll::barrier: return 1;
  }
  return 1;
}

/// algbw and busbw in GB/s for a call with count argument `param`.
inline std::pair<double, double> bandwidth(coll c, std::size_t param, std::size_t elt, double seconds,
                                           int nranks) {
  double bytes = static_cast<double>(param) * static_cast<double>(elt);
  if (c == coll::all_gather || c == coll::reduce_scatter || per_peer_blocks(c)) bytes *= nranks;
  const double alg = seconds > 0 ? bytes / 1.0e9 / seconds : 0.0;
  return {alg, alg * busbw_factor(c, nranks)};
}

// ---------------------------------------------------------------------------
// Table (nccl-tests' layout)
// ---------------------------------------------------------------------------

inline void print_columns(std::FILE* f) {
  std::fprintf(f, "#\n");
  std::fprintf(
      f, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "",
      "", "", "", "");
  std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
               "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
               "#wrong");
  std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

/// The op column: the op for reductions, "none" otherwise; the root column:
/// the root for broadcast/reduce, -1 otherwise.
inline const char* op_column(coll c, reduce_op op) { return is_reduction(c) ? name(op) : "none"; }
inline int root_column(coll c, int root) { return c == coll::broadcast || c == coll::reduce ? root : -1; }

inline void print_row_start(std::FILE* f, std::size_t bytes, std::size_t count, const char* type,
                            const char* op, int root) {
  std::fprintf(f, "%12zu  %12zu  %8s  %6s  %6i", bytes, count, type, op, root);
}

/// One block (out-of-place or in-place). wrong < 0 prints N/A (check off).
inline void print_row_block(std::FILE* f, double usec, double algbw, double busbw, long long wrong) {
  char t[32];
  if (usec >= 10000.0) std::snprintf(t, sizeof t, "%7.0f", usec);
  else if (usec >= 100.0) std::snprintf(t, sizeof t, "%7.1f", usec);
  else std::snprintf(t, sizeof t, "%7.2f", usec);
  if (wrong < 0) std::fprintf(f, "  %7s  %6.2f  %6.2f  %5s", t, algbw, busbw, "N/A");
  else std::fprintf(f, "  %7s  %6.2f  %6.2f  %5lld", t, algbw, busbw, wrong);
}

inline void print_footer(std::FILE* f, long long out_of_bounds, double avg_busbw) {
  std::fprintf(f, "# Out of bounds values : %lld %s\n", out_of_bounds, out_of_bounds ? "FAILED" : "OK");
  std::fprintf(f, "# Avg bus bandwidth    : %g \n", avg_busbw);
}

/// The usage lines of the sweep flags, the same in every driver.
inline constexpr const char* sweep_flags_help =
    "  -b, --minbytes <size>      smallest size (default 8; K/M/G suffixes)\n"
    "  -e, --maxbytes <size>      largest size (default 64M)\n"
    "  -f, --stepfactor <n>       multiply the size by n each step (default 2)\n"
    "  -i, --stepbytes <size>     with -f 1: add this many bytes each step (default 1M)\n"
    "  -n, --iters <n>            timed iterations per size (default 20)\n"
    "  -w, --warmup_iters <n>     untimed iterations before them (default 5)\n"
    "  -T, --min-time <ms>        where n timed calls (the slowest rank's) took less\n"
    "                             than ms, time again as many calls as fill it (default 0)\n"
    "  -t, --timing <mean|median> time column: mean of the timed calls (default), or the\n"
    "                             median of each call timed alone (robust to a rank\n"
    "                             descheduled by other tasks); the maximum over ranks\n"
    "      --rewrite-input        with -t median: before each timed call every rank\n"
    "                             stores to each cache line of its input, then a barrier\n"
    "                             (fresh data, as a producer leaves it: peers cannot\n"
    "                             reuse lines of it an earlier call left in their caches)\n"
    "  -c, --check <0|1>          check results before timing each size (default 1)\n";

/// What main does with a parse outcome: the usage on stdout for help (exit
/// status 0), the message and the usage on stderr for an error (2), and -1
/// to go on. Only a rank with `speak` set prints (MPI: rank 0).
inline int parse_exit_status(const parse_outcome& p, const char* prog, void (*usage)(std::FILE*, const char*),
                             bool speak = true) {
  if (p.what == parse_outcome::help) {
    if (speak) usage(stdout, prog);
    return 0;
  }
  if (p.what == parse_outcome::error) {
    if (speak) {
      std::fprintf(stderr, "%s: %s\n\n", prog, p.message.c_str());
      usage(stderr, prog);
    }
    return 2;
  }
  return -1;
}

/// The header of a table: what ran where, the sweep, the data and the
/// library (`tail`: "library …" or "variant …"), then the column names.
inline void print_header(std::FILE* f, const options& o, const char* program, const char* what, int nranks,
                         const char* mode, const char* op, int root, const std::string& tail) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::fprintf(f, "# %s %s  nranks %d  mode %s  pid %d on %s\n", program, what, nranks, mode,
               static_cast<int>(getpid()), host);
  char min_time[48] = "";
  if (o.min_time_ms > 0) std::snprintf(min_time, sizeof min_time, " (more to last %d ms)", o.min_time_ms);
  std::fprintf(f, "# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d%s validation: %d%s\n",
               o.min_bytes, o.max_bytes, o.step_factor > 1 ? o.step_factor : o.step_bytes,
               o.step_factor > 1 ? "factor" : "bytes", o.warmup_iters, o.iters, min_time, o.check,
               o.median_timing
                   ? (o.rewrite_input ? " timing: median per call, input rewritten before each call"
                                      : " timing: median per call")
                   : "");
  std::fprintf(f, "# dtype %s  op %s  root %d  %s\n", name(o.type), op, root, tail.c_str());
  print_columns(f);
  std::fflush(f);
}

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------

inline constexpr std::size_t page_size = 4096;
/// Bytes after each output that must stay untouched by the collective.
inline constexpr std::size_t guard_bytes = 64;
inline constexpr unsigned char sentinel_byte = 0xA5;

struct free_deleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using page_buffer = std::unique_ptr<std::byte, free_deleter>;

/// Page-aligned, zero-filled (so its pages are faulted in by the caller's thread).
inline page_buffer page_alloc(std::size_t bytes) {
  const std::size_t n = (std::max<std::size_t>(bytes, 1) + page_size - 1) / page_size * page_size;
  void* p = std::aligned_alloc(page_size, n);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, n);
  return page_buffer(static_cast<std::byte*>(p));
}

inline void fill_sentinel(void* p, std::size_t bytes) { std::memset(p, sentinel_byte, bytes); }

inline long long count_clobbered(const void* p, std::size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  long long n = 0;
  for (std::size_t i = 0; i < bytes; ++i) n += b[i] != sentinel_byte;
  return n;
}

// ---------------------------------------------------------------------------
// Check data
// ---------------------------------------------------------------------------

/// How inputs are made and results judged for one (collective, dtype, op, P).
struct data_spec {
  coll c = coll::all_reduce;
  dtype type = dtype::float32;
  reduce_op op = reduce_op::sum;
  int nranks = 1;
  bool bits = false;            // bit patterns (bitwise ops; integer data movement)
  bool product = false;         // prod: mostly ones, so products stay tiny
  std::int64_t lo = 0, hi = 0;  // arithmetic inputs are integers in [lo, hi]
  std::uint64_t mask = ~0ull;   // bit width of the type
  double tolerance = 0;         // allowed |got − expected| / max(1, |expected|)
};

/// Largest L such that every integer in [0, L] is exact in the type (and, for
/// 64-bit integers, in the double the reference is folded in).
inline std::int64_t exact_integer_limit(dtype d) {
  switch (d) {
    case dtype::int8: return 127;
    case dtype::uint8: return 255;
    case dtype::int32: return 2147483647LL;
    case dtype::uint32: return 4294967295LL;
    case dtype::int64:
    case dtype::uint64:
    case dtype::float64: return 1LL << 53;
    case dtype::float16: return 2048;
    case dtype::bfloat16: return 256;
    case dtype::float32: return 1LL << 24;
    case dtype::float8_e4m3: return 16;
    case dtype::float8_e5m2: return 8;
  }
  return 1;
}

inline bool is_signed_type(dtype d) { return d != dtype::uint8 && d != dtype::uint32 && d != dtype::uint64; }

/// nccl-tests' per-dtype bound; scaled by max(1, P−1) in make_spec.
inline double dtype_tolerance(dtype d) {
  switch (d) {
    case dtype::float16: return 1e-2;
    case dtype::bfloat16: return 1e-2;
    case dtype::float32: return 1e-5;
    case dtype::float64: return 1e-12;
    case dtype::float8_e4m3: return 0.125;  // one ulp of a 3-bit mantissa
    case dtype::float8_e5m2: return 0.25;   // one ulp of a 2-bit mantissa
    default: return 0;                      // integers: exact
  }
}

inline data_spec make_spec(coll c, dtype d, reduce_op op, int nranks) {
  data_spec s;
  s.c = c;
  s.type = d;
  s.op = op;
  s.nranks = nranks;
  const int bits = static_cast<int>(size_of(d) * 8);
  s.mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
  s.tolerance = dtype_tolerance(d) * std::max(1, nranks - 1);
  const std::int64_t L = exact_integer_limit(d);
  const bool sgn = is_signed_type(d);
  const bool reduction = is_reduction(c);
  if ((reduction && is_bitwise(op)) || (!reduction && is_integral(d))) {
    s.bits = true;
  } else if (reduction && op == reduce_op::prod) {
    s.product = true;
  } else if (reduction && (op == reduce_op::sum || op == reduce_op::avg)) {
    // Every partial sum of P inputs stays within the exact range.
    const std::int64_t m = std::clamp<std::int64_t>(L / nranks, 1, 1000);
    s.lo = sgn ? -(m / 2) : 0;
    s.hi = sgn ? m / 2 : m;
    if (s.hi == 0) s.hi = 1;
  } else {
    const std::int64_t m = std::min<std::int64_t>(L, 1000);
    s.lo = sgn ? -m : 0;
    s.hi = m;
  }
  return s;
}

/// A 64-bit mix of (rank, index): the splitmix64 finaliser.
inline std::uint64_t mix(int rank, std::size_t idx) {
  std::uint64_t z = (static_cast<std::uint64_t>(rank) << 48) ^ static_cast<std::uint64_t>(idx);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Input element idx of `rank`, arithmetic kind (an exact integer).
inline double input_value(const data_spec& s, int rank, std::size_t idx) {
  if (s.product) {
    const std::size_t P = static_cast<std::size_t>(s.nranks);
    if (static_cast<std::size_t>(rank) == idx % P) return 1.0 + static_cast<double>(mix(0, idx) % 3);
    if (s.nranks > 1 && is_signed_type(s.type) && static_cast<std::size_t>(rank) == (idx + 1) % P &&
        (mix(1, idx) & 1))
      return -1.0;
    return 1.0;
  }
  const std::uint64_t span = static_cast<std::uint64_t>(s.hi - s.lo) + 1;
  return static_cast<double>(s.lo + static_cast<std::int64_t>(mix(rank, idx) % span));
}

/// Input element idx of `rank`, bit-pattern kind.
inline std::uint64_t input_bits(const data_spec& s, int rank, std::size_t idx) {
  return mix(rank, idx) & s.mask;
}

template <class T>
inline T from_bits(std::uint64_t b) {
  return static_cast<T>(b);
}
template <class T>
inline std::uint64_t to_bits(T v, std::uint64_t mask) {
  if constexpr (std::is_integral_v<T>) return static_cast<std::uint64_t>(v) & mask;
  else return 0;
}

/// Writes rank's inputs for global element indices [idx0, idx0 + n).
template <class T>
void fill_input(const data_spec& s, T* buf, std::size_t n, int rank, std::size_t idx0) {
  if (s.bits) {
    if constexpr (std::is_integral_v<T>)
      for (std::size_t i = 0; i < n; ++i) buf[i] = from_bits<T>(input_bits(s, rank, idx0 + i));
  } else {
    for (std::size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(input_value(s, rank, idx0 + i));
  }
}

/// Whether a result element matches the expected double (rounded to T first).
template <class T>
inline bool matches(const data_spec& s, T got, double expected) {
  const double want = static_cast<double>(static_cast<T>(expected));
  const double g = static_cast<double>(got);
  if (s.tolerance == 0) return g == want;
  return std::fabs(g - want) <= s.tolerance * std::max(1.0, std::fabs(want));
}

/// Number of wrong elements among n results of a reduction over all ranks,
/// for global element indices [idx0, idx0 + n).
template <class T>
long long count_wrong_reduced(const data_spec& s, const T* got, std::size_t n, std::size_t idx0) {
  long long wrong = 0;
  const int P = s.nranks;
  if (s.bits) {
    if constexpr (std::is_integral_v<T>) {
      for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t acc = input_bits(s, 0, idx0 + i);
        for (int q = 1; q < P; ++q) {
          const std::uint64_t v = input_bits(s, q, idx0 + i);
          acc = s.op == reduce_op::band ? (acc & v) : s.op == reduce_op::bor ? (acc | v) : (acc ^ v);
        }
        wrong += to_bits(got[i], s.mask) != acc;
      }
    }
    return wrong;
  }
  for (std::size_t i = 0; i < n; ++i) {
    double acc = input_value(s, 0, idx0 + i);
    for (int q = 1; q < P; ++q) {
      const double v = input_value(s, q, idx0 + i);
      switch (s.op) {
        case reduce_op::prod: acc *= v; break;
        case reduce_op::min: acc = std::min(acc, v); break;
        case reduce_op::max: acc = std::max(acc, v); break;
        default: acc += v; break;  // sum, avg
      }
    }
    if (s.op == reduce_op::avg) acc = is_integral(s.type) ? std::trunc(acc / P) : acc / P;
    wrong += !matches(s, got[i], acc);
  }
  return wrong;
}

/// Number of wrong elements among n results that must equal src_rank's inputs
/// at global indices [idx0, idx0 + n).
template <class T>
long long count_wrong_copied(const data_spec& s, const T* got, std::size_t n, int src_rank,
                             std::size_t idx0) {
  long long wrong = 0;
  if (s.bits) {
    if constexpr (std::is_integral_v<T>)
      for (std::size_t i = 0; i < n; ++i)
        wrong += to_bits(got[i], s.mask) != input_bits(s, src_rank, idx0 + i);
    return wrong;
  }
  for (std::size_t i = 0; i < n; ++i) wrong += !matches(s, got[i], input_value(s, src_rank, idx0 + i));
  return wrong;
}

// ---------------------------------------------------------------------------
// One measurement: the buffer plan of a (size, placement) and its check
// ---------------------------------------------------------------------------

/// Where a rank's call reads and writes for one size, in or out of place, with
/// NCCL's in-place layouts. Offsets are bytes from the start of each buffer.
struct call_plan {
  bool in_place = false;
  std::size_t send_off = 0;   // from sendbuf (out of place) or recvbuf (in place)
  std::size_t recv_off = 0;   // from recvbuf
  std::size_t guard_off = 0;  // from recvbuf: the guard after everything the call may write
};

inline call_plan plan_for(const coll_counts& k, std::size_t elt, int rank, bool in_place) {
  call_plan p;
  p.in_place = in_place;
  const std::size_t r = static_cast<std::size_t>(rank);
  if (in_place) {
    p.send_off = r * k.send_inplace * elt;
    p.recv_off = r * k.recv_inplace * elt;
    p.guard_off = std::max(k.send, k.recv) * elt;
  } else {
    p.guard_off = k.recv * elt;
  }
  return p;
}

/// Prepares rank's buffers for the checked call: inputs where the call reads
/// them, the sentinel everywhere the call writes, and the guard.
template <class T>
void prepare_check(const data_spec& s, const coll_counts& k, const call_plan& p, int rank, int root,
                   std::byte* sendbuf, std::byte* recvbuf) {
  const std::size_t elt = sizeof(T);
  std::byte* src = p.in_place ? recvbuf + p.send_off : sendbuf;
  // The receive side first: in place, inputs are written over it below.
  fill_sentinel(recvbuf, std::max(k.send, k.recv) * elt + guard_bytes);
  // Only broadcast has ranks without input. Element i of a rank's input is
  // global index i: all_gather's pieces and reduce_scatter's blocks are then
  // checked against (rank, index) directly.
  if (s.c == coll::broadcast && rank != root) return;
  fill_input<T>(s, reinterpret_cast<T*>(src), k.send, rank, 0);
}

/// Counts wrong result elements of rank after the checked call, and the
/// guard bytes it clobbered.
template <class T>
std::pair<long long, long long> check_result(const data_spec& s, const coll_counts& k, const call_plan& p,
                                             int rank, int root, const std::byte* recvbuf) {
  const T* out = reinterpret_cast<const T*>(recvbuf + p.recv_off);
  long long wrong = 0;
  switch (s.c) {
    case coll::all_reduce: wrong = count_wrong_reduced<T>(s, out, k.recv, 0); break;
    case coll::reduce_scatter:
      wrong = count_wrong_reduced<T>(s, out, k.recv, static_cast<std::size_t>(rank) * k.recv);
      break;
    case coll::reduce:
      if (rank == root) wrong = count_wrong_reduced<T>(s, out, k.recv, 0);
      break;
    case coll::broadcast: wrong = count_wrong_copied<T>(s, out, k.recv, root, 0); break;
    case coll::all_gather:
      for (int q = 0; q < s.nranks; ++q)
        wrong += count_wrong_copied<T>(s, out + static_cast<std::size_t>(q) * k.send, k.send, q, 0);
      break;
    case coll::all_to_all:  // block q is rank q's send block `rank`
    case coll::all_to_allv:
      for (int q = 0; q < s.nranks; ++q)
        wrong += count_wrong_copied<T>(s, out + static_cast<std::size_t>(q) * k.param, k.param, q,
                                       static_cast<std::size_t>(rank) * k.param);
      break;
    case coll::send_recv:  // the previous rank's input
      wrong = count_wrong_copied<T>(s, out, k.recv, (rank + s.nranks - 1) % s.nranks, 0);
      break;
    case coll::barrier: break;
  }
  const long long oob = count_clobbered(recvbuf + p.guard_off, guard_bytes);
  return {wrong, oob};
}

/// Bytes each rank's buffers need for the whole sweep: send (out of place)
/// and recv (in place uses it for both), plus the guard.
struct buffer_bytes {
  std::size_t send = 0, recv = 0;
};
inline buffer_bytes buffers_for(const options& o, int nranks) {
  buffer_bytes b;
  const std::size_t elt = size_of(o.type);
  for (std::size_t bytes : sweep_sizes(o)) {
    const coll_counts k = counts_for(o.collective, bytes, elt, nranks);
    b.send = std::max(b.send, k.send * elt);
    b.recv = std::max(b.recv, std::max(k.send, k.recv) * elt);
  }
  b.recv += guard_bytes;
  return b;
}

/// One rank's page-aligned buffers for the whole sweep.
struct sweep_buffers {
  page_buffer send, recv;
};
inline sweep_buffers alloc_buffers(const options& o, int nranks) {
  const buffer_bytes need = buffers_for(o, nranks);
  return {page_alloc(need.send), page_alloc(need.recv)};
}

// ---------------------------------------------------------------------------
// Results of a sweep, as rank 0 accumulates them
// ---------------------------------------------------------------------------

struct block_result {
  double usec = 0, algbw = 0, busbw = 0;
  long long wrong = -1;  // -1: not checked
  long long out_of_bounds = 0;
};

struct sweep_totals {
  double busbw_sum = 0;
  int blocks = 0;
  long long wrong = 0, out_of_bounds = 0;
  void add(const block_result& r) {
    busbw_sum += r.busbw;
    ++blocks;
    if (r.wrong > 0) wrong += r.wrong;
    out_of_bounds += r.out_of_bounds;
  }
  double avg_busbw() const { return blocks ? busbw_sum / blocks : 0.0; }
  bool failed() const { return wrong > 0 || out_of_bounds > 0; }
};

inline void print_wrong_total(std::FILE* f, const sweep_totals& t) {
  if (t.wrong > 0) std::fprintf(f, "# %lld wrong elements in total: FAILED\n", t.wrong);
}

/// The end of a table: the footer, the wrong-element total when any, the
/// variant line when given, and the closing '#'.
inline void print_summary(std::FILE* f, const sweep_totals& t, const char* variant = nullptr) {
  print_footer(f, t.out_of_bounds, t.avg_busbw());
  print_wrong_total(f, t);
  if (variant != nullptr) std::fprintf(f, "# variant: %s\n", variant);
  std::fprintf(f, "#\n");
  std::fflush(f);
}

// ---------------------------------------------------------------------------
// The sweep: what every driver runs, with nccl-tests' timing policy
// ---------------------------------------------------------------------------

/// Seconds between two readings of a driver's clock: a std::chrono time point
/// or a double in seconds (MPI_Wtime).
template <class Time>
inline double seconds_between(const Time& t0, const Time& t1) {
  if constexpr (std::is_arithmetic_v<Time>) return static_cast<double>(t1 - t0);
  else return std::chrono::duration<double>(t1 - t0).count();
}

/// Stores each cache line of [p, p + n) back as it is: the lines are this
/// core's, modified, and a peer's earlier copies of them are gone.
inline void rewrite_lines(void* p, std::size_t n) {
  auto* b = static_cast<volatile unsigned char*>(p);
  for (std::size_t i = 0; i < n; i += 64) b[i] = b[i];
  if (n > 0) b[n - 1] = b[n - 1];
}

/// Timed calls of one size under options o, given the slowest rank's time
/// per call in a pilot of o.iters calls, in seconds: o.iters, or more where
/// they would take less than o.min_time_ms (at most 2^24).
inline int timed_iters(const options& o, double sec_per_call) {
  if (o.min_time_ms <= 0 || !(sec_per_call > 0)) return o.iters;
  const double want = std::ceil(o.min_time_ms * 1e-3 / sec_per_call);
  constexpr double most = double(1 << 24);
  return want > o.iters ? int(want < most ? want : most) : o.iters;
}

/// Runs the size sweep of one rank with element type T and returns the totals
/// (the same on every rank: times and counts are reduced over the ranks). Rows
/// go to `table` when it is not null (the printing rank); the header before
/// and the footer after are the caller's.
///
/// As nccl-tests: warm-up iterations at the largest, then the smallest size;
/// then per size, out of place and in place: one checked call (with -c),
/// the warm-up iterations, a barrier, the timed iterations, and the mean time
/// per iteration, the maximum over the ranks. With --min-time those calls are
/// a pilot: where the slowest rank's took less than the minimum, a barrier
/// and as many more calls as would fill it are timed instead (timed_iters);
/// the counts are listed after the rows.
///
/// The driver supplies what differs between libraries:
///   d.call(send, recv, count)         one collective;
///   d.in_place_send(plan, input)      in place: the send argument, given where
///                                     the rank's input lies (recvbuf +
///                                     plan.send_off); may move plan.recv_off
///                                     to where the library leaves the result;
///   d.barrier()                       all ranks arrive before timing starts;
///   d.now()                           a clock reading (see seconds_between);
///   d.max_over_ranks(double&)         in place;
///   d.sum_over_ranks(long long*, n)   in place;
///   d.after_timing(bytes)             optional: right after the timed calls
///                                     of a block, before any other call.
template <class T, class Driver>
sweep_totals run_sweep(const options& o, int rank, int nranks, std::byte* sendbuf, std::byte* recvbuf,
                       Driver& d, std::FILE* table) {
  const std::size_t elt = sizeof(T);
  const data_spec spec = make_spec(o.collective, o.type, o.op, nranks);
  sweep_totals totals;

  const std::vector<std::size_t> sizes = sweep_sizes(o);
  std::string iteration_notes;  // with --min-time: the timed calls of each block
  for (std::size_t bytes : {sizes.back(), sizes.front()}) {
    const std::size_t param = counts_for(o.collective, bytes, elt, nranks).param;
    for (int i = 0; i < o.warmup_iters; ++i) d.call(sendbuf, recvbuf, param);
  }
  for (std::size_t bytes : sizes) {
    const coll_counts k = counts_for(o.collective, bytes, elt, nranks);
    if (table)
      print_row_start(table, k.bytes(elt), k.param, name(o.type), op_column(o.collective, o.op),
                      root_column(o.collective, o.root));
    for (int in_place = 0; in_place < 2; ++in_place) {
      if (in_place && !has_in_place(o.collective)) {  // nothing to measure: an N/A block
        if (table) print_row_block(table, 0, 0, 0, -1);
        continue;
      }
      call_plan plan = plan_for(k, elt, rank, in_place != 0);
      // Where this rank's input lies (a library's in-place send argument may be a marker: MPI_IN_PLACE).
      std::byte* const input = in_place ? recvbuf + plan.send_off : sendbuf;
      const void* send = in_place ? d.in_place_send(plan, input) : static_cast<const void*>(sendbuf);
      void* recv = recvbuf + plan.recv_off;

      long long counts[2] = {0, 0};  // wrong elements, clobbered guard bytes
      if (o.check > 0) {
        prepare_check<T>(spec, k, plan, rank, o.root, sendbuf, recvbuf);
        d.call(send, recv, k.param);
        std::tie(counts[0], counts[1]) = check_result<T>(spec, k, plan, rank, o.root, recvbuf);
      } else {
        d.call(send, recv, k.param);
      }
      for (int i = 0; i < o.warmup_iters; ++i) d.call(send, recv, k.param);

      // n calls timed from a barrier: this rank's mean per call, or with -t
      // median the median of the calls timed alone.
      auto time_calls = [&](int n) {
        d.barrier();
        if (o.median_timing) {
          // Each call timed alone (one clock reading more per call, the same
          // for every library); this rank's median.
          std::vector<double> per_call(static_cast<std::size_t>(n));
          auto t = d.now();
          for (int i = 0; i < n; ++i) {
            if (o.rewrite_input) {
              rewrite_lines(input, k.send * elt);  // in place too: the input is k.send elements at `input`
              d.barrier();
              t = d.now();
            }
            d.call(send, recv, k.param);
            const auto u = d.now();
            per_call[static_cast<std::size_t>(i)] = seconds_between(t, u);
            t = u;
          }
          std::nth_element(per_call.begin(), per_call.begin() + n / 2, per_call.end());
          return per_call[static_cast<std::size_t>(n / 2)];
        }
        const auto t0 = d.now();
        for (int i = 0; i < n; ++i) d.call(send, recv, k.param);
        return seconds_between(t0, d.now()) / n;
      };
      double sec = time_calls(o.iters);
      if (o.min_time_ms > 0) {
        // Those calls were a pilot: where they were short, time more.
        double pilot = sec;
        d.max_over_ranks(pilot);
        const int iters = timed_iters(o, pilot);
        if (iters > o.iters) sec = time_calls(iters);
        if (table) {
          char note[64];
          std::snprintf(note, sizeof note, "%s%zu%s:%d", iteration_notes.empty() ? "" : " ", k.bytes(elt),
                        in_place ? "i" : "", iters);
          iteration_notes += note;
        }
      }
      if constexpr (requires { d.after_timing(k.bytes(elt)); }) d.after_timing(k.bytes(elt));
      d.max_over_ranks(sec);
      d.sum_over_ranks(counts, 2);

      block_result r;
      std::tie(r.algbw, r.busbw) = bandwidth(o.collective, k.param, elt, sec, nranks);
      r.usec = sec * 1e6;
      r.wrong = o.check > 0 ? counts[0] : -1;
      r.out_of_bounds = counts[1];
      totals.add(r);
      if (table) print_row_block(table, r.usec, r.algbw, r.busbw, r.wrong);
    }
    if (table) {
      std::fprintf(table, "\n");
      std::fflush(table);
    }
  }
  if (table && !iteration_notes.empty())  // bytes:calls, "i" in place
    std::fprintf(table, "# timed iterations per size: %s\n", iteration_notes.c_str());
  return totals;
}

// ---- which variant ran ---------------------------------------------------------

/// The id (algo_id, proto_id) whose name is s; false where none is.
template <class Id>
bool parse_id(const std::string& s, Id& out) {
  for (int i = 0; i < 256; ++i)
    if (s == name(static_cast<Id>(i))) {
      out = static_cast<Id>(i);
      return true;
    }
  return false;
}

inline std::string variant_name(variant_choice v) { return std::string(name(v.algo)) + "/" + name(v.proto); }

/// Sizes over which one variant ran, for the footer line "# variant: ...".
struct variant_span {
  variant_choice v;
  std::size_t first_bytes, last_bytes;
};

inline void note_variant(std::vector<variant_span>& spans, variant_choice v, std::size_t bytes) {
  if (!spans.empty() && spans.back().v.algo == v.algo && spans.back().v.proto == v.proto) {
    spans.back().last_bytes = bytes;
    return;
  }
  spans.push_back({v, bytes, bytes});
}

inline std::string variants_line(const std::vector<variant_span>& spans) {
  if (spans.empty()) return "none ran";
  if (spans.size() == 1) return variant_name(spans[0].v);
  std::string r;
  for (const variant_span& s : spans) {
    if (!r.empty()) r += ", ";
    r +=
        variant_name(s.v) + " (" + std::to_string(s.first_bytes) + "-" + std::to_string(s.last_bytes) + " B)";
  }
  return r;
}

}  // namespace collx::perf
