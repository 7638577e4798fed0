// collx/cuda/process.hpp — gpu::communicator over process ranks: one process
// per rank, on GPUs of one host.
//
//   auto comm = collx::gpu::from_env();                   // collxrun/torchrun/mpirun/srun
//   auto comm = collx::gpu::init_rank(nranks, id, rank, device);
//
// How the ranks join: the bootstrap session (as for host process ranks);
// each rank allocates its mesh region on its GPU (cuda/ipc_region.hpp) and
// hands it to the peers in one of three ways the ranks agree on
// (options::region_handles, cuda/region_handles.hpp): the CUDA virtual memory
// API with a file descriptor offered from an fd server
// (bootstrap/fd_exchange.hpp: a 0700 directory and a random token, both
// travelling only through the authenticated bootstrap), the same API with a
// fabric handle, or a cudaMalloc allocation with a CUDA IPC handle (the last
// two through the bootstrap); each rank maps every peer's region for its own
// GPU. A way that fails on some rank (no IMEX channel for fabric handles, no
// shared socket directory, a driver without virtual memory management) is
// abandoned by every rank alike for the next one. The abort word and
// the status words live in a POSIX shared-memory page that rank 0 creates,
// every rank maps and registers with CUDA as mapped host memory, so abort()
// on any rank reaches the kernels of all of them and error() on any rank can
// read its own status. All ranks must run on one host (not_supported
// otherwise, naming the ranks' hosts). from_env picks the device LOCAL_RANK
// (or its launcher's equivalent) modulo the number of GPUs.
//
// Without peer access (options::regions automatic, and some rank's GPU
// cannot reach another's, or does not see it: per-process
// CUDA_VISIBLE_DEVICES), or with region_memory::host, the regions are one
// POSIX shared-memory segment instead, which rank 0 creates and every rank
// maps and registers with CUDA as mapped host memory. The ranks agree on this
// through the bootstrap: every rank takes the same decision, and when one
// asked for device regions that cannot be had, every rank fails alike.
//
// Multicast (options::multicast, cuda/multicast.hpp): where every rank has a
// GPU of its own that offers it and the regions are device memory, the ranks
// vote (cuda/multicast_plan.hpp), align the registered buffer for the
// object, and once the regions are shared rank 0 makes the object and hands
// it over the same way (file descriptor or fabric handle); each rank adds its
// GPU, binds its buffer and maps the object, voting after each stage, so that
// all of them use it or none does. Not run on a GPU (gpu.multicast_procs).
//
// Status: run on one GPU (an H200, two processes, device regions shared by
// POSIX file descriptor, and host regions: bench/results/gpu-2026-12-04.md).
// The fabric and CUDA IPC ways and the agreement among the three have not
// run on a GPU (the agreement is tested on CPUs: [region_handles]). Its test
// is gpu.comm_procs (collxrun -n 2 collx_gpu_comm_test --procs [--handle
// WAY]), which skips without a GPU.
#pragma once

#include <collx/bootstrap/env.hpp>
#include <collx/bootstrap/fd_exchange.hpp>
#include <collx/bootstrap/session.hpp>
#include <collx/bootstrap/unique_id.hpp>
#include <collx/cuda/communicator.hpp>
#include <collx/cuda/ipc_region.hpp>
#include <collx/cuda/multicast.hpp>
#include <collx/cuda/multicast_plan.hpp>
#include <collx/net/host_id.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace collx::gpu {

namespace process_detail {

/// What every rank tells the others first: where it runs, and what it asks.
struct placement_card {
  std::uint64_t host;  // net::host_hash of the host id
  std::int32_t device;
  std::int32_t asked;            // region_memory
  char bus_id[32];               // the GPU's PCI bus id (ordinals differ between processes)
  std::uint8_t handles_offered;  // handle_bit()s of offered_handles(device)
  region_handle handles_asked;
};

/// Whether this process's GPU `device` reaches the memory of every GPU named
/// in `cards` (its own, or one it sees and has peer access to).
inline bool reaches_all(int device, const std::vector<placement_card>& cards) {
  char own[32] = {};
  check(cudaDeviceGetPCIBusId(own, sizeof own, device), "cudaDeviceGetPCIBusId");
  for (const placement_card& c : cards) {
    if (std::strncmp(c.bus_id, own, sizeof own) == 0) continue;
    int other = -1;
    if (cudaDeviceGetByPCIBusId(&other, c.bus_id) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;  // not visible to this process
    }
    int ok = 0;
    check(cudaDeviceCanAccessPeer(&ok, device, other), "cudaDeviceCanAccessPeer");
    if (!ok) return false;
  }
  return true;
}

/// What every rank tells the others.
struct rank_card {
  std::uint64_t host;  // net::host_hash of the host id
  std::int32_t device;
  char words_name[64];    // rank 0: the shared page of the abort and status words
  char regions_name[64];  // rank 0, host regions: the segment of every rank's region
};

/// How a peer maps a rank's device region: a descriptor from its fd server
/// (posix_fd), or 64 handle bytes (fabric, cuda_ipc).
struct region_card {
  char fd_path[108];
  bootstrap::secret_bytes token;
  std::uint64_t region_bytes;
  shareable_bytes handle;
};

/// A POSIX shared-memory segment, mapped and registered with CUDA as mapped
/// host memory: the abort and status words, and host regions.
struct shared_words {
  void* page = nullptr;
  std::size_t bytes = 0;
  bool registered = false;
  ~shared_words() {
    if (registered) (void)cudaHostUnregister(page);
    if (page != nullptr) ::munmap(page, bytes);
  }
};

inline std::shared_ptr<shared_words> map_words(const std::string& name, std::size_t bytes, bool create,
                                               const char* what = "the abort and status words") {
  const int fd = ::shm_open(name.c_str(), O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0600);
  if (fd < 0)
    throw_error(status::system_error, "gpu::init_rank: shm_open " + name + ": " + std::strerror(errno));
  auto w = std::make_shared<shared_words>();
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    ::close(fd);
    throw_error(status::system_error, "gpu::init_rank: ftruncate " + name + ": " + std::strerror(e));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw_error(status::system_error, "gpu::init_rank: mmap " + name);
  w->page = p;
  w->bytes = bytes;
  check(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
        (std::string("cudaHostRegister of ") + what).c_str());
  w->registered = true;
  return w;
}

/// One rank's part of a new window, as it tells the others: the IPC handle
/// of the allocation holding it and where in that allocation it starts.
struct window_card {
  cudaIpcMemHandle_t handle;
  std::uint64_t offset;
  std::uint64_t bytes;
  std::int32_t ok;  // 0: this rank could not export it (error says why)
  char error[240];
};

/// This process's mappings of peers' registered buffers: an allocation is
/// opened once however many windows lie in it (cudaIpcOpenMemHandle maps
/// the whole allocation), and closed with its last window.
class window_mappings {
 public:
  explicit window_mappings(int device) : device_(device) {}
  window_mappings(const window_mappings&) = delete;
  window_mappings& operator=(const window_mappings&) = delete;
  ~window_mappings() {
    device_guard on(device_);
    for (const opened& o : open_) (void)cudaIpcCloseMemHandle(o.base);
  }

  /// Rank q's allocation `h` as mapped here, for window w.
  std::byte* open(int q, const cudaIpcMemHandle_t& h, int w) {
    for (opened& o : open_)
      if (o.rank == q && std::memcmp(&o.handle, &h, sizeof h) == 0) {
        o.windows.push_back(w);
        return o.base;
      }
    device_guard on(device_);
    void* p = nullptr;
    check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
          ("cudaIpcOpenMemHandle of rank " + std::to_string(q) + "'s registered buffer").c_str());
    open_.push_back({q, h, static_cast<std::byte*>(p), {w}});
    return open_.back().base;
  }
  /// Drops window w; closes the allocations no other window uses.
  void close(int w) {
    device_guard on(device_);
    for (std::size_t i = open_.size(); i-- > 0;) {
      auto& ws = open_[i].windows;
      ws.erase(std::remove(ws.begin(), ws.end(), w), ws.end());
      if (!ws.empty()) continue;
      (void)cudaIpcCloseMemHandle(open_[i].base);
      open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

 private:
  struct opened {
    int rank;
    cudaIpcMemHandle_t handle;
    std::byte* base;
    std::vector<int> windows;
  };
  int device_;
  std::vector<opened> open_;
};

/// What a process rank's group state holds on to.
struct process_mappings {
  std::shared_ptr<shared_words> words;
  std::shared_ptr<shared_words> host_regions;  // region_memory::host: every rank's region
  exported_region own;
  std::vector<imported_region> peers;
  std::vector<std::byte*> regions;  // device regions: every rank's, as this process maps them
  /// The multicast object's binding of `own` (multicast_binding), released
  /// before the regions (members go in reverse order).
  std::shared_ptr<void> multicast;
};

}  // namespace process_detail

struct process_access {
  static communicator join(bootstrap::session s, int device, const options& opt) {
    const int rank = s.rank(), nranks = s.size();
    const char* op = "gpu::init_rank";
    communicator::validate(opt, op);
    const int count = communicator::device_count(op);
    require(device >= 0 && device < count, op,
            "device " + std::to_string(device) + " does not exist (" + std::to_string(count) + " devices)");
    require(nranks <= transport::max_mesh_ranks, op,
            "at most " + std::to_string(transport::max_mesh_ranks) + " ranks, got " + std::to_string(nranks));
    device_guard on(device);

    auto g = std::make_shared<detail::group_state>();
    auto keep = std::make_shared<process_detail::process_mappings>();
    g->nranks = nranks;
    g->launched.resize(static_cast<std::size_t>(nranks));

    // Where the ranks run, and where their regions can live.
    process_detail::placement_card place{};
    place.host = net::host_hash(net::host_id());
    place.device = device;
    place.asked = static_cast<std::int32_t>(opt.regions);
    check(cudaDeviceGetPCIBusId(place.bus_id, sizeof place.bus_id, device), "cudaDeviceGetPCIBusId");
    place.handles_offered = offered_handles(device);
    place.handles_asked = communicator::region_handles_of(opt);
    const auto places = all_of<process_detail::placement_card>(s, place);
    for (int q = 0; q < nranks; ++q)
      if (places[static_cast<std::size_t>(q)].host != place.host)
        throw_error(status::not_supported, std::string(op) + ": rank " + std::to_string(q) +
                                               " runs on another host; GPU ranks must share one host");
    // Stripes from the placement every rank now knows alike (the most ranks
    // on one GPU, told apart by PCI bus id), then the regions' layout.
    int crowd = 0;
    for (const auto& a : places) {
      int n = 0;
      for (const auto& b : places) n += std::strncmp(a.bus_id, b.bus_id, sizeof a.bus_id) == 0;
      crowd = std::max(crowd, n);
    }
    g->stripes = opt.stripes != 0 ? opt.stripes : automatic_stripes(crowd);
    g->view.layout = communicator::layout_for(nranks, opt, g->stripes);
    const auto reach = all_of<std::uint8_t>(s, process_detail::reaches_all(device, places) ? 1 : 0);
    std::string missing;
    bool host_asked = false;
    for (int q = 0; q < nranks; ++q) {
      if (!reach[static_cast<std::size_t>(q)])
        missing += (missing.empty() ? "" : ", ") + std::string("rank ") + std::to_string(q);
      host_asked |=
          places[static_cast<std::size_t>(q)].asked == static_cast<std::int32_t>(region_memory::host);
    }
    // A rank that asked for device regions fails, with every other rank, where
    // the group gets host regions (some rank lacks peer access, or asked for them).
    for (int q = 0; q < nranks && (host_asked || !missing.empty()); ++q)
      if (places[static_cast<std::size_t>(q)].asked == static_cast<std::int32_t>(region_memory::device))
        throw_error(status::not_supported,
                    std::string(op) + ": rank " + std::to_string(q) + " asked for device regions, but " +
                        (missing.empty() ? std::string("another rank asked for host regions")
                                         : missing + " cannot reach every other rank's GPU") +
                        " (every rank must ask alike; use region_memory::host or automatic)");
    g->host_regions = communicator::use_host_regions(
        host_asked ? region_memory::host : region_memory::automatic,
        missing.empty() ? std::string() : missing + " without peer access", op);
    // Multicast: the ranks agree whether to try it, and the registered
    // buffer is aligned for the object before any region is made.
    const multicast_plan mc = plan_multicast(s, device, communicator::multicast_of(opt), places, *g);
    if (mc.align != 0) g->view.layout = transport::mesh_layout::make(g->view.layout.fifos, mc.align);
    g->multicast_refusal = mc.why;
    const std::size_t stride = (g->view.layout.region_bytes() + 4095) / 4096 * 4096;

    process_detail::rank_card mine{};
    mine.host = place.host;
    mine.device = device;
    const std::size_t word_bytes = 4096;
    std::string words_name, regions_name;
    if (rank == 0) {
      const std::string stem = "/collx-gpu-" + bootstrap::secret_to_hex(bootstrap::random_secret());
      words_name = stem;
      keep->words = process_detail::map_words(words_name, word_bytes, true);
      std::snprintf(mine.words_name, sizeof mine.words_name, "%s", words_name.c_str());
      if (g->host_regions) {
        // A new segment reads as zeros: every counter starts at 0.
        regions_name = stem + "-regions";
        keep->host_regions = process_detail::map_words(
            regions_name, stride * static_cast<std::size_t>(nranks), true, "the FIFO regions");
        std::snprintf(mine.regions_name, sizeof mine.regions_name, "%s", regions_name.c_str());
      }
    }
    const auto cards = all_of<process_detail::rank_card>(s, mine);
    if (rank != 0) {
      keep->words = process_detail::map_words(cards[0].words_name, word_bytes, false);
      if (g->host_regions)
        keep->host_regions = process_detail::map_words(
            cards[0].regions_name, stride * static_cast<std::size_t>(nranks), false, "the FIFO regions");
    }
    std::byte* host_base = nullptr;
    if (g->host_regions) {
      void* dev = nullptr;
      check(cudaHostGetDevicePointer(&dev, keep->host_regions->page, 0),
            "cudaHostGetDevicePointer of the FIFO regions");
      host_base = static_cast<std::byte*>(dev);
    }
    // LL128 across GPUs only where every pair is on NVLink: each rank asks
    // NVML about the group's GPUs, and the ranks agree (any refusal refuses).
    std::vector<std::string> bus_ids;
    for (const auto& p : places) bus_ids.emplace_back(p.bus_id, strnlen(p.bus_id, sizeof p.bus_id));
    for (const auto& b : bus_ids) g->several_devices |= b != bus_ids[0];
    g->gpu_scope = communicator::gpu_scope_for(opt, *g);
    const nvlink_verdict links = g->several_devices && !g->host_regions
                                     ? nvlink_between(bus_ids, communicator::nvml_deadline(opt))
                                     : nvlink_verdict{true, {}};
    const auto nvlink_votes = all_of<std::uint8_t>(s, links.all ? 1 : 0);
    nvlink_verdict agreed = links;
    for (int q = 0; q < nranks && agreed.all; ++q)
      if (!nvlink_votes[static_cast<std::size_t>(q)])
        agreed = {false,
                  "rank " + std::to_string(q) + " found a pair of the group's GPUs not joined by NVLink"};
    g->ll128_refusal = communicator::ll128_refusal_for(*g, agreed);
    if (rank == 0) communicator::report_ll128(op, g->ll128_refusal);
    if (!g->host_regions) {
      std::vector<handle_request> asks;
      for (const auto& p : places) asks.push_back({p.handles_offered, p.handles_asked});
      g->region_sharing =
          share_regions(s, device, g->view.layout.region_bytes(), handle_candidates(asks, op), opt, *keep);
      if (mc.align != 0) share_multicast(s, device, opt, mc.required, *keep, *g);
    }
    g->process_rank = rank;
    for (int q = 0; q < nranks; ++q) {
      g->devices.push_back(cards[static_cast<std::size_t>(q)].device);
      if (g->host_regions) g->view.regions[q] = host_base + stride * static_cast<std::size_t>(q);
      else g->view.regions[q] = keep->regions[static_cast<std::size_t>(q)];
    }
    // Every rank has mapped every region and the page: the page's name may go.
    s.barrier();
    if (rank == 0) {
      ::shm_unlink(words_name.c_str());
      if (!regions_name.empty()) ::shm_unlink(regions_name.c_str());
    }

    auto* words = static_cast<std::uint32_t*>(keep->words->page);
    void* dev = nullptr;
    check(cudaHostGetDevicePointer(&dev, words, 0), "cudaHostGetDevicePointer");
    g->abort_host = words;
    g->abort_dev = static_cast<std::uint32_t*>(dev);
    g->view.abort = g->abort_dev;
    g->timeout_ns = opt.timeout_ms * 1'000'000ull;
    g->fence_each_thread = communicator::fences_of(opt);
    std::vector<std::string> distinct = bus_ids;
    std::sort(distinct.begin(), distinct.end());
    const int gpus = static_cast<int>(std::unique(distinct.begin(), distinct.end()) - distinct.begin());
    // The lowest compute capability of the ranks' GPUs, so that with the
    // facts agreed above every rank takes the same preset.
    const auto majors = all_of<int>(s, communicator::sm_major_of(device));
    const int sm_major = *std::min_element(majors.begin(), majors.end());
    communicator::price_with(*g, opt, gpus, agreed.all, sm_major, rank == 0 ? op : nullptr);
    g->mappings = keep;
    attach_windows(*g, std::make_shared<bootstrap::session>(std::move(s)), device);
    return communicator(std::move(g), rank);
  }

 private:
  /// Whether the ranks try multicast: every rank votes (its GPU offers
  /// multicast, no other rank is on it, the regions are device memory,
  /// multicast not off) and all agree (multicast_plan.hpp: agree_multicast,
  /// which throws on every rank alike where multicast was asked for and some
  /// rank refuses).
  static multicast_plan plan_multicast(bootstrap::session& s, int device, multicast_mode mode,
                                       const std::vector<process_detail::placement_card>& places,
                                       const detail::group_state& g) {
    const char* op = "gpu::init_rank";
    std::string why;
    std::uint64_t align = 0;
    bool shared_gpu = false;
    for (std::size_t a = 0; a < places.size(); ++a)
      for (std::size_t b = a + 1; b < places.size(); ++b)
        shared_gpu |= places[a].host == places[b].host &&
                      std::strncmp(places[a].bus_id, places[b].bus_id, sizeof places[a].bus_id) == 0;
    if (mode == multicast_mode::off) why = "multicast is off (options::multicast or COLLX_GPU_MULTICAST)";
    else if (s.size() < 2) why = "multicast needs two ranks or more";
    else if (g.host_regions) why = "the group's regions are host memory";
    else if (shared_gpu) why = "ranks share a GPU; a multicast object spans distinct GPUs";
    else {
      try {
        why = device_multicast_refusal(device);
        if (why.empty())
          align = multicast_alignment(std::span<const int>(&device, 1), places.size(),
                                      g.view.layout.fifos.peer_buffer_bytes());
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    const auto all = all_of<multicast_vote>(s, make_multicast_vote(mode == multicast_mode::on, align, why));
    const multicast_plan out = agree_multicast(all, op);
    if (!out.why.empty() && s.rank() == 0 && collx::detail::debug_enabled())
      std::fprintf(stderr, "collx: %s: no multicast: %s\n", op, out.why.c_str());
    return out;
  }

  /// Rank 0 makes a multicast object over every rank's registered buffer and
  /// hands it to the others the way the regions went; each rank adds its
  /// GPU, then (all added) binds its own buffer and maps the object. The
  /// ranks vote after each stage (region_handles.hpp: stage_agreement), so a
  /// failure on one rank leaves all of them without multicast, alike
  /// (not_supported on every rank where it was required). The vote after
  /// adding also keeps every rank out of cuMulticastBindMem and cuMemMap,
  /// which block in the driver until every GPU has been added, until all
  /// have: a rank that dies before adding leaves the others at that vote's
  /// deadline instead.
  static void share_multicast(bootstrap::session& s, int device, const options& opt, bool required,
                              process_detail::process_mappings& keep, detail::group_state& g) {
    const int rank = s.rank(), nranks = s.size();
    const char* op = "gpu::init_rank";
    const region_handle how = g.region_sharing;
    const transport::mesh_layout& l = g.view.layout;
    std::string refused;
    if (how != region_handle::posix_fd && how != region_handle::fabric) {
      refused = std::string("the regions were shared by ") + name(how) +
                " handles; a multicast object binds virtual-memory allocations only";
    } else {
      const stage_agreement agree([&s](const stage_vote& v) { return all_of<stage_vote>(s, v); });
      try {
        std::unique_ptr<multicast_binding> b;
        std::unique_ptr<bootstrap::fd_server> srv;
        process_detail::region_card mine{};
        std::string why;
        if (rank == 0) {
          try {
            b = multicast_binding::create(nranks, l.peer_buffer_span(), how);
            srv = offer(*b, how, mine);
          } catch (const std::exception& e) {
            why = std::string("making the multicast object: ") + e.what();
          }
        }
        agree(why);
        const auto cards = all_of<process_detail::region_card>(s, mine);
        try {
          if (rank != 0) {
            const auto& c = cards[0];
            if (how == region_handle::posix_fd) {
              b = with_fetched_fd(c, opt, [&](int fd) {
                return multicast_binding::import(how, fd, {}, l.peer_buffer_span());
              });
            } else {
              b = multicast_binding::import(how, -1, c.handle, l.peer_buffer_span());
            }
          }
          b->add(device);
        } catch (const std::exception& e) {
          why = std::string("joining the multicast object: ") + e.what();
        }
        agree(why);  // every GPU added (and rank 0's descriptor fetched) before any binds
        try {
          b->bind_and_map(keep.own.handle(), l.peer_buffer_offset(), l.buffer_align);
        } catch (const std::exception& e) {
          why = std::string("binding its buffer to the multicast object: ") + e.what();
        }
        agree(why);
        keep.multicast = std::shared_ptr<multicast_binding>(std::move(b));
      } catch (const handles_detail::attempt_refused& r) {
        refused = r.why;
      }
    }
    if (refused.empty()) {
      g.multicast_memory = keep.multicast;
      g.multicast_at.assign(static_cast<std::size_t>(nranks), nullptr);
      g.multicast_at[static_cast<std::size_t>(rank)] =
          static_cast<multicast_binding*>(keep.multicast.get())->address();
      g.multicast_refusal.clear();
      if (rank == 0 && collx::detail::debug_enabled())
        std::fprintf(stderr, "collx: %s: nvls through a multicast object\n", op);
      return;
    }
    g.multicast_refusal = refused;
    if (required) throw_error(status::not_supported, std::string(op) + ": multicast is on, but " + refused);
    if (rank == 0 && collx::detail::debug_enabled())
      std::fprintf(stderr, "collx: %s: no multicast: %s\n", op, refused.c_str());
  }

  /// Offers what `x` (a region, a multicast object) exports the way `how`
  /// says: its descriptor, served over a UNIX socket to whoever presents the
  /// card's token (posix_fd; the server returned must live until every peer
  /// has fetched it), or its 64 handle bytes in the card (fabric, cuda_ipc).
  template <class Exported>
  static std::unique_ptr<bootstrap::fd_server> offer(const Exported& x, region_handle how,
                                                     process_detail::region_card& card) {
    if (how != region_handle::posix_fd) {
      card.handle = x.export_bytes();
      return nullptr;
    }
    const int fd = x.export_fd();
    card.token = bootstrap::random_secret();
    std::unique_ptr<bootstrap::fd_server> srv;
    try {
      srv = std::make_unique<bootstrap::fd_server>(fd, card.token);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    std::snprintf(card.fd_path, sizeof card.fd_path, "%s", srv->path().c_str());
    return srv;
  }
  /// open(fd) with the descriptor a peer's card offers (fetched within the
  /// group's timeout), closed afterwards whatever open does.
  template <class Open>
  static std::invoke_result_t<Open, int> with_fetched_fd(const process_detail::region_card& c,
                                                         const options& opt, Open open) {
    struct closer {
      int fd;
      ~closer() { ::close(fd); }
    } const fetched{bootstrap::fetch_fd(c.fd_path, c.token, opt_timeout(opt))};
    return open(fetched.fd);
  }

  /// Device regions: tries each way in `candidates` until one exports and
  /// maps on every rank (region_handles.hpp: negotiate), leaves the own
  /// region zeroed and every rank's region mapped in `keep`, and returns the way.
  static region_handle share_regions(bootstrap::session& s, int device, std::size_t bytes,
                                     const std::vector<region_handle>& candidates, const options& opt,
                                     process_detail::process_mappings& keep) {
    const int rank = s.rank(), nranks = s.size();
    const char* op = "gpu::init_rank";
    auto attempt = [&](region_handle how, const stage_agreement& agree) {
      exported_region own;
      std::unique_ptr<bootstrap::fd_server> srv;
      process_detail::region_card mine{};
      std::string why;
      try {
        own = exported_region::create(device, bytes, how);
        check(cudaMemset(own.data(), 0, own.bytes()), "cudaMemset of the region");
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the region's initialisation");
        mine.region_bytes = own.bytes();
        srv = offer(own, how, mine);
      } catch (const std::exception& e) {
        why = std::string("exporting its region: ") + e.what();
      }
      agree(why);
      const auto cards = all_of<process_detail::region_card>(s, mine);
      std::vector<imported_region> peers;
      std::vector<std::byte*> regions(static_cast<std::size_t>(nranks), own.data());
      for (int q = 0; q < nranks && why.empty(); ++q) {
        if (q == rank) continue;
        const auto& c = cards[static_cast<std::size_t>(q)];
        try {
          if (how == region_handle::posix_fd) {
            peers.push_back(with_fetched_fd(
                c, opt, [&](int fd) { return imported_region::open(fd, c.region_bytes, device); }));
          } else {
            peers.push_back(imported_region::open(how, c.handle, c.region_bytes, device));
          }
          regions[static_cast<std::size_t>(q)] = peers.back().data();
        } catch (const std::exception& e) {
          why = "mapping rank " + std::to_string(q) + "'s region: " + e.what();
        }
      }
      // Every rank has fetched its descriptors before it votes: the servers may go.
      agree(why);
      keep.own = std::move(own);
      keep.peers = std::move(peers);
      keep.regions = std::move(regions);
    };
    const vote_exchange exchange = [&s](const stage_vote& v) { return all_of<stage_vote>(s, v); };
    const region_handle way =
        negotiate(candidates, attempt, exchange, op, [&](region_handle h, const std::string& why) {
          if (rank == 0 && collx::detail::debug_enabled())
            std::fprintf(stderr,
                         "collx: %s: sharing regions by %s handles failed (%s); trying the next way\n", op,
                         name(h), why.c_str());
        });
    if (rank == 0 && collx::detail::debug_enabled())
      std::fprintf(stderr, "collx: %s: regions shared by %s handles\n", op, name(way));
    return way;
  }
  /// register_buffer across processes: each rank exports the allocation
  /// holding its buffer as a CUDA IPC handle, the ranks trade handles through
  /// the bootstrap (kept for this), and each maps the peers' allocations.
  /// Every rank takes part even where its own export failed, so that all of
  /// them fail alike instead of waiting for it.
  static void attach_windows(detail::group_state& g, std::shared_ptr<bootstrap::session> s, int device) {
    auto maps = std::make_shared<process_detail::window_mappings>(device);
    g.register_across = [s, maps, device](void* ptr, std::size_t bytes, int w, const std::string& refusal) {
      const int rank = s->rank(), P = s->size();
      process_detail::window_card mine{};
      mine.bytes = bytes;
      try {
        if (!refusal.empty()) throw_error(status::invalid_argument, refusal);
        device_guard on(device);
        CUdeviceptr base = 0;
        std::size_t size = 0;
        ipc_detail::cu(
            ipc_detail::driver::get().address_range(&base, &size, reinterpret_cast<CUdeviceptr>(ptr)),
            "cuMemGetAddressRange");
        mine.offset = reinterpret_cast<std::uintptr_t>(ptr) - static_cast<std::uintptr_t>(base);
        check(cudaIpcGetMemHandle(&mine.handle, reinterpret_cast<void*>(base)),
              "cudaIpcGetMemHandle (the buffer must come from cudaMalloc)");
        mine.ok = 1;
      } catch (const std::exception& e) {
        std::snprintf(mine.error, sizeof mine.error, "%s", e.what());
      }
      const auto cards = all_of<process_detail::window_card>(*s, mine);
      for (int q = 0; q < P; ++q)
        if (!cards[static_cast<std::size_t>(q)].ok)
          throw_error(status::invalid_argument,
                      "gpu::communicator::register_buffer: rank " + std::to_string(q) +
                          " could not register its buffer: " + cards[static_cast<std::size_t>(q)].error);
      std::vector<transport::window_span> spans(static_cast<std::size_t>(P));
      for (int q = 0; q < P; ++q) {
        const auto& c = cards[static_cast<std::size_t>(q)];
        const std::uintptr_t base = q == rank ? reinterpret_cast<std::uintptr_t>(ptr) - c.offset
                                              : reinterpret_cast<std::uintptr_t>(maps->open(q, c.handle, w));
        spans[static_cast<std::size_t>(q)] = {base + c.offset, c.bytes};
      }
      return spans;
    };
    g.deregister_across = [maps](int w) { maps->close(w); };
  }
  /// Every rank's `mine`, by rank.
  template <class Card>
  static std::vector<Card> all_of(bootstrap::session& s, const Card& mine) {
    const auto blob = s.allgather(&mine, sizeof mine);
    std::vector<Card> out(static_cast<std::size_t>(s.size()));
    std::memcpy(out.data(), blob.data(), blob.size());
    return out;
  }
  static std::chrono::milliseconds opt_timeout(const options& opt) {
    return std::chrono::milliseconds(opt.timeout_ms);
  }
};

/// Rank `rank` of `nranks` processes that all pass the same id, on GPU `device`.
inline communicator init_rank(int nranks, const unique_id& id, int rank, int device,
                              const options& opt = {}) {
  require(nranks >= 1 && rank >= 0 && rank < nranks, "gpu::init_rank",
          "rank " + std::to_string(rank) + " / nranks " + std::to_string(nranks) + " are out of range");
  return process_access::join(
      bootstrap::session::connect(id, rank, nranks, std::chrono::milliseconds(opt.timeout_ms)), device, opt);
}

/// The rank this process was started as by a launcher, on GPU LOCAL_RANK
/// (or the launcher's equivalent; rank where it says none) modulo the GPUs.
inline communicator from_env(const options& opt = {}) {
  const auto env = bootstrap::detect_launch_env();
  if (!env)
    throw_error(status::invalid_argument,
                "gpu::from_env: no launcher environment found (COLLX_RANK/COLLX_SIZE, "
                "RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE or SLURM_*)");
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  const int local = env->local_rank >= 0 ? env->local_rank : env->rank;
  return process_access::join(bootstrap::connect_from_env(*env, std::chrono::milliseconds(opt.timeout_ms)),
                              count > 0 ? local % count : 0, opt);
}

}  // namespace collx::gpu
