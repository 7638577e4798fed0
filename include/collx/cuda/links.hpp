// collx/cuda/links.hpp — whether the GPUs of a group are joined by NVLink.
//
// LL128 relies on a 128-byte store arriving whole at the reader. Inside one
// GPU that is its memory system's behaviour; across GPUs it holds on NVLink
// (direct links or an NVSwitch) and not over PCIe, where a line may arrive in
// pieces. So a group of several GPUs runs LL128 only where every pair of its
// GPUs has an NVLink path, as NCCL enables it, and vLLM's custom all-reduce
// checks it: NVML's peer-to-peer status for the NVLink capability
// (nvmlDeviceGetP2PStatus with NVML_P2P_CAPS_INDEX_NVLINK) is OK for the pair.
//
// NVML is reached with dlopen ("libnvidia-ml.so.1", which the driver installs,
// or the file COLLX_NVML_LIBRARY names), so nothing links it and a machine
// without it only loses LL128 across GPUs, with the reason said. Host code
// only; no CUDA header is needed (GPUs are named by PCI bus id, as
// cudaDeviceGetPCIBusId writes it).
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace collx::gpu {

/// The answer of nvlink_between: all is true when every pair of distinct
/// GPUs has an NVLink path; otherwise why says what failed (NVML missing, a
/// GPU NVML does not know, the first pair that is not on NVLink).
struct nvlink_verdict {
  bool all = false;
  std::string why;
};

namespace links_detail {

// The part of NVML's C interface used here (nvml.h; stable since NVML 4).
struct nvml_device;
using nvml_return = int;
constexpr nvml_return nvml_success = 0;
constexpr int p2p_caps_index_nvlink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int p2p_status_ok = 0;          // NVML_P2P_STATUS_OK

struct nvml_api {
  void* library = nullptr;
  std::string load_error;
  nvml_return (*init)() = nullptr;
  nvml_return (*shutdown)() = nullptr;
  const char* (*error_string)(nvml_return) = nullptr;
  nvml_return (*by_bus_id)(const char*, nvml_device**) = nullptr;
  nvml_return (*p2p_status)(nvml_device*, nvml_device*, int, int*) = nullptr;
};

/// NVML's entry points, loaded once per process (the library stays loaded).
inline const nvml_api& nvml() {
  static nvml_api api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("COLLX_NVML_LIBRARY");
    const std::string name = path != nullptr && *path != '\0' ? path : "libnvidia-ml.so.1";
    api.library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.library == nullptr) {
      const char* e = dlerror();
      api.load_error = "NVML (" + name + ") could not be loaded: " + (e != nullptr ? e : "unknown error");
      return;
    }
    auto sym = [&](const char* s) { return dlsym(api.library, s); };
    api.init = reinterpret_cast<nvml_return (*)()>(sym("nvmlInit_v2"));
    api.shutdown = reinterpret_cast<nvml_return (*)()>(sym("nvmlShutdown"));
    api.error_string = reinterpret_cast<const char* (*)(nvml_return)>(sym("nvmlErrorString"));
    api.by_bus_id = reinterpret_cast<nvml_return (*)(const char*, nvml_device**)>(
        sym("nvmlDeviceGetHandleByPciBusId_v2"));
    api.p2p_status = reinterpret_cast<nvml_return (*)(nvml_device*, nvml_device*, int, int*)>(
        sym("nvmlDeviceGetP2PStatus"));
    if (api.init == nullptr || api.shutdown == nullptr || api.by_bus_id == nullptr ||
        api.p2p_status == nullptr)
      api.load_error = "NVML (" + name +
                       ") lacks nvmlInit_v2, nvmlShutdown, "
                       "nvmlDeviceGetHandleByPciBusId_v2 or nvmlDeviceGetP2PStatus";
  });
  return api;
}

inline std::string describe(const nvml_api& api, nvml_return r) {
  const char* s = api.error_string != nullptr ? api.error_string(r) : nullptr;
  return "NVML error " + std::to_string(r) + (s != nullptr ? std::string(" (") + s + ")" : std::string());
}

/// The verdict for distinct, sorted `bus_ids` (at least two), asking NVML
/// on the calling thread.
inline nvlink_verdict ask_nvml(const std::vector<std::string>& bus_ids) {
  const auto& api = nvml();
  if (!api.load_error.empty()) return {false, api.load_error};
  if (const auto r = api.init(); r != links_detail::nvml_success)
    return {false, "nvmlInit_v2 failed: " + links_detail::describe(api, r)};
  nvlink_verdict v{true, {}};
  std::vector<links_detail::nvml_device*> dev(bus_ids.size(), nullptr);
  for (std::size_t i = 0; i < bus_ids.size() && v.all; ++i)
    if (const auto r = api.by_bus_id(bus_ids[i].c_str(), &dev[i]); r != links_detail::nvml_success)
      v = {false,
           "NVML does not know the GPU at PCI bus id " + bus_ids[i] + ": " + links_detail::describe(api, r)};
  for (std::size_t i = 0; i < dev.size() && v.all; ++i)
    for (std::size_t j = i + 1; j < dev.size() && v.all; ++j) {
      int status = -1;
      const auto r = api.p2p_status(dev[i], dev[j], links_detail::p2p_caps_index_nvlink, &status);
      if (r != links_detail::nvml_success)
        v = {false, "the NVLink status of GPUs " + bus_ids[i] + " and " + bus_ids[j] +
                        " is unknown: " + links_detail::describe(api, r)};
      else if (status != links_detail::p2p_status_ok)
        v = {false, "GPUs " + bus_ids[i] + " and " + bus_ids[j] +
                        " are not joined by NVLink (NVML P2P status " + std::to_string(status) + ")"};
    }
  (void)api.shutdown();
  return v;
}

}  // namespace links_detail

/// Whether every pair of distinct GPUs among `bus_ids` has an NVLink path.
/// One GPU (or none) has no pair: all is true. Thread-safe; asks NVML each
/// time (a group is made once).
///
/// NVML runs inside the driver and may stall there (a GPU in recovery, a
/// wedged driver), so it is asked on a thread of its own and waited for at
/// most `deadline`. Past it the verdict is a refusal saying so, and the
/// thread is left to finish on its own: it holds only what it shares with
/// nothing else, and any later call starts afresh.
inline nvlink_verdict nvlink_between(std::vector<std::string> bus_ids,
                                     std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
  std::sort(bus_ids.begin(), bus_ids.end());
  bus_ids.erase(std::unique(bus_ids.begin(), bus_ids.end()), bus_ids.end());
  if (bus_ids.size() < 2) return {true, {}};
  struct answer {
    std::mutex lock;
    std::condition_variable ready;
    bool done = false;
    nvlink_verdict verdict;
  };
  auto shared = std::make_shared<answer>();
  try {
    std::thread([shared, ids = std::move(bus_ids)] {
      nvlink_verdict v;
      try {
        v = links_detail::ask_nvml(ids);
      } catch (const std::exception& e) {
        v = {false, std::string("asking NVML failed: ") + e.what()};
      }
      std::lock_guard hold(shared->lock);
      shared->verdict = std::move(v);
      shared->done = true;
      shared->ready.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    return {false, std::string("no thread to ask NVML on: ") + e.what()};
  }
  std::unique_lock hold(shared->lock);
  if (!shared->ready.wait_for(hold, deadline, [&] { return shared->done; }))
    return {false, "NVML did not answer within " + std::to_string(deadline.count()) +
                       " ms (stalled in the driver?), so the links are unknown"};
  return shared->verdict;
}

}  // namespace collx::gpu
