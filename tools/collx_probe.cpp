// tools/collx_probe.cpp — collx-probe: look at this machine, measure the
// model's parameters, compute what the model predicts, compare with what
// runs; and save the profile the automatic choice then uses.
//
//   collx-probe                          look, measure, compare all_reduce on 2 ranks (~1 min on 2 CPUs)
//   collx-probe --save [FILE]            … and write the profile (default: the location
//                                        communicators read, tune/active.hpp)
//   collx-probe --colls all_reduce,all_gather,reduce_scatter --ranks 2,4 --json
//
// look     tools/probe_look.hpp: CPU topology (hwloc), GPUs, RDMA devices, NICs.
// measure  on local process ranks, by collx-perf runs (the nccl-tests-style
//          timing of tools/collx_perf.cpp), each parameter from the schedule
//          whose cost terms isolate it (algo/cost.hpp), medians of --repeats:
//            α, bandwidth per protocol: ring all_gather sweeps on P ranks
//              (P−1 steps, (P−1)/P·bytes sent), fitted t = a + b·bytes_sent
//              (tune/fit.hpp: 1/t²-weighted, residual reported);
//            barrier: nvls all_gather 8 B staged (two barriers);
//            peer bandwidth: nvls all_gather 16 MiB single copy (three
//              barriers, (P−1)/P·bytes from peers);
//            per-call cost: ring all_reduce 8 B (twice all_gather's steps);
//            oversubscribed step and call: ring and direct all_gather 16 B
//              on 2×CPUs ranks (≤ 8);
//          in this process: γ per dtype (c = a + b, one thread) and copy
//          bandwidth (memcpy), 256 KiB operands in the cache, the best of
//          200 passes; the fit holds both (γ always, copy by
//          tune::fit_options::hold_copy);
//          the cache sizes the model prices: memcpy by one pinned thread per
//          CPU over working sets from 64 KiB to 4× the look's last level
//          (256 MiB to 1 GiB), fitted in the model's own form
//          (tools/probe_caches.hpp, tune/cache_fit.hpp); --look-caches takes
//          the look's sizes instead.
// compute  tune::explain (the model's prediction per variant) under the
//          measured profile.
// compare  per collective, rank count and size: every candidate variant run
//          (collx-perf --algo --proto), measured vs predicted time of the
//          tuner's pick, the fastest measured variant and the pick's slowdown
//          against it, bus bandwidth measured vs predicted; the knee
//          S* = α·bandwidth and the size for 90 % of the asymptotic bandwidth
//          (9·S*) per protocol; and whether the communicator, given the new
//          profile (COLLX_TUNE_FILE), picked what the in-process model picks;
//          and the measured choice (--online N, COLLX_TUNE_ONLINE: the
//          communicator times the profile's N best candidates on its first
//          calls of each size and keeps the fastest) run in the same
//          interleave, its exploration in the warm-up calls, judged against
//          the fastest variant like the pick.
//
// Output: tables on stdout; --json: one JSON document on stdout instead
// (schema: tools/collx-probe.schema.json); --plot PREFIX: one SVG per
// collective and rank count (tools/probe_svg.hpp); progress on stderr.
// Exit status: 0; 1 when a measurement failed; 2 for a bad command line.
#include "cli.hpp"
#include "cpu_contention.hpp"
#include "line_latency.hpp"
#include "probe_caches.hpp"
#include "probe_look.hpp"
#include "probe_problem.hpp"
#include "probe_svg.hpp"

#include <collx/comm/measured_choice.hpp>
#include <collx/detail/erased_reducer.hpp>
#include <collx/options.hpp>
#include <collx/transport/shm.hpp>
#include <collx/tune/active.hpp>
#include <collx/tune/explain.hpp>
#include <collx/tune/fit.hpp>
#include <collx/tune/json.hpp>
#include <collx/tune/profile_file.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace collx;
using tune::json::value;

constexpr const char* usage_text =
    "usage: collx-probe [--colls LIST] [--ranks LIST] [-b MIN -e MAX -f FACTOR] [--repeats N]\n"
    "                   [--online N] [--quick] [--json] [--save [FILE]] [--sweep-profile] [--plot PREFIX] "
    "[--perf PATH]\n"
    "                   [--look-caches]\n"
    "  look at this machine, measure the model's parameters on local process ranks,\n"
    "  compare the model's predictions and the tuner's picks with measured times.\n"
    "  --colls     collectives to compare (default all_reduce; all_reduce, all_gather,\n"
    "              reduce_scatter, broadcast, reduce, all_to_all)\n"
    "  --ranks     rank counts to compare on (default 2); parameters are measured on the first\n"
    "  -b -e -f    the compared sizes (default 8 to 2M by 8)\n"
    "  --repeats   runs per measurement, medians taken (default 3)\n"
    "  --online    also time the measured choice (COLLX_TUNE_ONLINE=N: the tuner times its N best\n"
    "              candidates on the first calls and keeps the fastest) against every variant\n"
    "              (default 6; 0: not compared)\n"
    "  --quick     a few sizes and iterations (seconds; for tests, not for a profile)\n"
    "  --json      the report as JSON (tools/collx-probe.schema.json) instead of tables\n"
    "  --save      write the measured profile to FILE, or to the default location\n"
    "              ($XDG_CONFIG_HOME or ~/.config)/collx/profile.json\n"
    "  --sweep-profile  save the profile fitted to the isolating sweeps instead of the one\n"
    "              refitted to every compared measurement at once (the default: it\n"
    "              predicted other runs better, bench/results/tuner_quality_notes.md)\n"
    "  --plot      write PREFIX_<collective>_<ranks>.svg: measured and predicted time per variant\n"
    "  --perf      the collx-perf binary (default: next to this one)\n"
    "  --look-caches  price the cache sizes the look reports (hwloc) instead of measuring them\n";

int bad(const std::string& what) {
  std::fprintf(stderr, "collx-probe: %s\n%s", what.c_str(), usage_text);
  return 2;
}

struct settings {
  std::vector<coll> colls{coll::all_reduce};
  std::vector<int> ranks{2};
  double lo = 8, hi = 2.0 * 1024 * 1024, factor = 8;
  int repeats = 3;
  int online = 6;  // the measured choice's candidates (COLLX_TUNE_ONLINE); 0: not compared
  bool quick = false, json = false, save = false, refit = true;
  bool look_caches = false;  // the look's cache sizes instead of measured ones
  std::string save_path, perf, plot;
};

void progress(const std::string& s) {
  std::fprintf(stderr, "collx-probe: %s\n", s.c_str());
  std::fflush(stderr);
}

// ---- running collx-perf -------------------------------------------------------

/// Times (µs, out of place) per size of one collx-perf run, and the variants
/// it reports.
struct perf_run {
  std::map<double, double> us;
  std::string variants;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// The core-to-core cache-line latency (tools/line_latency.hpp) between the
/// first two CPUs, sampled before and after every collx-perf run: on a
/// virtual machine the host may move the vCPUs while the probe runs, and this
/// says whether it did (bench/results/slow_mode.md).
std::vector<double> line_samples;
/// Runs away from the machine's prevailing state: a line latency before or
/// after the run over far_factor × the median of every sample so far, or
/// under it ÷ far_factor. Every collx run that was slow in
/// bench/results/slow_mode.md (2-8x, whole runs) was in the far state (about
/// 240 ns here, against 40-70 in the near one), and the model is fitted to
/// all runs at once, so they must describe one state: such a run is retried
/// (up to far_attempts runs). Judged against the lowest sample seen instead,
/// one near-state sample made every later run of a probe that ran in the far
/// state a retry, and it kept a mix of both (275 and 655 runs retried, the
/// refit's residual 55 % against 16 % in runs that stayed in one state,
/// bench/results/tuner_quality_min_time_2026-12-07/).
constexpr double far_factor = 3.0;
constexpr int far_attempts = 3;
int far_retried = 0;  // runs repeated because they were away from the prevailing state
int far_kept = 0;     // runs kept although still away from it after far_attempts
/// The share of CPU time other tasks took (tools/cpu_contention.hpp), sampled
/// before every collx-perf run: a probe on a loaded machine fits its model to
/// that load.
std::vector<double> contention_samples;
/// From this share on the machine counts as loaded (the tables say so), and
/// runs are not retried for their line latency: a sample then times the
/// scheduler, not where the vCPUs sit (one busy loop per CPU: 33 ns to 34 µs
/// in one probe run), and retrying would keep the runs the scheduler happened
/// to favour (588 of about 1,800 retried in each of two hog runs,
/// bench/results/tuner_quality_caches_2026-12-07/).
constexpr double loaded_share = 0.25;

void sample_contention() {
  static const std::vector<int> cpus = tools::allowed_cpus();
  if (const double share = probe::cpu_contention(cpus); share >= 0) contention_samples.push_back(share);
}

/// One sample (ns; 0 where there are fewer than two CPUs), recorded.
double sample_line_latency() {
  static const std::vector<int> cpus = tools::allowed_cpus();
  if (cpus.size() < 2) return 0;
  const double ns = probe::line_latency_ns(cpus[0], cpus[1], 20000);
  if (ns > 0) line_samples.push_back(ns);
  return ns;
}

double median(std::vector<double> v);

bool far_state(double ns) {
  if (ns <= 0 || line_samples.empty()) return false;
  const double prevailing = median(line_samples);
  return ns > far_factor * prevailing || ns * far_factor < prevailing;
}

/// A few samples before the first run, so that the lowest latency (the near
/// state) is known before any run is judged by it.
void sample_line_latency_baseline() {
  for (int i = 0; i < 8; ++i) {
    if (sample_line_latency() <= 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
}

perf_run run_once(const settings& s, const std::string& env, const std::string& args);

/// collx-perf once, again where the run began or ended away from the
/// prevailing state, unless the machine is loaded.
perf_run run_perf(const settings& s, const std::string& env, const std::string& args) {
  static const bool baseline = (sample_line_latency_baseline(), true);
  (void)baseline;
  for (int attempt = 1;; ++attempt) {
    const double before = sample_line_latency();
    perf_run r = run_once(s, env, args);
    const double after = sample_line_latency();
    const bool loaded = !contention_samples.empty() && contention_samples.back() >= loaded_share;
    if (loaded || (!far_state(before) && !far_state(after))) return r;
    if (attempt == far_attempts) {
      ++far_kept;
      return r;
    }
    ++far_retried;
    progress("cache-line latency " + std::to_string(int(before)) + "/" + std::to_string(int(after)) +
             " ns around a run (away from the prevailing state): running it again");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

perf_run run_once(const settings& s, const std::string& env, const std::string& args) {
  sample_contention();
  const std::string cmd =
      "env COLLX_TUNE_FILE=builtin " + env + " " + shell_quote(s.perf) + " " + args + " -c 0 --procs 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run " + cmd);
  perf_run r;
  std::string all;
  char line[1024];
  while (std::fgets(line, sizeof line, p) != nullptr) {
    all += line;
    if (std::strncmp(line, "# variant: ", 11) == 0) {
      r.variants = line + 11;
      while (!r.variants.empty() && r.variants.back() == '\n') r.variants.pop_back();
      continue;
    }
    double size = 0, count = 0, t = 0;
    char type[32], op[32];
    int root = 0;
    if (std::sscanf(line, " %lf %lf %31s %31s %d %lf", &size, &count, type, op, &root, &t) == 6)
      r.us[size] = t;
  }
  const int rc = pclose(p);
  if (rc != 0 || r.us.empty())
    throw std::runtime_error("collx-perf failed (" + cmd + "):\n" +
                             all.substr(all.size() > 2000 ? all.size() - 2000 : 0));
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// Median over `reps` runs of the time at each size; small sizes (≤ 64 KiB)
/// and large ones run separately, with iteration counts that keep both short,
/// and, with the measured choice of `online` candidates, enough untimed
/// calls per size for its exploration. `variants`, where given, gets what the
/// last runs reported they ran. Small sizes take 500 untimed calls and the
/// mean of 1000: a run's first few hundred calls are slower (ring all_gather
/// 8 B on 2 ranks, the first size of a run: 1.08-1.18 µs as the mean of 200
/// after 20, 0.72-0.78 as the mean of 1000 after 500, the sizes after it
/// 0.65-0.74 either way), and 1,500 calls of ≤ 64 KiB take milliseconds.
/// Larger sizes take 10 calls or as many as last 20 ms (collx-perf -T): ten
/// calls of a 256 KiB all_gather on 4 ranks of 2 CPUs took 56-63 us each,
/// 200 of them 32-33 us (how the ranks left the barrier before them, not the
/// collective).
std::map<double, double> timed(const settings& s, const std::string& env, const std::string& args, double lo,
                               double hi, double factor, int reps, int online = 0,
                               std::string* variants = nullptr) {
  auto warmup = [&](int plain, double bytes) {
    const int explore =
        online >= 2 ? int(comm::measured_class::exploration_calls(std::uint32_t(online), bytes)) : 0;
    return std::max(plain, explore + 1);
  };
  std::map<double, std::vector<double>> all;
  const double split = 64 * 1024;
  char range[160];
  for (int i = 0; i < reps; ++i) {
    if (lo <= split) {
      std::snprintf(range, sizeof range, " -b %.0f -e %.0f -f %g -n %d -w %d", lo, std::min(hi, split),
                    factor, s.quick ? 50 : 1000, warmup(s.quick ? 5 : 500, split));
      const perf_run r = run_perf(s, env, args + range);
      for (auto [b, t] : r.us) all[b].push_back(t);
      if (variants != nullptr) *variants = r.variants;
    }
    double first_large = lo;
    while (first_large <= split) first_large *= factor;
    if (first_large <= hi) {
      std::snprintf(range, sizeof range, " -b %.0f -e %.0f -f %g -n %d -w %d -T %d", first_large, hi, factor,
                    s.quick ? 3 : 10, warmup(s.quick ? 1 : 2, first_large), s.quick ? 0 : 20);
      const perf_run r = run_perf(s, env, args + range);
      for (auto [b, t] : r.us) all[b].push_back(t);
      if (variants != nullptr) *variants += (lo <= split ? "; " : "") + r.variants;
    }
  }
  std::map<double, double> out;
  for (auto& [b, v] : all) out[b] = median(v);
  return out;
}

// ---- measure ------------------------------------------------------------------

struct protocol_fit {
  std::string name;
  tune::line_fit fit;
  double alpha_us = 0, gbps = 0;
  std::map<double, double> points;  // bytes (collective size) → µs
};

struct measured {
  std::vector<protocol_fit> protos;
  double barrier_us = 0, peer_gbps = 0, single_copy_gbps = 0, copy_gbps = 0, oversub_step_us = 0;
  bool oversub_measured = false;
  std::map<std::string, double> gamma_gbps;    // per dtype
  double cache_bytes = 0, mem_gbps = 0;        // the cache term (look's last-level cache, fitted memory rate)
  double near_cache_bytes = 0, near_gbps = 0;  // the near-cache term (look's level below it, fitted rate)
  double sweep_fit_residual = 0;               // the profile fitted to the sweeps, against them
  tune::profile model{};
};

/// γ: the bytes per second collx's own reduction kernel (the erased
/// reducer's, the one every host collective runs) combines, sum of T, with
/// operands of `bytes` each; the best of `passes` (a pass in the cache takes
/// microseconds, so one descheduled or interrupted pass must not decide).
constexpr int rate_passes = 200;

template <class T>
double gamma_of(std::size_t bytes) {
  const std::size_t n = bytes / sizeof(T);
  std::vector<T> a(n, T(1)), b(n, T(2)), c(n);
  const detail::erased_reducer red = detail::make_erased_reducer(dtype_of<T>, reduce_op::sum, 2);
  double best = 1e30;
  for (int rep = 0; rep < rate_passes; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    red.apply<true, false, 1>(a.data(), b.data(), c.data(), nullptr, n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return double(bytes) / best / 1e9;
}

double copy_gbps(std::size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes);
  double best = 1e30;
  for (int rep = 0; rep < rate_passes; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    a[std::size_t(rep) % bytes] = b[bytes - 1 - std::size_t(rep) % bytes];
  }
  return double(bytes) / best / 1e9;
}

/// The tuner's problem for c on P process ranks of this machine at b bytes
/// (tools/probe_problem.hpp).
tune::problem problem_of(coll c, int P, double b) {
  return probe::problem_of(c, P, b, tune::this_machine().cpus);
}

measured measure(const settings& s, int P, double cache_bytes, double near_cache_bytes) {
  measured m;
  m.cache_bytes = cache_bytes;
  m.near_cache_bytes = near_cache_bytes;
  const double f = double(P - 1) / P;
  const std::string p = " -p " + std::to_string(P);
  struct sweep_spec {
    const char* name;
    double hi;
  };
  const sweep_spec specs[] = {
      {"simple", 64.0 * 1024 * 1024}, {"ll", 1024.0 * 1024}, {"ll128", 4.0 * 1024 * 1024}};
  for (const sweep_spec& sp : specs) {
    progress(std::string("measuring alpha and bandwidth of ") + sp.name + " (ring all_gather sweep)");
    protocol_fit pf;
    pf.name = sp.name;
    pf.points = timed(s, "COLLX_SINGLE_COPY=0", std::string("all_gather --algo ring --proto ") + sp.name + p,
                      8, s.quick ? std::min(sp.hi, 1024.0 * 1024) : sp.hi, 4, s.repeats);
    std::vector<double> x, t;
    for (auto [b, us] : pf.points) x.push_back(f * b), t.push_back(us);
    pf.fit = tune::fit_line(x, t);
    if (!pf.fit.ok || pf.fit.b <= 0)
      throw std::runtime_error(std::string("the ") + sp.name + " sweep did not fit a line");
    pf.alpha_us = std::max(pf.fit.a, 0.0) / (P - 1);
    pf.gbps = 1 / (pf.fit.b * 1e3);
    m.protos.push_back(pf);
  }
  // In the cache (256 KiB per operand, within L2): the model prices these
  // rates for every byte and charges the bytes beyond the last-level cache
  // once more through the cache term (mem_gbps), so rates measured out of the
  // cache would count memory twice and price small staged schedules (nvls)
  // several times too slow.
  progress("measuring gamma and copy bandwidth in the cache (this process)");
  constexpr std::size_t in_cache = 256 << 10;
  m.gamma_gbps["float32"] = gamma_of<float>(in_cache);
  m.gamma_gbps["float64"] = gamma_of<double>(in_cache);
  m.gamma_gbps["int32"] = gamma_of<std::int32_t>(in_cache);
  m.copy_gbps = copy_gbps(in_cache);
  // The calls every parameter is fitted to (tune::fit_profile, below): the
  // sweeps, and a few runs whose cost terms isolate what the sweeps leave out.
  std::vector<tune::timed_call> calls;
  // One collective c (all_gather unless named) of b bytes on `ranks` ranks by
  // A on channel ch, `us` long.
  tune::profile caches{};
  caches.cache_bytes = cache_bytes, caches.near_cache_bytes = near_cache_bytes;
  auto add = [&]<class A>(int ch, int ranks, double b, double us, bool single_copy,
                          coll c = coll::all_gather) {
    tune::problem q = problem_of(c, ranks, b);
    q.single_copy = single_copy;
    calls.push_back(tune::timed(A::cost(c, ranks, b, {q.chunks[ch], single_copy}), ch, q, us, caches));
  };
  // One small run's median time.
  auto one = [&](const std::string& env, const std::string& args, double b) {
    return timed(s, env, args, b, b, 2, s.repeats).begin()->second;
  };
  const auto channel_named = [](const std::string& n) {
    for (int c = 0; c < proto::channel_count; ++c)
      if (n == proto::channel_names[std::size_t(c)]) return c;
    throw std::runtime_error("no protocol named " + n);
  };
  for (const protocol_fit& x : m.protos)
    for (auto [b, us] : x.points) add.operator()<algo::ring>(channel_named(x.name), P, b, us, false);
  constexpr int simple_ch = proto::channel_of<proto::simple>;
  // The per-call cost apart from the step's: ring all_reduce takes twice the
  // all_gather's steps, so the two at 8 B tell call and α apart.
  progress("measuring the per-call cost (ring all_reduce 8 B, Simple)");
  add.operator()<algo::ring>(simple_ch, P, 8, one("", "all_reduce --algo ring --proto simple" + p, 8), false,
                             coll::all_reduce);
  progress("measuring barrier and peer bandwidth (nvls all_gather: 8 B to 1 MiB staged, 16 MiB single copy)");
  // Staged from 8 B (barriers only) through sizes that stay in the cache to
  // 1 MiB, so that the barrier, peer and copy terms are told apart.
  for (auto [b, us] : timed(s, "COLLX_SINGLE_COPY=0", "all_gather --algo nvls" + p, 8,
                            s.quick ? 64.0 * 1024 : 1024.0 * 1024, 8, s.repeats))
    add.operator()<algo::nvls>(simple_ch, P, b, us, false);
  const double big = 16.0 * 1024 * 1024;
  const double tp = timed(s, "COLLX_SINGLE_COPY_MIN=0", "all_gather --algo nvls" + p, big, big, 2, s.repeats)
                        .begin()
                        ->second;
  add.operator()<algo::nvls>(simple_ch, P, big, tp, true);
  const int over = 2 * tune::this_machine().cpus;
  if (over <= 8 && over > P) {
    progress("measuring the oversubscribed step per protocol (" + std::to_string(over) + " ranks)");
    for (const protocol_fit& x : m.protos) {
      const double to = timed(s, "COLLX_SINGLE_COPY=0",
                              "all_gather --algo ring --proto " + x.name + " -p " + std::to_string(over), 16,
                              16, 2, s.repeats)
                            .begin()
                            ->second;
      add.operator()<algo::ring>(channel_named(x.name), over, 16, to, false);
    }
    // One step instead of ring's ranks − 1: the meeting every call costs
    // apart from its steps.
    add.operator()<algo::direct>(
        simple_ch, over, 16,
        one("COLLX_SINGLE_COPY=0", "all_gather --algo direct --proto simple -p " + std::to_string(over), 16),
        false);
    m.oversub_measured = true;
  }
  // The start: the line fits (the link is the lowest-latency protocol's α and
  // Simple's bandwidth; each protocol adds its α difference and delivers its
  // share), γ and copy from this process, the cache from the look, the rest
  // shm_host's. Then every parameter the calls exercise, at once: the line
  // fits price a byte alike at every size, so the sweeps' sizes that run out
  // of the cache pull their in-cache bandwidth down; with the cache term they
  // are priced as what they are.
  tune::profile& pr = m.model;
  pr = tune::shm_host;
  double alpha = 1e30;
  for (const protocol_fit& x : m.protos) alpha = std::min(alpha, x.alpha_us);
  const double simple_gbps = m.protos[0].gbps;
  pr.intra = {tune::link_kind::shm, alpha, simple_gbps};
  for (const protocol_fit& x : m.protos)
    pr.proto[channel_named(x.name)] = {x.alpha_us - alpha, std::min(1.0, x.gbps / simple_gbps), 0};
  pr.copy_gbps = m.copy_gbps;
  pr.reduce_gbps = m.gamma_gbps["float32"];
  pr.cache_bytes = cache_bytes;
  pr.near_cache_bytes = near_cache_bytes;
  // The copy rate is held at the memcpy measured above: staged nvls, which
  // the fit needs for the barrier and the peer rate, copies into its staging
  // buffer and out of the peers' in the same proportion at every size, so
  // fitted it split the two at random (peer left at the start's 2.5 GB/s and
  // copy at 14 in two runs of three, bench/results/tuner_quality_2026-12-07/).
  const tune::profile_fit sf = tune::fit_profile(calls, pr, {.hold_copy = true});
  pr = sf.model;
  m.sweep_fit_residual = sf.rms_rel_residual;
  m.barrier_us = pr.barrier_us;
  m.peer_gbps = pr.peer_gbps;
  m.single_copy_gbps = pr.single_copy_gbps;
  m.oversub_step_us = pr.oversub_step_us;
  m.mem_gbps = pr.mem_gbps;
  m.near_gbps = pr.near_gbps;
  return m;
}

/// The cache sizes the model prices: measured, or the look's.
struct cache_choice {
  probe::cache_sweep sweep;  // empty with --look-caches
  double last = 0, near = 0;
  std::string source;  // what decided them
  std::string note;    // why the look's, where the measurement failed
};

/// Measures the caches unless --look-caches. A level the sweep did not show
/// keeps the look's size where that lies beyond the sweep; inside the sweep
/// the sweep contradicts it and the level is left out (0).
cache_choice choose_caches(const settings& s, const probe::topology& t) {
  cache_choice c;
  c.last = t.llc_bytes, c.near = t.near_cache_bytes;
  if (s.look_caches) {
    c.source = "look";
    return c;
  }
  constexpr double MiB = 1024.0 * 1024;
  // --quick is for tests (and runs under sanitizers): 64 MiB, a few tenths of a second.
  double max_ws = s.quick ? 64 * MiB : std::clamp(4 * t.llc_bytes, 256 * MiB, 1024 * MiB);
  const double mem = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (mem > 0) max_ws = std::min(max_ws, mem / 8);
  progress("measuring the caches (memcpy by one thread per CPU, working sets 64 KiB to " +
           cli::human(max_ws) + ")");
  try {
    c.sweep = probe::measure_caches(max_ws);
  } catch (const std::exception& e) {
    c.source = "look";
    c.note = std::string("the cache sweep failed: ") + e.what();
    progress(c.note + "; pricing the look's sizes");
    return c;
  }
  const tune::cache_levels& l = c.sweep.levels;
  const double seen = c.sweep.points.back().working_set / 2;  // the largest level a sweep can show
  c.last = l.last_bytes > 0 ? l.last_bytes : t.llc_bytes > seen ? t.llc_bytes : 0;
  c.near = l.near_bytes > 0 ? l.near_bytes : t.near_cache_bytes < c.last ? t.near_cache_bytes : 0;
  c.source = "measured";
  return c;
}

value caches_json(const cache_choice& c, const probe::topology& t) {
  value o = value::object();
  o.set("source", c.source);
  if (!c.note.empty()) o.set("note", c.note);
  o.set("look_near_bytes", t.near_cache_bytes);
  o.set("look_last_bytes", t.llc_bytes);
  if (c.source == "measured") {
    const tune::cache_levels& l = c.sweep.levels;
    o.set("threads", c.sweep.threads);
    o.set("seconds", c.sweep.seconds);
    o.set("near_bytes", l.near_bytes);
    o.set("last_bytes", l.last_bytes);
    o.set("in_gbps", l.in_gbps);
    o.set("near_gbps", l.near_gbps);
    o.set("mem_gbps", l.mem_gbps);
    o.set("rms_rel_residual", l.rms_rel_residual);
    value& pts = o.set("points", value::array());
    for (const tune::cache_point& p : c.sweep.points) {
      value x = value::array();
      x.push(p.working_set);
      x.push(p.gbps);
      pts.push(x);
    }
  }
  return o;
}

// ---- compare ------------------------------------------------------------------

struct size_row {
  double bytes = 0;
  variant_choice pick{}, fastest{};
  double pick_us = 0, pick_pred_us = 0, fastest_us = 0;
  double busbw_meas = 0, busbw_pred = 0;
  double online_us = 0;  // the measured choice's time (0: not compared)
};

struct comparison {
  coll c{};
  int P = 0;
  std::vector<size_row> rows;
  std::map<std::string, std::map<double, double>> measured_us, predicted_us;  // variant → size → µs
  std::string auto_variants;  // what the communicator reported with the new profile
  std::string auto_expected;
  int online = 0;                       // COLLX_TUNE_ONLINE of the measured choice's runs (0: none)
  std::string online_variants;          // what the measured choice kept, per size (the last repeat)
  std::vector<tune::timed_call> calls;  // every measurement with its cost terms (fit_profile)
};

std::string vname(variant_choice v) { return std::string(name(v.algo)) + "/" + name(v.proto); }

double busbw_factor(coll c, int P) {
  const double f = double(P - 1) / P;
  return c == coll::all_reduce ? 2 * f : c == coll::broadcast || c == coll::reduce ? 1 : f;
}

comparison compare(const settings& s, const tune::profile& m, coll c, int P,
                   const std::string& profile_path) {
  comparison out;
  out.c = c, out.P = P;
  out.online = s.online >= 2 ? s.online : 0;
  const std::vector<double> sizes = cli::sweep(s.lo, s.hi, s.factor);
  auto problem_at = [&](double b) { return problem_of(c, P, b); };
  // Every candidate at any size (the candidate set does not depend on size).
  const std::vector<tune::explained> cands = tune::explain<transport::shm>(m, problem_at(sizes.front()));
  // Every variant once per repeat, interleaved, so that a change of load
  // during the run reaches every variant alike instead of the ones that
  // happened to run then; each repeat starts one entry later in the list, so
  // that no variant always runs next to the same ones (the machine's state
  // lasts minutes: bench/results/tuner_quality_2026-12-06_online/).
  // Entry cands.size() is the measured choice.
  std::map<std::string, std::map<double, std::vector<double>>> samples;
  std::map<double, std::vector<double>> online_samples;
  const std::size_t entries = cands.size() + (s.online >= 2 ? 1 : 0);
  for (int rep = 0; rep < s.repeats; ++rep)
    for (std::size_t k = 0; k < entries; ++k) {
      const std::size_t i = (k + std::size_t(rep)) % entries;
      const std::string of = " on " + std::to_string(P) + " ranks (" + std::to_string(rep + 1) + " of " +
                             std::to_string(s.repeats) + ")";
      if (i == cands.size()) {
        // The measured choice, under the new profile's ranking; its
        // exploration happens in the warm-up calls.
        progress(std::string("compare: running ") + name(c) +
                 " with the measured choice (COLLX_TUNE_ONLINE=" + std::to_string(s.online) + ")" + of);
        for (auto [b, t] : timed(s,
                                 "COLLX_TUNE_FILE=" + shell_quote(profile_path) +
                                     " COLLX_TUNE_ONLINE=" + std::to_string(s.online),
                                 std::string(name(c)) + " -p " + std::to_string(P), s.lo, s.hi, s.factor, 1,
                                 s.online, &out.online_variants))
          online_samples[b].push_back(t);
        continue;
      }
      const tune::explained& e = cands[i];
      const std::string v = vname(e.variant);
      progress(std::string("compare: running ") + name(c) + " " + v + of);
      for (auto [b, t] : timed(s, "",
                               std::string(name(c)) + " -p " + std::to_string(P) + " --algo " +
                                   name(e.variant.algo) + " --proto " + name(e.variant.proto),
                               s.lo, s.hi, s.factor, 1))
        samples[v][b].push_back(t);
    }
  for (auto& [v, per_size] : samples)
    for (auto& [b, xs] : per_size) out.measured_us[v][b] = median(xs);
  for (double b : sizes) {
    size_row r;
    r.bytes = b;
    const std::vector<tune::explained> ex = tune::explain<transport::shm>(m, problem_at(b));
    const tune::problem q = problem_at(b);
    for (const tune::explained& e : ex) {
      out.predicted_us[vname(e.variant)][b] = e.time.total_us();
      const auto mi = out.measured_us.find(vname(e.variant));
      if (mi == out.measured_us.end() || mi->second.count(b) == 0) continue;
      visit_variant<transport::shm>(c, e.variant.algo, e.variant.proto, [&]<class A, class Pr>() {
        out.calls.push_back(tune::timed<A, Pr>(q, mi->second.at(b), m));
      });
    }
    r.pick = ex.front().variant;
    r.pick_pred_us = ex.front().time.total_us();
    // collx-perf skips sizes smaller than one element per rank (all_gather,
    // reduce_scatter): no row there.
    const auto& pm = out.measured_us[vname(r.pick)];
    if (pm.count(b) == 0) continue;
    r.pick_us = pm.at(b);
    r.fastest_us = 1e300;
    for (auto& [v, t] : out.measured_us)
      if (t.count(b) && t[b] < r.fastest_us) {
        r.fastest_us = t[b];
        for (const tune::explained& e : ex)
          if (vname(e.variant) == v) r.fastest = e.variant;
      }
    // algbw = size / time (size as nccl-tests counts it), busbw = algbw · factor.
    r.busbw_meas = b / r.pick_us / 1e3 * busbw_factor(c, P);
    r.busbw_pred = b / r.pick_pred_us / 1e3 * busbw_factor(c, P);
    if (online_samples.count(b)) r.online_us = median(online_samples[b]);
    out.rows.push_back(r);
    out.auto_expected += (out.auto_expected.empty() ? "" : ", ") + vname(r.pick);
  }
  // The communicator itself, given the new profile: which variants it ran.
  char range[160];
  std::snprintf(range, sizeof range, " -p %d -b %.0f -e %.0f -f %g -n 2 -w 0", P, s.lo, s.hi, s.factor);
  const perf_run a =
      run_perf(s, "COLLX_TUNE_FILE=" + shell_quote(profile_path), name(c) + std::string(range));
  out.auto_variants = a.variants;
  return out;
}

// ---- output -------------------------------------------------------------------

std::string iso_now() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

value fit_json(const protocol_fit& p) {
  value v = value::object();
  v.set("protocol", p.name);
  v.set("alpha_us", p.alpha_us);
  v.set("gbps", p.gbps);
  v.set("rms_rel_residual", p.fit.rms_rel_residual);
  v.set("knee_bytes", p.alpha_us * p.gbps * 1e3);
  v.set("bytes_90pct_bw", 9 * p.alpha_us * p.gbps * 1e3);
  value& pts = v.set("points", value::array());
  for (auto [b, t] : p.points) {
    value pt = value::array();
    pt.push(b);
    pt.push(t);
    pts.push(pt);
  }
  return v;
}

value comparison_json(const comparison& c) {
  value v = value::object();
  v.set("collective", name(c.c));
  v.set("nranks", c.P);
  value& rows = v.set("sizes", value::array());
  int within10 = 0, busbw20 = 0, online10 = 0, online_sizes = 0;
  for (const size_row& r : c.rows) {
    value x = value::object();
    x.set("bytes", r.bytes);
    x.set("pick", vname(r.pick));
    x.set("pick_measured_us", r.pick_us);
    x.set("pick_predicted_us", r.pick_pred_us);
    x.set("fastest", vname(r.fastest));
    x.set("fastest_measured_us", r.fastest_us);
    x.set("pick_slowdown", r.pick_us / r.fastest_us - 1);
    x.set("busbw_measured_gbps", r.busbw_meas);
    x.set("busbw_predicted_gbps", r.busbw_pred);
    if (r.online_us > 0) {
      x.set("online_measured_us", r.online_us);
      x.set("online_slowdown", r.online_us / r.fastest_us - 1);
    }
    rows.push(x);
    within10 += r.pick_us <= 1.1 * r.fastest_us;
    busbw20 += std::fabs(r.busbw_pred / r.busbw_meas - 1) <= 0.2;
    online10 += r.online_us > 0 && r.online_us <= 1.1 * r.fastest_us;
    online_sizes += r.online_us > 0;
  }
  value& sum = v.set("summary", value::object());
  sum.set("sizes", int(c.rows.size()));
  sum.set("pick_within_10pct", within10);
  sum.set("busbw_within_20pct", busbw20);
  if (online_sizes > 0) {
    sum.set("online_sizes", online_sizes);
    sum.set("online_within_10pct", online10);
  }
  value& vars = v.set("variants", value::array());
  for (auto& [name_, t] : c.measured_us) {
    value x = value::object();
    x.set("variant", name_);
    value& pts = x.set("points", value::array());
    for (auto [b, us] : t) {
      value pt = value::array();
      pt.push(b);
      pt.push(us);
      auto pi = c.predicted_us.find(name_);
      pt.push(pi != c.predicted_us.end() && pi->second.count(b) ? pi->second.at(b) : 0.0);
      pts.push(pt);
    }
    vars.push(x);
  }
  v.set("communicator_variants", c.auto_variants);
  v.set("model_picks", c.auto_expected);
  if (!c.online_variants.empty()) v.set("online_variants", c.online_variants);
  return v;
}

/// A profile's parameters, for a reader.
void print_profile(const tune::profile& r) {
  std::printf("    %-8s %10s %12s %16s\n", "protocol", "alpha_us", "GB/s", "oversub_step_us");
  for (int ch = 0; ch < proto::channel_count; ++ch)
    std::printf("    %-8s %10.3f %12.3f %16.2f\n", proto::channel_names[std::size_t(ch)],
                r.alpha_us(r.intra, ch), r.gbps(r.intra, ch),
                r.oversub_step_us + r.proto[ch].oversub_extra_us);
  std::printf(
      "    per call %.3f us (oversubscribed %.2f); barrier %.3f us; GB/s: peer %.3f, single copy %.3f, "
      "copy %.2f, reduce %.2f\n",
      r.call_us, r.oversub_call_us, r.barrier_us, r.peer_gbps, r.single_copy_gbps, r.copy_gbps,
      r.reduce_gbps);
  std::printf("    last-level cache %s; bytes beyond it also pay %.3f GB/s%s\n",
              cli::human(r.cache_bytes).c_str(), r.mem_gbps,
              r.mem_gbps > 0 ? "" : " (no run left the cache: no cache term)");
  std::printf("    near cache %s; bytes beyond it also pay %.3f GB/s%s\n",
              cli::human(r.near_cache_bytes).c_str(), r.near_gbps,
              r.near_gbps > 0 ? "" : " (no near-cache term)");
}

void print_tables(const probe::topology& t, const cache_choice& cc, const measured& m,
                  const std::vector<comparison>& cs, int P) {
  std::printf("# collx-probe — look\n");
  for (const std::string& l : t.lines) std::printf("  %s\n", l.c_str());
  if (!line_samples.empty()) {
    const auto [lo, hi] = std::minmax_element(line_samples.begin(), line_samples.end());
    std::printf(
        "  core-to-core cache-line latency, %zu samples around the runs: min %.0f, median %.0f, max %.0f ns; "
        "runs away from the prevailing state (over or under %.1fx the median): %d run again, %d kept after "
        "%d tries\n",
        line_samples.size(), *lo, median(line_samples), *hi, far_factor, far_retried, far_kept, far_attempts);
  }
  if (!contention_samples.empty()) {
    const auto [lo, hi] = std::minmax_element(contention_samples.begin(), contention_samples.end());
    std::printf("  CPU time other tasks took, before each of %zu runs: min %.2f, median %.2f, max %.2f%s\n",
                contention_samples.size(), *lo, median(contention_samples), *hi,
                median(contention_samples) >= loaded_share
                    ? " (a loaded machine: the measurements and the fitted profile describe that load)"
                    : "");
  }
  std::printf("\n# measure (process ranks, P = %d; medians)\n", P);
  std::printf("  %-8s %10s %10s %10s %12s %14s\n", "protocol", "alpha_us", "GB/s", "residual", "knee S*",
              "90% bw from");
  for (const protocol_fit& p : m.protos)
    std::printf("  %-8s %10.3f %10.3f %9.1f%% %12s %14s\n", p.name.c_str(), p.alpha_us, p.gbps,
                100 * p.fit.rms_rel_residual, cli::human(p.alpha_us * p.gbps * 1e3).c_str(),
                cli::human(9 * p.alpha_us * p.gbps * 1e3).c_str());
  std::printf("  gamma GB/s:");
  for (auto& [d, g] : m.gamma_gbps) std::printf(" %s %.2f", d.c_str(), g);
  std::printf("  (the model uses float32's); oversubscribed step %s\n",
              m.oversub_measured ? "measured" : "not measured: shm_host's");
  if (cc.source == "measured") {
    const tune::cache_levels& l = cc.sweep.levels;
    std::printf(
        "  caches (memcpy by %d threads at once, %zu working sets, %.1f s; fit residual %.1f %%): near %s, "
        "last level %s (the look reported %s and %s)\n",
        cc.sweep.threads, cc.sweep.points.size(), cc.sweep.seconds, 100 * l.rms_rel_residual,
        l.near_bytes > 0 ? cli::human(l.near_bytes).c_str() : "none seen",
        l.last_bytes > 0 ? cli::human(l.last_bytes).c_str() : "none seen",
        cli::human(t.near_cache_bytes).c_str(), cli::human(t.llc_bytes).c_str());
    std::printf("  copy GB/s: %.1f in the near cache, %.1f in the last level, %.1f from memory\n", l.in_gbps,
                1 / (1 / l.in_gbps + (l.near_gbps > 0 ? 1 / l.near_gbps : 0)),
                1 / (1 / l.in_gbps + (l.near_gbps > 0 ? 1 / l.near_gbps : 0) +
                     (l.mem_gbps > 0 ? 1 / l.mem_gbps : 0)));
  } else {
    std::printf("  caches: the look's (%s)\n", cc.note.empty() ? "--look-caches" : cc.note.c_str());
  }
  std::printf("  the profile, fitted to every measure run at once (residual %.1f %%):\n",
              100 * m.sweep_fit_residual);
  print_profile(m.model);
  for (const comparison& c : cs) {
    std::printf("\n# compare %s on %d ranks: the tuner's pick (model) against every variant (measured)\n",
                name(c.c), c.P);
    std::printf("  %10s %-20s %10s %10s %7s  %-20s %10s %8s %9s %9s %10s %8s\n", "size", "pick", "meas_us",
                "pred_us", "err", "fastest measured", "us", "slower", "busbw", "pred", "online_us", "slower");
    int within10 = 0, busbw20 = 0, online10 = 0, online_sizes = 0;
    for (const size_row& r : c.rows) {
      std::printf("  %10s %-20s %10.2f %10.2f %6.0f%%  %-20s %10.2f %7.1f%% %9.3f %9.3f",
                  cli::human(r.bytes).c_str(), vname(r.pick).c_str(), r.pick_us, r.pick_pred_us,
                  100 * (r.pick_pred_us / r.pick_us - 1), vname(r.fastest).c_str(), r.fastest_us,
                  100 * (r.pick_us / r.fastest_us - 1), r.busbw_meas, r.busbw_pred);
      if (r.online_us > 0)
        std::printf(" %10.2f %7.1f%%", r.online_us, 100 * (r.online_us / r.fastest_us - 1));
      std::printf("\n");
      within10 += r.pick_us <= 1.1 * r.fastest_us;
      busbw20 += std::fabs(r.busbw_pred / r.busbw_meas - 1) <= 0.2;
      online10 += r.online_us > 0 && r.online_us <= 1.1 * r.fastest_us;
      online_sizes += r.online_us > 0;
    }
    std::printf(
        "  pick within 10 %% of the fastest at %d of %zu sizes; predicted busbw within 20 %% at %d of %zu\n",
        within10, c.rows.size(), busbw20, c.rows.size());
    if (online_sizes > 0)
      std::printf(
          "  measured choice (COLLX_TUNE_ONLINE=%d) within 10 %% of the fastest at %d of %d sizes; it kept: "
          "%s\n",
          c.online, online10, online_sizes, c.online_variants.c_str());
    std::printf("  the communicator with this profile ran: %s\n", c.auto_variants.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto val = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument("'" + a + "' needs a value");
        return argv[++i];
      };
      if (a == "-h" || a == "--help") {
        std::fputs(usage_text, stdout);
        return 0;
      } else if (a == "--refit") {  // the default; kept for scripts that ask for it
        s.refit = true;
      } else if (a == "--sweep-profile") {
        s.refit = false;
      } else if (a == "--look-caches") {
        s.look_caches = true;
      } else if (a == "--quick") {
        s.quick = true;
      } else if (a == "--json") {
        s.json = true;
      } else if (a == "--save") {
        s.save = true;
        if (i + 1 < argc && argv[i + 1][0] != '-') s.save_path = argv[++i];
      } else if (a == "--plot") {
        s.plot = val();
      } else if (a == "--perf") {
        s.perf = val();
      } else if (a == "--online") {
        s.online = std::atoi(val().c_str());
        if (s.online != 0 && (s.online < 2 || s.online > int(comm_options::max_tune_online)))
          throw std::invalid_argument("--online needs 0 or a count in [2, " +
                                      std::to_string(comm_options::max_tune_online) + "]");
      } else if (a == "--repeats") {
        s.repeats = std::atoi(val().c_str());
        if (s.repeats < 1 || s.repeats > 99)
          throw std::invalid_argument("--repeats needs a count in [1, 99]");
      } else if (a == "--colls") {
        s.colls.clear();
        for (const std::string& n : cli::split(val())) {
          coll c{};
          if (!cli::parse_coll(n, c) || c == coll::all_to_allv || c == coll::send_recv || c == coll::barrier)
            throw std::invalid_argument("unknown or unsized collective '" + n + "'");
          s.colls.push_back(c);
        }
      } else if (a == "--ranks") {
        s.ranks.clear();
        for (const std::string& n : cli::split(val())) {
          const int r = std::atoi(n.c_str());
          if (r < 2 || r > 64)
            throw std::invalid_argument("--ranks needs counts in [2, 64], got '" + n + "'");
          s.ranks.push_back(r);
        }
      } else if (a == "-b" || a == "-e") {
        const std::string v = val();
        if (!cli::parse_size(v, a == "-b" ? s.lo : s.hi))
          throw std::invalid_argument("invalid size '" + v + "'");
      } else if (a == "-f") {
        s.factor = std::atof(val().c_str());
        if (!(s.factor > 1)) throw std::invalid_argument("-f needs a factor > 1");
      } else {
        throw std::invalid_argument("unknown flag '" + a + "'");
      }
    }
  } catch (const std::exception& e) {
    return bad(e.what());
  }
  if (s.lo < 1 || s.lo > s.hi) return bad("-b must be at least 1 and at most -e");
  if (s.quick) s.repeats = 1, s.lo = std::max(s.lo, 8.0), s.hi = std::min(s.hi, 64.0 * 1024), s.factor = 64;
  if (s.perf.empty()) {
    char self[4096] = {};
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, std::size_t(n)) : std::string(argv[0]);
    dir = dir.substr(0, dir.rfind('/') + 1);
    s.perf = dir + "collx-perf";
  }
  if (access(s.perf.c_str(), X_OK) != 0)
    return bad("no collx-perf at " + s.perf + " (build the collx-perf target, or give --perf PATH)");
  if (s.save && s.save_path.empty()) {
    s.save_path = tune::default_profile_path();
    if (s.save_path.empty()) return bad("--save without a file needs HOME or XDG_CONFIG_HOME");
  }

  try {
    const probe::topology t = probe::look();
    const int P = s.ranks.front();
    const cache_choice cc = choose_caches(s, t);
    const measured m = measure(s, P, cc.last, cc.near);
    tune::profile_doc doc;
    doc.model = m.model;
    doc.machine = t.machine;
    doc.measured = iso_now();
    doc.source = "collx-probe on " + std::to_string(P) + " process ranks" + (s.quick ? " (--quick)" : "");
    value evidence = value::object();
    value& fits = evidence.set("fits", value::array());
    for (const protocol_fit& p : m.protos) fits.push(fit_json(p));
    evidence.set("barrier_us", m.barrier_us);
    evidence.set("peer_gbps", m.peer_gbps);
    evidence.set("single_copy_gbps", m.single_copy_gbps);
    evidence.set("copy_gbps", m.copy_gbps);
    evidence.set("oversub_step_us", m.oversub_step_us);
    evidence.set("oversub_measured", m.oversub_measured);
    evidence.set("cache_bytes", m.cache_bytes);
    evidence.set("near_cache_bytes", m.near_cache_bytes);
    evidence.set("near_gbps", m.near_gbps);
    evidence.set("caches", caches_json(cc, t));
    evidence.set("mem_gbps", m.mem_gbps);
    evidence.set("sweep_fit_rms_rel_residual", m.sweep_fit_residual);

    value& gam = evidence.set("gamma_gbps", value::object());
    for (auto& [d, g] : m.gamma_gbps) gam.set(d, g);
    doc.probe = evidence;
    // The compare step's communicators load the new profile from a file.
    const std::string tmp = "/tmp/collx-probe-" + std::to_string(getpid()) + ".json";
    tune::save_profile(doc, tmp);
    std::vector<comparison> cs;
    for (int P2 : s.ranks)
      for (coll c : s.colls) cs.push_back(compare(s, m.model, c, P2, tmp));
    std::remove(tmp.c_str());
    // compute, again: the profile that explains every compared measurement at
    // once, and how the picks would fare under it (in sample: judged on the
    // measurements it was fitted to).
    std::vector<tune::timed_call> calls;
    for (const comparison& c : cs) calls.insert(calls.end(), c.calls.begin(), c.calls.end());
    const tune::profile_fit refit =
        tune::fit_profile(calls, m.model, {.hold_copy = true, .robust_rel = tune::probe_robust_rel});
    const double sweep_residual = tune::rms_rel_residual(m.model, calls);
    int refit_within = 0, refit_sizes = 0;
    for (const comparison& c : cs)
      for (const size_row& r : c.rows) {
        const tune::problem q = problem_of(c.c, c.P, r.bytes);
        const variant_choice v = tune::fastest<transport::shm>(refit.model, q);
        const auto mi = c.measured_us.find(vname(v));
        if (mi == c.measured_us.end() || mi->second.count(r.bytes) == 0) continue;
        ++refit_sizes;
        refit_within += mi->second.at(r.bytes) <= 1.1 * r.fastest_us;
      }
    if (s.refit) doc.model = refit.model;
    // The cache-line latency over the whole run (measure and compare).
    {
      // Samples taken around every run: their count, min, median and max.
      auto spread = [](const std::vector<double>& v) {
        value o = value::object();
        o.set("samples", int(v.size()));
        if (!v.empty()) {
          const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
          o.set("min", *lo);
          o.set("median", median(v));
          o.set("max", *hi);
        }
        return o;
      };
      value line = spread(line_samples);
      line.set("runs_retried", far_retried);
      line.set("runs_kept_far", far_kept);
      evidence.set("line_latency_ns", line);
      evidence.set("cpu_contention", spread(contention_samples));
      doc.probe = evidence;
    }
    if (!s.plot.empty())
      for (const comparison& c : cs) {
        std::vector<probe::svg_series> series;
        for (auto& [v, times] : c.measured_us) {
          probe::svg_series x{v, times, {}};
          if (auto pi = c.predicted_us.find(v); pi != c.predicted_us.end()) x.predicted = pi->second;
          series.push_back(std::move(x));
        }
        std::map<double, std::string> picks;
        for (const size_row& r : c.rows) picks[r.bytes] = vname(r.pick);
        const std::string path = s.plot + "_" + name(c.c) + "_" + std::to_string(c.P) + ".svg";
        std::FILE* f = std::fopen(path.c_str(), "w");
        if (f == nullptr) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
        const std::string svg =
            probe::svg_plot(std::string("collx-probe: ") + name(c.c) + " on " + std::to_string(c.P) +
                                " process ranks, " + t.machine.topology(),
                            series, picks);
        std::fputs(svg.c_str(), f);
        std::fclose(f);
        progress("wrote " + path);
      }
    if (s.save) {
      const std::string dir = s.save_path.substr(0, s.save_path.rfind('/'));
      if (s.save_path.find('/') != std::string::npos) {
        // Make the folder (one level below an existing one, as ~/.config/collx).
        ::mkdir(dir.substr(0, dir.rfind('/')).c_str(), 0755);
        ::mkdir(dir.c_str(), 0755);
      }
      tune::save_profile(doc, s.save_path);
      progress("saved the profile to " + s.save_path);
    }
    if (s.json) {
      value out = value::object();
      out.set("format", "collx-probe");
      out.set("version", 1);
      out.set("look", t.json);
      out.set("measure", evidence);
      // The profile the comparison judged (the sweeps'); the refitted one below.
      out.set("profile", *tune::json::parse(tune::to_json([&] {
                            tune::profile_doc x = doc;
                            x.model = m.model;
                            return x;
                          }()))
                              .find("model"));
      value& cj = out.set("compare", value::array());
      for (const comparison& c : cs) cj.push(comparison_json(c));
      value& rj = out.set("refit", value::object());
      rj.set("profile", *tune::json::parse(tune::to_json([&] {
                           tune::profile_doc x = doc;
                           x.model = refit.model;
                           return x;
                         }()))
                             .find("model"));
      rj.set("calls", int(calls.size()));
      rj.set("rms_rel_residual", refit.rms_rel_residual);
      rj.set("sweep_profile_rms_rel_residual", sweep_residual);
      rj.set("sizes", refit_sizes);
      rj.set("pick_within_10pct_in_sample", refit_within);
      rj.set("saved", s.refit && s.save);
      if (s.save) out.set("saved", s.save_path);
      std::fputs(out.dump().c_str(), stdout);
    } else {
      print_tables(t, cc, m, cs, P);
      const tune::profile& r = refit.model;
      std::printf(
          "\n# compute again: one profile fitted to all %zu compared measurements (tune::fit_profile)\n",
          calls.size());
      std::printf("  rms relative residual %.1f %% (the sweep-based profile: %.1f %%)\n",
                  100 * refit.rms_rel_residual, 100 * sweep_residual);
      print_profile(r);
      std::printf("  under it the pick is within 10 %% of the fastest at %d of %d sizes (in sample)%s\n",
                  refit_within, refit_sizes,
                  s.refit ? "; this is the profile saved" : " (--sweep-profile: not saved)");
      if (s.save)
        std::printf("\nprofile saved to %s (communicators load it from there%s)\n", s.save_path.c_str(),
                    s.save_path == tune::default_profile_path() ? "" : " with COLLX_TUNE_FILE");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collx-probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
