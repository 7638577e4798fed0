// Registered user buffers on a GPU (gpu::communicator::register_buffer):
// nvls's single copy reads peers' send buffers and writes into their recv
// buffers in place. 2, 3 and 4 ranks on GPU 0 (and 2 ranks on GPUs 0 and 1
// where there are two): all_reduce, reduce_scatter, all_gather, broadcast (out
// of place and in place, whose root writes into the receivers' buffers) and
// all_to_all through nvls/Simple, registered and not (staged), every result
// against a host reference of small integers (exact float sums), guard
// elements on both sides of every buffer, and out-of-place inputs unchanged.
// Then a call registered on rank 0 but not on rank 1: rank 0 must fail with
// status::mismatch (rank 1, which stages, stops at its deadline). Prints the
// time per call of registered nvls, staged nvls and the ring (LL) at a few
// sizes (information, no threshold). Exits 77 without a GPU.
#include "gpu_test.cuh"

#include <collx/algo/nvls.hpp>
#include <collx/cuda/communicator.hpp>
#include <collx/cuda/process.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace collx;

namespace {

constexpr std::size_t guard = 16;
constexpr float sentinel = -12345.5f;
int failures = 0;

float input(int r, std::size_t i) { return float(int((std::size_t(r) * 31 + i * 7) % 19) - 9); }

/// Every rank's buffers of one case, in device memory with guards.
struct rank_buffers {
  float* send = nullptr;  // guard + data + guard
  float* recv = nullptr;
  std::size_t send_n = 0, recv_n = 0;
  bool in_place = false;
  int windows[2] = {-1, -1};
};

enum class kind { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all };
const char* name_of(kind k) {
  switch (k) {
    case kind::all_reduce: return "all_reduce";
    case kind::reduce_scatter: return "reduce_scatter";
    case kind::all_gather: return "all_gather";
    case kind::broadcast: return "broadcast";
    default: return "all_to_all";
  }
}

/// The expected recv of rank r (count n, P ranks, root 1 for broadcast).
std::vector<float> expected(kind k, int r, int P, std::size_t n) {
  std::vector<float> out;
  switch (k) {
    case kind::all_reduce:
      for (std::size_t i = 0; i < n; ++i) {
        float s = 0;
        for (int q = 0; q < P; ++q) s += input(q, i);
        out.push_back(s);
      }
      break;
    case kind::reduce_scatter:
      for (std::size_t i = 0; i < n; ++i) {
        float s = 0;
        for (int q = 0; q < P; ++q) s += input(q, std::size_t(r) * n + i);
        out.push_back(s);
      }
      break;
    case kind::all_gather:
      for (int q = 0; q < P; ++q)
        for (std::size_t i = 0; i < n; ++i) out.push_back(input(q, i));
      break;
    case kind::broadcast:
      for (std::size_t i = 0; i < n; ++i) out.push_back(input(1 % P, i));
      break;
    case kind::all_to_all:
      for (int q = 0; q < P; ++q)
        for (std::size_t i = 0; i < n; ++i) out.push_back(input(q, std::size_t(r) * n + i));
      break;
  }
  return out;
}

std::size_t send_count(kind k, std::size_t n, int P) {
  return k == kind::reduce_scatter || k == kind::all_to_all ? n * std::size_t(P) : n;
}
std::size_t recv_count(kind k, std::size_t n, int P) {
  return k == kind::all_gather || k == kind::all_to_all ? n * std::size_t(P) : n;
}

void enqueue(kind k, gpu::communicator& c, const float* s, float* d, std::size_t n, cudaStream_t st) {
  using A = algo::nvls;
  using S = proto::simple;
  switch (k) {
    case kind::all_reduce: gpu::all_reduce<A, S>(c, s, d, n, ops::sum, st); break;
    case kind::reduce_scatter: gpu::reduce_scatter<A, S>(c, s, d, n, ops::sum, st); break;
    case kind::all_gather: gpu::all_gather<A, S>(c, s, d, n, st); break;
    case kind::broadcast: gpu::broadcast<A, S>(c, s, d, n, 1 % c.size(), st); break;
    case kind::all_to_all: gpu::all_to_all<A, S>(c, s, d, n, st); break;
  }
}

/// Runs one case on every rank; registered: every rank's buffers are windows.
void run_case(std::vector<gpu::communicator>& comms, kind k, std::size_t n, bool in_place, bool registered,
              const std::string& where) {
  const int P = int(comms.size());
  std::vector<rank_buffers> b(comms.size());
  std::vector<cudaStream_t> streams(comms.size());
  std::vector<std::vector<float>> send_host(comms.size());
  const bool can_in_place = k == kind::all_reduce || k == kind::broadcast || k == kind::all_gather;
  if (in_place && !can_in_place) return;
  for (int r = 0; r < P; ++r) {
    auto& x = b[std::size_t(r)];
    x.in_place = in_place;
    x.send_n = send_count(k, n, P), x.recv_n = recv_count(k, n, P);
    CUDA_OK(cudaSetDevice(comms[std::size_t(r)].device()));
    CUDA_OK(cudaStreamCreateWithFlags(&streams[std::size_t(r)], cudaStreamNonBlocking));
    std::vector<float> recv(x.recv_n + 2 * guard, sentinel);
    std::vector<float> send(x.send_n + 2 * guard, sentinel);
    for (std::size_t i = 0; i < x.send_n; ++i) send[guard + i] = input(r, i);
    if (in_place) {
      // NCCL's conventions: all_gather's input is the rank's block of recv.
      const std::size_t at = k == kind::all_gather ? guard + std::size_t(r) * n : guard;
      for (std::size_t i = 0; i < x.send_n; ++i) recv[at + i] = input(r, i);
    }
    CUDA_OK(cudaMalloc(&x.recv, recv.size() * sizeof(float)));
    CUDA_OK(cudaMemcpy(x.recv, recv.data(), recv.size() * sizeof(float), cudaMemcpyHostToDevice));
    if (!in_place) {
      CUDA_OK(cudaMalloc(&x.send, send.size() * sizeof(float)));
      CUDA_OK(cudaMemcpy(x.send, send.data(), send.size() * sizeof(float), cudaMemcpyHostToDevice));
      send_host[std::size_t(r)] = send;
    }
  }
  std::string err;
  try {
    if (registered)
      for (int r = 0; r < P; ++r) {
        auto& x = b[std::size_t(r)];
        x.windows[0] = comms[std::size_t(r)].register_buffer(x.recv, (x.recv_n + 2 * guard) * sizeof(float));
        if (!in_place)
          x.windows[1] =
              comms[std::size_t(r)].register_buffer(x.send, (x.send_n + 2 * guard) * sizeof(float));
      }
    for (int r = 0; r < P; ++r) {
      auto& x = b[std::size_t(r)];
      float* recv = x.recv + guard;
      const float* send =
          in_place ? (k == kind::all_gather ? recv + std::size_t(r) * n : recv) : x.send + guard;
      enqueue(k, comms[std::size_t(r)], send, recv, n, streams[std::size_t(r)]);
    }
    for (int r = 0; r < P; ++r) comms[std::size_t(r)].wait(streams[std::size_t(r)]);
  } catch (const std::exception& e) {
    err = e.what();
  }
  std::size_t wrong = 0;
  for (int r = 0; r < P && err.empty(); ++r) {
    auto& x = b[std::size_t(r)];
    std::vector<float> got(x.recv_n + 2 * guard);
    CUDA_OK(cudaMemcpy(got.data(), x.recv, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    const std::vector<float> want = expected(k, r, P, n);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const float w = i >= guard && i < guard + x.recv_n ? want[i - guard] : sentinel;
      if (got[i] != w && wrong++ < 5)
        std::printf("  rank %d recv[%zd]: got %g, want %g\n", r, std::ptrdiff_t(i) - std::ptrdiff_t(guard),
                    double(got[i]), double(w));
    }
    if (!in_place) {
      std::vector<float> s(x.send_n + 2 * guard);
      CUDA_OK(cudaMemcpy(s.data(), x.send, s.size() * sizeof(float), cudaMemcpyDeviceToHost));
      if (s != send_host[std::size_t(r)] && wrong++ < 5) std::printf("  rank %d: send buffer changed\n", r);
    }
  }
  for (int r = 0; r < P; ++r) {
    auto& x = b[std::size_t(r)];
    for (int w : x.windows)
      if (w >= 0) comms[std::size_t(r)].deregister_buffer(w);
    cudaFree(x.send), cudaFree(x.recv), cudaStreamDestroy(streams[std::size_t(r)]);
  }
  const bool ok = err.empty() && wrong == 0;
  failures += !ok;
  std::printf("%s %s P=%d %s n=%zu %s %s%s\n", ok ? "ok   " : "WRONG", where.c_str(), P, name_of(k), n,
              in_place ? "in place" : "out of place", registered ? "registered" : "staged",
              err.empty() ? (wrong ? " (wrong values)" : "") : (": " + err).c_str());
}

/// Rank 0 registered, rank 1 not: rank 0 fails with mismatch and raises the
/// group's abort word, so rank 1 (which stages) stops with aborted long
/// before its 20 s deadline, and its wait() names rank 0's failure.
void unregistered_peer() {
  const int devs[2] = {0, 0};
  gpu::options opt;
  opt.timeout_ms = 20'000;
  auto comms = gpu::communicator::create_group(devs, opt);
  constexpr std::size_t n = 4096;
  float *send[2], *recv[2];
  cudaStream_t st[2];
  for (int r = 0; r < 2; ++r) {
    CUDA_OK(cudaMalloc(&send[r], n * sizeof(float)));
    CUDA_OK(cudaMalloc(&recv[r], n * sizeof(float)));
    CUDA_OK(cudaMemset(send[r], 0, n * sizeof(float)));
    CUDA_OK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
  }
  comms[0].register_buffer(send[0], n * sizeof(float));
  comms[0].register_buffer(recv[0], n * sizeof(float));
  // Rank 1 registers other memory, so that the windows are complete, but
  // calls with buffers outside them.
  float* spare = nullptr;
  CUDA_OK(cudaMalloc(&spare, 2 * n * sizeof(float)));
  comms[1].register_buffer(spare, n * sizeof(float));
  comms[1].register_buffer(spare + n, n * sizeof(float));
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r)
    gpu::all_reduce<algo::nvls, proto::simple>(comms[r], send[r], recv[r], n, ops::sum, st[r]);
  for (int r = 0; r < 2; ++r) CUDA_OK(cudaStreamSynchronize(st[r]));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const status s0 = comms[0].error(), s1 = comms[1].error();
  std::string said;
  try {
    comms[1].wait(st[1]);
  } catch (const std::exception& e) {
    said = e.what();
  }
  const bool ok = s0 == status::mismatch && s1 == status::aborted && ms < 10'000 &&
                  said.find("rank 0's collective failed: mismatched call") != std::string::npos;
  failures += !ok;
  std::printf("%s a call registered on rank 0 only: rank 0 %s, rank 1 %s after %.0f ms; rank 1's wait: %s\n",
              ok ? "ok   " : "WRONG", to_string(s0), to_string(s1), ms, said.c_str());
  for (int r = 0; r < 2; ++r) cudaFree(send[r]), cudaFree(recv[r]), cudaStreamDestroy(st[r]);
  cudaFree(spare);
}

__global__ void add_one(float* x, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    x[i] += 1.0f;
}

/// Registered buffers in a CUDA graph: each rank captures {input += 1; nvls
/// all_reduce of registered buffers} and the graphs are replayed together
/// 1,000 times; after k replays every element is the sum of the inputs plus
/// P·k (a replay that skipped, read a stale peer or ran on stale counters
/// shows in the value or as a timeout). n: one-shot on 2 ranks, two-shot on 3.
void graph_replays(std::vector<gpu::communicator>& comms, std::size_t n, int replays) {
  const int P = int(comms.size());
  std::vector<float*> in(comms.size()), out(comms.size());
  std::vector<cudaStream_t> st(comms.size());
  std::vector<cudaGraphExec_t> exec(comms.size(), nullptr);
  std::vector<int> windows;
  std::string err;
  std::size_t wrong = 0;
  try {
    for (int r = 0; r < P; ++r) {
      const auto i = std::size_t(r);
      CUDA_OK(cudaSetDevice(comms[i].device()));
      CUDA_OK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
      CUDA_OK(cudaMalloc(&in[i], n * sizeof(float)));
      CUDA_OK(cudaMalloc(&out[i], n * sizeof(float)));
      std::vector<float> h(n);
      for (std::size_t k = 0; k < n; ++k) h[k] = input(r, k);
      CUDA_OK(cudaMemcpy(in[i], h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      windows.push_back(comms[i].register_buffer(in[i], n * sizeof(float)));
      windows.push_back(comms[i].register_buffer(out[i], n * sizeof(float)));
    }
    // A first call outside the capture: the stream's device is asked once.
    for (int r = 0; r < P; ++r)
      gpu::all_reduce<algo::nvls, proto::simple>(comms[std::size_t(r)], in[std::size_t(r)],
                                                 out[std::size_t(r)], n, ops::sum, st[std::size_t(r)]);
    for (int r = 0; r < P; ++r) {
      const auto i = std::size_t(r);
      CUDA_OK(cudaStreamBeginCapture(st[i], cudaStreamCaptureModeThreadLocal));
      add_one<<<4, 256, 0, st[i]>>>(in[i], n);
      gpu::all_reduce<algo::nvls, proto::simple>(comms[i], in[i], out[i], n, ops::sum, st[i]);
      cudaGraph_t g = nullptr;
      CUDA_OK(cudaStreamEndCapture(st[i], &g));
      CUDA_OK(cudaGraphInstantiate(&exec[i], g, 0));
      CUDA_OK(cudaGraphDestroy(g));
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < replays; ++k)
      for (int r = 0; r < P; ++r) CUDA_OK(cudaGraphLaunch(exec[std::size_t(r)], st[std::size_t(r)]));
    for (int r = 0; r < P; ++r) comms[std::size_t(r)].wait(st[std::size_t(r)]);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "info graph: %d replays of {add, registered nvls all_reduce of %zu floats} on %d ranks: %.2f us per "
        "replay\n",
        replays, n, P, us / replays);
    for (int r = 0; r < P; ++r) {
      std::vector<float> h(n);
      CUDA_OK(cudaMemcpy(h.data(), out[std::size_t(r)], n * sizeof(float), cudaMemcpyDeviceToHost));
      for (std::size_t k = 0; k < n; ++k) {
        float want = float(P) * float(replays);
        for (int q = 0; q < P; ++q) want += input(q, k);
        wrong += h[k] != want;
      }
    }
  } catch (const std::exception& e) {
    err = e.what();
  }
  for (int r = 0; r < P; ++r) {
    const auto i = std::size_t(r);
    if (exec[i]) cudaGraphExecDestroy(exec[i]);
    if (windows.size() > 2 * i + 1) {
      comms[i].deregister_buffer(windows[2 * i]);
      comms[i].deregister_buffer(windows[2 * i + 1]);
    }
    cudaFree(in[i]), cudaFree(out[i]), cudaStreamDestroy(st[i]);
  }
  const bool ok = err.empty() && wrong == 0;
  failures += !ok;
  std::printf("%s graph of registered nvls all_reduce, P=%d n=%zu, %d replays%s%s\n", ok ? "ok   " : "WRONG",
              P, n, replays, wrong ? (" (" + std::to_string(wrong) + " wrong)").c_str() : "",
              err.empty() ? "" : (": " + err).c_str());
}

/// register_buffer and deregister_buffer refuse what they cannot use.
void misuse() {
  const int devs[2] = {0, 0};
  auto comms = gpu::communicator::create_group(devs);
  std::vector<float> host(64);
  float* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, 64 * sizeof(float)));
  auto refused = [&](const char* what, auto&& call, const char* words) {
    std::string msg;
    try {
      call();
    } catch (const std::exception& e) {
      msg = e.what();
    }
    const bool ok = msg.find(words) != std::string::npos;
    failures += !ok;
    std::printf("%s %s: %s\n", ok ? "ok   " : "WRONG", what, msg.empty() ? "(accepted)" : msg.c_str());
  };
  refused(
      "host memory", [&] { comms[0].register_buffer(host.data(), 64 * sizeof(float)); }, "host memory");
  refused(
      "0 bytes", [&] { comms[0].register_buffer(dev, 0); }, "bytes is 0");
  refused(
      "a window never registered", [&] { comms[0].deregister_buffer(3); }, "not registered");
  const int w = comms[0].register_buffer(dev, 64 * sizeof(float));
  comms[0].deregister_buffer(w);
  refused(
      "a window deregistered twice", [&] { comms[0].deregister_buffer(w); }, "not registered");
  cudaFree(dev);
}

/// Microseconds per all_reduce of n floats on every rank (20 back to back).
double time_calls(
    std::vector<gpu::communicator>& comms, std::size_t n,
    const std::function<void(gpu::communicator&, const float*, float*, std::size_t, cudaStream_t)>& call,
    bool registered) {
  const int P = int(comms.size());
  std::vector<float*> s(comms.size()), d(comms.size());
  std::vector<cudaStream_t> st(comms.size());
  std::vector<int> w;
  for (int r = 0; r < P; ++r) {
    CUDA_OK(cudaSetDevice(comms[std::size_t(r)].device()));
    CUDA_OK(cudaMalloc(&s[std::size_t(r)], n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d[std::size_t(r)], n * sizeof(float)));
    CUDA_OK(cudaMemset(s[std::size_t(r)], 0, n * sizeof(float)));
    CUDA_OK(cudaStreamCreateWithFlags(&st[std::size_t(r)], cudaStreamNonBlocking));
    if (registered) {
      w.push_back(comms[std::size_t(r)].register_buffer(s[std::size_t(r)], n * sizeof(float)));
      w.push_back(comms[std::size_t(r)].register_buffer(d[std::size_t(r)], n * sizeof(float)));
    }
  }
  auto round = [&](int calls) {
    for (int i = 0; i < calls; ++i)
      for (int r = 0; r < P; ++r)
        call(comms[std::size_t(r)], s[std::size_t(r)], d[std::size_t(r)], n, st[std::size_t(r)]);
    for (int r = 0; r < P; ++r) comms[std::size_t(r)].wait(st[std::size_t(r)]);
  };
  round(5);
  const auto t0 = std::chrono::steady_clock::now();
  round(20);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 20;
  for (int r = 0; r < P; ++r) {
    if (registered) {
      comms[std::size_t(r)].deregister_buffer(w[std::size_t(2 * r)]);
      comms[std::size_t(r)].deregister_buffer(w[std::size_t(2 * r + 1)]);
    }
    cudaFree(s[std::size_t(r)]), cudaFree(d[std::size_t(r)]), cudaStreamDestroy(st[std::size_t(r)]);
  }
  return us;
}

void timings(std::vector<gpu::communicator>& comms, const std::string& where) {
  for (std::size_t n : {std::size_t(2), std::size_t(1024), std::size_t(65536), std::size_t(1) << 20}) {
    auto nvls = [](gpu::communicator& c, const float* s, float* d, std::size_t k, cudaStream_t st) {
      gpu::all_reduce<algo::nvls, proto::simple>(c, s, d, k, ops::sum, st);
    };
    auto ring = [](gpu::communicator& c, const float* s, float* d, std::size_t k, cudaStream_t st) {
      gpu::all_reduce<algo::ring, proto::ll>(c, s, d, k, ops::sum, st);
    };
    std::printf(
        "info %s P=%zu all_reduce %zu B: nvls registered %.1f us, nvls staged %.1f us, ring/LL %.1f us\n",
        where.c_str(), comms.size(), n * sizeof(float), time_calls(comms, n, nvls, true),
        time_calls(comms, n, nvls, false), time_calls(comms, n, ring, false));
  }
}

void all_cases(std::vector<gpu::communicator>& comms, const std::string& where) {
  for (kind k : {kind::all_reduce, kind::reduce_scatter, kind::all_gather, kind::broadcast, kind::all_to_all})
    for (std::size_t n : {std::size_t(1), std::size_t(1031), (std::size_t(1) << 18) + 3})
      for (bool in_place : {false, true})
        for (bool registered : {true, false}) run_case(comms, k, n, in_place, registered, where);
}

/// Process ranks (collxrun -n P ... --procs): each process is one rank; its
/// buffers are registered through CUDA IPC handles. Every rank checks its own
/// result; the exit code is 1 where any rank found a wrong one.
int process_ranks() {
  gpu::communicator c = gpu::from_env();
  const int P = c.size(), r = c.rank();
  CUDA_OK(cudaSetDevice(c.device()));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (kind k : {kind::all_reduce, kind::reduce_scatter, kind::all_gather, kind::broadcast, kind::all_to_all})
    for (std::size_t n : {std::size_t(1031), (std::size_t(1) << 18) + 3})
      for (bool registered : {true, false}) {
        const std::size_t sn = send_count(k, n, P), rn = recv_count(k, n, P);
        std::vector<float> send(sn + 2 * guard, sentinel), recv(rn + 2 * guard, sentinel);
        for (std::size_t i = 0; i < sn; ++i) send[guard + i] = input(r, i);
        float *ds = nullptr, *dr = nullptr;
        CUDA_OK(cudaMalloc(&ds, send.size() * sizeof(float)));
        CUDA_OK(cudaMalloc(&dr, recv.size() * sizeof(float)));
        CUDA_OK(cudaMemcpy(ds, send.data(), send.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dr, recv.data(), recv.size() * sizeof(float), cudaMemcpyHostToDevice));
        std::string err;
        int w[2] = {-1, -1};
        try {
          if (registered) {
            w[0] = c.register_buffer(ds, send.size() * sizeof(float));
            w[1] = c.register_buffer(dr, recv.size() * sizeof(float));
          }
          enqueue(k, c, ds + guard, dr + guard, n, st);
          c.wait(st);
        } catch (const std::exception& e) {
          err = e.what();
        }
        std::vector<float> got(recv.size()), sent(send.size());
        CUDA_OK(cudaMemcpy(got.data(), dr, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(sent.data(), ds, sent.size() * sizeof(float), cudaMemcpyDeviceToHost));
        const std::vector<float> want = expected(k, r, P, n);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < got.size(); ++i)
          wrong += got[i] != (i >= guard && i < guard + rn ? want[i - guard] : sentinel);
        wrong += sent != send;
        for (int x : w)
          if (x >= 0) c.deregister_buffer(x);
        cudaFree(ds), cudaFree(dr);
        const bool ok = err.empty() && wrong == 0;
        failures += !ok;
        std::printf("%s rank %d of %d (process) %s n=%zu %s%s\n", ok ? "ok   " : "WRONG", r, P, name_of(k), n,
                    registered ? "registered" : "staged",
                    err.empty() ? (wrong ? " (wrong values)" : "") : (": " + err).c_str());
      }
  cudaStreamDestroy(st);
  std::printf("%s\n", failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const int rc = test::exit_code_without_gpu(); rc >= 0) return rc;
  if (argc > 1 && std::strcmp(argv[1], "--procs") == 0) return process_ranks();
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  for (int P : {2, 3, 4}) {
    const std::vector<int> devs(std::size_t(P), 0);
    auto comms = gpu::communicator::create_group(devs);
    all_cases(comms, "GPU 0");
    if (P <= 3) graph_replays(comms, 4099, 1000);
    if (P == 2) timings(comms, "GPU 0");
  }
  if (devices >= 2) {
    const int devs[2] = {0, 1};
    auto comms = gpu::communicator::create_group(devs);
    all_cases(comms, "GPUs 0,1");
    timings(comms, "GPUs 0,1");
  }
  unregistered_peer();
  misuse();
  std::printf("%s\n", failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}
