// What the GPU tests share: CUDA_OK, which ends the test (exit 1) naming a
// failed runtime call, and exit_code_without_gpu, what a test does first.
#pragma once

#include <collx/cuda/check.hpp>

#include <cstdio>
#include <cstdlib>

#define CUDA_OK(x)                                                                             \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace collx::test {

/// Finds a GPU to run on. Returns -1 when there is one; otherwise prints why
/// and returns the test's exit code: 77 (skipped) when the machine has no GPU
/// (gpu::no_device), 1 when a GPU is there but the runtime cannot use it.
inline int exit_code_without_gpu() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (gpu::no_device(e, devices)) {
    std::printf("no CUDA device: skipping (cudaGetDeviceCount: %s, %d devices)\n",
                e == cudaSuccess ? "cudaSuccess" : cudaGetErrorName(e), devices);
    return 77;
  }
  if (e != cudaSuccess) {
    std::fprintf(stderr, "FAILED: cudaGetDeviceCount: %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
  }
  return -1;
}

}  // namespace collx::test
