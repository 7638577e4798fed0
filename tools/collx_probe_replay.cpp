// tools/collx_probe_replay.cpp — collx-probe-replay: judge the model on
// saved collx-probe reports, without running anything.
//
//   collx-probe-replay REPORT.json                 the report's own profile, and one
//                                                  refitted to its compared measurements
//   collx-probe-replay FIT.json JUDGE.json         fitted to FIT's measurements, judged
//                                                  on JUDGE's (held out: another run)
//   FIT may name several reports, comma-separated: the fit takes all of
//   their measurements (starting from the first report's profile).
//   --judge-profile FILE|preset:NAME               also judge that profile (a saved
//                                                  profile, or a built-in preset) on JUDGE
//   --worst N                                      also the N worst-explained calls
//   --caches NEAR,LAST                             refit with these cache sizes (node
//                                                  totals, e.g. 2M,32M) instead of the report's
//
// Reads the compared measurements of `collx-probe --json` reports (every
// variant at every size), prices them with the current model
// (tune/model.hpp), fits a profile to them at once (tune::fit_profile,
// starting from the report's own profile, with the cache sizes its look
// found), and prints per collective and rank count how often the pick is
// within 10 % of the fastest measured variant and the pick's predicted bus
// bandwidth within 20 % of its measured one: the probe's quality bar. A
// report judged on itself is judged in sample; a second report (another
// probe run) judges out of sample. Exit status: 0; 1 on an unreadable
// report; 2 for a bad command line.
#include "cli.hpp"
#include "probe_problem.hpp"

#include <collx/transport/shm.hpp>
#include <collx/tune/explain.hpp>
#include <collx/tune/fit.hpp>
#include <collx/tune/json.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/profile_file.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace collx;
using tune::json::value;

/// One measured call of a report: a variant of a collective on P ranks.
struct measurement {
  coll c{};
  int P = 0;
  variant_choice v{};
  double bytes = 0, us = 0;
};

/// What a report holds that the judgement needs.
struct report {
  std::vector<measurement> calls;
  tune::profile model{};
  int cpus = 0;
  double copy_gbps_measured = 0;  // measure.copy_gbps: memcpy in the probe's process (0: not in the report)
};

std::string vname(variant_choice v) { return std::string(name(v.algo)) + "/" + name(v.proto); }

variant_choice variant_named(const std::string& s) {
  for (int a = 0; a < int(algo_id::automatic); ++a)
    for (int p = 0; p < proto::channel_count; ++p) {
      const variant_choice v{static_cast<algo_id>(a), static_cast<proto_id>(p)};
      if (vname(v) == s) return v;
    }
  throw std::runtime_error("no variant named '" + s + "'");
}

const value& member(const value& v, const char* k) {
  const value* x = v.find(k);
  if (x == nullptr) throw std::runtime_error(std::string("no '") + k + "' in the report");
  return *x;
}

report load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  const value d = tune::json::parse(text.str());
  if (member(d, "format").str != "collx-probe")
    throw std::runtime_error(path + " is not a collx-probe report");
  report r;
  for (const value& c : member(d, "compare").items) {
    measurement m;
    if (!cli::parse_coll(member(c, "collective").str, m.c)) throw std::runtime_error("unknown collective");
    m.P = int(member(c, "nranks").num);
    for (const value& v : member(c, "variants").items) {
      m.v = variant_named(member(v, "variant").str);
      for (const value& p : member(v, "points").items) {
        m.bytes = p.items.at(0).num, m.us = p.items.at(1).num;
        if (m.bytes > 0 && m.us > 0)
          r.calls.push_back(m);  // collx-perf reports 0 B below one element per rank
      }
    }
  }
  // The report's profile, read as a profile file of the version it has.
  value doc = value::object();
  doc.set("format", tune::profile_format);
  const value& model = member(d, "profile");
  doc.set("version", model.find("multicast_gbps") != nullptr ? tune::profile_version
                     : model.find("near_gbps") != nullptr    ? 3
                                                             : 2);
  value& mach = doc.set("machine", value::object());
  const value& look_machine = member(member(d, "look"), "machine");
  mach.set("cpu", member(look_machine, "cpu").str);
  mach.set("cpus", member(look_machine, "cpus").num);
  mach.set("numa_nodes", member(look_machine, "numa_nodes").num);
  doc.set("model", model);
  r.model = tune::from_json(doc.dump(), path).model;
  r.cpus = int(member(look_machine, "cpus").num);
  if (const value* m = d.find("measure"))
    if (const value* c = m->find("copy_gbps"); c != nullptr && c->num > 0) r.copy_gbps_measured = c->num;
  // A report of a version before the near cache: take it from the look.
  const value& topo = member(member(d, "look"), "cpu_topology");
  if (r.model.near_cache_bytes == 0) {
    if (const value* n = topo.find("near_cache_bytes")) {
      r.model.near_cache_bytes = n->num;
    } else if (const value* caches = topo.find("caches_kib"); caches != nullptr && caches->find("L3")) {
      if (const value* l2 = caches->find("L2"))
        r.model.near_cache_bytes = l2->num * 1024 * r.cpus;  // per core
    }
  }
  return r;
}

std::vector<tune::timed_call> timed_calls(const report& r, const tune::profile& caches) {
  std::vector<tune::timed_call> out;
  for (const measurement& m : r.calls) {
    const tune::problem q = probe::problem_of(m.c, m.P, m.bytes, r.cpus);
    if (!visit_variant<transport::shm>(m.c, m.v.algo, m.v.proto, [&]<class A, class Pr>() {
          out.push_back(tune::timed<A, Pr>(q, m.us, caches));
        }))
      throw std::runtime_error("variant " + vname(m.v) + " is not compiled for " + name(m.c));
  }
  return out;
}

/// Prints the quality bar of profile `p` on report `r`'s measurements.
void judge(const char* title, const tune::profile& p, const report& r, bool rows) {
  std::map<std::tuple<int, int, double>, std::map<std::string, double>>
      at;  // (coll, P, bytes) → variant → µs
  for (const measurement& m : r.calls) at[{int(m.c), m.P, m.bytes}][vname(m.v)] = m.us;
  std::map<std::pair<int, int>, std::array<int, 3>> per;  // (coll, P) → within 10 %, busbw within 20 %, sizes
  std::printf("\n# %s\n", title);
  if (rows)
    std::printf("  %-14s %2s %9s %-20s %9s %9s %6s  %-20s %9s %9s %7s\n", "collective", "P", "bytes", "pick",
                "meas_us", "pred_us", "err", "fastest measured", "us", "pred_us", "slower");
  for (auto& [k, variants] : at) {
    const auto [c, P, b] = k;
    const tune::problem q = probe::problem_of(coll(c), P, b, r.cpus);
    const std::vector<tune::explained> ex = tune::explain<transport::shm>(p, q);
    if (ex.empty()) continue;
    const auto picked = variants.find(vname(ex.front().variant));
    if (picked == variants.end()) continue;
    const double pred = ex.front().time.total_us(), us = picked->second;
    const auto best = std::min_element(variants.begin(), variants.end(),
                                       [](const auto& x, const auto& y) { return x.second < y.second; });
    double best_pred = 0;
    for (const tune::explained& e : ex)
      if (vname(e.variant) == best->first) best_pred = e.time.total_us();
    auto& n = per[{c, P}];
    n[0] += us <= 1.1 * best->second;
    n[1] += us / pred >= 0.8 && us / pred <= 1.2;  // busbw ratio = measured time / predicted time
    ++n[2];
    if (rows)
      std::printf("  %-14s %2d %9.0f %-20s %9.2f %9.2f %+5.0f%%  %-20s %9.2f %9.2f %+6.0f%%\n", name(coll(c)),
                  P, b, picked->first.c_str(), us, pred, 100 * (pred / us - 1), best->first.c_str(),
                  best->second, best_pred, 100 * (us / best->second - 1));
  }
  std::array<int, 3> all{};
  for (auto& [k, n] : per) {
    std::printf("  %-14s P=%d: pick within 10 %% at %2d of %2d sizes, predicted busbw within 20 %% at %2d\n",
                name(coll(k.first)), k.second, n[0], n[2], n[1]);
    for (int i = 0; i < 3; ++i) all[i] += n[i];
  }
  if (all[2] > 0)
    std::printf("  all: pick within 10 %% at %d of %d (%.0f %%), busbw within 20 %% at %d (%.0f %%)\n",
                all[0], all[2], 100.0 * all[0] / all[2], all[1], 100.0 * all[1] / all[2]);
}

void print_profile(const tune::profile& r) {
  for (int ch = 0; ch < proto::channel_count; ++ch)
    std::printf("    %-8s alpha %.3f us, %.3f GB/s, oversubscribed step %.2f us\n",
                proto::channel_names[std::size_t(ch)], r.alpha_us(r.intra, ch), r.gbps(r.intra, ch),
                r.oversub_step_us + r.proto[ch].oversub_extra_us);
  std::printf(
      "    per call %.3f us (oversubscribed %.2f); barrier %.3f us; GB/s: peer %.2f, single copy %.2f, "
      "copy %.2f, reduce %.2f; near cache %s + %.2f GB/s; last level %s + %.2f GB/s\n",
      r.call_us, r.oversub_call_us, r.barrier_us, r.peer_gbps, r.single_copy_gbps, r.copy_gbps, r.reduce_gbps,
      cli::human(r.near_cache_bytes).c_str(), r.near_gbps, cli::human(r.cache_bytes).c_str(), r.mem_gbps);
}

}  // namespace

/// FIT's reports, merged: every measurement, the first report's profile and CPUs.
report load_all(const std::string& list) {
  report all;
  bool first = true;
  for (const std::string& path : cli::split(list)) {
    report r = load(path);
    if (first) all.model = r.model, all.cpus = r.cpus, all.copy_gbps_measured = r.copy_gbps_measured;
    else if (r.cpus != all.cpus) throw std::runtime_error(path + " was measured on another number of CPUs");
    all.calls.insert(all.calls.end(), r.calls.begin(), r.calls.end());
    first = false;
  }
  return all;
}

/// A profile to judge: "preset:NAME" or a profile file.
tune::profile profile_named(const std::string& spec) {
  if (spec.rfind("preset:", 0) == 0) {
    const tune::profile* p = tune::find_preset(spec.c_str() + 7);
    if (p == nullptr) throw std::runtime_error("no preset named '" + spec.substr(7) + "'");
    return *p;
  }
  const tune::profile_doc d = tune::load_profile(spec);
  for (const std::string& w : d.warnings)
    std::fprintf(stderr, "collx-probe-replay: warning: %s\n", w.c_str());
  return d.model;
}

constexpr const char* usage_line =
    "usage: collx-probe-replay FIT.json[,MORE.json...] [JUDGE.json] [--rows] [--worst N]\n"
    "                          [--judge-profile FILE|preset:NAME] [--caches NEAR,LAST]\n";

int main(int argc, char** argv) {
  std::vector<std::string> files;
  std::string other;
  int worst = 0;
  bool rows = false;
  double near_cache = -1, last_cache = -1;  // --caches (-1: the report's)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--worst" && i + 1 < argc) worst = std::atoi(argv[++i]);
    else if (a == "--judge-profile" && i + 1 < argc) other = argv[++i];
    else if (a == "--rows") rows = true;
    else if (a == "--caches" && i + 1 < argc) {
      const std::vector<std::string> v = cli::split(argv[++i]);
      if (v.size() != 2 || !cli::parse_size(v[0], near_cache) || !cli::parse_size(v[1], last_cache)) {
        std::fprintf(stderr, "collx-probe-replay: --caches needs NEAR,LAST sizes, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (!a.empty() && a[0] != '-') files.push_back(a);
    else {
      std::fprintf(stderr, "%s", usage_line);
      return 2;
    }
  }
  if (files.empty() || files.size() > 2) {
    std::fprintf(stderr, "%s", usage_line);
    return 2;
  }
  try {
    report fit_on = load_all(files[0]);
    if (last_cache >= 0) {
      fit_on.model.near_cache_bytes = near_cache, fit_on.model.cache_bytes = last_cache;
      std::printf("# refitting with the caches given: near %s, last level %s\n",
                  cli::human(near_cache).c_str(), cli::human(last_cache).c_str());
    }
    const report judged = files.size() > 1 ? load(files[1]) : fit_on;
    const std::vector<tune::timed_call> calls = timed_calls(fit_on, fit_on.model);
    // As the probe refits: the copy rate held at what it measured apart.
    tune::profile start = fit_on.model;
    if (fit_on.copy_gbps_measured > 0) start.copy_gbps = fit_on.copy_gbps_measured;
    const tune::profile_fit f = tune::fit_profile(
        calls, start, {.hold_copy = fit_on.copy_gbps_measured > 0, .robust_rel = tune::probe_robust_rel});
    std::printf("# %s: %zu measured calls; rms relative residual: the report's profile %.3f, refitted %.3f\n",
                files[0].c_str(), calls.size(), tune::rms_rel_residual(fit_on.model, calls),
                f.rms_rel_residual);
    std::printf("  the report's profile:\n");
    print_profile(fit_on.model);
    std::printf("  refitted:\n");
    print_profile(f.model);
    const std::string on = files.size() > 1 ? files[1] + " (out of sample)" : files[0] + " (in sample)";
    judge(("the report's profile, judged on " + (files.size() > 1 ? files[1] : files[0])).c_str(),
          fit_on.model, judged, rows);
    judge(("refitted to " + files[0] + ", judged on " + on).c_str(), f.model, judged, rows);
    if (!other.empty()) {
      const tune::profile p = profile_named(other);
      judge((other + ", judged on " + (files.size() > 1 ? files[1] : files[0])).c_str(), p, judged, rows);
    }
    if (worst > 0) {
      std::vector<std::pair<double, std::size_t>> err;
      for (std::size_t i = 0; i < calls.size(); ++i) {
        const double p = tune::price_one_node(f.model, calls[i].terms, calls[i].shape()).total_us();
        err.push_back({std::fabs(p / calls[i].us - 1), i});
      }
      std::sort(err.rbegin(), err.rend());
      std::printf("\n# the %d calls the refitted profile explains worst\n", worst);
      for (int k = 0; k < worst && k < int(err.size()); ++k) {
        const measurement& m = fit_on.calls[err[std::size_t(k)].second];
        const tune::timed_call& c = calls[err[std::size_t(k)].second];
        std::printf("  %-14s P=%d %9.0f B %-20s measured %9.2f us, predicted %9.2f (%+.0f %%)\n", name(m.c),
                    m.P, m.bytes, vname(m.v).c_str(), c.us,
                    tune::price_one_node(f.model, c.terms, c.shape()).total_us(),
                    100 * (tune::price_one_node(f.model, c.terms, c.shape()).total_us() / c.us - 1));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collx-probe-replay: %s\n", e.what());
    return 1;
  }
  return 0;
}
