// Four thread ranks sum a vector; then the same call with the variant named.
#include <collx/communicator.hpp>

#include <cstdio>
#include <thread>
#include <vector>

int main() {
  const int P = 4;
  auto comms = collx::communicator::create_thread_group(P);
  std::vector<std::thread> ranks;
  for (int r = 0; r < P; ++r)
    ranks.emplace_back([&comm = comms[r], r] {
      std::vector<float> x(1 << 20, float(r + 1)), y(x.size());
      comm.all_reduce(x.data(), y.data(), x.size(), collx::reduce_op::sum);  // y[i] = 1+2+3+4
      collx::all_reduce<collx::algo::ring, collx::proto::simple>(comm, y.data(), y.data(), y.size(),
                                                                 collx::reduce_op::max);  // in place
      if (r == 0) std::printf("y[0] = %g (expected 10)\n", y[0]);
    });
  for (auto& t : ranks) t.join();
}
