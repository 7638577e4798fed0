// half and bfloat16 all_reduce through gpu::communicator on a GPU: the
// automatic choice (bfloat16) and explicit ring/Simple and ring/LL128 (both
// types), sum and avg, 2 ranks on GPU 0 (and on GPUs 0 and 1 where there are
// two). With 2 ranks every element is one combination of the two inputs, so
// the result must have the host reducer's bits (collx/numeric/hardware.hpp
// promises them): sums that round, that overflow to infinity, subnormals.
// Counts that fill whole 16-byte packs and leave tails, buffers one element
// off the packs, and guard elements on both sides of every output. Exits 77
// without a GPU.
#include "gpu_test.cuh"

#include <collx/cuda/communicator.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace collx;

namespace {

constexpr std::size_t guard = 16;
int failures = 0;

template <class T>
using bits_of = decltype(T{}.bits);

/// Rank r's input: finite patterns of every class (normal, subnormal, zero,
/// the largest values, whose sums overflow), from a seed per rank.
template <class T>
std::vector<T> inputs(int r, std::size_t n) {
  std::mt19937 rng(0xB16 + 7919u * static_cast<unsigned>(r));
  std::uniform_int_distribution<unsigned> pick(0, (1u << (8 * sizeof(T))) - 1);
  std::vector<T> v(n);
  for (auto& x : v) {
    do x = T::from_bits(bits_of<T>(pick(rng)));
    while (!std::isfinite(static_cast<float>(x)));
  }
  return v;
}

/// One all_reduce on both ranks by `call(comm, send, recv, stream)`, checked
/// against the host reducer.
template <class T, reduce_op Op, class Call>
void check(std::vector<gpu::communicator>& comms, std::size_t n, std::size_t offset, const std::string& label,
           Call&& call) {
  const T sentinel = T::from_bits(bits_of<T>(0x5A5A & ((1u << (8 * sizeof(T))) - 1)));
  const std::size_t total = offset + n + 2 * guard, at = guard + offset;
  std::vector<std::vector<T>> in(2);
  std::vector<T*> send(2), recv(2);
  std::vector<cudaStream_t> streams(2);
  for (int r = 0; r < 2; ++r) {
    in[r] = inputs<T>(r, n);
    std::vector<T> hs(total, sentinel);
    std::copy(in[r].begin(), in[r].end(), hs.begin() + static_cast<std::ptrdiff_t>(at));
    CUDA_OK(cudaSetDevice(comms[r].device()));
    CUDA_OK(cudaMalloc(&send[r], total * sizeof(T)));
    CUDA_OK(cudaMalloc(&recv[r], total * sizeof(T)));
    CUDA_OK(cudaMemcpy(send[r], hs.data(), total * sizeof(T), cudaMemcpyHostToDevice));
    const std::vector<T> hr(total, sentinel);
    CUDA_OK(cudaMemcpy(recv[r], hr.data(), total * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
  }
  std::string err;
  try {
    for (int r = 0; r < 2; ++r) call(comms[r], send[r] + at, recv[r] + at, n, streams[r]);
    for (int r = 0; r < 2; ++r) comms[r].wait(streams[r]);
  } catch (const std::exception& e) {
    err = e.what();
  }
  const reducer<T, Op> red{2};
  std::size_t wrong = 0;
  for (int r = 0; r < 2 && err.empty(); ++r) {
    std::vector<T> out(total);
    CUDA_OK(cudaMemcpy(out.data(), recv[r], total * sizeof(T), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < total; ++i) {
      T want = sentinel;
      if (i >= at && i < at + n) {
        want = red(in[0][i - at], in[1][i - at]);
        if constexpr (Op == reduce_op::avg) want = red.post(want);
      }
      if (out[i].bits != want.bits && wrong++ < 5)
        std::printf("  %s: rank %d element %zd: got 0x%x, want 0x%x\n", label.c_str(), r,
                    static_cast<std::ptrdiff_t>(i) - static_cast<std::ptrdiff_t>(at), unsigned(out[i].bits),
                    unsigned(want.bits));
    }
  }
  for (int r = 0; r < 2; ++r) {
    cudaFree(send[r]), cudaFree(recv[r]), cudaStreamDestroy(streams[r]);
  }
  const bool ok = err.empty() && wrong == 0;
  failures += !ok;
  std::printf(
      "%s %s%s\n", ok ? "ok   " : "WRONG", label.c_str(),
      err.empty() ? (wrong ? (": " + std::to_string(wrong) + " wrong").c_str() : "") : (": " + err).c_str());
}

template <class T, reduce_op Op>
void explicit_cases(std::vector<gpu::communicator>& comms, const char* type, const std::string& where) {
  for (std::size_t n : {std::size_t(1031), (std::size_t(1) << 20) + 3})
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      const std::string tag = where + " " + type + (Op == reduce_op::sum ? " sum" : " avg") +
                              " n=" + std::to_string(n) + " offset " + std::to_string(offset);
      check<T, Op>(comms, n, offset, tag + " ring/simple",
                   [](auto& c, const T* s, T* r, std::size_t k, auto st) {
                     gpu::all_reduce<algo::ring, proto::simple>(c, s, r, k, static_reduce_op<Op>{}, st);
                   });
      if (comms[0].why_not(proto_id::ll128).empty())
        check<T, Op>(comms, n, offset, tag + " ring/ll128",
                     [](auto& c, const T* s, T* r, std::size_t k, auto st) {
                       gpu::all_reduce<algo::ring, proto::ll128>(c, s, r, k, static_reduce_op<Op>{}, st);
                     });
    }
}

void all_cases(std::vector<gpu::communicator>& comms, const std::string& where) {
  explicit_cases<half_t, reduce_op::sum>(comms, "half", where);
  explicit_cases<half_t, reduce_op::avg>(comms, "half", where);
  explicit_cases<bfloat16_t, reduce_op::sum>(comms, "bfloat16", where);
  explicit_cases<bfloat16_t, reduce_op::avg>(comms, "bfloat16", where);
  for (std::size_t n : {std::size_t(8), std::size_t(1031), std::size_t(65536), (std::size_t(1) << 22) + 5})
    check<bfloat16_t, reduce_op::sum>(comms, n, 0, where + " bfloat16 sum automatic n=" + std::to_string(n),
                                      [](auto& c, const bfloat16_t* s, bfloat16_t* r, std::size_t k,
                                         auto st) { c.all_reduce(s, r, k, ops::sum, st); });
}

}  // namespace

int main() {
  if (const int rc = test::exit_code_without_gpu(); rc >= 0) return rc;
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  {
    const int devs[2] = {0, 0};
    auto comms = gpu::communicator::create_group(devs);
    all_cases(comms, "GPU 0 x2");
  }
  if (devices >= 2) {
    const int devs[2] = {0, 1};
    auto comms = gpu::communicator::create_group(devs);
    std::printf("GPUs 0 and 1: LL128 %s\n", comms[0].why_not(proto_id::ll128).empty()
                                                ? "allowed"
                                                : comms[0].why_not(proto_id::ll128).c_str());
    all_cases(comms, "GPUs 0,1");
  }
  std::printf("%s\n", failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}
