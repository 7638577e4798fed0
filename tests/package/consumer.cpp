// Consumer of the collx package: builds against collx::collx and nothing else,
// and runs a real all_reduce on two thread ranks, so it checks that cxx_std_20,
// Threads and every header the communicator needs come with the target.
#include <collx/communicator.hpp>

#include <cstdio>
#include <thread>
#include <vector>

int main() {
  auto comms = collx::communicator::create_thread_group(2);
  std::vector<double> out(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      const double mine = r + 1.0;
      comms[r].all_reduce(&mine, &out[r], 1, collx::reduce_op::sum);
    });
  for (auto& t : ranks) t.join();
  std::printf("collx %d.%d.%d libcudacxx=%d sum=%g\n", COLLX_VERSION_MAJOR, COLLX_VERSION_MINOR,
              COLLX_VERSION_PATCH, COLLX_HAS_LIBCUDACXX, out[0]);
  return out[0] == 3.0 && out[1] == 3.0 ? 0 : 1;
}
