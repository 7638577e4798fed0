// collx-perf-cuda: nccl-tests-style sweep of gpu::communicator on P ranks
// sharing one GPU (-p, default 2), the same columns as collx-perf, plus the
// device-to-device copy bandwidth of the same bytes as the ceiling a
// one-GPU run is measured against (NCCL refuses two ranks on one GPU, so
// there is no peer to run beside it here).
//
//   collx-perf-cuda all_reduce -b 8 -e 256M -f 4 -p 2 [--stripes 4] [--graph]
//                   [--algo ring --proto ll]
//
// Time per call: every rank's calls enqueued on its own stream, `iters` of
// them, the wall time from the first enqueue to the last stream's end, over
// iters. With --graph, each rank's `iters` calls are captured into one CUDA
// graph first and the graphs are launched (launch overhead left out). float32
// sum only for now; -c 1 checks the first call of every size exactly.
#include "perf_common.hpp"

#include <collx/cuda/communicator.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace collx;
using namespace collx::perf;

namespace {

void usage(std::FILE* f, const char* prog) {
  std::fprintf(f,
               "usage: %s <collective> [flags]\n"
               "  collectives: all_reduce, all_gather, reduce_scatter, broadcast, reduce\n%s"
               "  -p, --nranks <n>           ranks sharing GPU 0 (default 2)\n"
               "  -r, --root <r>             root of broadcast and reduce (default 0)\n"
               "  --stripes <n>              blocks per rank per call (default 4)\n"
               "  --graph                    time CUDA graph launches of the calls\n"
               "  --algo ring|tree --proto simple|ll|ll128   explicit composition (all_reduce)\n",
               prog, sweep_flags_help);
}

float input(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 3) % 19) - 9);
}

struct rank_bufs {
  float* send = nullptr;
  float* recv = nullptr;
  cudaStream_t stream = nullptr;
};

/// One call of rank r: the collective with the chosen variant.
void call(gpu::communicator& c, const options& o, const float* s, float* r, std::size_t n, cudaStream_t st) {
  if (o.collective == coll::all_reduce && o.algo != "auto") {
    bool done = false;
    auto try_variant = [&]<class A, class P>() {
      if (done || o.algo != A::name || o.proto != P::name) return;
      gpu::all_reduce<A, P>(c, s, r, n, reduce_op::sum, st);
      done = true;
    };
    try_variant.template operator()<algo::ring, proto::simple>();
    try_variant.template operator()<algo::ring, proto::ll>();
    try_variant.template operator()<algo::ring, proto::ll128>();
    try_variant.template operator()<algo::tree, proto::simple>();
    try_variant.template operator()<algo::tree, proto::ll>();
    try_variant.template operator()<algo::tree, proto::ll128>();
    if (!done) throw_error(status::not_supported, "collx-perf-cuda: variant " + o.algo + "/" + o.proto);
    return;
  }
  switch (o.collective) {
    case coll::all_reduce: c.all_reduce(s, r, n, reduce_op::sum, st); break;
    case coll::all_gather: c.all_gather(s, r, n, st); break;
    case coll::reduce_scatter: c.reduce_scatter(s, r, n, reduce_op::sum, st); break;
    case coll::broadcast: c.broadcast(s, r, n, o.root, st); break;
    case coll::reduce: c.reduce(s, r, n, reduce_op::sum, o.root, st); break;
    default: throw_error(status::not_supported, std::string("collx-perf-cuda: ") + name(o.collective));
  }
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
    default: return sum(i);  // reduce, at the root
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The flags of this tool first, then the shared ones.
  int stripes = 4;
  bool graph = false;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--graph") == 0) graph = true;
    else if (std::strcmp(argv[i], "--stripes") == 0 && i + 1 < argc) stripes = std::atoi(argv[++i]);
    else rest.push_back(argv[i]);
  }
  options o;
  o.max_bytes = 256u << 20;
  const parse_outcome p =
      parse_command_line(static_cast<int>(rest.size()), rest.data(), o, flag_set{false, true});
  if (const int rc = parse_exit_status(p, argv[0], usage); rc >= 0) return rc;
  if (o.type != dtype::float32 || o.op != reduce_op::sum) {
    std::fprintf(stderr, "%s: only float32 sum is supported for now\n", argv[0]);
    return 2;
  }
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (gpu::no_device(e, devices)) {
    std::fprintf(stderr, "%s: no CUDA device\n", argv[0]);
    return 77;
  }
  try {
    const int P = o.nranks;
    std::vector<int> devs(static_cast<std::size_t>(P), 0);
    gpu::options go;
    go.stripes = stripes;
    auto comms = gpu::communicator::create_group(devs, go);
    const std::vector<std::size_t> sizes = sweep_sizes(o);
    const std::size_t max_elems = o.max_bytes / sizeof(float) + 64;
    std::vector<rank_bufs> b(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r) {
      gpu::check(cudaMalloc(&b[r].send, max_elems * sizeof(float)), "cudaMalloc");
      gpu::check(cudaMalloc(&b[r].recv, max_elems * sizeof(float)), "cudaMalloc");
      gpu::check(cudaStreamCreateWithFlags(&b[r].stream, cudaStreamNonBlocking), "cudaStreamCreate");
      std::vector<float> h(max_elems);
      for (std::size_t i = 0; i < max_elems; ++i) h[i] = input(r, i);
      gpu::check(cudaMemcpy(b[r].send, h.data(), max_elems * sizeof(float), cudaMemcpyHostToDevice),
                 "cudaMemcpy");
    }
    print_header(stdout, o, "collx-perf-cuda", name(o.collective), P, graph ? "cuda-graph" : "cuda-stream",
                 op_column(o.collective, o.op), root_column(o.collective, o.root),
                 "variant " + o.algo + "/" + o.proto + "  stripes " + std::to_string(stripes) +
                     "  (ranks share GPU 0; last column: device-to-device copy of size bytes, GB/s)");
    double busbw_sum = 0;
    long long wrong_total = 0;
    for (std::size_t bytes : sizes) {
      const coll_counts k = counts_for(o.collective, bytes, sizeof(float), P);
      const std::size_t n = k.param;
      auto enqueue_all = [&](int times) {
        for (int t = 0; t < times; ++t)
          for (int r = 0; r < P; ++r) call(comms[r], o, b[r].send, b[r].recv, n, b[r].stream);
      };
      auto sync_all = [&] {
        for (int r = 0; r < P; ++r) comms[r].wait(b[r].stream);
      };
      long long wrong = -1;
      if (o.check) {
        enqueue_all(1);
        sync_all();
        wrong = 0;
        for (int r = 0; r < P; ++r) {
          if (o.collective == coll::reduce && r != o.root) continue;
          std::vector<float> h(k.recv);
          gpu::check(cudaMemcpy(h.data(), b[r].recv, k.recv * sizeof(float), cudaMemcpyDeviceToHost),
                     "cudaMemcpy");
          for (std::size_t i = 0; i < k.recv; ++i)
            wrong += static_cast<double>(h[i]) != expected(o.collective, P, r, o.root, n, i);
        }
        wrong_total += wrong;
      }
      enqueue_all(o.warmup_iters);
      sync_all();
      double seconds = 0;
      if (graph) {
        std::vector<cudaGraphExec_t> ex(static_cast<std::size_t>(P));
        for (int r = 0; r < P; ++r) {
          cudaGraph_t g = nullptr;
          gpu::check(cudaStreamBeginCapture(b[r].stream, cudaStreamCaptureModeThreadLocal), "capture");
          for (int t = 0; t < o.iters; ++t) call(comms[r], o, b[r].send, b[r].recv, n, b[r].stream);
          gpu::check(cudaStreamEndCapture(b[r].stream, &g), "end capture");
          gpu::check(cudaGraphInstantiate(&ex[r], g, 0), "instantiate");
          gpu::check(cudaGraphDestroy(g), "graph destroy");
        }
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < P; ++r) gpu::check(cudaGraphLaunch(ex[r], b[r].stream), "graph launch");
        sync_all();
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
        for (auto x : ex) cudaGraphExecDestroy(x);
      } else {
        const auto t0 = std::chrono::steady_clock::now();
        enqueue_all(o.iters);
        sync_all();
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      }
      // The ceiling on one GPU: a device-to-device copy of the same bytes.
      const auto c0 = std::chrono::steady_clock::now();
      for (int t = 0; t < o.iters; ++t)
        gpu::check(cudaMemcpyAsync(b[0].recv, b[0].send, bytes, cudaMemcpyDeviceToDevice, b[0].stream),
                   "copy");
      gpu::check(cudaStreamSynchronize(b[0].stream), "sync");
      const double copy_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count() / o.iters;
      const auto [alg, bus] = bandwidth(o.collective, n, sizeof(float), seconds, P);
      busbw_sum += bus;
      print_row_start(stdout, bytes, n, "float", op_column(o.collective, o.op),
                      root_column(o.collective, o.root));
      print_row_block(stdout, seconds * 1e6, alg, bus, wrong);
      std::printf("  %8.2f\n", copy_s > 0 ? static_cast<double>(bytes) / 1e9 / copy_s : 0.0);
      std::fflush(stdout);
    }
    print_footer(stdout, wrong_total, sizes.empty() ? 0 : busbw_sum / static_cast<double>(sizes.size()));
    for (auto& x : b) cudaFree(x.send), cudaFree(x.recv), cudaStreamDestroy(x.stream);
    return wrong_total ? 1 : 0;
  } catch (const std::exception& x) {
    std::fprintf(stderr, "%s: %s\n", argv[0], x.what());
    return 1;
  }
}
