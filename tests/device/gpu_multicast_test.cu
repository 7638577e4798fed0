// nvls through an NVSwitch multicast object (gpu::options::multicast,
// collx/cuda/multicast.hpp): the switch reduces and stores each 16-byte pack
// (multimem.ld_reduce / multimem.st), the peers' memory the rest.
//
// On any GPU machine: a group of two ranks on one GPU refuses multicast when
// it is on (not_supported, naming the shared GPU) and goes without it when it
// is automatic, saying why. Where 2 or more GPUs offer multicast: groups on
// GPUs {0, 1}, … {0 … N-1} with multicast on run nvls all_reduce and
// reduce_scatter (out of place and in place) for float sum, avg and max (max
// is not the switch's: it goes through the peers), half and bfloat16 sums,
// int32 max, int64 and double sums, at counts that give unaligned heads and
// tails, a single element, and more than one staging buffer; every result
// against a host reference of small integers (exact in every type and
// order), with guard elements on both sides of every buffer. Then the time
// per call of nvls with and without the switch and of the ring at a few
// sizes (information, no threshold). Exits 77 where no group could use
// multicast (after the refusal checks), as without a GPU. Each thread group
// then registers windows from alloc_window, which it binds to a multicast
// object, and runs nvls all_reduce, reduce_scatter, all_gather and broadcast
// on them through the switch (no staging), every element and guard checked.
// With --procs
// (under collxrun, one process per GPU) the same cases on process ranks,
// whose multicast object rank 0 makes and the others import.
#include "gpu_test.cuh"

#include <collx/algo/nvls.hpp>
#include <collx/algo/ring.hpp>
#include <collx/cuda/communicator.hpp>
#include <collx/cuda/process.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

using namespace collx;

namespace {

constexpr std::size_t guard = 16;
int failures = 0;

void fail(const std::string& what) {
  std::printf("FAIL %s\n", what.c_str());
  ++failures;
}

double input(int r, std::size_t i) { return double(int((std::size_t(r) * 31 + i * 7) % 19) - 9); }

template <class T>
T to(double v) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(v);
  else return T(v);
}
template <class T>
double from(T v) {
  if constexpr (std::is_integral_v<T>) return static_cast<double>(v);
  else return static_cast<double>(v);
}

/// The expected element of rank r's recv.
template <class T, reduce_op Op>
T expected(bool scatter, int r, int P, std::size_t n, std::size_t i) {
  const std::size_t at = scatter ? std::size_t(r) * n + i : i;
  double acc = input(0, at);
  for (int q = 1; q < P; ++q) {
    const double v = input(q, at);
    if constexpr (Op == reduce_op::max) acc = v > acc ? v : acc;
    else acc += v;
  }
  if constexpr (Op == reduce_op::avg) return to<T>(double(float(acc) / float(P)));
  else return to<T>(acc);
}

template <class T, reduce_op Op>
void run_case(std::vector<gpu::communicator>& comms, bool scatter, std::size_t n, bool in_place,
              const char* type) {
  // Thread ranks: every rank of the group; process ranks: this process's.
  const int P = comms[0].size();
  const std::size_t send_n = scatter ? n * std::size_t(P) : n;
  const std::size_t recv_n = n;
  std::vector<T*> send(comms.size()), recv(comms.size());
  std::vector<cudaStream_t> st(comms.size());
  std::vector<T> sentinel(guard);
  std::memset(sentinel.data(), 0xA5, sizeof(T) * guard);
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const int r = comms[i].rank();
    CUDA_OK(cudaSetDevice(comms[i].device()));
    CUDA_OK(cudaStreamCreate(&st[i]));
    std::vector<T> host(send_n + 2 * guard);
    std::memcpy(host.data(), sentinel.data(), sizeof(T) * guard);
    std::memcpy(host.data() + guard + send_n, sentinel.data(), sizeof(T) * guard);
    for (std::size_t k = 0; k < send_n; ++k) host[guard + k] = to<T>(input(r, k));
    CUDA_OK(cudaMalloc(&send[i], host.size() * sizeof(T)));
    CUDA_OK(cudaMemcpy(send[i], host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    if (in_place) {
      recv[i] = send[i];
    } else {
      std::vector<T> out(recv_n + 2 * guard);
      std::memset(out.data(), 0xA5, out.size() * sizeof(T));
      CUDA_OK(cudaMalloc(&recv[i], out.size() * sizeof(T)));
      CUDA_OK(cudaMemcpy(recv[i], out.data(), out.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
  }
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const int r = comms[i].rank();
    CUDA_OK(cudaSetDevice(comms[i].device()));
    // In place: reduce_scatter's output is rank r's block of its input.
    T* d = recv[i] + guard + (in_place && scatter ? std::size_t(r) * n : 0);
    if (scatter)
      gpu::reduce_scatter<algo::nvls, proto::simple>(comms[i], send[i] + guard, d, n, static_reduce_op<Op>{},
                                                     st[i]);
    else
      gpu::all_reduce<algo::nvls, proto::simple>(comms[i], send[i] + guard, d, n, static_reduce_op<Op>{},
                                                 st[i]);
  }
  const std::string what = std::string(scatter ? "reduce_scatter " : "all_reduce ") + type + " op " +
                           std::to_string(int(Op)) + " P=" + std::to_string(P) + " n=" + std::to_string(n) +
                           (in_place ? " in place" : "");
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const int r = comms[i].rank();
    CUDA_OK(cudaSetDevice(comms[i].device()));
    try {
      comms[i].wait(st[i]);
    } catch (const error& e) {
      fail(what + ": rank " + std::to_string(r) + ": " + e.what());
      continue;
    }
    const std::size_t total = (in_place ? send_n : recv_n) + 2 * guard;
    std::vector<T> got(total);
    CUDA_OK(cudaMemcpy(got.data(), recv[i], total * sizeof(T), cudaMemcpyDeviceToHost));
    std::size_t wrong = 0, guards = 0;
    const std::size_t base = guard + (in_place && scatter ? std::size_t(r) * n : 0);
    for (std::size_t k = 0; k < n; ++k)
      wrong += from(got[base + k]) != from(expected<T, Op>(scatter, r, P, n, k));
    guards += std::memcmp(got.data(), sentinel.data(), sizeof(T) * guard) != 0;
    guards += std::memcmp(got.data() + total - guard, sentinel.data(), sizeof(T) * guard) != 0;
    if (wrong != 0 || guards != 0)
      fail(what + ": rank " + std::to_string(r) + ": " + std::to_string(wrong) + " wrong elements, " +
           std::to_string(guards) + " guards overwritten");
  }
  for (std::size_t i = 0; i < comms.size(); ++i) {
    CUDA_OK(cudaSetDevice(comms[i].device()));
    CUDA_OK(cudaStreamDestroy(st[i]));
    CUDA_OK(cudaFree(send[i]));
    if (!in_place) CUDA_OK(cudaFree(recv[i]));
  }
}

template <class T, reduce_op Op>
void cases(std::vector<gpu::communicator>& comms, const char* type) {
  // 1 element; heads and tails off a 16-byte boundary; more than one staging
  // buffer (segments), odd.
  for (std::size_t n :
       {std::size_t{1}, std::size_t{5}, std::size_t{1031}, std::size_t{77777}, (std::size_t{3} << 20) + 3})
    for (bool scatter : {false, true})
      for (bool in_place : {false, true}) run_case<T, Op>(comms, scatter, n, in_place, type);
  std::printf("ok   %s op %d on %d GPUs (%d failures so far)\n", type, int(Op), comms[0].size(), failures);
}

/// The refusals, on any machine with a GPU.
void refusals() {
  const std::vector<int> one_gpu{0, 0};
  gpu::options on;
  on.multicast = gpu::multicast_mode::on;
  try {
    (void)gpu::communicator::create_group(one_gpu, on);
    fail("two ranks on one GPU with multicast on: created");
  } catch (const error& e) {
    if (e.code() != status::not_supported || std::string(e.what()).find("share a GPU") == std::string::npos)
      fail(std::string("two ranks on one GPU with multicast on: ") + e.what());
  }
  auto comms = gpu::communicator::create_group(one_gpu);
  if (comms[0].multicast() || comms[0].why_no_multicast().empty())
    fail("two ranks on one GPU, automatic: multicast() " + std::to_string(comms[0].multicast()) + ", why '" +
         comms[0].why_no_multicast() + "'");
  gpu::options bad;
  bad.multicast = static_cast<gpu::multicast_mode>(7);
  try {
    (void)gpu::communicator::create_group(one_gpu, bad);
    fail("multicast mode 7: accepted");
  } catch (const error& e) {
    if (e.code() != status::invalid_argument) fail(std::string("multicast mode 7: ") + e.what());
  }
  std::printf("ok   refusals (%d failures so far)\n", failures);
}

template <class F>
double time_us(std::vector<gpu::communicator>& comms, std::vector<float*>& buf, std::size_t n, F call) {
  std::vector<cudaStream_t> st(comms.size());
  for (std::size_t i = 0; i < comms.size(); ++i) {
    CUDA_OK(cudaSetDevice(comms[i].device()));
    CUDA_OK(cudaStreamCreate(&st[i]));
  }
  auto round = [&](int calls) {
    for (int c = 0; c < calls; ++c)
      for (std::size_t i = 0; i < comms.size(); ++i) {
        CUDA_OK(cudaSetDevice(comms[i].device()));
        call(comms[i], buf[i], buf[i] + n, n, st[i]);
      }
    for (std::size_t i = 0; i < comms.size(); ++i) {
      CUDA_OK(cudaSetDevice(comms[i].device()));
      comms[i].wait(st[i]);
    }
  };
  round(5);
  const int calls = n >= (std::size_t{16} << 20) / sizeof(float) ? 10 : 100;
  const auto t0 = std::chrono::steady_clock::now();
  round(calls);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  for (std::size_t i = 0; i < comms.size(); ++i) {
    CUDA_OK(cudaSetDevice(comms[i].device()));
    CUDA_OK(cudaStreamDestroy(st[i]));
  }
  return us / calls;
}

void timings(const std::vector<int>& devices) {
  gpu::options off;
  off.multicast = gpu::multicast_mode::off;
  gpu::options on;
  on.multicast = gpu::multicast_mode::on;
  auto with = gpu::communicator::create_group(devices, on);
  auto without = gpu::communicator::create_group(devices, off);
  const std::size_t most = (std::size_t{256} << 20) / sizeof(float);
  std::vector<float*> buf(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    CUDA_OK(cudaSetDevice(devices[i]));
    CUDA_OK(cudaMalloc(&buf[i], 2 * most * sizeof(float)));
    CUDA_OK(cudaMemset(buf[i], 0, 2 * most * sizeof(float)));
  }
  auto nvls = [](gpu::communicator& c, float* s, float* d, std::size_t n, cudaStream_t st) {
    gpu::all_reduce<algo::nvls, proto::simple>(c, s, d, n, ops::sum, st);
  };
  auto ring = [](gpu::communicator& c, float* s, float* d, std::size_t n, cudaStream_t st) {
    gpu::all_reduce<algo::ring, proto::simple>(c, s, d, n, ops::sum, st);
  };
  for (std::size_t bytes :
       {std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{16} << 20, std::size_t{256} << 20}) {
    const std::size_t n = bytes / sizeof(float);
    const double a = time_us(with, buf, n, nvls), b = time_us(without, buf, n, nvls),
                 c = time_us(without, buf, n, ring);
    const double bus = 2.0 * double(devices.size() - 1) / double(devices.size()) * double(bytes) / 1e3;
    std::printf(
        "info all_reduce float %zu GPUs %zu B: nvls multicast %.1f us (busbw %.1f GB/s), nvls peers %.1f us "
        "(%.1f), "
        "ring/simple %.1f us (%.1f)\n",
        devices.size(), bytes, a, bus / a, b, bus / b, c, bus / c);
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    CUDA_OK(cudaSetDevice(devices[i]));
    CUDA_OK(cudaFree(buf[i]));
  }
}

/// Registered windows from alloc_window, bound to a multicast object by a
/// thread group with multicast: nvls reduces from and stores into the
/// buffers themselves through the window's multicast address
/// (algo::nvls::through_switch). Float sums (small integers: exact), every
/// collective the switch serves, out of place and in place; each rank's
/// call at the same offset (guard elements) of its window on every rank;
/// every element of every window checked, guards included.
template <coll C>
void window_case(std::vector<gpu::communicator>& comms, std::size_t n, bool in_place,
                 bool automatic = false) {
  const int P = comms[0].size();
  const std::size_t Pz = static_cast<std::size_t>(P);
  const std::size_t send_n = C == coll::reduce_scatter ? n * Pz : n,
                    recv_n = C == coll::all_gather ? n * Pz : n;
  const std::size_t whole = (in_place ? std::max(send_n, recv_n) : 0) + 2 * guard;  // in place: one window
  const std::size_t send_len = in_place ? whole : send_n + 2 * guard,
                    recv_len = in_place ? whole : recv_n + 2 * guard;
  const int root = P - 1;
  std::string what = std::string("window ") + name(C) + " P=" + std::to_string(P) +
                     " n=" + std::to_string(n) + (in_place ? " in place" : "") +
                     (automatic ? " automatic" : "");
  auto value = [&](int q, std::size_t k) { return float(input(q, k)); };
  struct rank_memory {
    std::unique_ptr<gpu::window_memory> send, recv;
    int send_window = -1, recv_window = -1;
    cudaStream_t stream = nullptr;
  };
  std::vector<rank_memory> m(comms.size());
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const int r = comms[i].rank();
    CUDA_OK(cudaSetDevice(comms[i].device()));
    CUDA_OK(cudaStreamCreate(&m[i].stream));
    m[i].send = comms[i].alloc_window(send_len * sizeof(float));
    if (!in_place) m[i].recv = comms[i].alloc_window(recv_len * sizeof(float));
    // Sentinels everywhere, then the input where this rank's call reads it.
    std::vector<float> host(m[i].send->bytes() / sizeof(float));
    std::memset(host.data(), 0xA5, host.size() * sizeof(float));
    // Element k of rank r's input is value(r, first + k): all_gather's blocks
    // are numbered as they land in recv.
    const std::size_t first = C == coll::all_gather ? std::size_t(r) * n : 0;
    const std::size_t at = guard + (in_place && C == coll::all_gather ? first : 0);
    if (C != coll::broadcast || r == root)
      for (std::size_t k = 0; k < send_n; ++k) host[at + k] = value(r, first + k);
    CUDA_OK(cudaMemcpy(m[i].send->data(), host.data(), m[i].send->bytes(), cudaMemcpyHostToDevice));
    if (!in_place) {
      std::vector<float> out(m[i].recv->bytes() / sizeof(float));
      std::memset(out.data(), 0xA5, out.size() * sizeof(float));
      CUDA_OK(cudaMemcpy(m[i].recv->data(), out.data(), m[i].recv->bytes(), cudaMemcpyHostToDevice));
    }
  }
  // Registered in the same order on every rank: the same window numbers.
  for (std::size_t i = 0; i < comms.size(); ++i) {
    m[i].send_window = comms[i].register_buffer(m[i].send->data(), m[i].send->bytes());
    if (!in_place) m[i].recv_window = comms[i].register_buffer(m[i].recv->data(), m[i].recv->bytes());
  }
  for (std::size_t i = 0; i < comms.size(); ++i)
    if (!comms[i].window_bound(m[i].send_window) || (!in_place && !comms[i].window_bound(m[i].recv_window)))
      fail(what +
           ": a window from alloc_window was not bound to a multicast object (COLLX_DEBUG=1 says why)");
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const int r = comms[i].rank();
    CUDA_OK(cudaSetDevice(comms[i].device()));
    float* s = static_cast<float*>(m[i].send->data()) + guard;
    float* d = in_place ? s : static_cast<float*>(m[i].recv->data()) + guard;
    // The call's own send and recv (in place: this rank's block or the whole).
    const float* send = C == coll::all_gather && in_place ? d + std::size_t(r) * n : s;
    float* recv = C == coll::reduce_scatter && in_place ? s + std::size_t(r) * n : d;
    if (automatic) {
      // What the choice takes for these buffers (the same on every rank).
      const std::size_t bytes = (C == coll::all_reduce || C == coll::broadcast ? n : n * Pz) * sizeof(float);
      const variant_choice v = comms[i].choose(C, bytes, comms[i].call_of<C>(send, recv, n, ops::sum, root));
      if (i == 0) what += std::string(" (") + name(v.algo) + "/" + name(v.proto) + ")";
      if constexpr (C == coll::all_reduce) comms[i].all_reduce(send, recv, n, ops::sum, m[i].stream);
      else if constexpr (C == coll::reduce_scatter)
        comms[i].reduce_scatter(send, recv, n, ops::sum, m[i].stream);
      else if constexpr (C == coll::all_gather) comms[i].all_gather(send, recv, n, m[i].stream);
      else comms[i].broadcast(send, recv, n, root, m[i].stream);
    } else if constexpr (C == coll::all_reduce) {
      gpu::all_reduce<algo::nvls, proto::simple>(comms[i], send, recv, n, ops::sum, m[i].stream);
    } else if constexpr (C == coll::reduce_scatter) {
      gpu::reduce_scatter<algo::nvls, proto::simple>(comms[i], send, recv, n, ops::sum, m[i].stream);
    } else if constexpr (C == coll::all_gather) {
      gpu::all_gather<algo::nvls, proto::simple>(comms[i], send, recv, n, m[i].stream);
    } else {
      gpu::broadcast<algo::nvls, proto::simple>(comms[i], send, recv, n, root, m[i].stream);
    }
  }
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const int r = comms[i].rank();
    CUDA_OK(cudaSetDevice(comms[i].device()));
    try {
      comms[i].wait(m[i].stream);
    } catch (const error& e) {
      fail(what + ": rank " + std::to_string(r) + ": " + e.what());
      continue;
    }
    const gpu::window_memory& out = in_place ? *m[i].send : *m[i].recv;
    std::vector<float> got(out.bytes() / sizeof(float));
    CUDA_OK(cudaMemcpy(got.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost));
    // Where the result lies, and its expected elements.
    const std::size_t lo = guard + (in_place && C == coll::reduce_scatter ? std::size_t(r) * n : 0);
    const std::size_t len = C == coll::all_gather ? n * Pz : n;
    std::size_t wrong = 0, guards = 0;
    for (std::size_t k = 0; k < len; ++k) {
      float want = 0;
      if constexpr (C == coll::all_reduce || C == coll::reduce_scatter)
        for (int q = 0; q < P; ++q)
          want += value(q, (C == coll::reduce_scatter ? std::size_t(r) * n : 0) + k);
      else if constexpr (C == coll::all_gather) want = value(int(k / n), k);
      else want = value(root, k);
      wrong += got[lo + k] != want;
    }
    // Outside the result: what was there before (sentinels, or in place the
    // rest of the input, which reduce_scatter leaves and nothing else writes).
    std::vector<float> before(got.size());
    std::memset(before.data(), 0xA5, before.size() * sizeof(float));
    for (std::size_t k = 0; k < got.size(); ++k) {
      if (k >= lo && k < lo + len) continue;
      const bool input_left = in_place && C == coll::reduce_scatter && k >= guard && k < guard + send_n;
      const float keep = input_left ? value(r, k - guard) : before[k];
      guards += std::memcmp(&got[k], &keep, sizeof(float)) != 0;
    }
    if (wrong != 0 || guards != 0)
      fail(what + ": rank " + std::to_string(r) + ": " + std::to_string(wrong) + " wrong elements, " +
           std::to_string(guards) + " elements outside the result changed");
  }
  if (automatic) std::printf("     %s\n", what.c_str());
  for (std::size_t i = 0; i < comms.size(); ++i) {
    CUDA_OK(cudaSetDevice(comms[i].device()));
    CUDA_OK(cudaStreamDestroy(m[i].stream));
    comms[i].deregister_buffer(m[i].send_window);
    if (!in_place) comms[i].deregister_buffer(m[i].recv_window);
  }
}

void windows(std::vector<gpu::communicator>& comms) {
  for (std::size_t n : {std::size_t{1}, std::size_t{1031}, (std::size_t{1} << 20) + 3})
    for (bool in_place : {false, true}) {
      window_case<coll::all_reduce>(comms, n, in_place);
      window_case<coll::reduce_scatter>(comms, n, in_place);
      window_case<coll::all_gather>(comms, n, in_place);
      window_case<coll::broadcast>(comms, n, in_place);
    }
  // The automatic choice on the same windows, up to 64 MiB (where the
  // H100 preset takes nvls for a bound all_reduce on 8 GPUs): right results
  // whatever it takes.
  for (std::size_t n : {std::size_t{1031}, (std::size_t{1} << 24) + 5})
    for (bool in_place : {false, true}) {
      window_case<coll::all_reduce>(comms, n, in_place, true);
      window_case<coll::reduce_scatter>(comms, n, in_place, true);
      window_case<coll::all_gather>(comms, n, in_place, true);
      window_case<coll::broadcast>(comms, n, in_place, true);
    }
  std::printf("ok   registered windows through the switch on %d GPUs (%d failures so far)\n", comms[0].size(),
              failures);
}

template <class Comms>
void every_type(Comms& comms) {
  cases<float, reduce_op::sum>(comms, "float");
  cases<float, reduce_op::avg>(comms, "float");
  cases<float, reduce_op::max>(comms, "float");
  cases<half_t, reduce_op::sum>(comms, "half");
  cases<bfloat16_t, reduce_op::sum>(comms, "bfloat16");
  cases<std::int32_t, reduce_op::max>(comms, "int32");
  cases<std::int64_t, reduce_op::sum>(comms, "int64");
  cases<double, reduce_op::sum>(comms, "double");
}

/// Process ranks (collxrun -n P ... --procs, one GPU each): the object made
/// by rank 0 and imported by the others. Every rank checks its own results;
/// 77 on every rank where the group cannot use multicast.
int process_ranks() {
  gpu::options on;
  on.multicast = gpu::multicast_mode::on;
  std::vector<gpu::communicator> comms;
  try {
    comms.push_back(gpu::from_env(on));
  } catch (const error& e) {
    if (e.code() != status::not_supported) throw;
    std::printf("no multicast for these process ranks: %s: skipping (77)\n", e.what());
    return 77;
  }
  if (!comms[0].multicast()) fail("process ranks, multicast on, group made, multicast() false");
  every_type(comms);
  std::printf("%s: rank %d of %d, %d failures\n", failures ? "FAILED" : "PASSED", comms[0].rank(),
              comms[0].size(), failures);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (int code = test::exit_code_without_gpu(); code >= 0) return code;
  try {
    if (argc > 1 && std::strcmp(argv[1], "--procs") == 0) return process_ranks();
    refusals();
    int ndev = 0;
    CUDA_OK(cudaGetDeviceCount(&ndev));
    int groups = 0;
    std::vector<int> largest;
    for (int k = 2; k <= ndev; ++k) {
      std::vector<int> devices;
      for (int d = 0; d < k; ++d) devices.push_back(d);
      gpu::options on;
      on.multicast = gpu::multicast_mode::on;
      std::vector<gpu::communicator> comms;
      try {
        comms = gpu::communicator::create_group(devices, on);
      } catch (const error& e) {
        if (e.code() != status::not_supported) throw;
        std::printf("no multicast on %d GPUs: %s\n", k, e.what());
        break;
      }
      if (!comms[0].multicast()) fail("multicast on, group made, multicast() false");
      ++groups;
      largest = devices;
      every_type(comms);
      windows(comms);
    }
    if (groups > 0 && failures == 0) timings(largest);
    if (failures != 0) {
      std::printf("FAILED: %d failures\n", failures);
      return 1;
    }
    if (groups == 0) {
      std::printf("refusals passed; no group of GPUs offers multicast here: skipping the rest (77)\n");
      return 77;
    }
    std::printf("PASSED: multicast on %d group(s)\n", groups);
    return 0;
  } catch (const error& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}
