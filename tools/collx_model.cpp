// tools/collx_model.cpp — collx-model: what the tuner predicts and picks.
//
//   collx-model all_reduce -p 4 --alpha 0.4e-6 --beta 1e-10 --gamma 2e-10 -b 8 -e 8M -f 4
//   collx-model all_gather -p 2 --alpha 0.4e-6 --beta 1e-10 --sizes 8,1024,1048576
//   collx-model calibrate [--bytes 8M] [--reps 20]
//
// The tool keeps no model of its own: every time it prints is
// tune::predict_us (tune/model.hpp) of an algorithm's constexpr cost terms
// (algo/cost.hpp), and the pick is tune::fastest (tune/select.hpp).
//
// For every compiled algorithm that implements the collective it prints, per
// size, the prediction under the profile the command line describes (α per
// step or barrier; β per byte sent, over the protocol's payload efficiency,
// or loaded from / stored to a peer; γ per byte reduced; staging free), the
// argmin and the
// algorithms in predicted order ('=' joins equal predictions; the argmin then
// names all of them). Algorithms on peer memory (nvls) have no protocol: their
// one variant is priced. Sizes are the collective's size as nccl-tests and
// collx-perf count it (all_gather: the whole output; reduce_scatter: the whole
// input; all_to_all: one rank's send buffer).
//
// Next to it, per size, what the automatic choice works with: the prediction
// under the profile communicators load (tune/active.hpp: COLLX_TUNE_FILE, the
// default location, else the built-in tune::shm_host; not the α, β, γ given here)
// of each algorithm on the same protocol, and the pick, tune::fastest with
// that problem as a communicator on the shm transport makes it: every
// compiled variant (not only --algo's), COLLX_ALGO, COLLX_PROTO,
// COLLX_DETERMINISTIC, COLLX_SINGLE_COPY[_MIN] and the FIFO geometry
// (COLLX_NSLOTS, COLLX_*BUFFSIZE) from the environment, single copy assumed
// available (the communicator probes it), and --oversubscribed when ranks
// outnumber the CPUs.
//
// `calibrate` measures β and γ on one thread of this machine, independently of
// any collective: β = seconds per byte of memcpy(dst, src, N), γ = seconds per
// output byte of c[i] = a[i] + b[i] over fp32 (N bytes each); N defaults to
// 8 MiB, the best of --reps timed passes after one warm-up. α is not measured
// here (it needs ranks): bench/run_algorithms.sh takes it from collx-perf.
//
// Exit status: 0, or 2 for a bad command line. Includes no communicator: only
// the algorithm, protocol and selection headers.
#include <collx/coll.hpp>
#include <collx/needs.hpp>
#include <collx/options.hpp>
#include <collx/proto/ids.hpp>
#include <collx/selection.hpp>
#include <collx/transport/shm.hpp>
#include <collx/tune/active.hpp>
#include <collx/tune/model.hpp>
#include <collx/tune/select.hpp>
#include <collx/variants.hpp>

#include "cli.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using collx::cli::parse_size;
using collx::cli::split;

using namespace collx;

constexpr const char* usage_text =
    "usage: collx-model <collective> -p P --alpha S [--beta S] [--gamma S] [--proto simple|ll|ll128]\n"
    "                   [-b MIN -e MAX -f FACTOR | --sizes N,N,...] [--algo A,B,...] [--terms]\n"
    "                   [--oversubscribed]\n"
    "       collx-model calibrate [--bytes N] [--reps N]\n"
    "  --alpha S   seconds per step (message latency on the critical path)\n"
    "  --beta S    seconds per byte sent, or moved to or from a peer's buffer (default 0)\n"
    "  --gamma S   seconds per byte reduced (default 0)\n"
    "  sizes take K, M, G suffixes (powers of 1024); -b 8 -e 8M -f 4 by default\n"
    "  --algo      only these algorithms; --terms also prints each algorithm's\n"
    "              cost terms (algo/cost.hpp)\n"
    "  --oversubscribed  the tuner's problem has more ranks than CPUs (P on this\n"
    "              machine's CPUs, or two ranks per CPU where P would fit them)\n"
    "Columns per size: tune::predict_us in us per algorithm under the profile alpha,\n"
    "beta and gamma describe; tune:<algo>, the same under the loaded profile\n"
    "(COLLX_TUNE_FILE, ~/.config/collx/profile.json, else tune::shm_host); pick\n"
    "and pick_us, the variant the automatic choice takes (tune::fastest over every\n"
    "compiled variant; COLLX_ALGO, COLLX_PROTO, COLLX_DETERMINISTIC, COLLX_SINGLE_COPY,\n"
    "COLLX_SINGLE_COPY_MIN and the FIFO geometry, COLLX_NSLOTS and COLLX_*BUFFSIZE,\n"
    "apply) and its predicted time; then the argmin and order of the first columns.\n";

int bad(const std::string& what) {
  std::fprintf(stderr, "collx-model: %s\n%s", what.c_str(), usage_text);
  return 2;
}

bool parse_seconds(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return *end == '\0' && out >= 0;
}

// ---- the tuner ------------------------------------------------------------------

struct prediction {
  std::string algo;
  algo::cost_terms terms;
  double us;
};

struct parameters {
  double alpha = -1, beta = 0, gamma = 0;
  proto_id proto = proto_id::simple;
};

/// The profile that α (s per step or barrier), β (s per byte sent, over the
/// protocol's payload efficiency, or loaded from / stored to a peer's buffer)
/// and γ (s per byte reduced) describe. Copies within a rank's memory
/// (staging) are free in it, as they are in the α-β-γ terms. A zero β or γ is
/// an infinite bandwidth.
tune::profile profile_of(const parameters& m) {
  const double gbps = 1 / (m.beta * 1e9), alpha_us = m.alpha * 1e6;
  tune::profile p{};
  p.intra = {tune::link_kind::shm, alpha_us, gbps};
  []<class... Ps>(tune::profile& out, type_list<Ps...>) {
    ((out.proto[proto::channel_of<Ps>] = {0, Ps::payload_efficiency}), ...);
  }(p, protocols{});
  p.barrier_us = p.oversub_step_us = alpha_us;
  p.peer_gbps = gbps;
  p.copy_gbps = std::numeric_limits<double>::infinity();
  p.reduce_gbps = 1 / (m.gamma * 1e9);
  return p;
}

/// tune::predict_us of every compiled algorithm that implements the
/// problem's collective, on protocol p (its one variant where it has no
/// protocol axis), under profile m; NaN where the variant cannot run on shm.
std::vector<prediction> predict(const tune::problem& q, proto_id p, const tune::profile& m) {
  std::vector<prediction> out;
  auto one = [&]<class A, class Pr>() {
    using Run = protocol_of<A, Pr>;
    const algo::cost_terms t =
        A::cost(q.kind, q.nranks, q.bytes, {q.chunks[proto::channel_of<Run>], q.single_copy});
    double us = std::nan("");
    if constexpr (composable<A, Run, transport::shm>) us = tune::predict_us<A, Run>(m, q);
    out.push_back({A::name, t, us});
  };
  [&]<class... As>(type_list<As...>) {
    (
        [&]<class A>() {
          if (!A::implements(q.kind)) return;
          [&]<class... Ps>(type_list<Ps...>) {
            ((Ps::id == p ? one.template operator()<A, Ps>() : void()), ...);
          }(protocols{});
        }.template operator()<As>(),
        ...);
  }(algorithms{});
  return out;
}

/// The variant a communicator with options `o` picks for the problem, and
/// its predicted time (as comm::resolve: the options' variant first).
std::pair<variant_choice, double> tuner_pick(const comm_options& o, const tune::profile& m,
                                             const tune::problem& q) {
  tune::request r{{}, o.allowed, o.deterministic};
  if (implements(o.variant.algo, q.kind)) r.fixed.algo = o.variant.algo;
  r.fixed.proto = o.variant.proto;
  if (r.fixed.algo != algo_id::automatic) r.fixed.proto = protocol_of_id(r.fixed.algo, r.fixed.proto);
  const variant_choice v = tune::fastest<transport::shm>(m, q, r);
  double us = std::nan("");
  visit_variant<transport::shm>(q.kind, v.algo, v.proto,
                                [&]<class A, class Pr>() { us = tune::predict_us<A, Pr>(m, q); });
  return {v, us};
}

std::string human(double b) {
  char buf[32];
  if (b >= 1 << 30) std::snprintf(buf, sizeof buf, "%gG", b / (1 << 30));
  else if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%gM", b / (1 << 20));
  else if (b >= 1 << 10) std::snprintf(buf, sizeof buf, "%gK", b / (1 << 10));
  else std::snprintf(buf, sizeof buf, "%g", b);
  return buf;
}

int evaluate(int argc, char** argv) {
  coll c{};
  bool found = false;
  for (int i = 0; i < coll_count; ++i)
    if (std::strcmp(argv[1], name(static_cast<coll>(i))) == 0) c = static_cast<coll>(i), found = true;
  if (!found) return bad(std::string("unknown collective '") + argv[1] + "'");
  parameters m;
  int P = 0;
  double lo = 8, hi = 8.0 * 1024 * 1024, factor = 4;
  std::vector<double> sizes;
  std::vector<std::string> only;
  bool terms = false, oversubscribed = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--terms") {
      terms = true;
      continue;
    }
    if (a == "--oversubscribed") {
      oversubscribed = true;
      continue;
    }
    if (i + 1 >= argc) return bad("'" + a + "' needs a value");
    const std::string v = argv[++i];
    if (a == "-p") {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (*end != '\0' || n < 1 || n > 4096)
        return bad("-p needs a rank count in [1, 4096], got '" + v + "'");
      P = static_cast<int>(n);
    } else if (a == "--alpha") {
      if (!parse_seconds(v, m.alpha)) return bad("invalid --alpha '" + v + "'");
    } else if (a == "--beta") {
      if (!parse_seconds(v, m.beta)) return bad("invalid --beta '" + v + "'");
    } else if (a == "--gamma") {
      if (!parse_seconds(v, m.gamma)) return bad("invalid --gamma '" + v + "'");
    } else if (a == "--proto") {
      bool ok = false;
      for (proto_id p : {proto_id::simple, proto_id::ll, proto_id::ll128})
        if (v == name(p)) m.proto = p, ok = true;
      if (!ok) return bad("unknown protocol '" + v + "'");
    } else if (a == "-b") {
      if (!parse_size(v, lo)) return bad("invalid size for -b: '" + v + "'");
    } else if (a == "-e") {
      if (!parse_size(v, hi)) return bad("invalid size for -e: '" + v + "'");
    } else if (a == "-f") {
      if (!parse_seconds(v, factor) || factor < 1) return bad("invalid -f '" + v + "' (a factor >= 1)");
    } else if (a == "--sizes") {
      for (const std::string& s : split(v)) {
        double x = 0;
        if (!parse_size(s, x)) return bad("invalid size in --sizes: '" + s + "'");
        sizes.push_back(x);
      }
    } else if (a == "--algo") {
      only = split(v);
    } else {
      return bad("unknown flag '" + a + "'");
    }
  }
  if (P == 0) return bad("missing -p");
  if (m.alpha < 0) return bad("missing --alpha");
  if (sizes.empty()) {
    if (lo > hi) return bad("-b is larger than -e");
    for (double s = lo; s <= hi; s = factor > 1 ? s * factor : hi + 1) sizes.push_back(s);
  }
  comm_options opt;
  const tune::active_profile* loaded_ptr = nullptr;
  try {
    opt = comm_options::from_env();
    loaded_ptr = &tune::profile_for(opt.tune_file, tune::shm_host);
  } catch (const std::exception& e) {
    return bad(e.what());
  }
  const tune::active_profile& loaded = *loaded_ptr;
  // The tuner's problem at a size, as comm::resolve_remembered builds it
  // (the FIFO geometry from the options, as the shm transport lays it out).
  const tune::chunk_table chunks =
      tune::chunk_table_of([&](int) { return opt.fifo_slots; },
                           [&](int ch) { return opt.slot_bytes[static_cast<std::size_t>(ch)]; });
  const tune::chunk_table granules =
      tune::granule_table_of([&](int ch) { return opt.slot_bytes[static_cast<std::size_t>(ch)]; });
  auto problem_at = [&](double bytes) {
    tune::problem q{c,
                    P,
                    bytes,
                    P > 1 && opt.single_copy && bytes >= double(opt.single_copy_min_for(false)),
                    oversubscribed,
                    chunks,
                    oversubscribed ? tune::assumed_oversubscribed_share(tune::this_machine().cpus, P) : 1.0};
    q.granules = granules;
    return q;
  };
  const tune::profile given = profile_of(m);
  auto chosen = [&](const prediction& p) {
    return only.empty() || std::find(only.begin(), only.end(), p.algo) != only.end();
  };
  std::vector<std::string> names;
  for (const prediction& p : predict(problem_at(1), m.proto, given))
    if (chosen(p)) names.push_back(p.algo);
  for (const std::string& n : only)
    if (std::find(names.begin(), names.end(), n) == names.end())
      return bad("no compiled algorithm '" + n + "' implements " + name(c));
  if (names.empty()) return bad(std::string("no compiled algorithm implements ") + name(c));
  // Column widths: 12, or the label's length.
  auto width = [](const std::string& label) {
    return static_cast<int>(std::max<std::size_t>(12, label.size()));
  };

  std::printf("# collx-model %s  P=%d  proto=%s  alpha=%.4g s  beta=%.4g s/B  gamma=%.4g s/B\n", name(c), P,
              name(m.proto), m.alpha, m.beta, m.gamma);
  std::printf(
      "# <algo> = tune::predict_us in us under alpha per step or barrier, beta per byte sent (over the "
      "payload "
      "efficiency) or moved to or from a peer, gamma per byte reduced\n");
  std::printf(
      "# tune:<algo> = tune::predict_us(loaded profile) in us, proto=%s; pick = tune::fastest, the automatic "
      "choice (single copy from %llu B%s%s)\n",
      name(m.proto), static_cast<unsigned long long>(opt.single_copy_min_for(false)),
      opt.single_copy ? "" : ", off", oversubscribed ? "; oversubscribed" : "");
  std::printf("# loaded profile: %s\n", loaded.origin.c_str());
  std::printf("#%11s", "size");
  for (const std::string& n : names) std::printf(" %12s", n.c_str());
  for (const std::string& n : names) std::printf(" %*s", width("tune:" + n), ("tune:" + n).c_str());
  std::printf(" %18s %12s", "pick", "pick_us");
  std::printf("  %-12s %s\n", "argmin", "order");
  for (double bytes : sizes) {
    const tune::problem q = problem_at(bytes);
    std::vector<prediction> ps;
    for (const prediction& p : predict(q, m.proto, given))
      if (chosen(p)) ps.push_back(p);
    std::printf("%12.0f", bytes);
    for (const prediction& p : ps) std::printf(" %12.3f", p.us);
    for (const prediction& p : predict(q, m.proto, loaded.model))
      if (std::find(names.begin(), names.end(), p.algo) != names.end())
        std::printf(" %*.3f", width("tune:" + p.algo), p.us);
    const auto [pick, pick_us] = tuner_pick(opt, loaded.model, q);
    std::printf(" %18s %12.3f", (std::string(name(pick.algo)) + "/" + name(pick.proto)).c_str(), pick_us);
    std::vector<prediction> order = ps;
    std::stable_sort(order.begin(), order.end(),
                     [](const prediction& x, const prediction& y) { return x.us < y.us; });
    // Equal predictions (ties, e.g. every algorithm at P = 2 whose terms agree) join with '='.
    auto same = [](double x, double y) {
      return std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y));
    };
    std::string o, argmin = order.front().algo;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const bool tie = k > 0 && same(order[k].us, order[k - 1].us);
      o += (k == 0 ? "" : tie ? "=" : "<") + order[k].algo;
      if (k > 0 && same(order[k].us, order[0].us)) argmin += "=" + order[k].algo;
    }
    std::printf("  %-12s %s\n", argmin.c_str(), o.c_str());
    if (terms)
      for (const prediction& p : ps) {
        const algo::cost_terms& t = p.terms;
        std::printf(
            "#   %-8s %-12s steps %g  bytes_sent %.6g  barriers %g  peer_bytes %.6g  staged_bytes %.6g  "
            "local_bytes %.6g  bytes_reduced %.6g  switch_bytes %.6g\n",
            human(bytes).c_str(), p.algo.c_str(), t.steps, t.bytes_sent, t.barriers, t.peer_bytes,
            t.staged_bytes, t.local_bytes, t.bytes_reduced, t.switch_bytes);
      }
  }
  return 0;
}

// ---- calibrate --------------------------------------------------------------------

// Keeps the compiler from dropping a loop whose result nobody reads.
void escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

template <class F>
double best_of(int reps, F&& f) {
  f();  // warm-up: page faults and caches
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

int calibrate(int argc, char** argv) {
  double bytes = 8.0 * 1024 * 1024;
  int reps = 20;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return bad("'" + a + "' needs a value");
    const std::string v = argv[++i];
    if (a == "--bytes") {
      if (!parse_size(v, bytes) || bytes < 4096) return bad("invalid --bytes '" + v + "' (at least 4K)");
    } else if (a == "--reps") {
      reps = std::atoi(v.c_str());
      if (reps < 1) return bad("invalid --reps '" + v + "'");
    } else {
      return bad("unknown flag '" + a + "'");
    }
  }
  const std::size_t n = static_cast<std::size_t>(bytes) / sizeof(float);
  std::vector<float> a(n), b(n), c(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = float(i % 1000), b[i] = float(i % 7);
  const double nbytes = double(n * sizeof(float));
  const double copy = best_of(reps, [&] {
    std::memcpy(c.data(), a.data(), n * sizeof(float));
    escape(c.data());
  });
  const double reduce = best_of(reps, [&] {
    float* __restrict cp = c.data();
    const float* __restrict ap = a.data();
    const float* __restrict bp = b.data();
    for (std::size_t i = 0; i < n; ++i) cp[i] = ap[i] + bp[i];
    escape(c.data());
  });
  std::printf("# collx-model calibrate: one thread, %.0f bytes, best of %d\n", nbytes, reps);
  std::printf("# memcpy %.2f GB/s; fp32 c = a + b %.2f GB/s (output bytes)\n", nbytes / copy / 1e9,
              nbytes / reduce / 1e9);
  std::printf("beta %.6g\ngamma %.6g\n", copy / nbytes, reduce / nbytes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::fputs(usage_text, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "calibrate") == 0) return calibrate(argc, argv);
  return evaluate(argc, argv);
}
