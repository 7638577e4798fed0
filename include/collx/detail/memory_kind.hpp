// collx/detail/memory_kind.hpp — is this pointer host memory or a GPU's?
// (host only, Linux; no CUDA headers, no CUDA link dependency)
//
// The host communicator reads and writes its buffers on the CPU, so a pointer
// to GPU memory (cudaMalloc, cuMemCreate) would crash it or, worse, scribble
// through an unrelated mapping. query_memory_kind asks the CUDA driver that
// is loaded in this process, if one is: collx does not load or link it.
//
// * No driver loaded (libcuda.so.1 not in the process): no GPU memory can
//   exist, the answer is host. Telling costs one dl_iterate_phdr pass over
//   the first loaded object (~12 ns): the loader's object counter says
//   whether anything was loaded since the last look; only then is the
//   driver looked for by its soname (dlopen RTLD_NOLOAD, tens of µs), once
//   per change of the process's objects.
// * Driver loaded: cuPointerGetAttributes (memory type, managed, device
//   ordinal). Memory the driver does not know (plain malloc, a stack
//   array), or a driver not yet initialised, is host. Pinned and registered
//   host memory is host; managed memory is `managed` (reachable from both);
//   everything else the driver calls device memory is `device`.
//
// Thread-safety: any thread, any time; the driver's function pointer and the
// loader counter are published through atomics (racing lookups find the
// same driver). The driver, once found, is kept loaded (its handle is never
// closed), so the pointer stays valid.
//
// pointer_memo remembers the answer for the last few distinct pointers, so a
// program that reuses its buffers pays the query once per buffer. A pointer
// freed and reused for another kind of memory keeps its old answer while it
// stays in the memo: host and device allocations come from disjoint address
// ranges under CUDA's unified addressing, so this needs an address to move
// from one to the other.
#pragma once

#include <atomic>
#include <cstdint>

#include <dlfcn.h>
#include <link.h>

namespace collx::detail {

enum class memory_kind : std::uint8_t {
  host,     ///< ordinary, pinned or registered host memory: the CPU may use it
  managed,  ///< CUDA managed memory: the CPU may use it (pages migrate)
  device,   ///< a GPU's memory: the CPU must not touch it
};

inline const char* name(memory_kind k) {
  switch (k) {
    case memory_kind::host: return "host memory";
    case memory_kind::managed: return "CUDA managed memory";
    case memory_kind::device: return "CUDA device memory";
  }
  return "memory";
}

struct pointer_kind {
  memory_kind kind = memory_kind::host;
  int device = -1;  ///< the GPU the driver names for device or managed memory, else -1
};

namespace driver_abi {
// The driver API's stable ABI (cuda.h): enum values and the one entry point
// used, declared here so the core headers need no CUDA toolkit.
using pointer_get_attributes_fn = int (*)(unsigned num, const int* attributes, void** data,
                                          unsigned long long ptr);
inline constexpr int attr_memory_type = 2;         // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
inline constexpr int attr_is_managed = 8;          // CU_POINTER_ATTRIBUTE_IS_MANAGED
inline constexpr int attr_device_ordinal = 9;      // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
inline constexpr unsigned memorytype_device = 2;   // CU_MEMORYTYPE_DEVICE
inline constexpr unsigned memorytype_unified = 4;  // CU_MEMORYTYPE_UNIFIED
}  // namespace driver_abi

/// The loader's count of objects added to this process so far.
inline unsigned long long loaded_object_adds() noexcept {
  unsigned long long adds = 0;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;  // the first object carries the counter; stop there
      },
      &adds);
  return adds;
}

/// cuPointerGetAttributes of the driver loaded in this process, or null.
inline driver_abi::pointer_get_attributes_fn loaded_driver_query() noexcept {
  static std::atomic<driver_abi::pointer_get_attributes_fn> found{nullptr};
  static std::atomic<unsigned long long> looked_at{~0ull};
  if (auto fn = found.load(std::memory_order_acquire)) return fn;
  const unsigned long long adds = loaded_object_adds();
  if (looked_at.load(std::memory_order_relaxed) == adds) return nullptr;
  driver_abi::pointer_get_attributes_fn fn = nullptr;
  if (void* lib = ::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY)) {
    fn = reinterpret_cast<driver_abi::pointer_get_attributes_fn>(::dlsym(lib, "cuPointerGetAttributes"));
    if (fn == nullptr) ::dlclose(lib);  // not a driver we can ask; keep looking on later loads
  }
  if (fn != nullptr) {
    found.store(fn, std::memory_order_release);
    return fn;
  }
  looked_at.store(adds, std::memory_order_relaxed);
  return nullptr;
}

/// What kind of memory `p` points to (see the header comment). Never throws.
inline pointer_kind query_memory_kind(const void* p) noexcept {
  const auto query = loaded_driver_query();
  if (query == nullptr || p == nullptr) return {};
  // Zeroed and wider than the driver writes (an unsigned, a bool, an int).
  unsigned long long type = 0, managed = 0, ordinal = 0;
  const int attrs[3] = {driver_abi::attr_memory_type, driver_abi::attr_is_managed,
                        driver_abi::attr_device_ordinal};
  void* data[3] = {&type, &managed, &ordinal};
  if (query(3, attrs, data, reinterpret_cast<std::uintptr_t>(p)) != 0) return {};  // not initialised
  const auto t = static_cast<unsigned>(type);
  const int dev = static_cast<int>(static_cast<std::int32_t>(ordinal));
  if (static_cast<std::uint32_t>(managed) != 0 || t == driver_abi::memorytype_unified)
    return {memory_kind::managed, dev};
  if (t == driver_abi::memorytype_device) return {memory_kind::device, dev};
  return {};
}

/// The answers for the last N distinct pointers looked up (fully
/// associative, replaced in turn: a call's few buffers never evict each
/// other, as they could in a direct-mapped table). One owner: not for
/// concurrent use.
template <class Value, int N = 8>
class pointer_memo {
  static_assert(N > 0, "pointer_memo: N must be positive");

 public:
  /// The remembered value of p, or null.
  const Value* find(const void* p) const noexcept {
    for (int i = 0; i < used_; ++i)
      if (slots_[i].ptr == p) return &slots_[i].value;
    return nullptr;
  }
  void remember(const void* p, const Value& v) noexcept {
    slots_[next_] = {p, v};
    next_ = (next_ + 1) % N;
    if (used_ < N) ++used_;
  }
  void clear() noexcept { used_ = next_ = 0; }

 private:
  struct entry {
    const void* ptr = nullptr;
    Value value{};
  };
  entry slots_[N];
  int used_ = 0, next_ = 0;
};

}  // namespace collx::detail
