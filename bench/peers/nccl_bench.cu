// bench/peers/nccl_bench.cu — nccl-bench: NCCL's collectives on P GPUs of this
// process (one rank per GPU, ncclCommInitAll), printing the table
// collx-perf-cuda prints from the same sweep (tools/perf_cuda.hpp: sizes,
// the check against collx-perf's reference and guard bytes, timing, the
// device-to-device copy column), so one run puts collx beside NCCL:
//
//   nccl-bench all_reduce -b 8 -e 256M -f 4 -p 8
//   collx-perf-cuda all_reduce -b 8 -e 256M -f 4 -p 8 --gpus 8
//
// NCCL is loaded when the program starts (dlopen of COLLX_NCCL_LIBRARY, else
// libnccl.so.2), its types come from the toolkit's nccl.h. Without the
// library, or with fewer GPUs than ranks, it says so and exits 77 (NCCL
// refuses two ranks on one GPU). NCCL chooses its own algorithm and protocol:
// NCCL_ALGO / NCCL_PROTO in the environment name them, as for nccl-tests.
// float32 sum; no CUDA graphs. A stream that makes no progress within
// COLLX_TIMEOUT seconds (default 120) aborts every communicator and fails.
#include "perf_cuda.hpp"

#include <collx/cuda/check.hpp>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace collx;
using namespace collx::perf;

namespace {

void usage(std::FILE* f, const char* prog) {
  print_gpu_usage_head(f, prog);
  std::fprintf(f,
               "  -p, --nranks <n>           ranks, one per GPU: GPUs 0..n-1 (default 2)\n"
               "  -r, --root <r>             root of broadcast and reduce (default 0)\n"
               "  every size runs out of place, then in place; -c 1 checks each once (values and\n"
               "  guard bytes, as collx-perf) before timing. NCCL_ALGO / NCCL_PROTO choose NCCL's\n"
               "  variant; COLLX_NCCL_LIBRARY names the library to load (default libnccl.so.2)\n"
               "  %s --probe: load NCCL and find its entry points, then exit (77 where it cannot)\n",
               prog);
}

/// NCCL's entry points, found in the library loaded at run time.
struct nccl_api {
  void* library = nullptr;
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_async_error = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclReduce) reduce = nullptr;

  /// The library named by COLLX_NCCL_LIBRARY or libnccl.so.2; `why` says
  /// what is missing where it cannot be loaded.
  bool load(std::string& why) {
    const char* env = std::getenv("COLLX_NCCL_LIBRARY");
    const char* path = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
    library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* e = dlerror();
      why = std::string("cannot load ") + path + ": " + (e != nullptr ? e : "unknown error");
      return false;
    }
    bool ok = true;
    auto find = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, symbol));
      if (fn == nullptr) {
        why += std::string(why.empty() ? "" : ", ") + symbol;
        ok = false;
      }
    };
    find(get_version, "ncclGetVersion");
    find(error_string, "ncclGetErrorString");
    find(comm_init_all, "ncclCommInitAll");
    find(comm_destroy, "ncclCommDestroy");
    find(comm_abort, "ncclCommAbort");
    find(comm_async_error, "ncclCommGetAsyncError");
    find(group_start, "ncclGroupStart");
    find(group_end, "ncclGroupEnd");
    find(all_reduce, "ncclAllReduce");
    find(all_gather, "ncclAllGather");
    find(reduce_scatter, "ncclReduceScatter");
    find(broadcast, "ncclBroadcast");
    find(reduce, "ncclReduce");
    if (!ok) why = std::string(path) + " lacks " + why;
    return ok;
  }

  void check(ncclResult_t r, const char* what) const {
    if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + error_string(r));
  }
};

/// Rank r's call of collective c on n elements (NCCL's count arguments: the
/// same per-rank counts as collx's).
void call(const nccl_api& nccl, coll c, int root, ncclComm_t comm, const float* s, float* r, std::size_t n,
          cudaStream_t st) {
  switch (c) {
    case coll::all_reduce:
      nccl.check(nccl.all_reduce(s, r, n, ncclFloat32, ncclSum, comm, st), "ncclAllReduce");
      break;
    case coll::all_gather:
      nccl.check(nccl.all_gather(s, r, n, ncclFloat32, comm, st), "ncclAllGather");
      break;
    case coll::reduce_scatter:
      nccl.check(nccl.reduce_scatter(s, r, n, ncclFloat32, ncclSum, comm, st), "ncclReduceScatter");
      break;
    case coll::broadcast:
      nccl.check(nccl.broadcast(s, r, n, ncclFloat32, root, comm, st), "ncclBroadcast");
      break;
    case coll::reduce:
      nccl.check(nccl.reduce(s, r, n, ncclFloat32, ncclSum, root, comm, st), "ncclReduce");
      break;
    default: throw std::runtime_error(std::string("nccl-bench: ") + name(c) + " is not supported");
  }
}

}  // namespace

int main(int argc, char** argv) {
  // --probe: load NCCL and find every entry point, touching no GPU.
  if (argc == 2 && std::strcmp(argv[1], "--probe") == 0) {
    nccl_api nccl;
    if (std::string why; !nccl.load(why)) {
      std::fprintf(stderr, "%s: %s\n", argv[0], why.c_str());
      return 77;
    }
    int version = 0;
    if (nccl.get_version(&version) != ncclSuccess) {
      std::fprintf(stderr, "%s: ncclGetVersion failed\n", argv[0]);
      return 1;
    }
    std::printf("NCCL %d: every entry point nccl-bench calls found\n", version);
    return 0;
  }
  options o;
  o.max_bytes = 256u << 20;
  const parse_outcome p = parse_command_line(argc, argv, o, flag_set{false, false});
  if (const int rc = parse_exit_status(p, argv[0], usage); rc >= 0) return rc;
  if (o.type != dtype::float32 || o.op != reduce_op::sum) {
    std::fprintf(stderr, "%s: only float32 sum is supported\n", argv[0]);
    return 2;
  }
  if (o.collective != coll::all_reduce && o.collective != coll::all_gather &&
      o.collective != coll::reduce_scatter && o.collective != coll::broadcast &&
      o.collective != coll::reduce) {
    std::fprintf(stderr, "%s: %s is not supported here\n", argv[0], name(o.collective));
    return 2;
  }
  int devices = 0;
  if (gpu::no_device(cudaGetDeviceCount(&devices), devices)) {
    std::fprintf(stderr, "%s: no CUDA device: skipping\n", argv[0]);
    return 77;
  }
  const int P = o.nranks;
  if (P > devices) {
    std::fprintf(stderr,
                 "%s: %d ranks need %d GPUs (NCCL runs one rank per GPU); this machine has %d: skipping\n",
                 argv[0], P, P, devices);
    return 77;
  }
  nccl_api nccl;
  if (std::string why; !nccl.load(why)) {
    std::fprintf(stderr, "%s: %s: skipping\n", argv[0], why.c_str());
    return 77;
  }
  try {
    int version = 0;
    nccl.check(nccl.get_version(&version), "ncclGetVersion");
    std::vector<int> devs(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r) devs[static_cast<std::size_t>(r)] = r;
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(P));
    nccl.check(nccl.comm_init_all(comms.data(), P, devs.data()), "ncclCommInitAll");
    std::vector<gpu_rank_buffers> b = gpu_buffers(o, devs);
    const char* algo = std::getenv("NCCL_ALGO");
    const char* proto = std::getenv("NCCL_PROTO");
    print_header(stdout, o, "nccl-bench", name(o.collective), P, "cuda-stream", op_column(o.collective, o.op),
                 root_column(o.collective, o.root),
                 "NCCL " + std::to_string(version) + "  NCCL_ALGO " + (algo != nullptr ? algo : "(unset)") +
                     "  NCCL_PROTO " + (proto != nullptr ? proto : "(unset)") +
                     "  (one rank per GPU; last column: device-to-device copy of size bytes on GPU 0, GB/s)");
    gpu_calls calls;
    calls.enqueue = [&](const gpu_call_args& args, std::size_t n, int times) {
      // One thread drives every GPU: each round of calls is one group.
      for (int t = 0; t < times; ++t) {
        nccl.check(nccl.group_start(), "ncclGroupStart");
        for (int r = 0; r < P; ++r)
          call(nccl, o.collective, o.root, comms[r], args[r].first, args[r].second, n, b[r].stream);
        nccl.check(nccl.group_end(), "ncclGroupEnd");
      }
    };
    // Every wait has a deadline: a stream that makes no progress within
    // COLLX_TIMEOUT seconds (default 120), or a communicator that reports an
    // error, aborts every communicator (which ends their kernels) and fails.
    const char* t = std::getenv("COLLX_TIMEOUT");
    const double timeout_s = t != nullptr && std::atof(t) > 0 ? std::atof(t) : 120.0;
    auto abort_all = [&](const std::string& why) {
      for (ncclComm_t c : comms) (void)nccl.comm_abort(c);
      comms.clear();
      throw std::runtime_error(why + "; every NCCL communicator aborted");
    };
    calls.wait_all = [&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
      for (int r = 0; r < P; ++r) {
        gpu::check(cudaSetDevice(b[r].device), "cudaSetDevice");
        for (;;) {
          const cudaError_t q = cudaStreamQuery(b[r].stream);
          if (q != cudaErrorNotReady) {
            gpu::check(q, "cudaStreamQuery");
            break;
          }
          ncclResult_t async = ncclSuccess;
          nccl.check(nccl.comm_async_error(comms[r], &async), "ncclCommGetAsyncError");
          if (async != ncclSuccess && async != ncclInProgress)
            abort_all("rank " + std::to_string(r) + ": a collective failed: " + nccl.error_string(async));
          if (std::chrono::steady_clock::now() > deadline)
            abort_all("rank " + std::to_string(r) + "'s stream made no progress within " +
                      std::to_string(timeout_s) + " s (COLLX_TIMEOUT)");
          std::this_thread::yield();
        }
        ncclResult_t async = ncclSuccess;
        nccl.check(nccl.comm_async_error(comms[r], &async), "ncclCommGetAsyncError");
        nccl.check(async, "a collective failed");
      }
    };
    const int rc = run_gpu_sweep(o, b, calls, false);
    free_gpu_buffers(b);
    for (ncclComm_t c : comms) (void)nccl.comm_destroy(c);
    return rc;
  } catch (const std::exception& x) {
    std::fprintf(stderr, "%s: %s\n", argv[0], x.what());
    return 1;
  }
}
