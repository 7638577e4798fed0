// A rank for the launcher tests: joins its group through the environment
// collxrun set up, allgathers a pattern that depends on (rank, index), checks
// every byte and prints "rank R of N ok".
//
//   bootstrap_child          all ranks take part
//   bootstrap_child die      rank 1 dies (exit 5, no orderly leave) after
//                            joining; the others report the peer failure
//                            and exit 0, so collxrun's status is rank 1's
#include <collx/bootstrap/env.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    auto env = collx::bootstrap::detect_launch_env();
    if (!env || env->source != "collx" || !env->id) {
      std::fprintf(stderr, "no collx launch environment\n");
      return 10;
    }
    auto s = collx::bootstrap::connect_from_env(*env, 10s);
    if (mode == "die" && s.rank() == 1) std::_Exit(5);  // like a crash: no destructors
    std::vector<unsigned char> mine(257);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<unsigned char>(s.rank() * 31 + i);
    auto all = s.allgather(mine.data(), mine.size());
    for (int q = 0; q < s.size(); ++q)
      for (std::size_t i = 0; i < mine.size(); ++i)
        if (std::to_integer<unsigned char>(all[q * mine.size() + i]) !=
            static_cast<unsigned char>(q * 31 + i)) {
          std::fprintf(stderr, "wrong byte %zu from rank %d\n", i, q);
          return 11;
        }
    s.barrier();
    std::printf("rank %d of %d ok\n", s.rank(), s.size());
    return 0;
  } catch (const collx::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return mode == "die" && e.code() == collx::status::peer_failure ? 0 : 6;
  }
}
