// tools/collx_explain.cpp — collx-explain: why the tuner picks a variant.
//
//   collx-explain all_reduce -p 8 --preset h100_nvswitch --sizes 8,1M,256M
//   collx-explain all_gather -p 2 --profile ~/.config/collx/profile.json -b 8 -e 64M -f 8
//   collx-explain --list
//
// For a preset (tune/presets.hpp) or a profile file (tune/profile_file.hpp;
// checked against this machine only when it is the one communicators would
// load), a collective, a rank count and sizes, it prints every candidate
// variant's predicted time split into latency (steps × α, barriers),
// bandwidth (bytes over links, peers' memory, staging) and reduction (γ),
// fastest first: the first line is the automatic choice (tune::fastest; the
// list is tune::explain), and the summary gives the runner-up's margin.
// Candidates are the compiled variants that compose on the shm transport
// (the one collx has) and implement the collective; --algo/--proto restrict
// them (COLLX_ALGO / COLLX_PROTO syntax). --gpu MODE prices instead a call
// of a GPU group made with default options, as gpu::communicator's
// automatic choice does (tune/mesh_problem.hpp): its candidates, its FIFOs
// and staging buffer, and the call's buffers as MODE says. The output
// depends on nothing but the arguments, so tests compare it with golden files.
//
// Exit status: 0, 2 for a bad command line or profile.
#include "cli.hpp"

#include <collx/options.hpp>
#include <collx/selection.hpp>
#include <collx/transport/shm.hpp>
#include <collx/tune/explain.hpp>
#include <collx/tune/mesh_problem.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/profile_file.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace collx;

constexpr const char* usage_text =
    "usage: collx-explain <collective> -p P (--preset NAME | --profile FILE)\n"
    "                     [-b MIN -e MAX -f FACTOR | --sizes N,N,...] [--algo LIST] [--proto LIST]\n"
    "                     [--single-copy [--mapped]] [--in-place] [--oversubscribed]\n"
    "                     [--contention SHARE] [--gpu staged|windows|bound]\n"
    "       collx-explain --list\n"
    "  every candidate variant's predicted time (us) as latency + bandwidth + reduction,\n"
    "  fastest first (the automatic choice), and the runner-up's margin; sizes as\n"
    "  nccl-tests counts them, with K, M, G suffixes; default -b 8 -e 256M -f 32.\n"
    "  --single-copy: peer-memory schedules read peers' buffers in place (process ranks\n"
    "  with cross-memory attach do from 256 KiB). --mapped: with --single-copy, peers'\n"
    "  buffers are loads (thread ranks; symmetric memory), not cross-memory attach.\n"
    "  --in-place: the call is in place on\n"
    "  every rank (all_gather prices it: no own block to copy into place).\n"
    "  --oversubscribed: the ranks outnumber the CPUs (P on this machine's CPUs, or\n"
    "  two ranks per CPU where P would fit them).\n"
    "  --contention: the share of CPU time other tasks take, in [0, 0.9] (default 0).\n"
    "  --gpu: a call of a GPU group made with default options, priced as its automatic\n"
    "  choice prices it (ring, tree, direct, nvls; its FIFOs and 1 MiB staging buffer):\n"
    "  staged (buffers not registered), windows (in registered windows: single copy),\n"
    "  bound (in windows bound to a multicast object); the group has multicast where\n"
    "  the profile has a multicast rate. With --in-place, not with the CPU flags.\n"
    "  --list prints the presets.\n";

int bad(const std::string& what) {
  std::fprintf(stderr, "collx-explain: %s\n%s", what.c_str(), usage_text);
  return 2;
}

void describe(const tune::profile& m, int P) {
  auto link = [](const char* what, const tune::link& l) {
    std::printf("# %s: %s, alpha %.4g us, %.4g GB/s one direction\n", what, tune::name(l.kind), l.alpha_us,
                l.gbps);
  };
  const int nodes = m.nodes(P);
  if (nodes > 1) std::printf("# %d ranks: %d nodes of %d\n", P, nodes, m.ranks_per_node);
  else std::printf("# %d ranks on one node\n", P);
  link("intra", m.intra);
  if (nodes > 1) link("inter (per rank)", m.inter);
  std::printf("# protocols:");
  for (int c = 0; c < proto::channel_count; ++c)
    std::printf(" %s +%.4g us x%.4g", proto::channel_names[static_cast<std::size_t>(c)],
                m.proto[c].extra_alpha_us, m.proto[c].efficiency);
  std::printf(
      "\n# barrier %.4g us, peer %.4g GB/s, copy %.4g GB/s, reduce %.4g GB/s, oversubscribed step %.4g us\n",
      m.barrier_us, m.peer_gbps, m.copy_gbps, m.reduce_gbps, m.oversub_step_us);
  if (m.multicast_gbps > 0)
    std::printf(
        "# multicast address: %.4g GB/s per direction (nvls's switch channel, all_gather, broadcast)\n",
        m.multicast_gbps);
  if (m.cache_bytes > 0 && m.mem_gbps > 0)
    std::printf(
        "# cache %.4g MiB: the share of a call's bytes beyond it also pays %.4g GB/s (in bandwidth)\n",
        m.cache_bytes / 1048576, m.mem_gbps);
}

std::string us(double t) {
  if (t == tune::unavailable_us) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", t);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--list") {
    for (const tune::named_preset& p : tune::presets) std::printf("%-24s %s\n", p.name, p.what);
    return 0;
  }
  if (argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::fputs(usage_text, stdout);
    return 0;
  }
  if (argc < 2) return bad("missing the collective");
  coll c{};
  if (!cli::parse_coll(argv[1], c)) return bad(std::string("unknown collective '") + argv[1] + "'");
  int P = 0;
  double lo = 8, hi = 256.0 * 1024 * 1024, factor = 32;
  std::vector<double> sizes;
  std::string preset, file;
  bool single_copy = false, mapped = false, in_place = false, oversubscribed = false;
  double contention = 0;
  std::string gpu;  // --gpu: staged, windows or bound
  tune::request r;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--single-copy") {
      single_copy = true;
      continue;
    }
    if (a == "--mapped") {
      mapped = true;
      continue;
    }
    if (a == "--in-place") {
      in_place = true;
      continue;
    }
    if (a == "--oversubscribed") {
      oversubscribed = true;
      continue;
    }
    if (i + 1 >= argc) return bad("'" + a + "' needs a value");
    const std::string v = argv[++i];
    try {
      if (a == "-p") {
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (*end != '\0' || n < 1 || n > 4096)
          return bad("-p needs a rank count in [1, 4096], got '" + v + "'");
        P = static_cast<int>(n);
      } else if (a == "--preset") {
        preset = v;
      } else if (a == "--profile") {
        file = v;
      } else if (a == "-b") {
        if (!cli::parse_size(v, lo)) return bad("invalid size for -b: '" + v + "'");
      } else if (a == "-e") {
        if (!cli::parse_size(v, hi)) return bad("invalid size for -e: '" + v + "'");
      } else if (a == "-f") {
        char* end = nullptr;
        factor = std::strtod(v.c_str(), &end);
        if (*end != '\0' || !(factor >= 1)) return bad("invalid -f '" + v + "' (a factor >= 1)");
      } else if (a == "--sizes") {
        for (const std::string& s : cli::split(v)) {
          double x = 0;
          if (!cli::parse_size(s, x)) return bad("invalid size in --sizes: '" + s + "'");
          sizes.push_back(x);
        }
      } else if (a == "--contention") {
        char* end = nullptr;
        contention = std::strtod(v.c_str(), &end);
        if (*end != '\0' || !(contention >= 0 && contention <= comm_options::max_contention))
          return bad("--contention needs a share in [0, 0.9], got '" + v + "'");
      } else if (a == "--gpu") {
        if (v != "staged" && v != "windows" && v != "bound")
          return bad("--gpu needs staged, windows or bound, got '" + v + "'");
        gpu = v;
      } else if (a == "--algo") {
        r.allowed.restrict_algos(v, "--algo");
      } else if (a == "--proto") {
        r.allowed.restrict_protos(v, "--proto");
      } else {
        return bad("unknown flag '" + a + "'");
      }
    } catch (const std::exception& e) {
      return bad(e.what());
    }
  }
  if (P == 0) return bad("missing -p");
  if (preset.empty() == file.empty()) return bad("give one of --preset NAME or --profile FILE");
  tune::profile m{};
  std::string what;
  if (!preset.empty()) {
    const tune::profile* p = tune::find_preset(preset.c_str());
    if (p == nullptr) {
      std::string names;
      for (const tune::named_preset& x : tune::presets)
        names += std::string(names.empty() ? "" : ", ") + x.name;
      return bad("no preset named '" + preset + "' (presets: " + names + ")");
    }
    m = *p;
    for (const tune::named_preset& x : tune::presets)
      if (x.value == p) what = "preset " + preset + " (" + x.what + ")";
  } else {
    try {
      const tune::profile_doc d = tune::load_profile(file);
      for (const std::string& w : d.warnings) std::fprintf(stderr, "collx-explain: warning: %s\n", w.c_str());
      m = d.model;
      what = "profile " + file + " (" + d.machine.topology() + (d.measured.empty() ? "" : ", " + d.measured) +
             ")";
    } catch (const std::exception& e) {
      std::fprintf(stderr, "collx-explain: %s\n", e.what());
      return 2;
    }
  }
  if (sizes.empty()) {
    if (lo > hi) return bad("-b is larger than -e");
    sizes = cli::sweep(lo, hi, factor);
  }

  std::printf("# collx-explain %s -p %d: %s\n", name(c), P, what.c_str());
  if (mapped && !single_copy) return bad("--mapped prices single-copy reads: it needs --single-copy");
  if (!gpu.empty() && (single_copy || mapped || oversubscribed || contention > 0))
    return bad(
        "--gpu states how the call runs: it takes none of --single-copy, --mapped, "
        "--oversubscribed, --contention");
  const transport::mesh_layout gpu_layout = tune::mesh_layout_of(P);
  tune::mesh_call call{};
  if (!gpu.empty()) {
    // The GPU's candidates, within what --algo/--proto allow.
    const selection mesh = tune::mesh_selection();
    for (int k = 0; k < coll_count; ++k) r.allowed.algos[k] &= mesh.algos[k];
    call.registered = gpu != "staged";
    call.send_bound = call.recv_bound = gpu == "bound";
    call.in_place = in_place;
  }
  describe(m, P);
  if (!gpu.empty())
    std::printf("# GPU group, default options: staging buffer %.4g MiB per rank; call %s%s\n",
                double(gpu_layout.fifos.peer_buffer_bytes()) / 1048576,
                gpu == "staged" ? "not registered (nvls stages, through the switch where the group has one)"
                : gpu == "windows"
                    ? "in registered windows (single copy, peer loads)"
                    : "in windows bound to a multicast object (single copy through the switch)",
                in_place ? ", in place" : "");
  std::printf(
      "# times in us: latency (steps x alpha, barriers) + bandwidth (links, peers, staging) + reduction\n");
  std::printf(
      "# (gamma); '-' = unavailable on this machine. Fastest first; '*' marks the automatic choice.\n");
  for (double bytes : sizes) {
    std::vector<tune::explained> all;
    if (gpu.empty()) {
      tune::problem q{c, P, bytes, single_copy && P > 1, oversubscribed};
      if (oversubscribed) q.cpu_share = tune::assumed_oversubscribed_share(tune::this_machine().cpus, P);
      q.contention = contention;
      q.in_place = in_place;
      q.mapped_peers = mapped;
      all = tune::explain<transport::shm>(m, q, r);
    } else {
      const tune::problem q = tune::mesh_problem(gpu_layout, c, bytes, call);
      const bool through = tune::mesh_multicast(q, call, m.multicast_gbps > 0);
      all = tune::explain<transport::mesh>(tune::mesh_profile(m, through), q, r);
    }
    std::printf("\n# %s %s (%.0f B)\n", name(c), cli::human(bytes).c_str(), bytes);
    if (all.empty()) {
      std::printf("  no compiled variant allowed serves %s\n", name(c));
      continue;
    }
    std::printf("  %-20s %12s %12s %12s %12s\n", "variant", "latency", "bandwidth", "reduction", "total");
    for (std::size_t i = 0; i < all.size(); ++i) {
      const tune::explained& e = all[i];
      const std::string v = std::string(name(e.variant.algo)) + "/" + name(e.variant.proto);
      std::printf("%c %-20s %12s %12s %12s %12s\n", i == 0 ? '*' : ' ', v.c_str(),
                  us(e.time.latency_us).c_str(), us(e.time.bandwidth_us).c_str(),
                  us(e.time.reduction_us).c_str(), us(e.time.total_us()).c_str());
    }
    const tune::explained& w = all[0];
    std::printf("  winner %s/%s", name(w.variant.algo), name(w.variant.proto));
    if (all.size() > 1 && all[1].time.total_us() != tune::unavailable_us) {
      const double a = w.time.total_us(), b = all[1].time.total_us();
      std::printf(", runner-up %s/%s slower by %s us (%.3g %%)", name(all[1].variant.algo),
                  name(all[1].variant.proto), us(b - a).c_str(), a > 0 ? (b - a) / a * 100 : 0.0);
    }
    const tune::prediction& t = w.time;
    const char* bound = t.latency_us >= t.bandwidth_us && t.latency_us >= t.reduction_us ? "latency"
                        : t.bandwidth_us >= t.reduction_us                               ? "bandwidth"
                                                                                         : "reduction";
    std::printf("; %s-bound\n", bound);
  }
  return 0;
}
