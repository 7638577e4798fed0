// gpu::communicator on a GPU: P ranks sharing device 0 (S stripes each),
// every collective through the automatic choice and through explicit
// composition, checked against a double reference with guard elements around
// every output; calls back to back (step counters carry over); a captured
// graph replayed 1,000 times; abort and deadline; misuse refused before
// anything is enqueued; a user kernel that computes and all-reduces in one
// launch through the device handle; the same over FIFO regions in mapped host
// memory (the fallback for GPUs without peer access, forced here). Exits 77
// without a GPU. `--procs [--host-regions] [--handle WAY]`: the process-rank
// case, under collxrun, with the regions shared the way named (posix_fd,
// fabric, cuda_ipc; automatic by default).
//
// `gpu_comm_test --no-device`: the one check that needs no GPU (creating a
// group on a machine without one is a clear not_supported error); 77 where a
// GPU is present.
// The type-erased reductions compile float sum alone here: the kernels the
// typed calls with collx::ops::sum compile anyway. Every other pair is
// refused with not_supported, which the misuse case checks.
#define COLLX_GPU_ERASED_DTYPES ::collx::dtype_set::of(::collx::dtype::float32)
#define COLLX_GPU_ERASED_OPS ::collx::reduce_op_set::of(::collx::reduce_op::sum)

#include <collx/bootstrap/fd_exchange.hpp>
#include <collx/cuda/communicator.hpp>
#include <collx/cuda/ipc_region.hpp>
#include <collx/cuda/process.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using namespace collx;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAILED: %s\n", what.c_str());
  }
}

#define CUDA_OK(x) gpu::check((x), #x)

constexpr std::size_t guard = 64;
constexpr float guard_value = -12345.0f;

float input(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 3) % 19) - 9);
}

struct rank_io {
  float* send = nullptr;  // lead guard + data + guard, device
  float* recv = nullptr;
  float* sp = nullptr;  // the data: after the lead guard (guard + skew elements)
  float* rp = nullptr;
  std::size_t send_n = 0, recv_n = 0;
  cudaStream_t stream = nullptr;
};

std::size_t send_elems(coll c, std::size_t n, int P) {
  return c == coll::reduce_scatter || c == coll::all_to_all ? n * P : n;
}
std::size_t recv_elems(coll c, std::size_t n, int P) {
  return c == coll::all_gather || c == coll::all_to_all ? n * P : n;
}

double expected(coll c, int P, int q, int root, std::size_t n, std::size_t i) {
  auto sum = [&](std::size_t k) {
    double v = 0;
    for (int r = 0; r < P; ++r) v += input(r, k);
    return v;
  };
  switch (c) {
    case coll::all_reduce: return sum(i);
    case coll::all_gather: return input(static_cast<int>(i / n), i % n);
    case coll::reduce_scatter: return sum(static_cast<std::size_t>(q) * n + i);
    case coll::broadcast: return input(root, i);
    case coll::reduce: return q == root ? sum(i) : guard_value;
    case coll::all_to_all: return input(static_cast<int>(i / n), static_cast<std::size_t>(q) * n + i % n);
    default: return 0;
  }
}

/// Element offsets of the send and receive data from a 256-byte boundary:
/// (0, 0) aligned; others put the buffers off the 16-byte packs, or at
/// different offsets from each other (the element-wise fallback).
struct skew_t {
  std::size_t send = 0, recv = 0;
};
skew_t skew{};

/// Runs `call(comm, rank, io)` on every rank (enqueue only), waits, checks.
template <class Call>
void run_case(std::vector<gpu::communicator>& comms, coll c, std::size_t n, int root,
              const std::string& label, Call&& call) {
  const int P = static_cast<int>(comms.size());
  std::vector<rank_io> io(static_cast<std::size_t>(P));
  const std::size_t lead_s = guard + skew.send, lead_r = guard + skew.recv;
  for (int r = 0; r < P; ++r) {
    rank_io& x = io[static_cast<std::size_t>(r)];
    x.send_n = send_elems(c, n, P), x.recv_n = recv_elems(c, n, P);
    std::vector<float> hs(x.send_n + lead_s + guard, guard_value), hr(x.recv_n + lead_r + guard, guard_value);
    for (std::size_t i = 0; i < x.send_n; ++i) hs[lead_s + i] = input(r, i);
    CUDA_OK(cudaMalloc(&x.send, hs.size() * sizeof(float)));
    CUDA_OK(cudaMalloc(&x.recv, hr.size() * sizeof(float)));
    CUDA_OK(cudaMemcpy(x.send, hs.data(), hs.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(x.recv, hr.data(), hr.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
    x.sp = x.send + lead_s, x.rp = x.recv + lead_r;
  }
  std::string err;
  try {
    for (int r = 0; r < P; ++r) call(comms[static_cast<std::size_t>(r)], r, io[static_cast<std::size_t>(r)]);
    for (int r = 0; r < P; ++r)
      comms[static_cast<std::size_t>(r)].wait(io[static_cast<std::size_t>(r)].stream);
  } catch (const std::exception& e) {
    err = e.what();
  }
  expect(err.empty(), label + ": " + err);
  std::size_t wrong = 0;
  for (int r = 0; r < P && err.empty(); ++r) {
    rank_io& x = io[static_cast<std::size_t>(r)];
    std::vector<float> hr(x.recv_n + lead_r + guard);
    CUDA_OK(cudaMemcpy(hr.data(), x.recv, hr.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < lead_r; ++i) wrong += hr[i] != guard_value;
    for (std::size_t i = 0; i < guard; ++i) wrong += hr[lead_r + x.recv_n + i] != guard_value;
    for (std::size_t i = 0; i < x.recv_n; ++i)
      wrong += static_cast<double>(hr[lead_r + i]) != expected(c, P, r, root, n, i);
  }
  expect(wrong == 0, label + ": " + std::to_string(wrong) + " wrong elements or guards");
  for (rank_io& x : io) {
    cudaFree(x.send), cudaFree(x.recv), cudaStreamDestroy(x.stream);
  }
}

template <class A, class Pr>
void explicit_cases(std::vector<gpu::communicator>& comms, std::size_t n, const std::string& tag) {
  const int P = static_cast<int>(comms.size()), root = static_cast<int>(n % P);
  const std::string v = tag + std::string(" ") + A::name + "/" + Pr::name + " n=" + std::to_string(n);
  if constexpr (A::implements(coll::all_reduce))
    run_case(comms, coll::all_reduce, n, 0, v + " all_reduce", [&](gpu::communicator& c, int, rank_io& x) {
      gpu::all_reduce<A, Pr>(c, x.sp, x.rp, n, ops::sum, x.stream);
    });
  // The calls above name the operator at compile time (one kernel each); a
  // runtime reduce_op goes through the dispatch over every operator's kernel
  // (ring/simple alone, to keep the build's kernels few).
  if constexpr (std::is_same_v<A, algo::ring> && std::is_same_v<Pr, proto::simple>)
    run_case(comms, coll::all_reduce, n, 0, v + " all_reduce (runtime op)",
             [&](gpu::communicator& c, int, rank_io& x) {
               const reduce_op runtime = reduce_op::sum;
               gpu::all_reduce<A, Pr>(c, x.sp, x.rp, n, runtime, x.stream);
             });
  if constexpr (A::implements(coll::all_gather))
    run_case(comms, coll::all_gather, n, 0, v + " all_gather", [&](gpu::communicator& c, int, rank_io& x) {
      gpu::all_gather<A, Pr>(c, x.sp, x.rp, n, x.stream);
    });
  if constexpr (A::implements(coll::reduce_scatter))
    run_case(comms, coll::reduce_scatter, n, 0, v + " reduce_scatter",
             [&](gpu::communicator& c, int, rank_io& x) {
               gpu::reduce_scatter<A, Pr>(c, x.sp, x.rp, n, ops::sum, x.stream);
             });
  if constexpr (A::implements(coll::broadcast))
    run_case(comms, coll::broadcast, n, root, v + " broadcast", [&](gpu::communicator& c, int, rank_io& x) {
      gpu::broadcast<A, Pr>(c, x.sp, x.rp, n, root, x.stream);
    });
  if constexpr (A::implements(coll::reduce))
    run_case(comms, coll::reduce, n, root, v + " reduce", [&](gpu::communicator& c, int, rank_io& x) {
      gpu::reduce<A, Pr>(c, x.sp, x.rp, n, ops::sum, root, x.stream);
    });
}

void automatic_cases(std::vector<gpu::communicator>& comms, std::size_t n, const std::string& tag) {
  const int P = static_cast<int>(comms.size()), root = static_cast<int>((n + 1) % P);
  const std::string v = tag + " automatic n=" + std::to_string(n);
  run_case(comms, coll::all_reduce, n, 0, v + " all_reduce",
           [&](gpu::communicator& c, int, rank_io& x) { c.all_reduce(x.sp, x.rp, n, ops::sum, x.stream); });
  run_case(comms, coll::all_gather, n, 0, v + " all_gather",
           [&](gpu::communicator& c, int, rank_io& x) { c.all_gather(x.sp, x.rp, n, x.stream); });
  run_case(
      comms, coll::reduce_scatter, n, 0, v + " reduce_scatter",
      [&](gpu::communicator& c, int, rank_io& x) { c.reduce_scatter(x.sp, x.rp, n, ops::sum, x.stream); });
  run_case(comms, coll::broadcast, n, root, v + " broadcast",
           [&](gpu::communicator& c, int, rank_io& x) { c.broadcast(x.sp, x.rp, n, root, x.stream); });
  run_case(comms, coll::reduce, n, root, v + " reduce",
           [&](gpu::communicator& c, int, rank_io& x) { c.reduce(x.sp, x.rp, n, ops::sum, root, x.stream); });
  run_case(comms, coll::all_to_all, n, 0, v + " all_to_all",
           [&](gpu::communicator& c, int, rank_io& x) { c.all_to_all(x.sp, x.rp, n, x.stream); });
  // Type-erased reductions (float sum, compiled above) and data movement (the
  // float bytes travel as 4-byte words).
  run_case(comms, coll::all_reduce, n, 0, v + " all_reduce (dtype)",
           [&](gpu::communicator& c, int, rank_io& x) {
             c.all_reduce(static_cast<const void*>(x.sp), x.rp, n, dtype::float32, reduce_op::sum, x.stream);
           });
  run_case(comms, coll::reduce_scatter, n, 0, v + " reduce_scatter (dtype)",
           [&](gpu::communicator& c, int, rank_io& x) {
             c.reduce_scatter(static_cast<const void*>(x.sp), x.rp, n, dtype::float32, reduce_op::sum,
                              x.stream);
           });
  run_case(comms, coll::reduce, n, root, v + " reduce (dtype)", [&](gpu::communicator& c, int, rank_io& x) {
    c.reduce(static_cast<const void*>(x.sp), x.rp, n, dtype::float32, reduce_op::sum, root, x.stream);
  });
  run_case(comms, coll::all_gather, n, 0, v + " all_gather (dtype)",
           [&](gpu::communicator& c, int, rank_io& x) {
             c.all_gather(static_cast<const void*>(x.sp), x.rp, n, dtype::float32, x.stream);
           });
  run_case(comms, coll::broadcast, n, root, v + " broadcast (dtype)",
           [&](gpu::communicator& c, int, rank_io& x) {
             c.broadcast(static_cast<const void*>(x.sp), x.rp, n, dtype::float32, root, x.stream);
           });
  run_case(comms, coll::all_to_all, n, 0, v + " all_to_all (dtype)",
           [&](gpu::communicator& c, int, rank_io& x) {
             c.all_to_all(static_cast<const void*>(x.sp), x.rp, n, dtype::float32, x.stream);
           });
}

__global__ void add_one(float* v, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    v[i] += 1.0f;
}

/// Per-rank device arrays of n floats: `in` holds input(r, ·), `out` sits
/// between guard elements; one stream per rank. Freed on destruction.
struct rank_arrays {
  std::vector<float*> in, out_alloc;
  std::vector<cudaStream_t> st;
  std::size_t n;
  rank_arrays(int P, std::size_t count)
      : in(static_cast<std::size_t>(P)),
        out_alloc(static_cast<std::size_t>(P)),
        st(static_cast<std::size_t>(P)),
        n(count) {
    for (int r = 0; r < P; ++r) {
      std::vector<float> h(n), g(n + 2 * guard, guard_value);
      for (std::size_t i = 0; i < n; ++i) h[i] = input(r, i);
      CUDA_OK(cudaMalloc(&in[r], n * sizeof(float)));
      CUDA_OK(cudaMalloc(&out_alloc[r], g.size() * sizeof(float)));
      CUDA_OK(cudaMemcpy(in[r], h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(out_alloc[r], g.data(), g.size() * sizeof(float), cudaMemcpyHostToDevice));
      CUDA_OK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
    }
  }
  ~rank_arrays() {
    for (std::size_t r = 0; r < in.size(); ++r) {
      if (in[r]) cudaFree(in[r]);
      if (out_alloc[r]) cudaFree(out_alloc[r]);
      if (st[r]) cudaStreamDestroy(st[r]);
    }
  }
  float* out(int r) const { return out_alloc[r] + guard; }
  /// Rank r's output, and whether the guards around it are intact.
  std::vector<float> result(int r, bool& guards_ok) const {
    std::vector<float> g(n + 2 * guard);
    CUDA_OK(cudaMemcpy(g.data(), out_alloc[r], g.size() * sizeof(float), cudaMemcpyDeviceToHost));
    guards_ok = true;
    for (std::size_t i = 0; i < guard; ++i)
      guards_ok = guards_ok && g[i] == guard_value && g[guard + n + i] == guard_value;
    return std::vector<float>(g.begin() + guard, g.begin() + guard + static_cast<std::ptrdiff_t>(n));
  }
};

/// Each rank captures {input += 1; all_reduce} into a graph; the graphs of all
/// ranks are launched together `replays` times. After k replays every element
/// is Σ_r input(r, i) + P·k: a replay that was skipped or ran on stale
/// counters shows up in the value (or as a timeout).
/// Ends a capture that an exception left open, so that one failed case does
/// not leave the stream capturing (and, in global mode, every later runtime
/// call of the process failing).
struct capture_scope {
  cudaStream_t st;
  bool open = true;
  capture_scope(cudaStream_t s, cudaStreamCaptureMode mode) : st(s) {
    CUDA_OK(cudaStreamBeginCapture(s, mode));
  }
  cudaGraph_t end() {
    cudaGraph_t g = nullptr;
    open = false;
    CUDA_OK(cudaStreamEndCapture(st, &g));
    return g;
  }
  ~capture_scope() {
    if (!open) return;
    cudaGraph_t g = nullptr;
    if (cudaStreamEndCapture(st, &g) == cudaSuccess && g != nullptr) cudaGraphDestroy(g);
    (void)cudaGetLastError();
  }
};

const char* name(cudaStreamCaptureMode m) {
  return m == cudaStreamCaptureModeGlobal        ? "global"
         : m == cudaStreamCaptureModeThreadLocal ? "thread-local"
                                                 : "relaxed";
}

void graph_case(std::vector<gpu::communicator>& comms, std::size_t n, int replays,
                cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal) {
  const int P = static_cast<int>(comms.size());
  std::vector<cudaGraphExec_t> exec(static_cast<std::size_t>(P));
  std::string err;
  try {
    rank_arrays a(P, n);
    for (int r = 0; r < P; ++r) {
      // The streams are new: the first call a rank sees on its stream is
      // being captured (the stream's device cannot be asked then).
      capture_scope capture(a.st[r], mode);
      add_one<<<4, 256, 0, a.st[r]>>>(a.in[r], n);
      comms[static_cast<std::size_t>(r)].all_reduce(a.in[r], a.out(r), n, ops::sum, a.st[r]);
      cudaGraph_t g = capture.end();
      CUDA_OK(cudaGraphInstantiate(&exec[r], g, 0));
      CUDA_OK(cudaGraphDestroy(g));
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < replays; ++k)
      for (int r = 0; r < P; ++r) CUDA_OK(cudaGraphLaunch(exec[r], a.st[r]));
    for (int r = 0; r < P; ++r) comms[static_cast<std::size_t>(r)].wait(a.st[r]);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "graph (%s capture): %d replays of {add, all_reduce of %zu floats} on %d ranks: %.2f us per replay\n",
        name(mode), replays, n, P, us / replays);
    for (int r = 0; r < P; ++r) {
      bool guards_ok = false;
      const std::vector<float> h = a.result(r, guards_ok);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        double want = static_cast<double>(P) * replays;
        for (int q = 0; q < P; ++q) want += input(q, i);
        wrong += h[i] != static_cast<float>(want);
      }
      expect(wrong == 0 && guards_ok, "graph replays: rank " + std::to_string(r) + ": " +
                                          std::to_string(wrong) + " wrong" +
                                          (guards_ok ? "" : ", guards written"));
    }
  } catch (const std::exception& e) {
    err = e.what();
  }
  expect(err.empty(), std::string("graph replays (") + name(mode) + " capture): " + err);
  for (auto x : exec)
    if (x) cudaGraphExecDestroy(x);
}

/// A user kernel that produces its stripe's slice of y (2·input) and
/// all-reduces y in the same kernel (collx/cuda/device.hpp).
__global__ void __launch_bounds__(gpu::block_threads)
    fused_double_then_all_reduce(const __grid_constant__ gpu::device_comm h, const float* x, float* y,
                                 std::size_t n) {
  const stripe_slice s = h.slice_of_block(n, sizeof(float));
  for (std::size_t i = s.lo + threadIdx.x; i < s.lo + s.n; i += blockDim.x) y[i] = 2.0f * x[i];
  __syncthreads();
  (void)h.all_reduce<algo::ring, proto::simple>(y, y, n);
}

void fused_case(std::vector<gpu::communicator>& comms, std::size_t n) {
  const int P = static_cast<int>(comms.size());
  std::string err;
  try {
    rank_arrays a(P, n);
    for (int r = 0; r < P; ++r) {
      const gpu::device_comm h = comms[static_cast<std::size_t>(r)].device_handle();
      fused_double_then_all_reduce<<<h.stripes, gpu::block_threads, 0, a.st[r]>>>(h, a.in[r], a.out(r), n);
      CUDA_OK(cudaGetLastError());
    }
    for (int r = 0; r < P; ++r) comms[static_cast<std::size_t>(r)].wait(a.st[r]);
    for (int r = 0; r < P; ++r) {
      bool guards_ok = false;
      const std::vector<float> h = a.result(r, guards_ok);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        double want = 0;
        for (int q = 0; q < P; ++q) want += 2.0 * input(q, i);
        wrong += h[i] != static_cast<float>(want);
      }
      expect(wrong == 0 && guards_ok, "fused kernel: rank " + std::to_string(r) + ": " +
                                          std::to_string(wrong) + " wrong" +
                                          (guards_ok ? "" : ", guards written"));
    }
  } catch (const std::exception& e) {
    err = e.what();
  }
  expect(err.empty(), "fused kernel: " + err);
}

/// A region exported as a file descriptor, passed through the fd exchange
/// and mapped again: bytes written through one mapping are read through the
/// other (the path a process rank's region takes to its peers).
void ipc_case() {
  std::string err;
  try {
    const auto region = gpu::exported_region::create(0, 3 << 20);
    expect(region.bytes() >= (3u << 20), "exported region size");
    const int fd = region.export_fd();
    const auto token = bootstrap::random_secret();
    bootstrap::fd_server srv(fd, token);
    const int got = bootstrap::fetch_fd(srv.path(), token, std::chrono::seconds(5));
    ::close(fd);
    const auto mapped = gpu::imported_region::open(got, region.bytes(), 0);
    ::close(got);
    expect(mapped.data() != region.data(), "the import is a second mapping");
    CUDA_OK(cudaMemset(region.data(), 0x3c, region.bytes()));
    CUDA_OK(cudaMemset(region.data() + 12345, 0x7e, 1));
    std::vector<unsigned char> h(region.bytes());
    CUDA_OK(cudaMemcpy(h.data(), mapped.data(), h.size(), cudaMemcpyDeviceToHost));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < h.size(); ++i) wrong += h[i] != (i == 12345 ? 0x7e : 0x3c);
    expect(wrong == 0, "ipc region: " + std::to_string(wrong) + " bytes differ through the second mapping");
    std::printf("ipc region: %zu bytes exported, passed as a descriptor and mapped again: %s\n",
                region.bytes(), wrong ? "WRONG" : "ok");
  } catch (const std::exception& e) {
    err = e.what();
  }
  expect(err.empty(), "ipc region: " + err);
  // Fabric handles, where the GPU offers them: exported as 64 bytes and
  // imported in this process. The driver refuses them without an IMEX
  // channel; that is reported, not counted as a failure.
  if (!(gpu::offered_handles(0) & gpu::handle_bit(gpu::region_handle::fabric))) {
    std::printf("fabric region: not offered by device 0\n");
    return;
  }
  std::optional<gpu::exported_region> region;
  std::optional<gpu::imported_region> mapped;
  try {
    region.emplace(gpu::exported_region::create(0, 1 << 20, gpu::region_handle::fabric));
    mapped.emplace(
        gpu::imported_region::open(gpu::region_handle::fabric, region->export_bytes(), region->bytes(), 0));
  } catch (const error& e) {
    std::printf("fabric region: refused here: %s\n", e.what());
    return;
  }
  CUDA_OK(cudaMemset(region->data(), 0x5a, region->bytes()));
  std::vector<unsigned char> h(mapped->bytes());
  CUDA_OK(cudaMemcpy(h.data(), mapped->data(), h.size(), cudaMemcpyDeviceToHost));
  std::size_t wrong = 0;
  for (unsigned char b : h) wrong += b != 0x5a;
  expect(wrong == 0, "fabric region: " + std::to_string(wrong) + " bytes differ through the second mapping");
  std::printf("fabric region: %zu bytes exported as a fabric handle and mapped again: %s\n", region->bytes(),
              wrong ? "WRONG" : "ok");
}

/// Rank 1 never calls: rank 0's kernel must end by abort() or by its deadline.
void failure_case(bool by_abort) {
  const int devs[2] = {0, 0};
  gpu::options opt;
  opt.stripes = 2;
  opt.timeout_ms = by_abort ? 60'000 : 200;
  auto comms = gpu::communicator::create_group(devs, opt);
  float* buf = nullptr;
  CUDA_OK(cudaMalloc(&buf, 4096 * sizeof(float)));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const auto t0 = std::chrono::steady_clock::now();
  comms[0].all_reduce(buf, buf, 4096, ops::sum, s);
  if (by_abort) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    comms[1].abort();  // any handle, any thread
  }
  status got = status::ok;
  try {
    comms[0].wait(s);
  } catch (const error& e) {
    got = e.code();
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const status want = by_abort ? status::aborted : status::timeout;
  expect(got == want, std::string(by_abort ? "abort" : "deadline") + ": wait threw " + to_string(got) +
                          " instead of " + to_string(want));
  expect(comms[0].error() == want, "error() after the failure");
  expect(comms[1].error() == status::ok, "the rank that never called has no error");
  std::printf("%s: rank 0 returned %s after %.0f ms\n", by_abort ? "abort" : "deadline", to_string(got), ms);
  cudaFree(buf), cudaStreamDestroy(s);
}

void misuse_cases() {
  const int devs[2] = {0, 0};
  auto comms = gpu::communicator::create_group(devs);
  std::vector<float> host(1024);
  float* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, 1024 * sizeof(float)));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto refused = [&](const std::string& label, auto&& f, const char* words,
                     status want = status::invalid_argument) {
    std::string msg;
    status code = status::ok;
    try {
      f();
    } catch (const error& e) {
      msg = e.what(), code = e.code();
    }
    expect(code == want && msg.find(words) != std::string::npos, label + ": got \"" + msg + "\"");
  };
  const void* cdev = dev;
  refused(
      "type-erased half sum, not compiled",
      [&] { comms[0].all_reduce(cdev, dev, 512, dtype::float16, reduce_op::sum, s); },
      "COLLX_GPU_ERASED_DTYPES", status::not_supported);
  refused(
      "type-erased float max, not compiled",
      [&] { comms[0].reduce_scatter(cdev, dev, 512, dtype::float32, reduce_op::max, s); },
      "COLLX_GPU_ERASED_OPS", status::not_supported);
  refused(
      "type-erased bitwise op on float",
      [&] { comms[0].reduce(cdev, dev, 1024, dtype::float32, reduce_op::band, 0, s); },
      "not supported for float");
  refused(
      "host send buffer", [&] { comms[0].all_reduce(host.data(), dev, 1024, ops::sum, s); }, "host memory");
  refused(
      "bitwise op on float",
      [&] { gpu::all_reduce<algo::ring, proto::simple>(comms[0], dev, dev, 1024, reduce_op::band, s); },
      "not supported");
  refused(
      "root out of range", [&] { comms[0].broadcast(dev, dev, 1024, 2, s); }, "root 2");
  refused(
      "null recv", [&] { comms[0].all_reduce(dev, static_cast<float*>(nullptr), 1024, ops::sum, s); },
      "recv is null");
  // Nothing was enqueued: a correct call on both ranks (each on a stream of
  // its own) still completes.
  cudaStream_t s1 = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  float* dev1 = nullptr;
  CUDA_OK(cudaMalloc(&dev1, 1024 * sizeof(float)));
  std::string err;
  try {
    comms[0].all_reduce(dev, dev, 1024, ops::sum, s);
    comms[1].all_reduce(dev1, dev1, 1024, ops::sum, s1);
    comms[0].wait(s);
    comms[1].wait(s1);
  } catch (const std::exception& e) {
    err = e.what();
  }
  expect(err.empty(), "a call after refused ones: " + err);
  // Both ranks' kernels of one call on one stream would wait for each other
  // until their deadline: the second rank's call is refused. The first
  // rank's kernel, already enqueued, then ends in its (short) deadline.
  {
    gpu::options opt;
    opt.timeout_ms = 200;
    auto pair = gpu::communicator::create_group(devs, opt);
    std::string first;
    try {
      pair[0].all_reduce(dev, dev, 1024, ops::sum, s);
    } catch (const std::exception& e) {
      first = e.what();
    }
    expect(first.empty(), "one stream for two ranks: rank 0's call: " + first);
    refused(
        "one stream for two ranks", [&] { pair[1].all_reduce(dev1, dev1, 1024, ops::sum, s); },
        "a stream of its own");
    std::string late;
    try {
      pair[0].wait(s);
    } catch (const error& e) {
      late = e.what();
    }
    expect(late.find("timeout") != std::string::npos,
           "one stream for two ranks: rank 0 alone should end in its deadline, got \"" + late + "\"");
  }
  cudaFree(dev), cudaFree(dev1), cudaStreamDestroy(s), cudaStreamDestroy(s1);
}

/// `--procs` under a launcher (collxrun -n P): this process is one rank
/// (gpu::from_env); all_reduce and all_gather checked against the reference.
/// The fallback for GPUs without peer access, forced on one GPU: every
/// region in mapped pinned host memory. Every collective, automatic and
/// explicit (Simple, LL), calls back to back and a replayed graph; LL128
/// refused, naming why.
/// The profile a group prices with: the preset for ranks sharing one GPU
/// (a stand-in, said so), a preset named by COLLX_GPU_TUNE_FILE or by the
/// options, the options' profile, and a CPU preset refused.
void profile_cases() {
  const std::vector<int> devs{0, 0};
  auto comms = gpu::communicator::create_group(devs);
  expect(comms[0].profile_origin().find("share one GPU") != std::string::npos,
         "two ranks on GPU 0 priced with " + comms[0].profile_origin());
  gpu::options opt;
  opt.tune_file = "preset:a100_nvswitch";
  comms = gpu::communicator::create_group(devs, opt);
  expect(comms[1].profile().barrier_us == tune::a100_nvswitch.barrier_us &&
             comms[1].profile_origin().find("preset a100_nvswitch") != std::string::npos,
         "tune_file preset:a100_nvswitch: priced with " + comms[1].profile_origin());
  opt.profile = tune::pcie_gen4_8gpu;
  comms = gpu::communicator::create_group(devs, opt);
  expect(comms[0].profile().intra.gbps == tune::pcie_gen4_8gpu.intra.gbps &&
             comms[0].profile_origin() == "gpu::options::profile",
         "options::profile: priced with " + comms[0].profile_origin());
  gpu::options bad;
  bad.tune_file = "preset:nonexistent";
  std::string msg;
  try {
    (void)gpu::communicator::create_group(devs, bad);
  } catch (const error& x) {
    msg = x.what();
  }
  expect(msg.find("no preset named 'nonexistent'") != std::string::npos,
         "tune_file preset:nonexistent: " + (msg.empty() ? std::string("accepted") : msg));
  std::printf("profiles: done (%d failures so far)\n", failures);
}

void host_region_cases() {
  for (int P : {2, 3}) {
    std::vector<int> devs(static_cast<std::size_t>(P), 0);
    gpu::options opt;
    opt.stripes = 2;
    opt.timeout_ms = 10'000;
    opt.regions = gpu::region_memory::host;
    auto comms = gpu::communicator::create_group(devs, opt);
    const std::string tag = "host regions P=" + std::to_string(P);
    expect(comms[0].regions() == gpu::region_memory::host, tag + ": regions() is not host");
    expect(!comms[0].gpu_scope(), tag + ": steps over host memory ordered at GPU scope");
    for (std::size_t n : {std::size_t(1), std::size_t(1031), (std::size_t(1) << 20) + 3}) {
      automatic_cases(comms, n, tag);
      explicit_cases<algo::ring, proto::simple>(comms, n, tag);
      explicit_cases<algo::ring, proto::ll>(comms, n, tag);
      explicit_cases<algo::tree, proto::ll>(comms, n, tag);
    }
    expect(comms[0].choose(coll::all_reduce, 1 << 20).proto != proto_id::ll128,
           tag + ": the automatic choice took LL128 over host memory");
    // Every step crosses PCIe: the machine's preset is a PCIe one.
    expect(comms[0].profile().intra.kind == tune::link_kind::pcie &&
               comms[0].profile_origin().find("built-in preset pcie_gen") != std::string::npos,
           tag + ": priced with " + comms[0].profile_origin() + ", not a PCIe preset");
    std::string msg;
    float* d = nullptr;
    CUDA_OK(cudaMalloc(&d, 1024 * sizeof(float)));
    try {
      gpu::all_reduce<algo::ring, proto::ll128>(comms[0], d, d, 1024, ops::sum, nullptr);
    } catch (const error& x) {
      msg = x.what();
    }
    cudaFree(d);  // also when refused, as expected
    expect(msg.find("host memory") != std::string::npos, tag + ": LL128 not refused with the reason: " + msg);
    graph_case(comms, 4099, 100);
    std::printf("%s: done (%d failures so far)\n", tag.c_str(), failures);
  }
  // A group on one GPU with the default options keeps device regions.
  const int one[2] = {0, 0};
  auto comms = gpu::communicator::create_group(one);
  expect(comms[0].regions() == gpu::region_memory::device,
         "one GPU, automatic: regions are not device memory");
}

/// `way`: how the device regions are shared (automatic: whichever works);
/// a named way the ranks refuse alike with not_supported (fabric handles
/// without an IMEX channel) makes the case skip (77), saying why.
int process_rank_case(bool host_regions, gpu::region_handle way) {
  std::string err;
  try {
    gpu::options opt;
    opt.stripes = 2;
    opt.timeout_ms = 10'000;
    opt.region_handles = way;
    if (host_regions) opt.regions = gpu::region_memory::host;
    std::optional<gpu::communicator> made;
    try {
      made.emplace(gpu::from_env(opt));
    } catch (const error& e) {
      if (way == gpu::region_handle::automatic || e.code() != status::not_supported) throw;
      std::printf("%s region handles refused on this machine: %s\nskipping\n", gpu::name(way), e.what());
      return 77;
    }
    gpu::communicator& c = *made;
    const int P = c.size(), r = c.rank();
    expect(c.regions() == (host_regions ? gpu::region_memory::host : gpu::region_memory::device),
           "process rank " + std::to_string(r) + ": regions() is " + gpu::name(c.regions()));
    const gpu::region_handle shared = c.region_sharing();
    expect(host_regions ? shared == gpu::region_handle::automatic
                        : shared != gpu::region_handle::automatic &&
                              (way == gpu::region_handle::automatic || shared == way),
           "process rank " + std::to_string(r) + ": regions shared by " + gpu::name(shared) + ", asked " +
               gpu::name(way));
    if (r == 0) std::printf("regions shared by %s handles (asked: %s)\n", gpu::name(shared), gpu::name(way));
    cudaStream_t st = nullptr;
    CUDA_OK(cudaSetDevice(c.device()));
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (std::size_t n : {std::size_t(1031), (std::size_t(1) << 20) + 3}) {
      float *x = nullptr, *y = nullptr;
      std::vector<float> h(n * P);
      for (std::size_t i = 0; i < n; ++i) h[i] = input(r, i);
      CUDA_OK(cudaMalloc(&x, n * sizeof(float)));
      CUDA_OK(cudaMalloc(&y, n * P * sizeof(float)));
      CUDA_OK(cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      c.all_reduce(x, y, n, ops::sum, st);
      c.wait(st);
      CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        wrong += h[i] != static_cast<float>(expected(coll::all_reduce, P, r, 0, n, i));
      c.all_gather(x, y, n, st);
      c.wait(st);
      CUDA_OK(cudaMemcpy(h.data(), y, n * P * sizeof(float), cudaMemcpyDeviceToHost));
      for (std::size_t i = 0; i < n * P; ++i)
        wrong += h[i] != static_cast<float>(expected(coll::all_gather, P, r, 0, n, i));
      expect(wrong == 0, "process rank " + std::to_string(r) + " n=" + std::to_string(n) + ": " +
                             std::to_string(wrong) + " wrong");
      cudaFree(x), cudaFree(y);
    }
    cudaStreamDestroy(st);
  } catch (const std::exception& e) {
    err = e.what();
  }
  expect(err.empty(), "process ranks: " + err);
  std::printf("%s\n", failures ? "FAILED" : "process ranks: all ok");
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  const bool none = gpu::no_device(e, devices);
  if (argc > 1 && std::strcmp(argv[1], "--no-device") == 0) {
    if (!none) {
      std::printf("a GPU is present: the no-device check does not apply\n");
      return 77;
    }
    const int devs[1] = {0};
    std::string msg;
    status code = status::ok;
    try {
      (void)gpu::communicator::create_group(devs);
    } catch (const error& x) {
      msg = x.what(), code = x.code();
    }
    expect(code == status::not_supported && msg.find("no CUDA device") != std::string::npos,
           "create_group without a GPU: got \"" + msg + "\"");
    std::printf("%s\n", failures ? "FAILED" : "no device: create_group refused with a clear error");
    return failures ? 1 : 0;
  }
  if (none) {
    std::printf("no CUDA device: skipping\n");
    return 77;
  }
  if (argc > 1 && std::strcmp(argv[1], "--procs") == 0) {
    bool host_regions = false;
    gpu::region_handle way = gpu::region_handle::automatic;
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--host-regions") == 0) host_regions = true;
      else if (std::strcmp(argv[i], "--handle") == 0 && i + 1 < argc)
        way = gpu::parse_region_handle(argv[++i], "--handle");
      else {
        std::fprintf(stderr, "usage: --procs [--host-regions] [--handle posix_fd|fabric|cuda_ipc]\n");
        return 2;
      }
    }
    return process_rank_case(host_regions, way);
  }
  try {
    for (int P : {1, 2, 3, 4, 8})
      for (int S : {1, 4}) {
        std::vector<int> devs(static_cast<std::size_t>(P), 0);
        gpu::options opt;
        opt.stripes = S;
        opt.timeout_ms = 5'000;
        auto comms = gpu::communicator::create_group(devs, opt);
        const std::string tag = "P=" + std::to_string(P) + " S=" + std::to_string(S);
        // Every rank on device 0 with device regions: GPU scope, unless
        // COLLX_GPU_SCOPE=system (gpu-check.sh runs this test both ways).
        const char* scope_env = std::getenv("COLLX_GPU_SCOPE");
        const bool system_asked = scope_env != nullptr && std::strcmp(scope_env, "system") == 0;
        expect(comms[0].gpu_scope() == !system_asked,
               tag + ": gpu_scope() is " + (comms[0].gpu_scope() ? "true" : "false"));
        if (P == 2 && S == 1)
          std::printf("steps ordered at %s scope\n", comms[0].gpu_scope() ? "GPU" : "system");
        for (std::size_t n :
             {std::size_t(0), std::size_t(1), std::size_t(1031), (std::size_t(1) << 20) + 3}) {
          automatic_cases(comms, n, tag);
          explicit_cases<algo::ring, proto::simple>(comms, n, tag);
          explicit_cases<algo::ring, proto::ll>(comms, n, tag);
          explicit_cases<algo::ring, proto::ll128>(comms, n, tag);
          explicit_cases<algo::tree, proto::simple>(comms, n, tag);
          explicit_cases<algo::tree, proto::ll>(comms, n, tag);
        }
        if (P == 3 || P == 8) {
          // Off the 16-byte packs: both buffers one element in, and at
          // different offsets from each other.
          for (skew_t k : {skew_t{1, 1}, skew_t{1, 2}}) {
            skew = k;
            const std::string t = tag + " skew " + std::to_string(k.send) + "/" + std::to_string(k.recv);
            for (std::size_t n : {std::size_t(1031), (std::size_t(1) << 20) + 3}) {
              automatic_cases(comms, n, t);
              explicit_cases<algo::ring, proto::simple>(comms, n, t);
              explicit_cases<algo::ring, proto::ll128>(comms, n, t);
            }
          }
          skew = {};
        }
        std::printf("%s: done (%d failures so far)\n", tag.c_str(), failures);
        if (P >= 2 && S == 4) graph_case(comms, 4099, 1000);
        if (P == 2 && S == 4) graph_case(comms, 1031, 10, cudaStreamCaptureModeGlobal);
        if (P >= 2) fused_case(comms, (std::size_t(1) << 18) + 5);
      }
    profile_cases();
    host_region_cases();
    ipc_case();
    failure_case(true);
    failure_case(false);
    misuse_cases();
  } catch (const std::exception& x) {
    expect(false, std::string("unexpected exception: ") + x.what());
  }
  std::printf("%s\n", failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}
