// A rank that dies mid-collective, and survivors that must report it.
//
//   fault_child kill|exit VICTIM STAMP_FILE [COUNT]
//
// Started by collxrun. Every rank prints "rank R pid P", then runs
// back-to-back all_reduces of COUNT floats (default 4 Mi) until one throws.
// Rank VICTIM starts a thread that, once the all_reduces run, writes the
// CLOCK_MONOTONIC time to STAMP_FILE and then SIGKILLs its own process
// (`kill`) or _exit(3)s without any cleanup (`exit`). Each survivor checks
// that its error is status::peer_dead naming rank VICTIM, prints
// "rank R survived: detected in X ms: <message>" and exits 0 (1 otherwise).
#include <collx/communicator.hpp>
#include <collx/process.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace collx;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: fault_child kill|exit VICTIM STAMP_FILE [COUNT]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int victim = std::atoi(argv[2]);
  const char* stamp = argv[3];
  const std::size_t count = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : std::size_t{4} << 20;
  comm_options opt = comm_options::from_env();
  opt.timeout = std::chrono::seconds(60);  // far above the expected detection time
  communicator comm;
  try {
    comm = collx::from_env(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_child: %s\n", e.what());
    return 1;
  }
  const int rank = comm.rank();
  std::printf("rank %d pid %d\n", rank, static_cast<int>(::getpid()));
  std::fflush(stdout);

  std::atomic<int> calls{0};
  std::thread killer;
  if (rank == victim)
    killer = std::thread([&] {
      while (calls.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // inside a call, most likely
      if (std::FILE* f = std::fopen(stamp, "w")) {
        std::fprintf(f, "%llu\n", static_cast<unsigned long long>(exec::monotonic_ns()));
        std::fclose(f);
      }
      if (mode == "exit") ::_exit(3);
      ::kill(::getpid(), SIGKILL);
    });

  std::vector<float> a(count, 1.0f), b(count);
  try {
    for (;;) {
      comm.all_reduce(a.data(), b.data(), count, reduce_op::sum);
      ++calls;
    }
  } catch (const collx::error& e) {
    const std::uint64_t now = exec::monotonic_ns();
    if (killer.joinable()) killer.detach();
    unsigned long long died = 0;
    if (std::FILE* f = std::fopen(stamp, "r")) {
      if (std::fscanf(f, "%llu", &died) != 1) died = 0;
      std::fclose(f);
    }
    const std::string who = "rank " + std::to_string(victim) + " (pid ";
    const bool right = e.code() == status::peer_dead && std::strstr(e.what(), who.c_str()) != nullptr &&
                       comm.error() == status::peer_dead;
    if (!right) {
      std::fprintf(stderr, "rank %d: wrong error (%s): %s\n", rank, to_string(e.code()), e.what());
      return 1;
    }
    std::printf("rank %d survived: detected in %.1f ms: %s\n", rank,
                died ? static_cast<double>(now - died) / 1e6 : -1.0, e.what());
    return 0;
  }
}
