// collx/cuda/multicast.hpp — a thread group's FIFO regions with their
// registered buffers bound to one NVSwitch multicast object.
//
// Where every GPU of a group has CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (H100
// and later on NVSwitch, with the fabric manager running), the group may make
// each rank's region with the virtual memory API instead of cudaMalloc
// (cuMemCreate on the rank's GPU, mapped with read/write access for every GPU
// of the group, which is how peers store into it), create one multicast
// object (cuMulticastCreate), add every GPU to it, bind each rank's
// registered buffer (the region's last part, mesh_layout::peer_buffer_*) at
// multicast offset 0, and map the object once per rank for that rank's GPU.
// A kernel then reaches offset k of every rank's buffer through one
// multicast address (mesh_view::multicast), and nvls's switch channel
// reduces and stores with multimem instructions (transport/switch_channel.hpp).
//
// The buffer's offset and length within the region are multiples of the
// multicast granularity (mesh_layout::buffer_align), as binding requires.
// Created and released by one thread; every driver call is checked, and
// what was made is undone in reverse order (unmap, unbind, release) by the
// destructor, also after a failure half-way.
//
// Process ranks (collx/cuda/process.hpp), one per GPU: rank 0 makes the
// object and hands it to the others the way the regions went (a POSIX file
// descriptor or a fabric handle; not with CUDA IPC regions, which are not
// virtual-memory allocations); each rank adds its GPU, binds its own buffer
// and maps the object (multicast_binding).
#pragma once

#include <collx/cuda/check.hpp>
#include <collx/cuda/ipc_region.hpp>
#include <collx/cuda/region_handles.hpp>
#include <collx/error.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace collx::gpu {

/// Whether a group's nvls reductions and stores go through the switch.
enum class multicast_mode {
  /// Where every GPU of the group offers multicast, the ranks are on
  /// different GPUs and the regions are device memory (COLLX_DEBUG=1 says
  /// why not otherwise); the peers' memory otherwise.
  automatic,
  /// Never.
  off,
  /// Always: not_supported, naming the reason, where the group cannot.
  on,
};

inline const char* name(multicast_mode m) {
  switch (m) {
    case multicast_mode::automatic: return "automatic";
    case multicast_mode::off: return "off";
    case multicast_mode::on: return "on";
  }
  return "?";
}

namespace multicast_detail {

/// The driver's functions where it has multicast objects (CUDA 12.1+ and
/// virtual memory management); null otherwise.
inline const ipc_detail::driver* driver() {
  try {
    const ipc_detail::driver& d = ipc_detail::driver::get();
    return d.has_multicast() ? &d : nullptr;
  } catch (const error&) {
    return nullptr;  // no virtual-memory entry points
  }
}

/// Pinned device memory on GPU `device`, shared by no handle (a thread group's).
inline CUmemAllocationProp on_device(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  return p;
}

inline CUdevice cu_device(int ordinal) {
  CUdevice dev = 0;
  ipc_detail::cu(driver()->device_get(&dev, ordinal), "cuDeviceGet");
  return dev;
}

/// A multicast object of `bytes` over a thread group's GPUs (rank →
/// ordinal), with each rank's allocation bound at multicast offset 0 and the
/// object mapped once per rank for that rank's GPU: what multicast_regions
/// and window_multicast make. Each step is recorded as it succeeds, and the
/// destructor undoes them in reverse order (unmap, unbind, release), also
/// after a failure half-way; its own failures are ignored.
struct object_over_group {
  CUmemGenericAllocationHandle object = 0;
  bool have_object = false;
  std::vector<CUdevice> bound;     // devices whose memory is bound
  std::vector<std::byte*> mapped;  // the object as each rank's GPU maps it
  std::size_t bytes = 0;

  /// memory[r] + offsets[r]: rank r's part; `align`: the mappings'
  /// alignment. Throws collx::error naming the driver call that failed
  /// (`what` says which object).
  void make(const std::vector<int>& devices, std::size_t size,
            const std::vector<CUmemGenericAllocationHandle>& memory, const std::vector<std::size_t>& offsets,
            std::size_t align, const std::string& what) {
    const auto* mc = driver();
    bytes = size;
    CUmulticastObjectProp prop{};
    prop.numDevices = static_cast<unsigned>(devices.size());
    prop.size = bytes;
    ipc_detail::cu(mc->multicast_create(&object, &prop), ("cuMulticastCreate (" + what + ")").c_str());
    have_object = true;
    // Every GPU joins before any memory is bound.
    for (int dev : devices)
      ipc_detail::cu(mc->multicast_add_device(object, cu_device(dev)),
                     ("cuMulticastAddDevice (" + what + ")").c_str());
    for (std::size_t r = 0; r < devices.size(); ++r) {
      device_guard on(devices[r]);
      ipc_detail::cu(mc->multicast_bind_mem(object, 0, memory[r], offsets[r], bytes, 0),
                     ("cuMulticastBindMem (" + what + ")").c_str());
      bound.push_back(cu_device(devices[r]));
    }
    for (int dev : devices) {
      device_guard on(dev);
      mapped.push_back(ipc_detail::map_for(object, bytes, std::span<const int>(&dev, 1), align));
    }
  }

  object_over_group() = default;
  object_over_group(const object_over_group&) = delete;
  object_over_group& operator=(const object_over_group&) = delete;
  ~object_over_group() {
    const ipc_detail::driver& d = ipc_detail::driver::get();
    for (std::byte* p : mapped) {
      const auto va = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
      (void)d.unmap(va, bytes);
      (void)d.address_free(va, bytes);
    }
    for (CUdevice dev : bound) (void)driver()->multicast_unbind(object, dev, 0, bytes);
    if (have_object) (void)d.release(object);
  }
};

}  // namespace multicast_detail

/// Why GPU `device` cannot join a multicast object; empty where it can.
inline std::string device_multicast_refusal(int device) {
  if (multicast_detail::driver() == nullptr) return "the CUDA driver has no multicast objects (CUDA 12.1+)";
  device_guard on(device);
  ipc_detail::make_current(device);
  if (!ipc_detail::has_attribute(device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED))
    return "GPU " + std::to_string(device) + " has no virtual memory management";
  if (!ipc_detail::has_attribute(device, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED))
    return "GPU " + std::to_string(device) +
           " does not offer multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: NVSwitch with the fabric "
           "manager "
           "running)";
  return {};
}

/// Why a group on `devices` (rank → ordinal) cannot use multicast; empty
/// where it can. `host_regions`: the group's regions are host memory.
inline std::string multicast_refusal(const std::vector<int>& devices, bool host_regions) {
  if (devices.size() < 2) return "multicast needs two ranks or more";
  std::vector<int> d(devices);
  std::sort(d.begin(), d.end());
  if (std::adjacent_find(d.begin(), d.end()) != d.end())
    return "ranks share a GPU; a multicast object spans distinct GPUs";
  if (host_regions) return "the group's regions are host memory";
  for (int x : d)
    if (std::string why = device_multicast_refusal(x); !why.empty()) return why;
  return {};
}

/// The alignment a multicast object over `team` GPUs binding buffers of
/// about `bytes` needs of a bound buffer's offset and length, also a multiple
/// of the allocation granularity of each of `devices` (those of this process).
inline std::size_t multicast_alignment(std::span<const int> devices, std::size_t team, std::size_t bytes) {
  const auto* mc = multicast_detail::driver();
  require(mc != nullptr, "gpu::multicast_alignment", "the CUDA driver has no multicast objects");
  CUmulticastObjectProp prop{};
  prop.numDevices = static_cast<unsigned>(team);
  prop.size = bytes;
  // The granularity depends on the object's properties, its handle types
  // among them: asked for each type it may be created with (none for a
  // thread group; a descriptor or a fabric handle for process ranks, chosen
  // later), the largest answer. A type the driver refuses is not one it
  // would create the object with either.
  std::size_t g = 0;
  ipc_detail::cu(mc->multicast_granularity(&g, &prop, CU_MULTICAST_GRANULARITY_MINIMUM),
                 "cuMulticastGetGranularity");
  for (const CUmemAllocationHandleType type : {
         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
#if CUDA_VERSION >= 12030
         , CU_MEM_HANDLE_TYPE_FABRIC
#endif
       }) {
    prop.handleTypes = static_cast<unsigned long long>(type);
    std::size_t t = 0;
    if (mc->multicast_granularity(&t, &prop, CU_MULTICAST_GRANULARITY_MINIMUM) == CUDA_SUCCESS && t != 0)
      g = std::lcm(g, t);
  }
  for (int x : devices) {
    const CUmemAllocationProp p = multicast_detail::on_device(x);
    std::size_t a = 0;
    ipc_detail::cu(ipc_detail::driver::get().granularity(&a, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   "cuMemGetAllocationGranularity");
    g = std::lcm(g, a);
  }
  return g;
}

/// Every rank's region, and the multicast object over their buffers (see the
/// header comment).
class multicast_regions {
 public:
  /// Regions of `region_bytes` on each rank's GPU (devices: rank → ordinal,
  /// distinct), zeroed; each one's [buffer_offset, buffer_offset +
  /// buffer_bytes) bound to one multicast object. Both multiples of
  /// multicast_alignment(). Throws collx::error naming the driver call
  /// that failed (not_supported where the driver refuses multicast).
  static std::unique_ptr<multicast_regions> create(const std::vector<int>& devices, std::size_t region_bytes,
                                                   std::size_t buffer_offset, std::size_t buffer_bytes) {
    const auto* mc = multicast_detail::driver();
    require(mc != nullptr, "gpu::multicast_regions::create", "the CUDA driver has no multicast objects");
    const ipc_detail::driver& d = ipc_detail::driver::get();
    const std::size_t align = multicast_alignment(devices, devices.size(), buffer_bytes);
    require(buffer_offset % align == 0 && buffer_bytes % align == 0 &&
                buffer_offset + buffer_bytes <= region_bytes,
            "gpu::multicast_regions::create",
            "the registered buffer is not aligned to the multicast granularity");
    std::unique_ptr<multicast_regions> m(new multicast_regions);
    m->devices_ = devices;
    const std::size_t bytes = (region_bytes + align - 1) / align * align;
    for (int dev : devices) {
      device_guard on(dev);
      ipc_detail::make_current(dev);
      const CUmemAllocationProp p = multicast_detail::on_device(dev);
      CUmemGenericAllocationHandle h = 0;
      ipc_detail::cu(d.create(&h, bytes, &p, 0), "cuMemCreate of a rank's region");
      try {
        m->regions_.push_back({h, ipc_detail::map_for(h, bytes, devices, align), bytes});
      } catch (...) {
        (void)d.release(h);
        throw;
      }
      check(cudaMemset(m->regions_.back().data, 0, bytes), "cudaMemset of a rank's region");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a region's initialisation");
    }
    std::vector<CUmemGenericAllocationHandle> memory;
    for (const allocation& r : m->regions_) memory.push_back(r.handle);
    m->object_ = std::make_unique<multicast_detail::object_over_group>();
    m->object_->make(devices, buffer_bytes, memory, std::vector<std::size_t>(devices.size(), buffer_offset),
                     align, "the staging buffers");
    return m;
  }

  multicast_regions(const multicast_regions&) = delete;
  multicast_regions& operator=(const multicast_regions&) = delete;
  ~multicast_regions() {
    const ipc_detail::driver& d = ipc_detail::driver::get();
    object_.reset();  // the object first: it binds the regions
    for (const allocation& r : regions_) {
      const auto va = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(r.data));
      (void)d.unmap(va, r.bytes);
      (void)d.address_free(va, r.bytes);
      (void)d.release(r.handle);
    }
  }

  /// Rank r's region as every GPU of the group addresses it.
  std::byte* region(int r) const { return regions_[static_cast<std::size_t>(r)].data; }
  /// The multicast address of the buffers as rank r's GPU addresses it.
  std::byte* multicast(int r) const { return object_->mapped[static_cast<std::size_t>(r)]; }

 private:
  multicast_regions() = default;
  struct allocation {
    CUmemGenericAllocationHandle handle;
    std::byte* data;
    std::size_t bytes;
  };
  std::vector<int> devices_;
  std::vector<allocation> regions_;
  std::unique_ptr<multicast_detail::object_over_group> object_;
};

/// One process rank's part of a multicast object that process ranks share
/// (collx/cuda/process.hpp): the object's handle (made by rank 0, imported
/// by the others), this rank's GPU added to it, this rank's buffer bound to
/// it, and the object mapped for this GPU. The destructor undoes what was
/// done, in reverse order, also after a failure half-way.
class multicast_binding {
 public:
  /// Rank 0: a new object for `ndevices` GPUs binding `bytes` each,
  /// exportable as `how` (posix_fd or fabric) handles.
  static std::unique_ptr<multicast_binding> create(int ndevices, std::size_t bytes, region_handle how) {
    const auto* mc = multicast_detail::driver();
    require(mc != nullptr, "gpu::multicast_binding::create", "the CUDA driver has no multicast objects");
    CUmulticastObjectProp prop{};
    prop.numDevices = static_cast<unsigned>(ndevices);
    prop.size = bytes;
    prop.handleTypes = ipc_detail::driver_handle_type(how);
    std::unique_ptr<multicast_binding> b(new multicast_binding);
    b->bytes_ = bytes;
    ipc_detail::cu(mc->multicast_create(&b->object_, &prop), "cuMulticastCreate");
    b->have_object_ = true;
    return b;
  }
  /// Another rank: the object behind rank 0's descriptor (posix_fd; the
  /// caller closes it) or fabric handle bytes.
  static std::unique_ptr<multicast_binding> import(region_handle how, int fd, const shareable_bytes& handle,
                                                   std::size_t bytes) {
    std::unique_ptr<multicast_binding> b(new multicast_binding);
    b->bytes_ = bytes;
    const ipc_detail::driver& d = ipc_detail::driver::get();
    if (how == region_handle::fabric) {
      CUmemFabricHandle f{};
      std::memcpy(&f, handle.data(), sizeof f);
      ipc_detail::cu(d.import_handle(&b->object_, &f, CU_MEM_HANDLE_TYPE_FABRIC),
                     "cuMemImportFromShareableHandle (multicast object, fabric)");
    } else {
      ipc_detail::cu(d.import_handle(&b->object_, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     "cuMemImportFromShareableHandle (multicast object, POSIX file descriptor)");
    }
    b->have_object_ = true;
    return b;
  }
  /// A new descriptor for the object (the caller closes it); rank 0, posix_fd.
  int export_fd() const {
    int fd = -1;
    ipc_detail::cu(
        ipc_detail::driver::get().export_handle(&fd, object_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemExportToShareableHandle (multicast object, POSIX file descriptor)");
    return fd;
  }
  /// The object's fabric handle; rank 0, fabric.
  shareable_bytes export_bytes() const {
    CUmemFabricHandle f{};
    ipc_detail::cu(ipc_detail::driver::get().export_handle(&f, object_, CU_MEM_HANDLE_TYPE_FABRIC, 0),
                   "cuMemExportToShareableHandle (multicast object, fabric)");
    shareable_bytes out{};
    std::memcpy(out.data(), &f, sizeof f);
    return out;
  }
  /// Adds this rank's GPU; every rank's must be added before any binds.
  void add(int device) {
    device_guard on(device);
    const CUdevice dev = multicast_detail::cu_device(device);
    ipc_detail::cu(multicast_detail::driver()->multicast_add_device(object_, dev), "cuMulticastAddDevice");
    device_ = dev;
    ordinal_ = device;
  }
  /// Binds [offset, offset + bytes) of this rank's allocation `memory` (on
  /// the GPU added) at multicast offset 0, and maps the object for that GPU
  /// at an address aligned to `align`.
  void bind_and_map(CUmemGenericAllocationHandle memory, std::size_t offset, std::size_t align) {
    device_guard on(ordinal_);
    ipc_detail::cu(multicast_detail::driver()->multicast_bind_mem(object_, 0, memory, offset, bytes_, 0),
                   "cuMulticastBindMem");
    bound_ = true;
    address_ = ipc_detail::map_for(object_, bytes_, std::span<const int>(&ordinal_, 1), align);
  }
  /// The multicast address as this rank's GPU maps it.
  std::byte* address() const { return address_; }

  multicast_binding(const multicast_binding&) = delete;
  multicast_binding& operator=(const multicast_binding&) = delete;
  ~multicast_binding() {
    const ipc_detail::driver& d = ipc_detail::driver::get();
    if (address_ != nullptr) {
      const auto va = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(address_));
      (void)d.unmap(va, bytes_);
      (void)d.address_free(va, bytes_);
    }
    if (bound_) (void)multicast_detail::driver()->multicast_unbind(object_, device_, 0, bytes_);
    if (have_object_) (void)d.release(object_);
  }

 private:
  multicast_binding() = default;
  CUmemGenericAllocationHandle object_ = 0;
  bool have_object_ = false;
  CUdevice device_ = 0;
  int ordinal_ = -1;
  bool bound_ = false;
  std::byte* address_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Device memory for a registered window (communicator::alloc_window): on
/// one GPU, from the virtual memory API (cuMemCreate), its size a multiple
/// of `align`, mapped at an address aligned to it with read/write access for
/// each of `devices` (the group's GPUs, which load peers' windows in place);
/// or, where a multicast object could not bind it anyway (process ranks,
/// which share windows as CUDA IPC handles of cudaMalloc memory), cudaMalloc
/// memory. Released by the destructor.
class window_memory {
 public:
  static std::unique_ptr<window_memory> vmm(int device, std::span<const int> devices, std::size_t bytes,
                                            std::size_t align) {
    const ipc_detail::driver& d = ipc_detail::driver::get();
    device_guard on(device);
    ipc_detail::make_current(device);
    const CUmemAllocationProp p = multicast_detail::on_device(device);
    std::unique_ptr<window_memory> m(new window_memory);
    m->bytes_ = (bytes + align - 1) / align * align;
    ipc_detail::cu(d.create(&m->handle_, m->bytes_, &p, 0), "cuMemCreate of a window's buffer");
    m->vmm_ = true;
    m->data_ = ipc_detail::map_for(m->handle_, m->bytes_, devices, align);
    return m;
  }
  static std::unique_ptr<window_memory> plain(int device, std::size_t bytes) {
    device_guard on(device);
    std::unique_ptr<window_memory> m(new window_memory);
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc of a window's buffer");
    m->data_ = static_cast<std::byte*>(p);
    m->bytes_ = bytes;
    return m;
  }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

  window_memory(const window_memory&) = delete;
  window_memory& operator=(const window_memory&) = delete;
  ~window_memory() {
    if (!vmm_) {
      if (data_ != nullptr) (void)cudaFree(data_);
      return;
    }
    const ipc_detail::driver& d = ipc_detail::driver::get();
    if (data_ != nullptr) {
      const auto va = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(data_));
      (void)d.unmap(va, bytes_);
      (void)d.address_free(va, bytes_);
    }
    (void)d.release(handle_);
  }

 private:
  window_memory() = default;
  CUmemGenericAllocationHandle handle_ = 0;
  bool vmm_ = false;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// One window of a thread group with its ranks' buffers bound to a multicast
/// object, mapped once per rank for that rank's GPU (the window's multicast
/// address: transport::window_span::multicast). bind() binds where every
/// buffer is memory of the virtual memory API (window_memory::vmm, or the
/// caller's own cuMemCreate mappings) starting on a multicast granule of its
/// allocation, which holds whole granules up to the largest buffer's size
/// (the object's, rounded up); elsewhere it returns null and says why in `why`. A driver
/// call that fails throws collx::error naming it, after undoing what was done.
class window_multicast {
 public:
  static std::unique_ptr<window_multicast> bind(
      const std::vector<int>& devices, const std::vector<std::pair<std::uintptr_t, std::size_t>>& spans,
      std::string& why) {
    const auto* mc = multicast_detail::driver();
    if (mc == nullptr) return why = "the CUDA driver has no multicast objects", nullptr;
    const ipc_detail::driver& d = ipc_detail::driver::get();
    // The object covers the largest buffer, rounded up to whole granules:
    // every rank's allocation must hold that much from its buffer's start.
    std::size_t largest = 0;
    for (const auto& sp : spans) largest = std::max(largest, sp.second);
    const std::size_t align = multicast_alignment(devices, devices.size(), largest);
    const std::size_t bytes = (largest + align - 1) / align * align;
    std::unique_ptr<window_multicast> m(new window_multicast);
    for (std::size_t r = 0; r < spans.size(); ++r) {
      const std::uintptr_t base = spans[r].first;
      if (base % align != 0)
        return why = "rank " + std::to_string(r) + "'s buffer is not aligned to the multicast granularity (" +
                     std::to_string(align) +
                     " bytes; gpu::communicator::alloc_window allocates such buffers)",
               nullptr;
      device_guard on(devices[r]);
      CUmemGenericAllocationHandle h = 0;
      if (d.retain_handle(&h, reinterpret_cast<void*>(base)) != CUDA_SUCCESS)
        return why = "rank " + std::to_string(r) +
                     "'s buffer is not memory of the CUDA virtual memory API (cuMemCreate; "
                     "gpu::communicator::alloc_window allocates such buffers)",
               nullptr;
      m->retained_.push_back(h);
      CUdeviceptr start = 0;
      std::size_t size = 0;
      ipc_detail::cu(d.address_range(&start, &size, static_cast<CUdeviceptr>(base)), "cuMemGetAddressRange");
      const std::size_t offset = static_cast<std::size_t>(base - static_cast<std::uintptr_t>(start));
      if (offset % align != 0 || offset + bytes > size)
        return why = "rank " + std::to_string(r) +
                     "'s allocation does not hold whole multicast granules from the buffer's start (" +
                     std::to_string(bytes) + " bytes)",
               nullptr;
      m->offsets_.push_back(offset);
    }
    m->object_ = std::make_unique<multicast_detail::object_over_group>();
    m->object_->make(devices, bytes, m->retained_, m->offsets_, align, "a window");
    return m;
  }

  /// The window's multicast address as rank r's GPU maps it.
  std::byte* address(int r) const { return object_->mapped[static_cast<std::size_t>(r)]; }

  window_multicast(const window_multicast&) = delete;
  window_multicast& operator=(const window_multicast&) = delete;
  ~window_multicast() {
    object_.reset();  // unbound before the allocations' retains are released
    for (CUmemGenericAllocationHandle h : retained_)
      (void)ipc_detail::driver::get().release(h);  // the retains in bind()
  }

 private:
  window_multicast() = default;
  std::vector<CUmemGenericAllocationHandle> retained_;  // each rank's allocation, retained
  std::vector<std::size_t> offsets_;                    // each buffer's offset in it
  std::unique_ptr<multicast_detail::object_over_group> object_;
};

}  // namespace collx::gpu
