// collxrun — start N ranks of a program on this machine.
//
//   collxrun -n N [--timeout SECONDS] [--no-prefix] [--bind-to core|none] [--] prog [args...]
//
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
  try {
    return collx::launch::run_local(nranks, prog, opt);
  } catch (const collx::error& e) {
    std::fprintf(stderr, "collxrun: %s\n", e.what());
    return 1;
  }
}
