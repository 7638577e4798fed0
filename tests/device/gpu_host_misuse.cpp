// The host communicator given GPU memory: a clear error before any byte
// moves (comm_options::check_pointers), where before it crashed. Managed and
// pinned memory are accepted and reduced right. Exits 77 without a GPU.
#include <collx/communicator.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s  %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}
// The call must throw invalid_argument naming `which` as device memory.
template <class F>
void expect_refused(F&& call, const char* which, const std::string& what) {
  try {
    call();
    expect(false, what + ": accepted");
  } catch (const collx::error& e) {
    const std::string m = e.what();
    expect(e.code() == collx::status::invalid_argument && m.find(which) != std::string::npos &&
               m.find("CUDA device memory (GPU 0)") != std::string::npos,
           what + ": " + m);
  }
}
}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaSetDevice(0);
  const std::size_t count = 1 << 16;
  void *d = nullptr, *m = nullptr, *h = nullptr;
  if (cudaMalloc(&d, count * sizeof(float)) != cudaSuccess ||
      cudaMallocManaged(&m, count * sizeof(float)) != cudaSuccess ||
      cudaMallocHost(&h, count * sizeof(float)) != cudaSuccess) {
    std::printf("FAIL  allocation\n");
    return 1;
  }
  auto* dev = static_cast<float*>(d);
  auto* managed = static_cast<float*>(m);
  auto* pinned = static_cast<float*>(h);
  cudaMemset(dev, 0, count * sizeof(float));
  std::vector<float> host(count, 2.0f), out(count, -1.0f);
  auto comms = collx::communicator::create_thread_group(1);
  auto& c = comms[0];
  expect_refused([&] { c.all_reduce(dev, out.data(), count, collx::reduce_op::sum); }, "send buffer",
                 "all_reduce from device memory");
  expect_refused([&] { c.all_reduce(host.data(), dev, count, collx::reduce_op::sum); }, "recv buffer",
                 "all_reduce into device memory");
  expect_refused([&] { c.broadcast(dev, dev, count, 0); }, "send buffer",
                 "broadcast in place on device memory");
  expect(out == std::vector<float>(count, -1.0f), "nothing written by the refused calls");
  for (std::size_t i = 0; i < count; ++i) managed[i] = float(i % 7), pinned[i] = float(i % 5);
  c.all_reduce(managed, pinned, count, collx::reduce_op::sum);
  bool right = true;
  for (std::size_t i = 0; i < count; ++i) right = right && pinned[i] == float(i % 7);
  expect(right, "managed into pinned memory: accepted, values right (one rank: a copy)");
  expect(c.error() == collx::status::ok, "communicator still usable");
  cudaFree(dev);
  cudaFree(managed);
  cudaFreeHost(pinned);
  std::printf("%s\n", failures == 0 ? "PASSED" : "FAILED");
  return failures == 0 ? 0 : 1;
}
