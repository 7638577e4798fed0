// collxrun — start N ranks of a program on this machine.
//
//   collxrun -n N [--timeout SECONDS] [--no-prefix] [--bind-to core|none] [--] prog [args...]
//   collxrun --nnodes M --node-rank K --master ADDR:PORT -n N ... prog   (one per node)
//
// With --nnodes, each node's collxrun starts its N ranks as global ranks
// K·N … K·N+N−1 of M·N; node 0's runs the rendezvous root at ADDR:PORT (a
// numeric address of node 0 every node reaches; [v6]:port for IPv6); every
// node needs the same COLLX_SECRET (32 hex digits) in its environment.
// Each rank gets COLLX_RANK, COLLX_SIZE, COLLX_LOCAL_RANK, COLLX_LOCAL_SIZE
// and COLLX_UNIQUE_ID; the rendezvous root runs inside collxrun. Exit status:
// 0 when all ranks succeed, else the first failing rank's code (128+signal),
// 124 on timeout, 127 when prog is not found, 2 on bad arguments.
#include <collx/launch/local.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr const char* usage_text =
    "usage: collxrun -n N [--timeout SECONDS] [--no-prefix] [--bind-to core|none] [--] prog [args...]\n"
    "  -n N               number of ranks (1..4096)\n"
    "  --timeout SECONDS  terminate all ranks after SECONDS (decimals allowed), exit 124\n"
    "  --no-prefix        do not prefix output lines with \"[rank] \"\n"
    "  --bind-to core|none  pin rank r to the r-th usable CPU (default: core when the ranks fit)\n"
    "  --nnodes M         the job spans M nodes, one collxrun each (COLLX_SECRET must be set, equal on all)\n"
    "  --node-rank K      this node's index in [0, M)\n"
    "  --master ADDR:PORT where node 0's collxrun runs the rendezvous root (numeric address)\n"
    "  -h, --help         show this help\n";

int usage(const std::string& problem) {
  if (!problem.empty()) std::fprintf(stderr, "collxrun: %s\n", problem.c_str());
  std::fputs(usage_text, stderr);
  return 2;
}

bool parse_ranks(std::string_view s, int& out) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string_view::npos) return false;
  out = std::stoi(std::string(s));
  return out >= 1 && out <= 4096;
}

bool parse_seconds(const std::string& s, std::chrono::milliseconds& out) {
  if (s.empty() || s.find_first_not_of("0123456789.") != std::string::npos) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v <= 0 || v > 1e7) return false;
  out = std::chrono::milliseconds(static_cast<long long>(std::ceil(v * 1000)));
  return true;
}

/// "10.0.0.1:29500" or "[fd00::1]:29500".
bool parse_master(const std::string& s, std::string& addr, std::uint16_t& port) {
  std::size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  addr = s.substr(0, colon);
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  const std::string p = s.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  const int v = std::stoi(p);
  if (v < 1 || v > 65535 || addr.empty()) return false;
  port = static_cast<std::uint16_t>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 0;
  collx::launch::launch_options opt;
  std::vector<std::string> prog;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--") {
      prog.assign(argv + i + 1, argv + argc);
      break;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(usage_text, stdout);
      return 0;
    }
    if (a == "-n" || a == "--np") {
      const char* v = value();
      if (!v || !parse_ranks(v, nranks)) return usage("-n needs a number of ranks in 1..4096");
    } else if (a == "--nnodes") {
      const char* v = value();
      if (!v || !parse_ranks(v, opt.nnodes)) return usage("--nnodes needs a number of nodes in 1..4096");
    } else if (a == "--node-rank") {
      const char* v = value();
      const std::string t = v ? v : "";
      if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos)
        return usage("--node-rank needs a node index");
      opt.node_rank = std::stoi(t);
    } else if (a == "--master") {
      const char* v = value();
      if (!v || !parse_master(v, opt.master_address, opt.master_port))
        return usage("--master needs ADDR:PORT (numeric address; [v6]:port), port in 1..65535");
    } else if (a == "--timeout") {
      const char* v = value();
      if (!v || !parse_seconds(v, opt.timeout)) return usage("--timeout needs a positive number of seconds");
    } else if (a == "--bind-to") {
      const char* v = value();
      const std::string b = v ? v : "";
      if (b == "core") opt.bind = collx::launch::launch_options::binding::core;
      else if (b == "none") opt.bind = collx::launch::launch_options::binding::none;
      else return usage("--bind-to needs 'core' or 'none'");
    } else if (a == "--no-prefix") {
      opt.prefix_output = false;
    } else if (!a.empty() && a[0] == '-') {
      return usage("unknown option '" + a + "'");
    } else {
      prog.assign(argv + i, argv + argc);
      break;
    }
  }
  if (nranks == 0) return usage("missing -n N");
  if (prog.empty()) return usage("missing the program to run");
  if (opt.node_rank >= opt.nnodes)
    return usage("--node-rank " + std::to_string(opt.node_rank) + " is not below --nnodes " +
                 std::to_string(opt.nnodes));
  if (opt.nnodes > 1) {
    if (opt.master_address.empty()) return usage("--nnodes needs --master ADDR:PORT");
    const char* secret = std::getenv("COLLX_SECRET");
    if (secret == nullptr || *secret == '\0')
      return usage("--nnodes needs COLLX_SECRET (32 hex digits), the same on every node");
    try {
      opt.secret = collx::bootstrap::secret_from_hex(secret, "environment: COLLX_SECRET");
    } catch (const collx::error& e) {
      return usage(e.what());
    }
  }
  try {
    return collx::launch::run_local(nranks, prog, opt);
  } catch (const collx::error& e) {
    std::fprintf(stderr, "collxrun: %s\n", e.what());
    return 1;
  }
}
