// collx/cuda/ipc_region.hpp — GPU memory that other processes map: the
// region of a process rank of the mesh transport.
//
// exported_region::create(device, bytes, how) allocates device memory that
// can be handed to other processes in one of three ways (region_handles.hpp):
//
//   posix_fd  cuMemCreate requesting POSIX file-descriptor handles;
//             export_fd() gives a descriptor, which another process receives
//             (bootstrap/fd_exchange.hpp: SCM_RIGHTS over a UNIX socket) and
//             maps with imported_region::open(fd, bytes, device);
//   fabric    cuMemCreate requesting fabric handles; export_bytes() gives
//             64 bytes that travel through the bootstrap, mapped with
//             imported_region::open(region_handle::fabric, bytes64, ...);
//   cuda_ipc  cudaMalloc; export_bytes() gives its cudaIpcMemHandle_t,
//             opened with cudaIpcOpenMemHandle.
//
// In each case `device` is the GPU that will load and store the mapping (for
// the first two, peer access to the owner's GPU is set on the mapping; the
// third enables it lazily), so no cudaDeviceEnablePeerAccess is needed.
// offered_handles(device) says which ways the device and driver offer; a way
// they offer may still fail (fabric without an IMEX channel), which is why
// process ranks agree on the way by trying (region_handles.hpp: negotiate).
//
// The driver calls are reached through cudaGetDriverEntryPointByVersion, so
// programs link only the CUDA runtime (a machine without a driver still
// starts them and gets a clear error). Errors: collx::error
// (status::system_error naming the driver or runtime call, status::not_supported
// where the device does not offer the way asked for).
#pragma once

#include <collx/cuda/check.hpp>
#include <collx/cuda/region_handles.hpp>
#include <collx/error.hpp>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace collx::gpu {

namespace ipc_detail {

/// The driver's entry point `name` of at least version `version` (CUDA's
/// number, 12000 for 12.0), reached through the runtime; null where the
/// driver has none.
inline void* entry_point(const char* name, int version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q);
#else
  // Runtimes before 12.5 have no ByVersion call: this one gives the version
  // of the runtime the program was built with, which is at least `version`
  // wherever the symbol exists.
  (void)version;
  const cudaError_t e = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &q);
#endif
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

/// The driver functions the regions use, resolved once through the runtime.
/// Each pointer has the type of the ABI version its lookup asks for
/// (cudaTypedefs.h's PFN_<name>_v<version>: the newest at or below 12000, or
/// 12010 for multicast), not cuda.h's current prototype, which a later
/// toolkit may move to a newer version of the call.
struct driver {
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 export_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 import_handle = nullptr;
  PFN_cuDeviceGetAttribute_v2000 attribute = nullptr;
  PFN_cuMemGetAddressRange_v3020 address_range = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 retain_handle = nullptr;
  // Multicast objects (CUDA 12.1+; collx/cuda/multicast.hpp): null where the
  // driver has none.
  PFN_cuMulticastCreate_v12010 multicast_create = nullptr;
  PFN_cuMulticastAddDevice_v12010 multicast_add_device = nullptr;
  PFN_cuMulticastBindMem_v12010 multicast_bind_mem = nullptr;
  PFN_cuMulticastUnbind_v12010 multicast_unbind = nullptr;
  PFN_cuMulticastGetGranularity_v12010 multicast_granularity = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;

  bool has_multicast() const {
    return multicast_create && multicast_add_device && multicast_bind_mem && multicast_unbind &&
           multicast_granularity && device_get;
  }

  static const driver& get() {
    static const driver d = [] {
      driver x;
      auto load = [](const char* name, auto& fn) {
        void* p = entry_point(name, 12000);
        if (p == nullptr) throw_error(status::not_supported, std::string("CUDA driver: no ") + name);
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
      };
      load("cuMemGetAllocationGranularity", x.granularity);
      load("cuMemCreate", x.create);
      load("cuMemRelease", x.release);
      load("cuMemAddressReserve", x.reserve);
      load("cuMemAddressFree", x.address_free);
      load("cuMemMap", x.map);
      load("cuMemUnmap", x.unmap);
      load("cuMemSetAccess", x.set_access);
      load("cuMemExportToShareableHandle", x.export_handle);
      load("cuMemImportFromShareableHandle", x.import_handle);
      load("cuDeviceGetAttribute", x.attribute);
      load("cuMemGetAddressRange", x.address_range);
      load("cuMemRetainAllocationHandle", x.retain_handle);
      auto optional = [](const char* name, auto& fn) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(entry_point(name, 12010));
      };
      optional("cuMulticastCreate", x.multicast_create);
      optional("cuMulticastAddDevice", x.multicast_add_device);
      optional("cuMulticastBindMem", x.multicast_bind_mem);
      optional("cuMulticastUnbind", x.multicast_unbind);
      optional("cuMulticastGetGranularity", x.multicast_granularity);
      optional("cuDeviceGet", x.device_get);
      return x;
    }();
    return d;
  }
};

inline void cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw_error(status::system_error, std::string("CUDA driver: ") + what + " failed (CUresult " +
                                          std::to_string(static_cast<int>(r)) + ")");
}

/// The driver's handle type for a virtual-memory way of sharing.
inline CUmemAllocationHandleType driver_handle_type(region_handle how) {
  return how == region_handle::fabric ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

inline CUmemAllocationProp properties(int device, region_handle how) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = driver_handle_type(how);
  return p;
}

/// bytes rounded up to the allocation granularity of `device`.
inline std::size_t rounded(int device, std::size_t bytes, region_handle how) {
  const driver& d = driver::get();
  const CUmemAllocationProp p = properties(device, how);
  std::size_t g = 0;
  cu(d.granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
  return (bytes + g - 1) / g * g;
}

/// Reserves address space for `handle` (aligned to `align`, 0: the
/// driver's default), maps it and gives each of `devices` read/write access.
inline std::byte* map_for(CUmemGenericAllocationHandle handle, std::size_t bytes,
                          std::span<const int> devices, std::size_t align = 0) {
  const driver& d = driver::get();
  CUdeviceptr va = 0;
  cu(d.reserve(&va, bytes, align, 0, 0), "cuMemAddressReserve");
  if (CUresult r = d.map(va, bytes, 0, handle, 0); r != CUDA_SUCCESS) {
    (void)d.address_free(va, bytes);
    cu(r, "cuMemMap");
  }
  std::vector<CUmemAccessDesc> access(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[i].location.id = devices[i];
    access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  if (CUresult r = d.set_access(va, bytes, access.data(), access.size()); r != CUDA_SUCCESS) {
    (void)d.unmap(va, bytes);
    (void)d.address_free(va, bytes);
    cu(r, "cuMemSetAccess");
  }
  return reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(va));
}
inline std::byte* map_for(CUmemGenericAllocationHandle handle, std::size_t bytes, int device) {
  return map_for(handle, bytes, std::span<const int>(&device, 1));
}

/// Memory mapped here, released as it was obtained: a virtual-memory mapping
/// and its allocation handle, a cudaMalloc allocation, or a mapping opened
/// from a CUDA IPC handle.
class mapping {
 public:
  enum class backing { vmm, malloced, ipc_opened };
  mapping() = default;
  mapping(backing b, CUmemGenericAllocationHandle h, std::byte* p, std::size_t n)
      : backing_(b), handle_(h), data_(p), bytes_(n) {}
  mapping(mapping&& o) noexcept { *this = static_cast<mapping&&>(o); }
  mapping& operator=(mapping&& o) noexcept {
    if (this != &o) {
      reset();
      backing_ = o.backing_, handle_ = o.handle_, data_ = o.data_, bytes_ = o.bytes_;
      o.data_ = nullptr, o.handle_ = 0, o.bytes_ = 0;
    }
    return *this;
  }
  ~mapping() { reset(); }
  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  CUmemGenericAllocationHandle handle() const { return handle_; }

 private:
  void reset() {
    if (data_ == nullptr) return;
    if (backing_ == backing::malloced) {
      (void)cudaFree(data_);
    } else if (backing_ == backing::ipc_opened) {
      (void)cudaIpcCloseMemHandle(data_);
    } else {
      const driver& d = driver::get();
      const auto va = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(data_));
      (void)d.unmap(va, bytes_);
      (void)d.address_free(va, bytes_);
      (void)d.release(handle_);
    }
    data_ = nullptr;
  }
  backing backing_ = backing::vmm;
  CUmemGenericAllocationHandle handle_ = 0;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Maps `handle` for `device` and takes ownership of it; releases the handle
/// if the mapping fails.
inline mapping adopt(CUmemGenericAllocationHandle handle, std::size_t bytes, int device) {
  std::byte* va = nullptr;
  try {
    va = map_for(handle, bytes, device);
  } catch (...) {
    (void)driver::get().release(handle);
    throw;
  }
  return mapping(mapping::backing::vmm, handle, va, bytes);
}

/// Whether the GPU of runtime ordinal `device` reports `attribute` as 1 (an
/// attribute the driver does not know reads as 0). The driver names devices
/// by CUdevice, asked of cuDeviceGet where the driver has it.
inline bool has_attribute(int device, CUdevice_attribute attribute) {
  const driver& d = driver::get();
  CUdevice dev = device;
  if (d.device_get != nullptr && d.device_get(&dev, device) != CUDA_SUCCESS) return false;
  int v = 0;
  return d.attribute(&v, attribute, dev) == CUDA_SUCCESS && v == 1;
}

inline void make_current(int device) {
  check(cudaFree(nullptr),
        ("cudaFree(nullptr) (context initialisation of device " + std::to_string(device) + ")").c_str());
}

}  // namespace ipc_detail

/// The 64 bytes of a fabric handle or a CUDA IPC handle.
using shareable_bytes = std::array<std::byte, 64>;
static_assert(sizeof(CUmemFabricHandle) == sizeof(shareable_bytes));
static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(shareable_bytes));

/// handle_bit()s of the ways `device` and the driver offer: posix_fd and
/// fabric where the device has virtual memory management and the handle
/// type; cuda_ipc always (it may still fail, e.g. across containers).
inline std::uint8_t offered_handles(int device) {
  std::uint8_t bits = handle_bit(region_handle::cuda_ipc);
  try {
    device_guard on(device);
    ipc_detail::make_current(device);
    using ipc_detail::has_attribute;
    if (!has_attribute(device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) return bits;
    if (has_attribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED))
      bits |= handle_bit(region_handle::posix_fd);
    if (has_attribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED))
      bits |= handle_bit(region_handle::fabric);
  } catch (const error&) {
    // No virtual-memory entry points in this driver: the legacy way only.
  }
  return bits;
}

/// Device memory of `device` that other processes can map (see the header comment).
class exported_region {
 public:
  /// At least `bytes` bytes (rounded up to the allocation granularity),
  /// mapped here for `device`, to be shared the way `how` says (not
  /// automatic). Not zeroed. not_supported where the device does not offer
  /// that way.
  static exported_region create(int device, std::size_t bytes, region_handle how = region_handle::posix_fd) {
    require(how != region_handle::automatic, "gpu::exported_region::create",
            "name the way to share the region (posix_fd, fabric or cuda_ipc)");
    device_guard on(device);
    ipc_detail::make_current(device);
    if (!(offered_handles(device) & handle_bit(how)))
      throw_error(status::not_supported, "device " + std::to_string(device) + " does not offer " + name(how) +
                                             " handles (virtual memory management with that handle type)");
    exported_region r;
    r.how_ = how;
    if (how == region_handle::cuda_ipc) {
      void* p = nullptr;
      check(cudaMalloc(&p, bytes), "cudaMalloc of the region");
      r.m_ =
          ipc_detail::mapping(ipc_detail::mapping::backing::malloced, 0, static_cast<std::byte*>(p), bytes);
      return r;
    }
    const ipc_detail::driver& d = ipc_detail::driver::get();
    const std::size_t n = ipc_detail::rounded(device, bytes, how);
    const CUmemAllocationProp p = ipc_detail::properties(device, how);
    CUmemGenericAllocationHandle h = 0;
    ipc_detail::cu(d.create(&h, n, &p, 0), "cuMemCreate");
    r.m_ = ipc_detail::adopt(h, n, device);
    return r;
  }

  std::byte* data() const { return m_.data(); }
  std::size_t bytes() const { return m_.bytes(); }
  region_handle way() const { return how_; }
  /// The allocation's handle (0 for a cuda_ipc region, which is not a
  /// virtual-memory allocation).
  CUmemGenericAllocationHandle handle() const { return m_.handle(); }
  /// A new descriptor for the allocation (the caller closes it); posix_fd only.
  int export_fd() const {
    require(how_ == region_handle::posix_fd, "gpu::exported_region::export_fd",
            std::string("the region is shared by ") + name(how_) + " handles, not posix_fd");
    int fd = -1;
    ipc_detail::cu(ipc_detail::driver::get().export_handle(&fd, m_.handle(),
                                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                   "cuMemExportToShareableHandle (POSIX file descriptor)");
    return fd;
  }
  /// The 64-byte handle another process opens; fabric and cuda_ipc only.
  shareable_bytes export_bytes() const {
    shareable_bytes out{};
    if (how_ == region_handle::fabric) {
      CUmemFabricHandle f{};
      ipc_detail::cu(ipc_detail::driver::get().export_handle(&f, m_.handle(), CU_MEM_HANDLE_TYPE_FABRIC, 0),
                     "cuMemExportToShareableHandle (fabric)");
      std::memcpy(out.data(), &f, sizeof f);
    } else {
      require(how_ == region_handle::cuda_ipc, "gpu::exported_region::export_bytes",
              "the region is shared by posix_fd handles: use export_fd()");
      cudaIpcMemHandle_t h{};
      check(cudaIpcGetMemHandle(&h, m_.data()), "cudaIpcGetMemHandle of the region");
      std::memcpy(out.data(), &h, sizeof h);
    }
    return out;
  }

 private:
  ipc_detail::mapping m_;
  region_handle how_ = region_handle::posix_fd;
};

/// Another process's exported region, mapped here for `device`.
class imported_region {
 public:
  /// Maps `bytes` bytes (the exporter's bytes()) of the allocation behind
  /// `fd`; the descriptor stays the caller's to close.
  static imported_region open(int fd, std::size_t bytes, int device) {
    device_guard on(device);
    ipc_detail::make_current(device);
    CUmemGenericAllocationHandle h = 0;
    ipc_detail::cu(
        ipc_detail::driver::get().import_handle(&h, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle (POSIX file descriptor)");
    imported_region r;
    r.m_ = ipc_detail::adopt(h, bytes, device);
    return r;
  }
  /// Maps `bytes` bytes of the allocation behind a fabric or CUDA IPC handle
  /// (the exporter's export_bytes()).
  static imported_region open(region_handle how, const shareable_bytes& handle, std::size_t bytes,
                              int device) {
    device_guard on(device);
    ipc_detail::make_current(device);
    imported_region r;
    if (how == region_handle::fabric) {
      CUmemFabricHandle f{};
      std::memcpy(&f, handle.data(), sizeof f);
      CUmemGenericAllocationHandle h = 0;
      ipc_detail::cu(ipc_detail::driver::get().import_handle(&h, &f, CU_MEM_HANDLE_TYPE_FABRIC),
                     "cuMemImportFromShareableHandle (fabric)");
      r.m_ = ipc_detail::adopt(h, bytes, device);
      return r;
    }
    require(how == region_handle::cuda_ipc, "gpu::imported_region::open",
            std::string("a ") + name(how) + " region is not opened from 64 bytes");
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, handle.data(), sizeof h);
    void* p = nullptr;
    check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
          "cudaIpcOpenMemHandle of a peer's region");
    r.m_ =
        ipc_detail::mapping(ipc_detail::mapping::backing::ipc_opened, 0, static_cast<std::byte*>(p), bytes);
    return r;
  }

  std::byte* data() const { return m_.data(); }
  std::size_t bytes() const { return m_.bytes(); }

 private:
  ipc_detail::mapping m_;
};

}  // namespace collx::gpu
