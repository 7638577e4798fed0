// collx-perf-cuda: nccl-tests-style sweep of gpu::communicator on P ranks
// sharing one GPU (-p, default 2), the same columns as collx-perf, plus the
// device-to-device copy bandwidth of the same bytes as the ceiling a
// one-GPU run is measured against (NCCL refuses two ranks on one GPU, so
// there is no peer to run beside it here).
//
//   collx-perf-cuda all_reduce -b 8 -e 256M -f 4 -p 2 [--stripes 32] [--graph]
//                   [--algo ring --proto ll] [--algo nvls --proto simple --register]
//
// Time per call: every rank's calls enqueued on its own stream, `iters` of
// them, the wall time from the first enqueue to the last stream's end, over
// iters. With --graph, each rank's `iters` calls are captured into one CUDA
// graph first and the graphs are launched (launch overhead left out). float32
// sum only for now. Out of place and in place (NCCL's layouts), each checked
// once per size with collx-perf's inputs, reference and guard bytes
// (perf_common.hpp) before timing. The footer names the variant that ran at
// each size and, for stream runs, what the host spent enqueueing one rank's
// call. --register registers every rank's send and receive buffers
// (gpu::communicator::register_buffer), so nvls reads peers' buffers in
// place (one-shot or two-shot all_reduce); without it nvls stages them.
#include "perf_common.hpp"

#include <collx/algo/nvls.hpp>
#include <collx/cuda/communicator.hpp>

#include <algorithm>
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
               "  --stripes <n>              blocks per rank per call (default: automatic)\n"
               "  --graph                    time CUDA graph launches of the calls\n"
               "  --algo ring|tree --proto simple|ll|ll128   explicit composition (all_reduce)\n"
               "  --algo nvls --proto simple  peer memory (all_reduce); with --register, the\n"
               "                             buffers are registered and read in place\n"
               "  every size runs out of place, then in place; -c 1 checks each once (values and\n"
               "  guard bytes, as collx-perf) before timing\n",
               prog, sweep_flags_help);
}

struct rank_bufs {
  std::byte* send = nullptr;  // device: the sweep's largest send buffer
  std::byte* recv = nullptr;  // device: the largest receive buffer and the guard
  cudaStream_t stream = nullptr;
};

/// One call of rank r: the collective with the chosen variant.
void call(gpu::communicator& c, const options& o, const float* s, float* r, std::size_t n, cudaStream_t st) {
  if (o.collective == coll::all_reduce && o.algo != "auto") {
    bool done = false;
    auto try_variant = [&]<class A, class P>() {
      if (done || o.algo != A::name || o.proto != P::name) return;
      gpu::all_reduce<A, P>(c, s, r, n, ops::sum, st);
      done = true;
    };
    try_variant.template operator()<algo::ring, proto::simple>();
    try_variant.template operator()<algo::ring, proto::ll>();
    try_variant.template operator()<algo::ring, proto::ll128>();
    try_variant.template operator()<algo::tree, proto::simple>();
    try_variant.template operator()<algo::tree, proto::ll>();
    try_variant.template operator()<algo::tree, proto::ll128>();
    try_variant.template operator()<algo::nvls, proto::simple>();
    if (!done) throw_error(status::not_supported, "collx-perf-cuda: variant " + o.algo + "/" + o.proto);
    return;
  }
  switch (o.collective) {
    case coll::all_reduce: c.all_reduce(s, r, n, ops::sum, st); break;
    case coll::all_gather: c.all_gather(s, r, n, st); break;
    case coll::reduce_scatter: c.reduce_scatter(s, r, n, ops::sum, st); break;
    case coll::broadcast: c.broadcast(s, r, n, o.root, st); break;
    case coll::reduce: c.reduce(s, r, n, ops::sum, o.root, st); break;
    default: throw_error(status::not_supported, std::string("collx-perf-cuda: ") + name(o.collective));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The flags of this tool first, then the shared ones.
  long stripes = 0;  // 0: collx::automatic_stripes (stripes.hpp)
  bool graph = false;
  bool registered = false;  // --register: every rank's buffers are windows
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--graph") == 0) {
      graph = true;
    } else if (std::strcmp(argv[i], "--register") == 0) {
      registered = true;
    } else if (std::strcmp(argv[i], "--stripes") == 0) {
      if (i + 1 >= argc || !parse_int(argv[i + 1], 1, transport::max_stripes, stripes)) {
        std::fprintf(stderr, "%s: --stripes needs an integer in [1, %d]\n", argv[0], transport::max_stripes);
        return 2;
      }
      ++i;
    } else {
      rest.push_back(argv[i]);
    }
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
  if (o.collective == coll::all_to_all || o.collective == coll::all_to_allv ||
      o.collective == coll::send_recv || o.collective == coll::barrier) {
    std::fprintf(stderr, "%s: %s is not supported here yet\n", argv[0], name(o.collective));
    return 2;
  }
  if ((o.algo != "auto" || o.proto != "auto") && o.collective != coll::all_reduce) {
    std::fprintf(stderr, "%s: --algo/--proto are supported for all_reduce only\n", argv[0]);
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
    go.stripes = static_cast<int>(stripes);
    auto comms = gpu::communicator::create_group(devs, go);
    const std::vector<std::size_t> sizes = sweep_sizes(o);
    const buffer_bytes need = buffers_for(o, P);
    const data_spec spec = make_spec(o.collective, o.type, o.op, P);
    std::vector<rank_bufs> b(static_cast<std::size_t>(P));
    for (auto& x : b) {
      gpu::check(cudaMalloc(&x.send, need.send), "cudaMalloc");
      gpu::check(cudaMalloc(&x.recv, need.recv), "cudaMalloc");
      gpu::check(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    if (registered)
      for (int r = 0; r < P; ++r) {
        comms[r].register_buffer(b[r].send, need.send);
        comms[r].register_buffer(b[r].recv, need.recv);
      }
    std::vector<std::byte> hs(need.send), hr(need.recv);
    print_header(stdout, o, "collx-perf-cuda", name(o.collective), P, graph ? "cuda-graph" : "cuda-stream",
                 op_column(o.collective, o.op), root_column(o.collective, o.root),
                 "variant " + o.algo + "/" + o.proto + (registered ? " (buffers registered)" : "") +
                     "  stripes " + std::to_string(comms[0].stripes()) +
                     "  (ranks share GPU 0; last column: device-to-device copy of size bytes, GB/s)");
    double busbw_sum = 0;
    long long wrong_total = 0, oob_total = 0;
    std::vector<variant_span> spans;  // which variant ran, per size (the footer)
    std::vector<double> enqueue_us;   // host time to enqueue one rank's call, per timed block
    variant_choice named{algo_id::automatic, proto_id::automatic};
    (void)parse_id(o.algo, named.algo), (void)parse_id(o.proto, named.proto);
    for (std::size_t bytes : sizes) {
      note_variant(spans, o.algo == "auto" ? comms[0].choose(o.collective, bytes) : named, bytes);
      const coll_counts k = counts_for(o.collective, bytes, sizeof(float), P);
      const std::size_t n = k.param;
      auto sync_all = [&] {
        for (int r = 0; r < P; ++r) comms[r].wait(b[r].stream);
      };
      print_row_start(stdout, bytes, n, "float", op_column(o.collective, o.op),
                      root_column(o.collective, o.root));
      for (bool in_place : {false, true}) {
        std::vector<call_plan> plan(static_cast<std::size_t>(P));
        for (int r = 0; r < P; ++r) plan[r] = plan_for(k, sizeof(float), r, in_place);
        auto args = [&](int r) {
          const std::byte* src = in_place ? b[r].recv + plan[r].send_off : b[r].send;
          return std::pair{reinterpret_cast<const float*>(src),
                           reinterpret_cast<float*>(b[r].recv + plan[r].recv_off)};
        };
        auto enqueue_all = [&](int times) {
          for (int t = 0; t < times; ++t)
            for (int r = 0; r < P; ++r) call(comms[r], o, args(r).first, args(r).second, n, b[r].stream);
        };
        long long wrong = -1;
        if (o.check) {
          for (int r = 0; r < P; ++r) {
            prepare_check<float>(spec, k, plan[r], r, o.root, hs.data(), hr.data());
            gpu::check(cudaMemcpy(b[r].send, hs.data(), need.send, cudaMemcpyHostToDevice), "cudaMemcpy");
            gpu::check(cudaMemcpy(b[r].recv, hr.data(), need.recv, cudaMemcpyHostToDevice), "cudaMemcpy");
          }
          enqueue_all(1);
          sync_all();
          wrong = 0;
          for (int r = 0; r < P; ++r) {
            gpu::check(cudaMemcpy(hr.data(), b[r].recv, need.recv, cudaMemcpyDeviceToHost), "cudaMemcpy");
            const auto [w, oob] = check_result<float>(spec, k, plan[r], r, o.root, hr.data());
            wrong += w;
            oob_total += oob;
          }
          wrong_total += wrong;
        }
        enqueue_all(o.warmup_iters);
        sync_all();
        double seconds = 0;
        const auto t0 = std::chrono::steady_clock::now();
        if (graph) {
          std::vector<cudaGraphExec_t> ex(static_cast<std::size_t>(P));
          for (int r = 0; r < P; ++r) {
            cudaGraph_t g = nullptr;
            gpu::check(cudaStreamBeginCapture(b[r].stream, cudaStreamCaptureModeThreadLocal), "capture");
            for (int t = 0; t < o.iters; ++t)
              call(comms[r], o, args(r).first, args(r).second, n, b[r].stream);
            gpu::check(cudaStreamEndCapture(b[r].stream, &g), "end capture");
            gpu::check(cudaGraphInstantiate(&ex[r], g, 0), "instantiate");
            gpu::check(cudaGraphDestroy(g), "graph destroy");
          }
          const auto g0 = std::chrono::steady_clock::now();
          for (int r = 0; r < P; ++r) gpu::check(cudaGraphLaunch(ex[r], b[r].stream), "graph launch");
          sync_all();
          seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count() / o.iters;
          for (auto x : ex) cudaGraphExecDestroy(x);
        } else {
          enqueue_all(o.iters);
          // What the host spends enqueueing one rank's call (checks, choice,
          // launch): bounds the time per call from below where it exceeds
          // the kernels' own time.
          enqueue_us.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
              (static_cast<double>(o.iters) * P));
          sync_all();
          seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
        }
        const auto [alg, bus] = bandwidth(o.collective, n, sizeof(float), seconds, P);
        if (!in_place) busbw_sum += bus;
        print_row_block(stdout, seconds * 1e6, alg, bus, wrong);
      }
      // The ceiling on one GPU: a device-to-device copy of the same bytes.
      // (all_gather's send buffer is smaller than its size: copy what it holds.)
      const std::size_t copied = std::min(bytes, need.send);
      const auto c0 = std::chrono::steady_clock::now();
      for (int t = 0; t < o.iters; ++t)
        gpu::check(cudaMemcpyAsync(b[0].recv, b[0].send, copied, cudaMemcpyDeviceToDevice, b[0].stream),
                   "copy");
      gpu::check(cudaStreamSynchronize(b[0].stream), "sync");
      const double copy_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count() / o.iters;
      std::printf("  %8.2f\n", copy_s > 0 ? static_cast<double>(copied) / 1e9 / copy_s : 0.0);
      std::fflush(stdout);
    }
    print_footer(stdout, oob_total, sizes.empty() ? 0 : busbw_sum / static_cast<double>(sizes.size()));
    std::printf("# variant: %s\n", variants_line(spans).c_str());
    if (!enqueue_us.empty()) {
      std::sort(enqueue_us.begin(), enqueue_us.end());
      std::printf("# host enqueue of one rank's call: median %.2f us, %.2f-%.2f us over the timed blocks\n",
                  enqueue_us[enqueue_us.size() / 2], enqueue_us.front(), enqueue_us.back());
    }
    for (auto& x : b) cudaFree(x.send), cudaFree(x.recv), cudaStreamDestroy(x.stream);
    return wrong_total || oob_total ? 1 : 0;
  } catch (const std::exception& x) {
    std::fprintf(stderr, "%s: %s\n", argv[0], x.what());
    return 1;
  }
}
