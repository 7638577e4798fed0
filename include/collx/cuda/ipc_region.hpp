// collx/cuda/ipc_region.hpp — GPU memory that other processes map: the
// region of a process rank of the mesh transport.
//
// exported_region::create(device, bytes) allocates device memory with the
// CUDA virtual memory API (cuMemCreate, requesting POSIX file descriptor
// handles), maps it into this process with read/write access for `device`,
// and hands out file descriptors for it (export_fd()). Another process gets
// such a descriptor (bootstrap/fd_exchange.hpp: SCM_RIGHTS over a UNIX
// socket) and maps the same memory with imported_region::open(fd, bytes,
// device), where `device` is the GPU that will load and store it (peer access
// to the owner's GPU is set on the mapping, so no cudaDeviceEnablePeerAccess
// is needed). The fabric handles of multi-node NVLink (IMEX) and the cudaIpc*
// fallback are not provided.
//
// The driver calls are reached through cudaGetDriverEntryPointByVersion, so
// programs link only the CUDA runtime (a machine without a driver still
// starts them and gets a clear error). Errors: collx::error
// (status::system_error naming the driver call, status::not_supported where
// the device has no virtual-memory management or POSIX-fd handles).
#pragma once

#include <collx/cuda/check.hpp>
#include <collx/error.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace collx::gpu {

namespace ipc_detail {

/// The driver functions the regions use, resolved once through the runtime.
struct driver {
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  decltype(&cuMemExportToShareableHandle) export_handle = nullptr;
  decltype(&cuMemImportFromShareableHandle) import_handle = nullptr;
  decltype(&cuDeviceGetAttribute) attribute = nullptr;
  decltype(&cuMemGetAddressRange) address_range = nullptr;

  static const driver& get() {
    static const driver d = [] {
      driver x;
      auto load = [](const char* name, auto& fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q{};
        check(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q),
              "cudaGetDriverEntryPointByVersion");
        if (q != cudaDriverEntryPointSuccess || p == nullptr)
          throw_error(status::not_supported, std::string("CUDA driver: no ") + name);
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

inline CUmemAllocationProp properties(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

/// bytes rounded up to the allocation granularity of `device`.
inline std::size_t rounded(int device, std::size_t bytes) {
  const driver& d = driver::get();
  const CUmemAllocationProp p = properties(device);
  std::size_t g = 0;
  cu(d.granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
  return (bytes + g - 1) / g * g;
}

/// Reserves address space for `handle`, maps it and gives `device` read/write access.
inline std::byte* map_for(CUmemGenericAllocationHandle handle, std::size_t bytes, int device) {
  const driver& d = driver::get();
  CUdeviceptr va = 0;
  cu(d.reserve(&va, bytes, 0, 0, 0), "cuMemAddressReserve");
  if (CUresult r = d.map(va, bytes, 0, handle, 0); r != CUDA_SUCCESS) {
    (void)d.address_free(va, bytes);
    cu(r, "cuMemMap");
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = d.set_access(va, bytes, &access, 1); r != CUDA_SUCCESS) {
    (void)d.unmap(va, bytes);
    (void)d.address_free(va, bytes);
    cu(r, "cuMemSetAccess");
  }
  return reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(va));
}

/// A mapping and its allocation handle, released together.
class mapping {
 public:
  mapping() = default;
  mapping(CUmemGenericAllocationHandle h, std::byte* p, std::size_t n) : handle_(h), data_(p), bytes_(n) {}
  mapping(mapping&& o) noexcept { *this = static_cast<mapping&&>(o); }
  mapping& operator=(mapping&& o) noexcept {
    if (this != &o) {
      reset();
      handle_ = o.handle_, data_ = o.data_, bytes_ = o.bytes_;
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
    const driver& d = driver::get();
    const auto va = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(data_));
    (void)d.unmap(va, bytes_);
    (void)d.address_free(va, bytes_);
    (void)d.release(handle_);
    data_ = nullptr;
  }
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
  return mapping(handle, va, bytes);
}

}  // namespace ipc_detail

/// Device memory of `device` that other processes can map (see the header comment).
class exported_region {
 public:
  /// At least `bytes` bytes (rounded up to the allocation granularity),
  /// mapped here for `device`. Not zeroed.
  static exported_region create(int device, std::size_t bytes) {
    device_guard on(device);
    check(cudaFree(nullptr), "cudaFree(nullptr) (context initialisation)");
    const ipc_detail::driver& d = ipc_detail::driver::get();
    int vmm = 0, fd_handles = 0;
    ipc_detail::cu(d.attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
                   "cuDeviceGetAttribute");
    ipc_detail::cu(
        d.attribute(&fd_handles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device),
        "cuDeviceGetAttribute");
    if (!vmm || !fd_handles)
      throw_error(status::not_supported,
                  "device " + std::to_string(device) +
                      " has no virtual memory management with file-descriptor handles");
    const std::size_t n = ipc_detail::rounded(device, bytes);
    const CUmemAllocationProp p = ipc_detail::properties(device);
    CUmemGenericAllocationHandle h = 0;
    ipc_detail::cu(d.create(&h, n, &p, 0), "cuMemCreate");
    exported_region r;
    r.m_ = ipc_detail::adopt(h, n, device);
    return r;
  }

  std::byte* data() const { return m_.data(); }
  std::size_t bytes() const { return m_.bytes(); }
  /// A new descriptor for the allocation (the caller closes it).
  int export_fd() const {
    int fd = -1;
    ipc_detail::cu(ipc_detail::driver::get().export_handle(&fd, m_.handle(),
                                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                   "cuMemExportToShareableHandle");
    return fd;
  }

 private:
  ipc_detail::mapping m_;
};

/// Another process's exported region, mapped here for `device`.
class imported_region {
 public:
  /// Maps `bytes` bytes (the exporter's bytes()) of the allocation behind
  /// `fd`; the descriptor stays the caller's to close.
  static imported_region open(int fd, std::size_t bytes, int device) {
    device_guard on(device);
    check(cudaFree(nullptr), "cudaFree(nullptr) (context initialisation)");
    const ipc_detail::driver& d = ipc_detail::driver::get();
    CUmemGenericAllocationHandle h = 0;
    ipc_detail::cu(d.import_handle(&h, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                   "cuMemImportFromShareableHandle");
    imported_region r;
    r.m_ = ipc_detail::adopt(h, bytes, device);
    return r;
  }

  std::byte* data() const { return m_.data(); }
  std::size_t bytes() const { return m_.bytes(); }

 private:
  ipc_detail::mapping m_;
};

}  // namespace collx::gpu
