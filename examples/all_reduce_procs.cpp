// One process per rank: `collxrun -n 4 ./all_reduce_procs` (or torchrun, mpirun, srun).
#include <collx/process.hpp>

#include <cstdio>
#include <vector>

int main() {
  auto comm = collx::from_env();
  std::vector<double> x(1000, comm.rank() + 1.0), y(x.size());
  comm.all_reduce(x.data(), y.data(), x.size(), collx::reduce_op::avg);
  std::printf("rank %d of %d: y[0] = %g\n", comm.rank(), comm.size(), y[0]);
}
