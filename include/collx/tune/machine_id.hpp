// collx/tune/machine_id.hpp — which machine a profile describes.
//
// A measured profile is only valid on the topology it was measured on. The
// fingerprint that must match is the CPU model, the number of online CPUs
// and of NUMA nodes (what the shm transport's α and β depend on); the host
// name is recorded for people and not compared (containers rename hosts).
// Host only; Linux (/proc/cpuinfo, /sys/devices/system/node), with empty or
// zero fields where those are absent.
#pragma once

#include <collx/config.hpp>

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace collx::tune {

struct machine_info {
  std::string hostname;
  std::string cpu;     // /proc/cpuinfo's first "model name"
  int cpus = 0;        // online CPUs
  int numa_nodes = 0;  // /sys/devices/system/node/node*

  /// The fingerprint a profile must match, for messages.
  COLLX_COLD std::string topology() const {
    return "'" + cpu + "', " + std::to_string(cpus) + " CPUs, " + std::to_string(numa_nodes) + " NUMA node" +
           (numa_nodes == 1 ? "" : "s");
  }
  /// Whether a profile measured on `other` applies here.
  bool same_topology(const machine_info& other) const {
    return cpu == other.cpu && cpus == other.cpus && numa_nodes == other.numa_nodes;
  }
};

/// This machine, read once per call.
COLLX_COLD inline machine_info this_machine() {
  machine_info m;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;
  if (std::FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "model name", 10) != 0) continue;
      const char* colon = std::strchr(line, ':');
      if (colon == nullptr) continue;
      std::string v = colon + 1;
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(v.begin());
      while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
      m.cpu = v;
      break;
    }
    std::fclose(f);
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  m.cpus = n > 0 ? static_cast<int>(n) : 0;
  if (DIR* d = opendir("/sys/devices/system/node")) {
    while (const dirent* e = readdir(d))
      if (std::strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9')
        ++m.numa_nodes;
    closedir(d);
  }
  return m;
}

}  // namespace collx::tune
