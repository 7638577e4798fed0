// collx/cuda/communicator.hpp — collectives on CUDA streams: ranks are GPUs
// (or, for testing, several ranks share one GPU) of this process.
//
// What it is: gpu::communicator::create_group(devices) makes one rank per
// entry of `devices` (thread ranks of one process, as ncclCommInitAll does);
// ranks may share a GPU. A call such as
//   comm.all_reduce(d_send, d_recv, n, reduce_op::sum, stream);
// checks its arguments on the host, picks a variant (the cost model over the
// communicator's profile, or the one named by explicit composition:
// gpu::all_reduce<algo::ring, proto::ll>(comm, ...)), and enqueues one kernel
// of `stripes` blocks on `stream`. It never blocks the host and allocates
// nothing, so calls may be captured into a CUDA graph and replayed: the FIFO
// step counters live in device memory and carry over from kernel to kernel.
// Every rank of the group must issue the same calls in the same order, and
// the kernels of one call on all ranks must be able to run at the same time
// (they wait for each other): the communicator checks at launch that the
// blocks of every rank sharing a GPU fit on it at once, and refuses a call on
// the stream another rank of this process used for the same call (a stream
// would run the two kernels one after the other).
//
// Memory: the mesh transport (transport/mesh.hpp): each rank's region is
// device memory of its own GPU and holds the FIFO slots and tails of the
// connections into it and the heads of those out of it, so every wait polls
// the GPU's own memory and every store to a peer crosses the link once.
// Ranks on other GPUs reach a region by peer access. Where some pair of the
// group's GPUs has none (PCIe without P2P, some virtual machines), every
// region is mapped pinned host memory instead (options::regions): each GPU
// reaches every region over its own link, slower but everywhere; Simple and
// LL only, since 128-byte stores into host memory may arrive in pieces.
// Process ranks, one process per GPU, are made by collx/cuda/process.hpp.
// The abort word and one status word per rank live in mapped pinned host
// memory.
//
// Errors: argument errors (host pointers, buffers on another GPU, a stream of
// another GPU, a bad root, a reduction the type does not support, a variant
// that does not compose) throw collx::error before anything is enqueued; a
// buffer's attributes are asked of the runtime once and remembered (the last
// 8 buffers of each handle, so a handle is for one thread at a time). A
// failure inside a kernel (a wait past its deadline, an abort) is stored in
// the rank's status word: error() reads it at any time without synchronising;
// wait(stream) synchronises the stream and throws naming the rank. A kernel
// that fails raises the group's abort word, so the other ranks' kernels stop
// at once with status::aborted (their wait() names the rank that failed).
// abort() (any thread) makes every waiting kernel of the group return. After
// a kernel failure the connection state is undefined: destroy the group.
//
// LL128 relies on 128-byte stores arriving whole; between blocks of one GPU
// that is the GPU's own memory system, across GPUs NCCL enables it only on
// NVLink. A group spanning several GPUs asks NVML whether every pair of them
// is joined by NVLink (collx/cuda/links.hpp); where some pair is not, where
// NVML cannot say, or where the regions are host memory, the group excludes
// LL128 from the automatic choice and refuses it when named (why_not() says
// why; COLLX_DEBUG=1 prints it when the group is made).
// Needs nvcc (kernels are launched with <<<>>>).
#pragma once

#include <collx/algo/direct.hpp>
#include <collx/algo/nvls.hpp>
#include <collx/algo/ring.hpp>
#include <collx/algo/tree.hpp>
#include <collx/composition.hpp>
#include <collx/cuda/check.hpp>
#include <collx/cuda/device.hpp>
#include <collx/cuda/kernel.hpp>
#include <collx/cuda/links.hpp>
#include <collx/cuda/multicast.hpp>
#include <collx/cuda/region_handles.hpp>
#include <collx/detail/debug.hpp>
#include <collx/detail/env_choice.hpp>
#include <collx/detail/erased_visit.hpp>
#include <collx/detail/memory_kind.hpp>
#include <collx/dtype.hpp>
#include <collx/error.hpp>
#include <collx/needs.hpp>
#include <collx/options.hpp>
#include <collx/proto/ll.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/proto/simple.hpp>
#include <collx/reduce_op.hpp>
#include <collx/stripes.hpp>
#include <collx/transport/mesh.hpp>
#include <collx/transport/multimem.hpp>
#include <collx/transport/window_registry.hpp>
#include <collx/tune/gpu_profile.hpp>
#include <collx/tune/mesh_problem.hpp>
#include <collx/tune/model.hpp>
#include <collx/tune/presets.hpp>
#include <collx/type_list.hpp>
#include <collx/variants.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#if !defined(__CUDACC__)
#error "collx/cuda/communicator.hpp launches kernels: compile this translation unit with nvcc"
#endif

// Which element types and operators the type-erased reductions compile
// kernels for (see erased_kernels): every pair unless a program names fewer.
#ifndef COLLX_GPU_ERASED_DTYPES
#define COLLX_GPU_ERASED_DTYPES ::collx::dtype_set::all()
#endif
#ifndef COLLX_GPU_ERASED_OPS
#define COLLX_GPU_ERASED_OPS ::collx::reduce_op_set::all()
#endif

namespace collx::gpu {

/// The (element type, operator) pairs for which the type-erased reductions
/// (all_reduce, reduce_scatter and reduce given a dtype) compile kernels.
/// Every pair is one kernel per variant the automatic choice may take, so a
/// program that reduces few kinds of data names them, by defining
/// COLLX_GPU_ERASED_DTYPES (a collx::dtype_set) and COLLX_GPU_ERASED_OPS (a
/// collx::reduce_op_set) before including this header, alike in every
/// translation unit:
///   #define COLLX_GPU_ERASED_DTYPES collx::dtype_set::of(collx::dtype::bfloat16, collx::dtype::float32)
///   #define COLLX_GPU_ERASED_OPS collx::reduce_op_set::of(collx::reduce_op::sum)
/// A call outside them throws not_supported naming the macro; a typed call
/// (T*, and a static op such as collx::ops::max) compiles its own kernels.
template <dtype_set Types = COLLX_GPU_ERASED_DTYPES, reduce_op_set Ops = COLLX_GPU_ERASED_OPS>
struct erased_kernels {
  static constexpr dtype_set types = Types;
  static constexpr reduce_op_set ops = Ops;
};

/// Where a group's FIFO regions live.
enum class region_memory {
  /// Device memory where every pair of the group's GPUs has peer access,
  /// else host memory (COLLX_DEBUG=1 says which and why).
  automatic,
  /// Each rank's region on its own GPU; peers store into it by peer access
  /// (not_supported without it).
  device,
  /// Every region in mapped pinned host memory (cudaHostAlloc, or for
  /// process ranks a shared-memory segment registered with cudaHostRegister),
  /// which every GPU reaches without peer access. Simple and LL only.
  host,
};

/// The memory scope of the fences and release stores that order a step.
enum class memory_scope {
  /// GPU scope where every rank of the group runs on one GPU and the regions
  /// are device memory (nothing outside that GPU takes part in a step); system
  /// scope otherwise.
  automatic,
  /// System scope always.
  system,
};

inline const char* name(region_memory m) {
  switch (m) {
    case region_memory::automatic: return "automatic";
    case region_memory::device: return "device";
    case region_memory::host: return "host";
  }
  return "?";
}

/// How a group is made. The defaults suit ranks on separate GPUs of a node.
struct options {
  /// Blocks per rank per call (NCCL's channels), 1..transport::max_stripes;
  /// 0 (the default): automatic_stripes() of the group's placement.
  int stripes = 0;
  /// FIFO geometry, as comm_options (per protocol slot bytes, slots per FIFO).
  std::uint32_t fifo_slots = comm_options::default_fifo_slots;
  std::array<std::uint32_t, proto::channel_count> slot_bytes = comm_options{}.slot_bytes;
  /// Every wait of a kernel gives up after this long (then error() says timeout).
  std::uint64_t timeout_ms = 30'000;
  /// What the automatic choice prices variants with, where set; else
  /// tune_file, else COLLX_GPU_TUNE_FILE (`preset:NAME` or a GPU profile
  /// file), else the built-in preset for the machine the group finds: PCIe
  /// for host regions or GPUs without NVLink between every pair, h100_nvswitch
  /// or a100_nvswitch on NVLink (tune/gpu_profile.hpp).
  /// communicator::profile_origin() says which.
  std::optional<tune::profile> profile;
  std::string tune_file;
  /// Where the ranks' FIFO regions live (see region_memory).
  region_memory regions = region_memory::automatic;
  /// Every thread of a block fences before a post (true), or none does
  /// (false, the default): the leader's release store after the block
  /// barrier orders a send's stores, and a receiver frees its slots with a
  /// plain store after the barrier, as NCCL's primitives post
  /// (exec::cuda::fence_each_thread, post_freed). On an H200 the second took
  /// 12 µs per 8 B LL call where the first took 14.6, 14 µs per graph replay
  /// of 2 ranks where the first took 17 (65 against 168 for 8 ranks), and
  /// moved 229 GB/s at 256 MiB where the first moved 194; both passed the
  /// whole GPU test (bench/results/gpu-2026-12-04.md). COLLX_GPU_FENCE=each
  /// or =leader overrides it.
  bool fence_each_thread = false;
  /// Process ranks: how each rank's FIFO region is handed to its peers
  /// (region_handles.hpp). automatic tries posix_fd, then fabric, then
  /// cuda_ipc, and takes the first that works on every rank; a named way is
  /// the only one tried (not_supported on every rank where it fails on one).
  /// Every rank must ask alike. COLLX_GPU_REGION_HANDLE overrides it. Thread
  /// groups and host regions share nothing by handle and ignore it.
  region_handle region_handles = region_handle::automatic;
  /// The scope of the fences and release stores that order a step (see
  /// memory_scope). COLLX_GPU_SCOPE=system or =automatic overrides it.
  memory_scope scope = memory_scope::automatic;
  /// Whether nvls's reductions and stores go through an NVSwitch multicast
  /// object (see multicast_mode, collx/cuda/multicast.hpp): thread groups of
  /// one rank per GPU, every GPU offering multicast. COLLX_GPU_MULTICAST=
  /// automatic, off or on overrides it.
  multicast_mode multicast = multicast_mode::automatic;
};

/// Algorithms the automatic choice picks from: ring, tree, direct and nvls
/// (tune/mesh_problem.hpp, which prices a call as the group would run it).
using automatic_algorithms = tune::mesh_algorithms;

namespace detail {

/// What the ranks of one group share; freed when the last rank's handle goes.
struct group_state {
  int nranks = 0;
  int stripes = 1;
  std::vector<int> devices;  // rank → device
  bool several_devices = false;
  std::string ll128_refusal;            // why LL128 cannot run on this group (empty: it can)
  bool host_regions = false;            // regions in mapped pinned host memory (region_memory::host)
  transport::mesh_view view{};          // regions[r]: as the device addresses them
  std::vector<void*> host_allocations;  // thread groups with host regions: what cudaFreeHost frees
  std::uint32_t* abort_host = nullptr;  // mapped pinned: [0] abort word, then one status word per rank
  std::uint32_t* abort_dev = nullptr;
  std::uint64_t timeout_ns = 0;
  bool fence_each_thread = false;  // exec::cuda::fence_each_thread of every launch
  /// Process ranks with device regions: how the regions were shared
  /// (automatic where they were not shared by handle).
  region_handle region_sharing = region_handle::automatic;
  /// exec::cuda::one_gpu of every launch: steps ordered at GPU scope.
  bool gpu_scope = false;
  /// The regions and their multicast object where the group has one
  /// (multicast_regions); multicast_at[r]: the multicast address as rank r's
  /// GPU maps it. multicast_refusal: why the group has none ("" where it has).
  std::shared_ptr<void> multicast_memory;
  std::vector<std::byte*> multicast_at;
  std::string multicast_refusal;
  tune::profile profile{};
  std::string profile_origin;  // where profile comes from (profile_origin())
  /// Blocks of each launched kernel a device holds at once (kernel, device →
  /// blocks): queried once, then read on every launch; ranks of the group may
  /// launch from different threads.
  struct residency {
    const void* kernel;
    int device;
    int blocks;
  };
  mutable std::mutex residency_lock;
  mutable std::vector<residency> resident;
  /// Per rank: calls launched from this process so far and the stream of the
  /// last (see communicator::claim_stream). Sized nranks when the group is
  /// made (nothing allocates during a graph capture); under launch_lock.
  struct launch_record {
    std::uint64_t calls = 0;
    cudaStream_t stream = nullptr;
  };
  mutable std::mutex launch_lock;
  mutable std::vector<launch_record> launched;
  /// Process ranks (collx/cuda/process.hpp): the regions and words are
  /// mappings this holds, released with it, not allocations freed here;
  /// process_rank: this process's rank (-1 for a thread group).
  std::shared_ptr<void> mappings;
  int process_rank = -1;

  /// Registered user buffers (communicator::register_buffer), under
  /// windows_lock. `windows` holds every rank's span of each window (as this
  /// process maps it; a thread group fills a window's spans as its ranks
  /// register, process ranks all at once); `filled` how many ranks have, per
  /// window; `registered[r]` how many buffers rank r registered. Each rank's
  /// kernels read a copy in its GPU's memory (`tables[r]`, max_windows ×
  /// nranks spans), written when a window is complete.
  static constexpr int max_windows = 256;
  mutable std::mutex windows_lock;
  /// Set (release) once the first window is made, under windows_lock: a call
  /// that finds it clear has no window to look up, and skips the lock. A
  /// window is complete only once this rank has registered its part, so a
  /// rank whose own registration set it, or came after it, sees it set.
  std::atomic<bool> any_windows{false};
  transport::window_registry windows;
  std::vector<int> filled;
  std::vector<int> registered;
  std::vector<transport::window_span*> tables;
  /// Process ranks: what registers (every rank's span of the new window, by
  /// rank, through the bootstrap) and deregisters a buffer of this process.
  /// The last argument: why this rank refuses its buffer ("" where it does not).
  std::function<std::vector<transport::window_span>(void*, std::size_t, int, const std::string&)>
      register_across;
  std::function<void(int)> deregister_across;
  /// Thread groups with multicast: windows whose buffers are bound to a
  /// multicast object (window_multicast, by window; null where not). The
  /// object goes with the last rank's part of its window, before the memory
  /// may be freed.
  std::vector<std::shared_ptr<window_multicast>> bound_windows;

  ~group_state() {
    {
      int saved = 0;
      (void)cudaGetDevice(&saved);
      // Kernels of this group still running would read what is released
      // below (unmapping does not wait for them): wait for the GPUs this
      // process runs ranks on first (a process rank's own; every one of a
      // thread group's).
      for (std::size_t r = 0; r < devices.size(); ++r) {
        const bool here = process_rank < 0 || static_cast<std::size_t>(process_rank) == r;
        const auto seen = devices.begin() + static_cast<std::ptrdiff_t>(r);
        if (here && std::find(devices.begin(), seen, devices[r]) == seen) {
          (void)cudaSetDevice(devices[r]);
          (void)cudaDeviceSynchronize();
        }
      }
      for (std::size_t r = 0; r < tables.size(); ++r)
        if (tables[r] != nullptr) {
          (void)cudaSetDevice(devices[r]);
          (void)cudaFree(tables[r]);
        }
      (void)cudaSetDevice(saved);
    }
    if (mappings) {
      view = {};
      multicast_memory.reset();  // process ranks: the binding, before the regions it binds
      mappings.reset();
      return;
    }
    for (void* p : host_allocations) (void)cudaFreeHost(p);
    if (multicast_memory) {
      for (auto& p : view.regions) p = nullptr;  // the multicast object's regions
      multicast_memory.reset();
    }
    int saved = 0;
    (void)cudaGetDevice(&saved);
    for (std::size_t r = 0; r < devices.size() && !host_regions; ++r)
      if (view.regions[r] != nullptr) {
        (void)cudaSetDevice(devices[r]);
        (void)cudaFree(view.regions[r]);
      }
    (void)cudaSetDevice(saved);
    if (abort_host != nullptr) (void)cudaFreeHost(abort_host);
  }
  int* status_host(int rank) const { return reinterpret_cast<int*>(abort_host + 1 + rank); }
  int* status_dev(int rank) const { return reinterpret_cast<int*>(abort_dev + 1 + rank); }
  /// Ranks that share device d.
  int ranks_on(int d) const {
    int n = 0;
    for (int x : devices) n += x == d;
    return n;
  }
};

}  // namespace detail

struct process_access;  // collx/cuda/process.hpp's door to the private constructor

/// One rank's handle. Copyable (handles share the group); one thread at a
/// time per handle; abort() from any thread.
class communicator {
 public:
  communicator() = default;

  /// One rank per entry of `devices` (device ordinals; repeats put several
  /// ranks on one GPU). Throws: no GPU, a bad ordinal, GPUs without peer
  /// access to each other, options out of range.
  static std::vector<communicator> create_group(std::span<const int> devices, const options& opt = {}) {
    require(!devices.empty() && devices.size() <= std::size_t(transport::max_mesh_ranks),
            "gpu::communicator::create_group",
            "a group has 1 to " + std::to_string(transport::max_mesh_ranks) + " ranks, got " +
                std::to_string(devices.size()));
    validate(opt, "gpu::communicator::create_group");
    const int count = device_count("gpu::communicator::create_group");
    auto g = std::make_shared<detail::group_state>();
    g->nranks = static_cast<int>(devices.size());
    g->devices.assign(devices.begin(), devices.end());
    g->launched.resize(devices.size());
    int crowd = 0;  // the most ranks on one GPU
    for (int d : g->devices) crowd = std::max(crowd, g->ranks_on(d));
    g->stripes = opt.stripes != 0 ? opt.stripes : automatic_stripes(crowd);
    for (std::size_t r = 0; r < devices.size(); ++r)
      require(devices[r] >= 0 && devices[r] < count, "gpu::communicator::create_group", [&] {
        return "rank " + std::to_string(r) + "'s device " + std::to_string(devices[r]) + " does not exist (" +
               std::to_string(count) + " devices)";
      });
    for (int d : g->devices) g->several_devices |= d != g->devices[0];
    g->host_regions =
        use_host_regions(opt.regions, missing_peer_access(g->devices), "gpu::communicator::create_group");
    if (!g->host_regions) enable_peer_access(g->devices);
    g->gpu_scope = gpu_scope_for(opt, *g);
    const nvlink_verdict links = g->several_devices && !g->host_regions
                                     ? nvlink_between(bus_ids_of(g->devices), nvml_deadline(opt))
                                     : nvlink_verdict{true, {}};
    g->ll128_refusal = ll128_refusal_for(*g, links);
    report_ll128("gpu::communicator::create_group", g->ll128_refusal);
    g->view.layout = layout_for(g->nranks, opt, g->stripes);
    make_multicast(*g, opt);
    const std::size_t region = g->view.layout.region_bytes();
    for (int r = 0; r < g->nranks; ++r) {
      if (g->multicast_memory) break;  // made with the multicast object
      device_guard on(g->devices[static_cast<std::size_t>(r)]);
      void* p = nullptr;
      if (g->host_regions) {
        // Portable: every GPU of the group may map it, not only the current one.
        check(cudaHostAlloc(&p, region, cudaHostAllocMapped | cudaHostAllocPortable),
              "cudaHostAlloc of a rank's FIFO region");
        g->host_allocations.push_back(p);
        std::memset(p, 0, region);
        void* dev = nullptr;
        check(cudaHostGetDevicePointer(&dev, p, 0), "cudaHostGetDevicePointer of a rank's FIFO region");
        g->view.regions[r] = static_cast<std::byte*>(dev);
        continue;
      }
      check(cudaMalloc(&p, region), "cudaMalloc of a rank's FIFO region");
      g->view.regions[r] = static_cast<std::byte*>(p);
      check(cudaMemset(p, 0, region), "cudaMemset of a rank's FIFO region");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a region's initialisation");
    }
    {
      device_guard on(g->devices[0]);
      void* words = nullptr;
      const std::size_t bytes = sizeof(std::uint32_t) * (1 + static_cast<std::size_t>(g->nranks));
      check(cudaHostAlloc(&words, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
            "cudaHostAlloc of the abort and status words");
      g->abort_host = static_cast<std::uint32_t*>(words);
      for (std::size_t i = 0; i < 1 + static_cast<std::size_t>(g->nranks); ++i) g->abort_host[i] = 0;
      void* dev = nullptr;
      check(cudaHostGetDevicePointer(&dev, words, 0), "cudaHostGetDevicePointer");
      g->abort_dev = static_cast<std::uint32_t*>(dev);
      g->view.abort = g->abort_dev;
    }
    g->timeout_ns = opt.timeout_ms * 1'000'000ull;
    g->fence_each_thread = fences_of(opt);
    std::vector<int> distinct = g->devices;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    int sm_major = sm_major_of(distinct[0]);
    for (int d : distinct) sm_major = std::min(sm_major, sm_major_of(d));
    price_with(*g, opt, static_cast<int>(distinct.size()), links.all, sm_major,
               "gpu::communicator::create_group");
    std::vector<communicator> out;
    for (int r = 0; r < g->nranks; ++r) out.push_back(communicator(g, r));
    return out;
  }

  int rank() const { return rank_; }
  int size() const { return live().nranks; }
  int device() const { return live().devices[static_cast<std::size_t>(rank_)]; }
  int stripes() const { return live().stripes; }
  /// Where the group's FIFO regions are: region_memory::device or ::host.
  region_memory regions() const { return live().host_regions ? region_memory::host : region_memory::device; }
  /// How process ranks' device regions were handed to the peers (posix_fd,
  /// fabric or cuda_ipc); automatic where nothing was shared by handle (a
  /// thread group, host regions).
  region_handle region_sharing() const { return live().region_sharing; }
  /// Whether this group's steps are ordered at GPU scope (memory_scope).
  bool gpu_scope() const { return live().gpu_scope; }
  /// The profile the automatic choice prices with, and where it comes from
  /// (options::profile, a preset or file named by options::tune_file or
  /// COLLX_GPU_TUNE_FILE, or the built-in preset for this machine, and why).
  const tune::profile& profile() const { return live().profile; }
  const std::string& profile_origin() const { return live().profile_origin; }

  /// Whether nvls's reductions and stores go through an NVSwitch multicast
  /// object (multicast_mode); why_no_multicast() says why not.
  bool multicast() const { return static_cast<bool>(live().multicast_memory); }
  std::string why_no_multicast() const { return live().multicast_refusal; }

  /// Why protocol `p` cannot run on this group (empty: it can).
  std::string why_not(proto_id p) const {
    return p == proto_id::ll128 ? live().ll128_refusal : std::string();
  }

  // ---- collectives (NCCL's argument conventions; see communicator.hpp) ------------
  // A reduction's op is a reduce_op or, to compile one operator's kernels
  // instead of every one's, a static one (collx::ops::sum, …).
  template <class T, reduce_op_argument O>
  void all_reduce(const T* send, T* recv, std::size_t count, O op, cudaStream_t stream) {
    automatic<coll::all_reduce>(send, recv, count, op, 0, stream);
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t sendcount, cudaStream_t stream) {
    automatic<coll::all_gather>(send, recv, sendcount, reduce_op::sum, 0, stream);
  }
  template <class T, reduce_op_argument O>
  void reduce_scatter(const T* send, T* recv, std::size_t recvcount, O op, cudaStream_t stream) {
    automatic<coll::reduce_scatter>(send, recv, recvcount, op, 0, stream);
  }
  template <class T>
  void broadcast(const T* send, T* recv, std::size_t count, int root, cudaStream_t stream) {
    automatic<coll::broadcast>(send, recv, count, reduce_op::sum, root, stream);
  }
  template <class T, reduce_op_argument O>
  void reduce(const T* send, T* recv, std::size_t count, O op, int root, cudaStream_t stream) {
    automatic<coll::reduce>(send, recv, count, op, root, stream);
  }
  template <class T>
  void all_to_all(const T* send, T* recv, std::size_t count, cudaStream_t stream) {
    automatic<coll::all_to_all>(send, recv, count, reduce_op::sum, 0, stream);
  }

  // ---- type-erased: dt names the element type -------------------------------------
  // Reductions instantiate the kernels of the (type, operator) pairs of
  // erased_kernels where they are used (every pair by default).
  // Collectives that only move data run on an unsigned type of the element's
  // width (the bytes are the same, and four kernel sets serve twelve dtypes).
  template <class Kernels = erased_kernels<>>
  void all_reduce(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op,
                  cudaStream_t stream) {
    erased_reduction<coll::all_reduce, Kernels>(send, recv, count, dt, op, 0, stream);
  }
  template <class Kernels = erased_kernels<>>
  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtype dt, reduce_op op,
                      cudaStream_t stream) {
    erased_reduction<coll::reduce_scatter, Kernels>(send, recv, recvcount, dt, op, 0, stream);
  }
  template <class Kernels = erased_kernels<>>
  void reduce(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root,
              cudaStream_t stream) {
    erased_reduction<coll::reduce, Kernels>(send, recv, count, dt, op, root, stream);
  }
  template <class = void>
  void all_gather(const void* send, void* recv, std::size_t sendcount, dtype dt, cudaStream_t stream) {
    erased_movement<coll::all_gather>(send, recv, sendcount, dt, 0, stream);
  }
  template <class = void>
  void broadcast(const void* send, void* recv, std::size_t count, dtype dt, int root, cudaStream_t stream) {
    erased_movement<coll::broadcast>(send, recv, count, dt, root, stream);
  }
  template <class = void>
  void all_to_all(const void* send, void* recv, std::size_t count, dtype dt, cudaStream_t stream) {
    erased_movement<coll::all_to_all>(send, recv, count, dt, 0, stream);
  }

  /// The variant the automatic choice takes for collective c of `bytes`
  /// (nccl-tests' size) on this group, for a call that offers `call` (its
  /// registered windows; call_of() states it for a call's buffers): priced
  /// as the group would run it (tune/mesh_problem.hpp).
  variant_choice choose(coll c, std::size_t bytes, const tune::mesh_call& call = {}) const {
    const detail::group_state& g = live();
    const tune::problem q = tune::mesh_problem(g.view.layout, c, static_cast<double>(bytes), call);
    // The profile's multicast rate describes the machine; it applies only
    // where the buffers the call goes through are bound to a multicast object.
    const tune::profile m = tune::mesh_profile(g.profile, tune::mesh_multicast(q, call, multicast()));
    variant_choice best{};
    double best_us = 0;
    bool found = false;
    for_each_automatic([&]<class A, class P>() {
      if (!A::implements(c) || !allowed<A, P>()) return;
      const double us = tune::predict_us<A, P>(m, q);
      if (found && !(us < best_us)) return;
      best = {A::id, P::id};
      best_us = us;
      found = true;
    });
    return best;
  }

  /// Enqueues <Algo, Proto>'s schedule of collective C on `stream`: compiles
  /// one kernel per operator a runtime `op` may name, one for a static op.
  template <class Algo, class Proto, coll C, class T, reduce_op_argument O>
  void execute(const T* send, T* recv, std::size_t count, O op, int root, cudaStream_t stream) {
    transport::call_windows windows{};
    if constexpr (algorithm_needs<Algo>::peer_memory) windows = call_windows_of<C>(send, recv, count, root);
    execute_with<Algo, Proto, C>(send, recv, count, op, root, stream, windows);
  }

  /// What a call of C on these buffers offers the automatic choice
  /// (tune::mesh_call): whether its buffers lie in complete registered
  /// windows and which of those are bound to a multicast object, and whether
  /// the switch computes op on T. Only what is the same on every rank where
  /// the ranks' calls are valid (registration is all or none), so that every
  /// rank chooses alike; in place is not (see facts_of).
  template <coll C, class T>
  tune::mesh_call call_of(const T* send, const T* recv, std::size_t count, reduce_op op = reduce_op::sum,
                          int root = 0) const {
    return facts_of<C>(send, recv, count, op, root);
  }

  /// The first failure of this rank's kernels since the group was made (ok if
  /// none). Reads mapped host memory: no synchronisation, may lag the device.
  status error() const {
    const int v = *static_cast<volatile int*>(live().status_host(rank_));
    return static_cast<status>(v);
  }

  /// Waits for `stream` and throws collx::error naming this rank if any of its
  /// kernels failed.
  void wait(cudaStream_t stream) const {
    {
      device_guard on(device());
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    const status st = error();
    if (st != status::ok)
      throw_error(st, "gpu::communicator: rank " + std::to_string(rank_) + " (device " +
                          std::to_string(device()) + "): a collective failed: " + to_string(st) +
                          cause_of(st));
  }

  /// Where this rank was aborted: the rank whose kernel failed first, as far
  /// as the status words show (a failing kernel raises the group's abort
  /// word, collx/cuda/kernel.hpp's report_failure).
  std::string cause_of(status st) const {
    if (st != status::aborted) return {};
    const detail::group_state& g = live();
    for (int q = 0; q < g.nranks; ++q) {
      const auto v = static_cast<status>(*static_cast<volatile int*>(g.status_host(q)));
      if (v != status::ok && v != status::aborted)
        return " (rank " + std::to_string(q) + "'s collective failed: " + to_string(v) + ")";
    }
    return " (abort() was called, or the failing rank's status is not visible yet)";
  }

  /// The handle a user kernel runs collectives with (collx/cuda/device.hpp).
  device_comm device_handle() const {
    const detail::group_state& g = live();
    device_comm h;
    h.view = g.view;
    if (g.multicast_memory) h.view.multicast = g.multicast_at[static_cast<std::size_t>(rank_)];
    h.exec.abort_word = g.abort_dev;
    h.exec.timeout_ns = g.timeout_ns;
    h.exec.fence_each_thread = g.fence_each_thread;
    h.exec.one_gpu = g.gpu_scope;
    h.rank = rank_;
    h.nranks = g.nranks;
    h.stripes = g.stripes;
    h.status_word = g.status_dev(rank_);
    return h;
  }

  /// Makes every waiting kernel of the group return status::aborted. Any thread.
  void abort() const { *static_cast<volatile std::uint32_t*>(live().abort_host) = 1; }

  // ---- registered user buffers ------------------------------------------------------
  /// Registers [ptr, ptr + bytes) of this rank's GPU memory as its part of a
  /// window: the k-th buffer every rank registers makes window k (returned).
  /// A call whose send and recv buffers lie inside windows on every rank
  /// (any offsets, any windows; a broadcast's non-root send is not looked
  /// at) lets the peer-memory schedule (algo::nvls) read peers' send buffers
  /// and write into their recv buffers in place: each datum is copied once,
  /// not staged through the FIFO region (transport/user_windows.hpp).
  /// Collective, in the same order on every rank. A thread group's ranks do
  /// not wait for each other here (one thread may register for all of them);
  /// a window is used once every rank has registered its part, so register
  /// on every rank before the first call on those buffers. Process ranks
  /// exchange CUDA IPC handles through the bootstrap (the buffer must come
  /// from cudaMalloc). A thread group with multicast binds a window, once
  /// every rank has registered its part, to a multicast object of its own
  /// where the buffers allow it (alloc_window's do; window_bound() tells), and
  /// nvls then runs through the switch over them. Not during a graph
  /// capture. Errors: host memory,
  /// another GPU's memory, bytes 0, more than max_windows windows,
  /// status::not_supported on a group of GPUs without peer access.
  /// A call registered on some ranks and not on others fails with
  /// status::mismatch on the registered ones where they find it out, or runs
  /// into the deadline: register on every rank or none.
  int register_buffer(void* ptr, std::size_t bytes) {
    (void)live();  // an empty handle: a clear error, not a null dereference
    detail::group_state& g = *g_;
    const char* op = "gpu::communicator::register_buffer";
    // Process ranks exchange what they register: one that refuses its buffer
    // still takes part, so that every rank fails alike instead of waiting.
    std::string refusal;
    try {
      require(bytes > 0, op, "bytes is 0");
      if (g.host_regions && g.several_devices)
        throw_error(
            status::not_supported,
            std::string(op) +
                ": this group's GPUs cannot reach each other's memory (its FIFO regions are host memory), "
                "and peers would load the registered buffers directly");
      check_buffer(ptr, bytes, op, "the buffer");
    } catch (const collx::error& e) {
      if (!g.register_across) throw;
      refusal = e.what();
    }
    std::lock_guard<std::mutex> hold(g.windows_lock);
    if (g.filled.empty()) {
      g.windows = transport::window_registry(g.nranks);
      g.registered.assign(static_cast<std::size_t>(g.nranks), 0);
      g.tables.assign(static_cast<std::size_t>(g.nranks), nullptr);
      g.any_windows.store(true, std::memory_order_release);
    }
    const int k = g.registered[static_cast<std::size_t>(rank_)];
    require(k < detail::group_state::max_windows, op, [&] {
      return "rank " + std::to_string(rank_) + " has registered " + std::to_string(k) +
             " buffers, the most (" + std::to_string(detail::group_state::max_windows) + ")";
    });
    const auto mine = transport::window_span{reinterpret_cast<std::uintptr_t>(ptr), bytes};
    if (g.register_across) {  // process ranks: every rank's span at once
      const std::vector<transport::window_span> spans = g.register_across(ptr, bytes, k, refusal);
      g.windows.add(spans);
      g.filled.push_back(g.nranks);
      write_table(g, rank_, k);
    } else {
      if (k == static_cast<int>(g.filled.size())) {
        g.windows.add(std::vector<transport::window_span>(static_cast<std::size_t>(g.nranks)));
        g.filled.push_back(0);
      }
      g.windows.set(k, rank_, mine);
      if (++g.filled[static_cast<std::size_t>(k)] == g.nranks) {
        bind_window_multicast(g, k);
        for (int q = 0; q < g.nranks; ++q) write_table(g, q, k);
      }
    }
    ++g.registered[static_cast<std::size_t>(rank_)];
    return k;
  }

  /// Forgets this rank's part of window `window`: later calls of this rank
  /// on it are not registered. Calls already enqueued on it must have
  /// finished (synchronise their streams first); the memory may be freed
  /// once every rank has deregistered. Collective for process ranks (their
  /// IPC mappings of the peers' parts are closed).
  void deregister_buffer(int window) {
    (void)live();
    detail::group_state& g = *g_;
    std::lock_guard<std::mutex> hold(g.windows_lock);
    require(window >= 0 && window < g.windows.count() && g.windows.span(window, rank_).bytes > 0,
            "gpu::communicator::deregister_buffer", [&] {
              return "window " + std::to_string(window) + " is not registered on rank " +
                     std::to_string(rank_);
            });
    g.windows.set(window, rank_, {});
    if (g.deregister_across) g.deregister_across(window);
    const auto w = static_cast<std::size_t>(window);
    if (w < g.bound_windows.size() && g.bound_windows[w] != nullptr) {
      bool any_left = false;
      for (int q = 0; q < g.nranks; ++q) any_left = any_left || g.windows.span(window, q).bytes > 0;
      if (!any_left) g.bound_windows[w].reset();  // unbound and unmapped: the memory may be freed now
    }
  }

  /// Whether window `window`'s buffers are bound to a multicast object (see
  /// alloc_window); false for a window not registered (yet) on every rank.
  bool window_bound(int window) const {
    const detail::group_state& g = live();
    std::lock_guard<std::mutex> hold(g.windows_lock);
    const auto w = static_cast<std::size_t>(window);
    return window >= 0 && w < g.bound_windows.size() && g.bound_windows[w] != nullptr;
  }

  /// Device memory for a window (NCCL's ncclMemAlloc): `bytes` (> 0) on this
  /// rank's GPU, rounded up to the multicast granularity, from the virtual
  /// memory API, readable and writable by every GPU of the group. Registered
  /// on every rank at the same size and offset (register_buffer), a thread
  /// group with multicast (multicast()) binds the window to a multicast
  /// object, and nvls reduces from and stores into the buffers themselves
  /// through it: no staging copies. Elsewhere (no multicast; process ranks,
  /// whose windows travel as CUDA IPC handles of cudaMalloc memory) it is
  /// cudaMalloc memory. Freed with the returned object, after the window is
  /// deregistered on every rank. Errors: bytes 0; the driver's failures.
  std::unique_ptr<window_memory> alloc_window(std::size_t bytes) const {
    const detail::group_state& g = live();
    require(bytes > 0, "gpu::communicator::alloc_window", "bytes is 0");
    const int dev = device();
    if (!multicast() || g.process_rank >= 0) return window_memory::plain(dev, bytes);
    const std::size_t align = multicast_alignment(g.devices, g.devices.size(), bytes);
    return window_memory::vmm(dev, g.devices, bytes, align);
  }

 private:
  friend struct process_access;

  static void validate(const options& opt, const char* op) {
    require(opt.stripes >= 0 && opt.stripes <= transport::max_stripes, op,
            "stripes must be in [1, " + std::to_string(transport::max_stripes) + "] or 0 (automatic), got " +
                std::to_string(opt.stripes));
    require(opt.fifo_slots >= 2 && opt.fifo_slots <= 1024, op,
            "fifo_slots must be in [2, 1024], got " + std::to_string(opt.fifo_slots));
    require(opt.regions == region_memory::automatic || opt.regions == region_memory::device ||
                opt.regions == region_memory::host,
            op, "regions is not a region_memory value: " + std::to_string(static_cast<int>(opt.regions)));
    require(opt.scope == memory_scope::automatic || opt.scope == memory_scope::system, op,
            "scope is not a memory_scope value: " + std::to_string(static_cast<int>(opt.scope)));
    require(static_cast<unsigned>(opt.region_handles) <= static_cast<unsigned>(region_handle::cuda_ipc), op,
            "region_handles is not a region_handle value: " +
                std::to_string(static_cast<int>(opt.region_handles)));
    require(static_cast<unsigned>(opt.multicast) <= static_cast<unsigned>(multicast_mode::on), op,
            "multicast is not a multicast_mode value: " + std::to_string(static_cast<int>(opt.multicast)));
  }
  /// How long NVML may take to say how the GPUs are linked: half the
  /// group's timeout, so that a rank whose NVML stalled still answers its
  /// peers before their bootstrap waits give up.
  static std::chrono::milliseconds nvml_deadline(const options& opt) {
    return std::chrono::milliseconds(std::max<std::uint64_t>(1, opt.timeout_ms / 2));
  }
  /// Whether a group's steps may be ordered at GPU scope: options::scope (or
  /// COLLX_GPU_SCOPE) allows it, and every rank runs on one GPU with its
  /// region in device memory.
  static bool gpu_scope_for(const options& opt, const detail::group_state& g) {
    const memory_scope scope = collx::detail::env_choice(
        "COLLX_GPU_SCOPE", {{"automatic", memory_scope::automatic}, {"system", memory_scope::system}},
        opt.scope);
    return scope == memory_scope::automatic && !g.several_devices && !g.host_regions;
  }
  /// options::multicast, or what COLLX_GPU_MULTICAST names.
  static multicast_mode multicast_of(const options& opt) {
    return collx::detail::env_choice(
        "COLLX_GPU_MULTICAST",
        {{"automatic", multicast_mode::automatic}, {"off", multicast_mode::off}, {"on", multicast_mode::on}},
        opt.multicast);
  }
  /// A thread group's regions with a multicast object over their buffers,
  /// where multicast_of(opt) and the group allow it (g.devices, host_regions
  /// and view.layout set; the layout is realigned for the object). Where
  /// not, g.multicast_refusal says why: not_supported if multicast is on,
  /// COLLX_DEBUG=1 prints it otherwise.
  static void make_multicast(detail::group_state& g, const options& opt) {
    const multicast_mode mode = multicast_of(opt);
    if (mode == multicast_mode::off) {
      g.multicast_refusal = "multicast is off (options::multicast or COLLX_GPU_MULTICAST)";
      return;
    }
    try {
      g.multicast_refusal = multicast_refusal(g.devices, g.host_regions);
      if (g.multicast_refusal.empty()) {
        const transport::mesh_layout plain = g.view.layout;
        const std::size_t align =
            multicast_alignment(g.devices, g.devices.size(), plain.fifos.peer_buffer_bytes());
        const transport::mesh_layout l = transport::mesh_layout::make(plain.fifos, align);
        auto m = multicast_regions::create(g.devices, l.region_bytes(), l.peer_buffer_offset(),
                                           l.peer_buffer_span());
        g.view.layout = l;
        for (int r = 0; r < g.nranks; ++r) {
          g.view.regions[r] = m->region(r);
          g.multicast_at.push_back(m->multicast(r));
        }
        g.multicast_memory = std::shared_ptr<multicast_regions>(std::move(m));
      }
    } catch (const collx::error& e) {
      g.multicast_refusal = e.what();
    }
    if (g.multicast_refusal.empty()) return;
    if (mode == multicast_mode::on)
      throw_error(status::not_supported,
                  "gpu::communicator::create_group: multicast is on, but " + g.multicast_refusal);
    if (collx::detail::debug_enabled())
      std::fprintf(stderr, "collx: gpu::communicator::create_group: no multicast: %s\n",
                   g.multicast_refusal.c_str());
  }
  /// options::region_handles, or what COLLX_GPU_REGION_HANDLE names.
  static region_handle region_handles_of(const options& opt) {
    const char* e = std::getenv("COLLX_GPU_REGION_HANDLE");
    if (e == nullptr || *e == '\0') return opt.region_handles;
    return parse_region_handle(e, "COLLX_GPU_REGION_HANDLE");
  }
  /// options::fence_each_thread, or what COLLX_GPU_FENCE says (each, leader).
  static bool fences_of(const options& opt) {
    return collx::detail::env_choice("COLLX_GPU_FENCE", {{"each", true}, {"leader", false}},
                                     opt.fence_each_thread);
  }
  /// The number of GPUs; not_supported naming `op` where there is none.
  static int device_count(const char* op) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (no_device(e, count)) {
      (void)cudaGetLastError();
      throw_error(status::not_supported, std::string(op) + ": no CUDA device on this machine");
    }
    check(e, "cudaGetDeviceCount");
    return count;
  }
  /// FIFO regions for `stripes` (resolved: not 0) stripes per directed pair.
  static transport::mesh_layout layout_for(int nranks, const options& opt, int stripes) {
    return tune::mesh_layout_of(nranks, opt.fifo_slots, opt.slot_bytes, stripes);
  }
  communicator(std::shared_ptr<detail::group_state> g, int rank) : g_(std::move(g)), rank_(rank) {}

  const detail::group_state& live() const {
    if (!g_) throw_error(status::invalid_argument, "gpu::communicator: used before create_group");
    return *g_;
  }

  template <class A, class P>
  bool allowed() const {
    return !(protocol_needs<P>::in_order_128b_lines && !live().ll128_refusal.empty());
  }

  /// Why LL128 cannot run on group g, whose GPUs' links are `links` (empty:
  /// it can).
  static std::string ll128_refusal_for(const detail::group_state& g, const nvlink_verdict& links) {
    if (g.host_regions)
      return "LL128 needs 128-byte stores that arrive whole; this group's FIFOs are in host memory, "
             "reached over PCIe, where they may arrive in pieces";
    if (!links.all)
      return "LL128 needs 128-byte stores that arrive whole; across GPUs that holds on NVLink only, and " +
             links.why;
    return {};
  }

  /// The profile group g prices with (tune/gpu_profile.hpp): options::profile
  /// where set, else what options::tune_file or COLLX_GPU_TUNE_FILE names,
  /// else the preset for the machine g found (its `gpus` distinct GPUs, all
  /// joined by NVLink or not, host regions, multicast, and `sm_major`, the
  /// lowest compute capability among them). COLLX_DEBUG=1 prints it where
  /// `op` is set.
  static void price_with(detail::group_state& g, const options& opt, int gpus, bool all_nvlink, int sm_major,
                         const char* op) {
    if (opt.profile) {
      g.profile = *opt.profile;
      g.profile_origin = "gpu::options::profile";
    } else {
      tune::gpu_machine m;
      m.gpus = gpus;
      m.host_regions = g.host_regions;
      m.all_nvlink = all_nvlink;
      m.multicast = static_cast<bool>(g.multicast_memory);
      m.sm_major = sm_major;
      const tune::active_profile a = tune::resolve_gpu_profile(opt.tune_file, m, tune::this_machine());
      g.profile = a.model;
      g.profile_origin = a.origin;
    }
    if (op != nullptr && collx::detail::debug_enabled())
      std::fprintf(stderr, "collx: %s: the automatic choice prices with %s\n", op, g.profile_origin.c_str());
  }

  /// The major compute capability of GPU `device`.
  static int sm_major_of(int device) {
    int major = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
          "cudaDeviceGetAttribute(compute capability)");
    return major;
  }

  /// COLLX_DEBUG=1: says why a new group excludes LL128.
  static void report_ll128(const char* op, const std::string& refusal) {
    if (refusal.empty()) return;
    if (collx::detail::debug_enabled())
      std::fprintf(stderr, "collx: %s: LL128 excluded: %s\n", op, refusal.c_str());
  }

  /// The PCI bus ids of `devices` (NVML names GPUs by them).
  static std::vector<std::string> bus_ids_of(const std::vector<int>& devices) {
    std::vector<std::string> ids;
    for (int d : devices) {
      char id[32] = {};
      check(cudaDeviceGetPCIBusId(id, sizeof id, d), "cudaDeviceGetPCIBusId");
      ids.emplace_back(id);
    }
    return ids;
  }

  /// Pairs (a, b) of distinct devices where a cannot reach b's memory, as text
  /// ("" when every pair can).
  static std::string missing_peer_access(const std::vector<int>& devices) {
    std::vector<int> d(devices);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    std::string missing;
    for (int a : d)
      for (int b : d) {
        if (a == b) continue;
        int ok = 0;
        check(cudaDeviceCanAccessPeer(&ok, a, b), "cudaDeviceCanAccessPeer");
        if (!ok) missing += "device " + std::to_string(a) + " to " + std::to_string(b) + ", ";
      }
    if (!missing.empty()) missing.resize(missing.size() - 2);
    return missing;
  }

  /// Whether the regions go to host memory: as asked, or (automatic) where
  /// some pair lacks peer access. Refuses device regions without it.
  static bool use_host_regions(region_memory asked, const std::string& missing, const char* op) {
    if (asked == region_memory::host) return true;
    if (missing.empty()) return false;
    if (asked == region_memory::device)
      throw_error(status::not_supported, std::string(op) +
                                             ": device regions need peer access between every pair of GPUs; "
                                             "missing from " +
                                             missing + " (use region_memory::host or automatic)");
    if (collx::detail::debug_enabled())
      std::fprintf(stderr,
                   "collx: %s: no peer access for %s; FIFO regions in mapped host memory, LL128 "
                   "excluded\n",
                   op, missing.c_str());
    return true;
  }

  template <class F>
  static void for_each_automatic(F&& f) {
    [&]<class... As>(type_list<As...>) {
      (
          [&]<class A>() {
            [&]<class... Ps>(type_list<Ps...>) {
              (
                  [&]<class P>() {
                    if constexpr (composable<A, P, transport::mesh, exec::cuda>)
                      f.template operator()<A, P>();
                  }.template operator()<Ps>(),
                  ...);
            }(protocols_of<A>{});
          }.template operator()<As>(),
          ...);
    }(automatic_algorithms{});
  }

  template <coll C, class Kernels>
  void erased_reduction(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root,
                        cudaStream_t stream) {
    collx::detail::visit_compiled_reduction<Kernels::types, Kernels::ops>(
        dt, op, name(C), "COLLX_GPU_ERASED_DTYPES", "COLLX_GPU_ERASED_OPS",
        [&]<class T, reduce_op Op>(std::type_identity<T>, static_reduce_op<Op> o) {
          automatic<C>(static_cast<const T*>(send), static_cast<T*>(recv), count, o, root, stream);
        });
  }

  template <coll C>
  void erased_movement(const void* send, void* recv, std::size_t count, dtype dt, int root,
                       cudaStream_t stream) {
    require(is_valid(dt), name(C),
            [&] { return "dtype " + std::to_string(int(dt)) + " is not a collx dtype"; });
    auto run = [&]<class W>(std::type_identity<W>) {
      automatic<C>(static_cast<const W*>(send), static_cast<W*>(recv), count, reduce_op::sum, root, stream);
    };
    switch (size_of(dt)) {
      case 1: run(std::type_identity<std::uint8_t>{}); break;
      case 2: run(std::type_identity<half_t>{}); break;  // moved, never computed on
      case 4: run(std::type_identity<std::uint32_t>{}); break;
      case 8: run(std::type_identity<std::uint64_t>{}); break;
      default:
        throw_error(status::not_supported,
                    std::string(name(C)) + ": no element width " + std::to_string(size_of(dt)));
    }
  }

  /// execute() with the call's windows (peer-memory schedules read
  /// registered buffers in place: register_buffer; empty for the others).
  template <class Algo, class Proto, coll C, class T, reduce_op_argument O>
  void execute_with(const T* send, T* recv, std::size_t count, O op, int root, cudaStream_t stream,
                    const transport::call_windows& windows) {
    const detail::group_state& g = live();
    static_assert(Algo::implements(C), "this algorithm does not implement the collective");
    if constexpr (collx::detail::is_static_reduce_op<O>)
      static_assert(!is_reduction(C) || is_supported(O::value, dtype_of<T>),
                    "this reduction is not defined for this element type (bitwise on floats)");
    static_assert(composable<Algo, Proto, transport::mesh, exec::cuda>,
                  "this algorithm and protocol do not compose on GPU ranks (collx/composition.hpp)");
    require(allowed<Algo, Proto>(), name(C), [&] { return why_not(Proto::id); });
    validate<C, T>(send, recv, count, op, root, stream);
    const schedule_args<T> a{send, recv, count, root, rank_, g.nranks};
    visit_reduce_op(op, [&](auto o) {
      constexpr reduce_op Op = decltype(o)::value;
      if constexpr (is_reduction(C) && is_bitwise(Op) && !std::is_integral_v<T>) {
        throw_error(status::invalid_argument,
                    std::string(name(C)) + ": bitwise reduction of a floating type");
      } else {
        constexpr reduce_op Used = is_reduction(C) ? Op : reduce_op::sum;
        if constexpr (Used == Op) launch(collective_kernel<Algo, Proto, C, T, Used>, a, stream, windows);
      }
    });
  }

  /// The windows of this rank's call of C (windows_of; facts, where given,
  /// gets what they offer the choice). A broadcast's non-root send is never
  /// read: its recv stands for it.
  template <coll C, class T>
  transport::call_windows call_windows_of(const T* send, const T* recv, std::size_t count, int root,
                                          tune::mesh_call* facts = nullptr) const {
    const detail::group_state& g = live();
    const std::size_t P = static_cast<std::size_t>(g.nranks);
    const std::size_t send_n = C == coll::reduce_scatter || C == coll::all_to_all ? count * P : count;
    const std::size_t recv_n = C == coll::all_gather || C == coll::all_to_all ? count * P : count;
    const bool root_only = C == coll::broadcast && rank_ != root;
    return windows_of(g, root_only ? recv : send, (root_only ? recv_n : send_n) * sizeof(T), recv,
                      recv_n * sizeof(T), facts);
  }

  /// call_of() for a call of T with operator op: its windows' facts from
  /// call_windows_of, and whether the switch computes op on T. Not whether
  /// the call is in place: ranks may differ in that (the kernels agree on it
  /// from what every rank published), and a choice that followed it could
  /// differ between ranks, whose kernels would then wait for each other
  /// until their deadline. Priced out of place.
  template <coll C, class T>
  tune::mesh_call facts_of(const T* send, const T* recv, std::size_t count, reduce_op op, int root,
                           transport::call_windows* windows = nullptr) const {
    tune::mesh_call c;
    const transport::call_windows w = call_windows_of<C>(send, recv, count, root, &c);
    if (windows != nullptr) *windows = w;
    c.switch_reduces = transport::switch_reduces<T>(op);
    return c;
  }

  template <coll C, class T, reduce_op_argument O>
  void automatic(const T* send, T* recv, std::size_t count, O op, int root, cudaStream_t stream) {
    const detail::group_state& g = live();
    const std::size_t bytes = count * sizeof(T) *
                              (C == coll::all_gather || C == coll::reduce_scatter || C == coll::all_to_all
                                   ? static_cast<std::size_t>(g.nranks)
                                   : 1);
    // The call's windows decide how nvls would run it (and are what it reads).
    transport::call_windows windows{};
    const tune::mesh_call call = facts_of<C>(send, recv, count, op, root, &windows);
    // The model prices every candidate: remember the last answer per collective.
    memo& m = memo_[static_cast<int>(C)];
    if (m.bytes != bytes || !(m.call == call)) m = {bytes, call, choose(C, bytes, call)};
    const variant_choice v = m.choice;
    bool ran = false;
    for_each_automatic([&]<class A, class P>() {
      if constexpr (A::implements(C)) {
        if (ran || A::id != v.algo || P::id != v.proto) return;
        execute_with<A, P, C>(send, recv, count, op, root, stream,
                              algorithm_needs<A>::peer_memory ? windows : transport::call_windows{});
        ran = true;
      }
    });
    if (!ran)
      throw_error(status::not_supported, std::string(name(C)) + ": no compiled variant serves it here");
  }

  /// Argument checks, all before anything is enqueued.
  template <coll C, class T>
  void validate(const T* send, T* recv, std::size_t count, reduce_op op, int root,
                cudaStream_t stream) const {
    const detail::group_state& g = live();
    const char* what = name(C);
    if (is_reduction(C))
      require(is_supported(op, dtype_of<T>), what, [&] {
        return std::string("reduction ") + name(op) + " is not supported for " + name(dtype_of<T>);
      });
    if (C == coll::broadcast || C == coll::reduce)
      require(root >= 0 && root < g.nranks, what, [&] {
        return "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(g.nranks);
      });
    const std::size_t P = static_cast<std::size_t>(g.nranks);
    const std::size_t send_n = C == coll::reduce_scatter || C == coll::all_to_all ? count * P : count;
    const std::size_t recv_n = C == coll::all_gather || C == coll::all_to_all ? count * P : count;
    const bool sends = !(C == coll::broadcast && rank_ != root);
    const bool receives = !(C == coll::reduce && rank_ != root);
    if (sends) check_buffer(send, send_n * sizeof(T), what, "send");
    if (receives) check_buffer(recv, recv_n * sizeof(T), what, "recv");
    const int sd = stream_device(stream);
    require(sd < 0 || sd == device(), what, [&] {
      return "the stream belongs to device " + std::to_string(sd) + ", rank " + std::to_string(rank_) +
             "'s GPU is device " + std::to_string(device());
    });
  }

  /// The device of `stream`, or -1 where it cannot be asked. Asked of the
  /// runtime once per stream and remembered (the last few streams of this
  /// handle): the enqueue path of a small call is host-bound (6 µs per rank's
  /// call on an H200 in a VM, bench/results/gpu-2026-12-04.md), and every
  /// runtime call counts. A stream destroyed and another created at the same
  /// address on another GPU keeps the old answer while it stays remembered.
  /// The runtime refuses cudaStreamGetDevice on a stream being captured into
  /// a graph (and the refusal would invalidate the capture): a stream first
  /// seen while capturing is not checked here (its kernels are captured for
  /// this rank's device, and launching the graph on another device's stream
  /// fails in cudaGraphLaunch).
  int stream_device(cudaStream_t stream) const {
    if (const int* known = streams_.find(stream)) return *known;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(stream, &cs), "cudaStreamIsCapturing");
    if (cs != cudaStreamCaptureStatusNone) return -1;
    int sd = -1;
    check(cudaStreamGetDevice(stream, &sd), "cudaStreamGetDevice");
    streams_.remember(stream, sd);
    return sd;
  }

  /// A buffer must be device memory of this rank's GPU, or managed memory.
  /// The runtime is asked once per buffer (the last few are remembered).
  void check_buffer(const void* p, std::size_t bytes, const char* what, const char* which) const {
    if (bytes == 0) return;
    require(p != nullptr, what, [&] { return std::string(which) + " is null"; });
    const collx::detail::pointer_kind* known = buffers_.find(p);
    collx::detail::pointer_kind k{};
    if (known != nullptr) {
      k = *known;
    } else {
      cudaPointerAttributes at{};
      relaxed_capture relaxed;  // the call may be inside a user's graph capture
      const cudaError_t e = cudaPointerGetAttributes(&at, p);
      if (e != cudaSuccess) (void)cudaGetLastError();
      require(e == cudaSuccess && (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged), what,
              [&] {
                return std::string(which) +
                       " is host memory: the CUDA communicator needs device (or managed) memory";
              });
      k = {at.type == cudaMemoryTypeManaged ? collx::detail::memory_kind::managed
                                            : collx::detail::memory_kind::device,
           at.device};
    }
    require(k.kind == collx::detail::memory_kind::managed || k.device == device(), what, [&] {
      return std::string(which) + " is on device " + std::to_string(k.device) + ", rank " +
             std::to_string(rank_) + "'s GPU is device " + std::to_string(device());
    });
    if (known == nullptr) buffers_.remember(p, k);
  }

  /// A thread group with multicast: binds complete window k's buffers to a
  /// multicast object where they allow it (window_multicast::bind). A window
  /// that cannot be bound still works, through peer loads (COLLX_DEBUG=1
  /// says why it was not bound).
  static void bind_window_multicast(detail::group_state& g, int k) {
    if (!g.multicast_memory || g.process_rank >= 0) return;
    const auto kk = static_cast<std::size_t>(k);
    if (g.bound_windows.size() <= kk) g.bound_windows.resize(kk + 1);
    std::vector<std::pair<std::uintptr_t, std::size_t>> spans;
    for (int r = 0; r < g.nranks; ++r)
      spans.emplace_back(g.windows.span(k, r).base, g.windows.span(k, r).bytes);
    std::string why;
    try {
      g.bound_windows[kk] = window_multicast::bind(g.devices, spans, why);
    } catch (const collx::error& e) {
      why = e.what();
    }
    if (g.bound_windows[kk] != nullptr) {
      // Any nonzero address marks the window as bound for the host's lookup
      // (call_windows::multicast); each GPU's table gets its own.
      g.windows.set_multicast(k, reinterpret_cast<std::uintptr_t>(g.bound_windows[kk]->address(0)));
    } else if (collx::detail::debug_enabled()) {
      std::fprintf(
          stderr,
          "collx: gpu::communicator::register_buffer: window %d not bound to a multicast object: %s\n", k,
          why.c_str());
    }
  }

  /// Copies window k's spans (and its multicast address as q's GPU maps it) into rank q's table on q's GPU
  /// (allocated at the first window). On a stream of its own, waited for: no call of any rank that could see
  /// the window is enqueued before it, and a device-wide synchronisation would wait for kernels waiting for
  /// this thread's ranks.
  static void write_table(detail::group_state& g, int q, int k) {
    const auto i = static_cast<std::size_t>(q);
    device_guard on(g.devices[i]);
    const std::size_t P = static_cast<std::size_t>(g.nranks);
    if (g.tables[i] == nullptr) {
      void* t = nullptr;
      check(cudaMalloc(&t, sizeof(transport::window_span) * P * detail::group_state::max_windows),
            "cudaMalloc of the registered buffers' table");
      g.tables[i] = static_cast<transport::window_span*>(t);
    }
    std::vector<transport::window_span> row(P);
    const auto kk = static_cast<std::size_t>(k);
    const bool bound = kk < g.bound_windows.size() && g.bound_windows[kk] != nullptr;
    for (std::size_t r = 0; r < P; ++r) {
      row[r] = g.windows.span(k, static_cast<int>(r));
      // The window's multicast address as rank q's GPU maps it.
      row[r].multicast = bound ? reinterpret_cast<std::uintptr_t>(g.bound_windows[kk]->address(q)) : 0;
    }
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    const cudaError_t e = cudaMemcpyAsync(g.tables[i] + static_cast<std::size_t>(k) * P, row.data(),
                                          sizeof(transport::window_span) * P, cudaMemcpyHostToDevice, s);
    const cudaError_t w = e == cudaSuccess ? cudaStreamSynchronize(s) : e;
    (void)cudaStreamDestroy(s);
    check(w, "copying a registered window's spans to the GPU");
  }

  /// The windows of this rank's call (empty where a side is not inside a
  /// complete window of this rank): what nvls's single copy reads.
  /// facts, where given, gets what they offer the automatic choice (one
  /// lookup under one lock): registered, and which sides' windows have a
  /// multicast address (what the kernel's switch path reads).
  transport::call_windows windows_of(const detail::group_state& g, const void* send, std::size_t send_bytes,
                                     const void* recv, std::size_t recv_bytes,
                                     tune::mesh_call* facts = nullptr) const {
    if (!g.any_windows.load(std::memory_order_acquire)) return {};  // nothing registered yet
    std::lock_guard<std::mutex> hold(g.windows_lock);
    if (g.filled.empty()) return {};
    const auto me = static_cast<std::size_t>(rank_);
    transport::call_windows w =
        g.windows.for_call(rank_, send, send_bytes, recv, recv_bytes, 0, g.tables[me]);
    const auto complete = [&](int k) { return g.filled[static_cast<std::size_t>(k)] == g.nranks; };
    if (w.registered() && (!complete(w.send) || !complete(w.recv))) return {};
    w.one_shot_bytes = tune::mesh_one_shot_bytes(g.nranks);
    if (facts != nullptr && w.registered()) {
      facts->registered = true;
      facts->min_bytes = w.min_bytes;
      facts->send_bound = g.windows.span(w.send, rank_).multicast != 0;
      facts->recv_bound = g.windows.span(w.recv, rank_).multicast != 0;
    }
    return w;
  }

  /// Launches `kernel` as this rank's `stripes` blocks on `stream`, after
  /// checking (once per kernel and device) that every rank sharing the GPU
  /// can have its blocks resident at once: they wait for each other.
  template <class T>
  void launch(void (*kernel)(transport::mesh_view, exec::cuda, schedule_args<T>, int*),
              const schedule_args<T>& a, cudaStream_t stream,
              const transport::call_windows& windows = {}) const {
    const detail::group_state& g = live();
    const int dev = device();
    device_guard on(dev);
    const int need = g.ranks_on(dev) * g.stripes;
    const int fit = resident_blocks(g, reinterpret_cast<const void*>(kernel), dev);
    if (fit < need)
      throw_error(status::not_supported, "gpu::communicator: " + std::to_string(g.ranks_on(dev)) +
                                             " ranks x " + std::to_string(g.stripes) + " stripes need " +
                                             std::to_string(need) + " blocks resident at once on device " +
                                             std::to_string(dev) + ", which holds " + std::to_string(fit) +
                                             " of this kernel (use fewer stripes or ranks per GPU)");
    exec::cuda ex{};
    ex.abort_word = g.abort_dev;
    ex.timeout_ns = g.timeout_ns;
    ex.fence_each_thread = g.fence_each_thread;
    ex.one_gpu = g.gpu_scope;
    const std::uint64_t call = claim_stream(g, dev, stream);
    transport::mesh_view view = g.view;
    view.windows = windows;
    if (g.multicast_memory) view.multicast = g.multicast_at[static_cast<std::size_t>(rank_)];
    kernel<<<g.stripes, block_threads, 0, stream>>>(view, ex, a, g.status_dev(rank_));
    check(cudaGetLastError(), "kernel launch");
    std::lock_guard<std::mutex> hold(g.launch_lock);
    g.launched[static_cast<std::size_t>(rank_)] = {call, stream};
  }

  /// The number this rank's next call will have; refuses the call (before it
  /// is enqueued) where another rank of this process on the same GPU has
  /// already enqueued the same call on the same stream: the two kernels wait
  /// for each other, and a stream runs one after the other, so both would
  /// run into their deadline. (cudaStreamPerThread names a different stream
  /// in each thread, so it is not compared.)
  std::uint64_t claim_stream(const detail::group_state& g, int dev, cudaStream_t stream) const {
    std::lock_guard<std::mutex> hold(g.launch_lock);
    const std::uint64_t call = g.launched[static_cast<std::size_t>(rank_)].calls + 1;
    if (stream == cudaStreamPerThread) return call;
    for (int q = 0; q < g.nranks; ++q) {
      const auto& other = g.launched[static_cast<std::size_t>(q)];
      if (q == rank_ || other.calls != call || other.stream != stream) continue;
      if (static_cast<std::size_t>(q) < g.devices.size() && g.devices[static_cast<std::size_t>(q)] != dev)
        continue;
      throw_error(status::invalid_argument,
                  "gpu::communicator: rank " + std::to_string(rank_) + "'s call " + std::to_string(call) +
                      " is on the stream rank " + std::to_string(q) +
                      " enqueued the same call on: the ranks' kernels wait for each other, so each rank "
                      "needs a stream of its own");
    }
    return call;
  }

  static int resident_blocks(const detail::group_state& g, const void* kernel, int dev) {
    std::lock_guard<std::mutex> hold(g.residency_lock);
    for (const auto& x : g.resident)
      if (x.kernel == kernel && x.device == dev) return x.blocks;
    int per_sm = 0, sms = 0;
    relaxed_capture relaxed;  // the first launch may be inside a user's graph capture
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block_threads, 0),
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
    g.resident.push_back({kernel, dev, per_sm * sms});
    return per_sm * sms;
  }

  /// Enables access from every device of the group to every other's memory
  /// (use_host_regions has checked that it is possible).
  static void enable_peer_access(const std::vector<int>& devices) {
    for (int a : devices)
      for (int b : devices) {
        if (a == b) continue;
        device_guard on(a);
        const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
        else check(e, "cudaDeviceEnablePeerAccess");
      }
  }

  std::shared_ptr<detail::group_state> g_;
  int rank_ = 0;
  mutable collx::detail::pointer_memo<collx::detail::pointer_kind> buffers_;  // check_buffer's answers
  mutable collx::detail::pointer_memo<int> streams_;  // stream_device's answers (stream → device)
  struct memo {
    std::size_t bytes = ~std::size_t{0};
    tune::mesh_call call{};
    variant_choice choice{};
  };
  memo memo_[coll_count]{};
};

// ---- explicit composition --------------------------------------------------------
template <class Algo, class Proto, class T, reduce_op_argument O>
void all_reduce(communicator& c, const T* send, T* recv, std::size_t count, O op, cudaStream_t s) {
  c.template execute<Algo, Proto, coll::all_reduce>(send, recv, count, op, 0, s);
}
template <class Algo, class Proto, class T>
void all_gather(communicator& c, const T* send, T* recv, std::size_t sendcount, cudaStream_t s) {
  c.template execute<Algo, Proto, coll::all_gather>(send, recv, sendcount, reduce_op::sum, 0, s);
}
template <class Algo, class Proto, class T, reduce_op_argument O>
void reduce_scatter(communicator& c, const T* send, T* recv, std::size_t recvcount, O op, cudaStream_t s) {
  c.template execute<Algo, Proto, coll::reduce_scatter>(send, recv, recvcount, op, 0, s);
}
template <class Algo, class Proto, class T>
void broadcast(communicator& c, const T* send, T* recv, std::size_t count, int root, cudaStream_t s) {
  c.template execute<Algo, Proto, coll::broadcast>(send, recv, count, reduce_op::sum, root, s);
}
template <class Algo, class Proto, class T, reduce_op_argument O>
void reduce(communicator& c, const T* send, T* recv, std::size_t count, O op, int root, cudaStream_t s) {
  c.template execute<Algo, Proto, coll::reduce>(send, recv, count, op, root, s);
}
template <class Algo, class Proto, class T>
void all_to_all(communicator& c, const T* send, T* recv, std::size_t count, cudaStream_t s) {
  c.template execute<Algo, Proto, coll::all_to_all>(send, recv, count, reduce_op::sum, 0, s);
}

}  // namespace collx::gpu
