// collx-perf-cuda: nccl-tests-style sweep of gpu::communicator on P ranks
// (-p, default 2) over G GPUs (--gpus, default 1: every rank shares GPU 0;
// rank r runs on GPU r mod G), the same columns as collx-perf, plus the
// device-to-device copy bandwidth of the same bytes as the ceiling a
// one-GPU run is measured against. NCCL refuses two ranks on one GPU; on P
// GPUs bench's nccl-bench prints the same table for NCCL (perf_cuda.hpp is
// the sweep of both).
//
//   collx-perf-cuda all_reduce -b 8 -e 256M -f 4 -p 2 [--gpus 2] [--stripes 32] [--graph]
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
#include "perf_cuda.hpp"

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
  print_gpu_usage_head(f, prog);
  std::fprintf(f,
               "  -p, --nranks <n>           ranks (default 2)\n"
               "  --gpus <g>                 GPUs the ranks run on, rank r on GPU r mod g (default 1)\n"
               "  -r, --root <r>             root of broadcast and reduce (default 0)\n"
               "  --stripes <n>              blocks per rank per call (default: automatic)\n"
               "  --graph                    time CUDA graph launches of the calls\n"
               "  --algo ring|tree --proto simple|ll|ll128   explicit composition (all_reduce)\n"
               "  --algo nvls --proto simple  peer memory (all_reduce); with --register, the\n"
               "                             buffers are registered and read in place\n"
               "  every size runs out of place, then in place; -c 1 checks each once (values and\n"
               "  guard bytes, as collx-perf) before timing\n");
}

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

/// What rank c's call of the sweep's collective on these buffers offers the
/// automatic choice (gpu::communicator::call_of; its registered windows).
tune::mesh_call call_facts(const gpu::communicator& c, const options& o, const float* s, const float* r,
                           std::size_t n) {
  switch (o.collective) {
    case coll::all_reduce: return c.call_of<coll::all_reduce>(s, r, n, reduce_op::sum, o.root);
    case coll::all_gather: return c.call_of<coll::all_gather>(s, r, n, reduce_op::sum, o.root);
    case coll::reduce_scatter: return c.call_of<coll::reduce_scatter>(s, r, n, reduce_op::sum, o.root);
    case coll::broadcast: return c.call_of<coll::broadcast>(s, r, n, reduce_op::sum, o.root);
    default: return c.call_of<coll::reduce>(s, r, n, reduce_op::sum, o.root);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The flags of this tool first, then the shared ones.
  long stripes = 0;  // 0: collx::automatic_stripes (stripes.hpp)
  long gpus = 1;     // --gpus: rank r on GPU r mod gpus
  bool graph = false;
  bool registered = false;  // --register: every rank's buffers are windows
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--graph") == 0) {
      graph = true;
    } else if (std::strcmp(argv[i], "--register") == 0) {
      registered = true;
    } else if (std::strcmp(argv[i], "--gpus") == 0) {
      if (i + 1 >= argc || !parse_int(argv[i + 1], 1, 1024, gpus)) {
        std::fprintf(stderr, "%s: --gpus needs an integer in [1, 1024]\n", argv[0]);
        return 2;
      }
      ++i;
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
  if (gpus > devices) {
    std::fprintf(stderr, "%s: --gpus %ld, but this machine has %d CUDA device(s): skipping\n", argv[0], gpus,
                 devices);
    return 77;
  }
  try {
    const int P = o.nranks;
    std::vector<int> devs(static_cast<std::size_t>(P), 0);
    for (int r = 0; r < P; ++r) devs[static_cast<std::size_t>(r)] = r % static_cast<int>(gpus);
    gpu::options go;
    go.stripes = static_cast<int>(stripes);
    auto comms = gpu::communicator::create_group(devs, go);
    const buffer_bytes need = buffers_for(o, P);
    std::vector<gpu_rank_buffers> b = gpu_buffers(o, devs);
    if (registered)
      for (int r = 0; r < P; ++r) {
        comms[r].register_buffer(b[r].send, need.send);
        comms[r].register_buffer(b[r].recv, need.recv);
      }
    print_header(stdout, o, "collx-perf-cuda", name(o.collective), P, graph ? "cuda-graph" : "cuda-stream",
                 op_column(o.collective, o.op), root_column(o.collective, o.root),
                 "variant " + o.algo + "/" + o.proto + (registered ? " (buffers registered)" : "") +
                     "  stripes " + std::to_string(comms[0].stripes()) + "  GPUs " + std::to_string(gpus) +
                     "  (last column: device-to-device copy of size bytes on rank 0's GPU, GB/s)");
    variant_choice named{algo_id::automatic, proto_id::automatic};
    (void)parse_id(o.algo, named.algo), (void)parse_id(o.proto, named.proto);
    gpu_calls calls;
    calls.enqueue = [&](const gpu_call_args& args, std::size_t n, int times) {
      for (int t = 0; t < times; ++t)
        for (int r = 0; r < P; ++r) call(comms[r], o, args[r].first, args[r].second, n, b[r].stream);
    };
    calls.wait_all = [&] {
      for (int r = 0; r < P; ++r) comms[r].wait(b[r].stream);
    };
    calls.enqueue_rank = [&](int r, const gpu_call_args& args, std::size_t n, int times) {
      for (int t = 0; t < times; ++t) call(comms[r], o, args[r].first, args[r].second, n, b[r].stream);
    };
    // The choice for rank 0's out-of-place buffers (in place is priced alike).
    calls.variant = [&](std::size_t bytes, const gpu_call_args& args, std::size_t n) {
      if (o.algo != "auto") return named;
      return comms[0].choose(o.collective, bytes, call_facts(comms[0], o, args[0].first, args[0].second, n));
    };
    const int rc = run_gpu_sweep(o, b, calls, graph);
    free_gpu_buffers(b);
    return rc;
  } catch (const std::exception& x) {
    std::fprintf(stderr, "%s: %s\n", argv[0], x.what());
    return 1;
  }
}
