// A stand-in for NVML (libnvidia-ml.so.1) with a topology set by the test:
//   COLLX_FAKE_NVML_GPUS   the PCI bus ids it knows, comma-separated
//   COLLX_FAKE_NVML_PCIE   pairs "A-B" joined by PCIe only, comma-separated
//                          (every other pair of known GPUs is on NVLink)
//   COLLX_FAKE_NVML_FAIL   init | p2p: that call fails; stall: nvmlInit_v2
//                          sleeps 20 s first (a driver that does not answer)
// It counts nvmlInit_v2 and nvmlShutdown calls (fake_nvml_balance) so the
// test can check that every init is shut down.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::vector<std::string> split(const char* s, char sep) {
  std::vector<std::string> out;
  if (s == nullptr) return out;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == sep || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

std::vector<std::string>& known() {
  static std::vector<std::string> gpus;
  return gpus;
}
int balance = 0;

bool fails(const char* what) {
  const char* f = std::getenv("COLLX_FAKE_NVML_FAIL");
  return f != nullptr && std::strcmp(f, what) == 0;
}

}  // namespace

extern "C" {

struct nvml_device;

int nvmlInit_v2() {
  if (fails("init")) return 999;
  if (fails("stall")) std::this_thread::sleep_for(std::chrono::seconds(20));
  known() = split(std::getenv("COLLX_FAKE_NVML_GPUS"), ',');
  ++balance;
  return 0;
}

int nvmlShutdown() {
  --balance;
  return 0;
}

const char* nvmlErrorString(int r) { return r == 13 ? "Not Found" : "Unknown Error"; }

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, nvml_device** d) {
  const auto& g = known();
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i] == bus_id) {
      *d = reinterpret_cast<nvml_device*>(i + 1);
      return 0;
    }
  return 13;  // NVML_ERROR_NOT_FOUND
}

int nvmlDeviceGetP2PStatus(nvml_device* a, nvml_device* b, int index, int* status) {
  if (fails("p2p")) return 999;
  if (index != 2) return 2;  // only the NVLink index is asked for
  const auto& g = known();
  const std::string& x = g[reinterpret_cast<std::size_t>(a) - 1];
  const std::string& y = g[reinterpret_cast<std::size_t>(b) - 1];
  *status = 0;  // NVML_P2P_STATUS_OK
  for (const auto& pair : split(std::getenv("COLLX_FAKE_NVML_PCIE"), ','))
    if (pair == x + "-" + y || pair == y + "-" + x) *status = 5;  // NVML_P2P_STATUS_NOT_SUPPORTED
  return 0;
}

int fake_nvml_balance() { return balance; }

}  // extern "C"
