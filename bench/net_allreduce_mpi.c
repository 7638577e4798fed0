/* all_reduce fp32 8 B..64 MiB with MPI, the same sizes, iteration counts and
 * output columns as tests/net/net_rank.cpp's bench mode (bytes, us, busbw
 * GB/s), for bench/netns_allreduce.sh's side-by-side run over veth. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 2) {
    const size_t n = bytes / 4;
    float* x = malloc(bytes);
    float* y = malloc(bytes);
    for (size_t i = 0; i < n; ++i) x[i] = 1.0f;
    const int iters = bytes <= (1 << 16) ? 200 : bytes <= (1 << 22) ? 20 : 5;
    for (int w = 0; w < 3; ++w) MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double us = (MPI_Wtime() - t0) * 1e6 / iters;
    const double busbw = (double)bytes / us / 1e3 * 2.0 * (P - 1) / P;
    if (y[0] != (float)P) printf("WRONG RESULT\n");
    if (rank == 0) printf("%12zu %12.2f %10.3f  mpi\n", bytes, us, busbw);
    free(x);
    free(y);
  }
  MPI_Finalize();
  return 0;
}
