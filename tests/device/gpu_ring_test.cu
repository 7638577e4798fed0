// Runs the ring schedules on a GPU: P ranks of S thread blocks (stripes) each,
// sharing one segment in device memory. Checks every element against a double reference
// and guard words around every output. Exits 77 (skip) only when the machine
// has no GPU (see gpu::no_device), 1 when a GPU is there but cannot be used.
#include "gpu_test.cuh"
#include "ring_kernels.cuh"

#include <collx/cuda/check.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace collx;

namespace {

/// Per-kernel budget: COLLX_GPU_TIMEOUT_MS, default 2 s (a correct kernel here takes milliseconds).
std::uint64_t timeout_ns() {
  const char* s = std::getenv("COLLX_GPU_TIMEOUT_MS");
  return (s != nullptr ? std::strtoull(s, nullptr, 10) : 2000ull) * 1000000ull;
}

constexpr std::size_t guard = 64;  // elements on each side of every buffer
constexpr float guard_value = -12345.0f;

float input(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 3) % 19) - 9);
}

template <class Proto, coll C>
int run(int P, int S, std::size_t count) {
  const auto layout =
      transport::shm_layout::make(static_cast<std::uint32_t>(P), 8, {64 * 1024, 8 * 1024, 32 * 1024}, S);
  std::byte* seg = nullptr;
  CUDA_OK(cudaMalloc(&seg, layout.total_bytes()));
  CUDA_OK(cudaMemset(seg, 0, layout.total_bytes()));
  const std::size_t send_n = C == coll::reduce_scatter ? count * P : count;
  const std::size_t recv_n = C == coll::all_gather ? count * P : count;
  std::vector<float*> sends(P), recvs(P);
  std::vector<float> host_in(send_n + 2 * guard), host_out(recv_n + 2 * guard, guard_value);
  for (int r = 0; r < P; ++r) {
    CUDA_OK(cudaMalloc(&sends[r], (send_n + 2 * guard) * sizeof(float)));
    CUDA_OK(cudaMalloc(&recvs[r], (recv_n + 2 * guard) * sizeof(float)));
    for (std::size_t i = 0; i < send_n; ++i) host_in[guard + i] = input(r, i);
    CUDA_OK(cudaMemcpy(sends[r], host_in.data(), host_in.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(recvs[r], host_out.data(), host_out.size() * sizeof(float), cudaMemcpyHostToDevice));
    sends[r] += guard;
    recvs[r] += guard;
  }
  float **d_sends = nullptr, **d_recvs = nullptr;
  int* d_status = nullptr;
  CUDA_OK(cudaMalloc(&d_sends, P * sizeof(float*)));
  CUDA_OK(cudaMalloc(&d_recvs, P * sizeof(float*)));
  CUDA_OK(cudaMalloc(&d_status, P * S * sizeof(int)));
  CUDA_OK(cudaMemcpy(d_sends, sends.data(), P * sizeof(float*), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_recvs, recvs.data(), P * sizeof(float*), cudaMemcpyHostToDevice));
  exec::cuda ex{};
  ex.abort_word = reinterpret_cast<const std::uint32_t*>(seg + offsetof(transport::shm_header, abort));
  transport::shm_view view{seg, layout};
  // The P·S blocks spin on each other: all must be resident at once, or the
  // unscheduled ranks leave the others to time out.
  auto kernel = test::ring_kernel<Proto, C, float, reduce_op::sum>;
  int per_sm = 0, sms = 0;
  CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, 0));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (per_sm * sms < P * S) {
    std::printf("%s/%s P=%d S=%d: only %d blocks of 256 threads can be resident at once: WRONG\n",
                Proto::name, name(C), P, S, per_sm * sms);
    return 1;
  }
  kernel<<<P * S, 256>>>(view, ex, d_sends, d_recvs, count, 0, d_status, timeout_ns());
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int> st(P * S);
  CUDA_OK(cudaMemcpy(st.data(), d_status, P * S * sizeof(int), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int b = 0; b < P * S; ++b)
    if (st[b] != 0) ++wrong;
  for (int r = 0; r < P; ++r) {
    CUDA_OK(cudaMemcpy(host_out.data(), recvs[r] - guard, host_out.size() * sizeof(float),
                       cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < guard; ++i)
      if (host_out[i] != guard_value || host_out[guard + recv_n + i] != guard_value) ++wrong;
    for (std::size_t i = 0; i < recv_n; ++i) {
      double want = 0;
      if (C == coll::all_reduce) {
        for (int q = 0; q < P; ++q) want += input(q, i);
      } else if (C == coll::reduce_scatter) {
        for (int q = 0; q < P; ++q) want += input(q, r * count + i);
      } else {  // all_gather
        want = input(static_cast<int>(i / count), i % count);
      }
      if (static_cast<double>(host_out[guard + i]) != want) ++wrong;
    }
  }
  for (int r = 0; r < P; ++r) {
    cudaFree(sends[r] - guard);
    cudaFree(recvs[r] - guard);
  }
  cudaFree(d_sends);
  cudaFree(d_recvs);
  cudaFree(d_status);
  cudaFree(seg);
  std::printf("%s/%s P=%d S=%d count=%zu: %s\n", Proto::name, name(C), P, S, count, wrong ? "WRONG" : "ok");
  return wrong;
}

template <class Proto>
int run_protocol(int P, int S, std::size_t count) {
  return run<Proto, coll::all_reduce>(P, S, count) + run<Proto, coll::all_gather>(P, S, count) +
         run<Proto, coll::reduce_scatter>(P, S, count);
}

}  // namespace

int main() {
  if (const int rc = test::exit_code_without_gpu(); rc >= 0) return rc;
  // COLLX_GPU_SMALL=1: a small matrix, for the sanitizers (10-100x slower).
  const bool small = std::getenv("COLLX_GPU_SMALL") != nullptr;
  const std::vector<int> ranks = small ? std::vector<int>{1, 2, 3} : std::vector<int>{1, 2, 3, 4, 8};
  const std::vector<int> stripes = small ? std::vector<int>{1, 2} : std::vector<int>{1, 4};
  int wrong = 0;
  for (int P : ranks)
    for (int S : stripes) {
      std::vector<std::size_t> counts{0, 1, std::size_t(P + 1), 1009};
      if (!small) counts.push_back((std::size_t(1) << 20) + 3);
      for (std::size_t count : counts) {
        wrong += run_protocol<proto::simple>(P, S, count);
        wrong += run_protocol<proto::ll>(P, S, count);
        wrong += run_protocol<proto::ll128>(P, S, count);
      }
    }
  std::printf("%s\n", wrong ? "FAILED" : "all ok");
  return wrong ? 1 : 0;
}
