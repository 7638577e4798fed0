// tools/probe_look.hpp — collx-probe's first step: what this machine is.
//
// The CPU topology from hwloc where the build found it (COLLX_PROBE_HWLOC:
// packages, NUMA nodes, cores, hardware threads, cache sizes), else from
// sysconf and /sys; GPUs from /proc/driver/nvidia/gpus (NVIDIA's driver; no
// CUDA or NVML is linked); RDMA devices and their ports (state, InfiniBand
// or RoCE, LID, MTU) through rdma-core's verbs where the probe links
// collx::ibverbs, else their names from /sys/class/infiniband; network
// interfaces from /sys/class/net with their link speed. Each finding is a JSON value and a line of text.
#pragma once

#include <collx/net/verbs.hpp>
#include <collx/tune/json.hpp>
#include <collx/tune/machine_id.hpp>
#if COLLX_HAVE_IBVERBS
#include <collx/net/verbs_rdma.hpp>
#endif

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#if COLLX_PROBE_HWLOC
#include <hwloc.h>
#endif

namespace collx::probe {

namespace look_detail {

inline std::vector<std::string> entries(const char* dir) {
  std::vector<std::string> v;
  if (DIR* d = opendir(dir)) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') v.push_back(e->d_name);
    closedir(d);
  }
  return v;
}

inline std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace look_detail

/// This machine as found; `lines` is the human summary.
struct topology {
  tune::machine_info machine;
  double llc_bytes = 0;         // the last-level cache, every instance together (the model's cache_bytes)
  double near_cache_bytes = 0;  // the level below it, every instance together (near_cache_bytes)
  tune::json::value json = tune::json::value::object();
  std::vector<std::string> lines;
};

/// RDMA devices and their ports through a verbs provider (rdma-core's where
/// collx was built with it, net/verbs_rdma.hpp; tests pass the fake one):
/// per port whether it is active, InfiniBand or Ethernet (RoCE), its LID and
/// active MTU. Without a provider (built without rdma-core), the device
/// names from sysfs. A device that cannot be opened is listed with the
/// reason, not fatal.
inline void rdma_look(topology& t, const net::verbs::provider* vp) {
  using tune::json::value;
  value& rdma = t.json.set("rdma", value::array());
  std::string summary;
  if (vp == nullptr) {
    for (const std::string& d : look_detail::entries("/sys/class/infiniband")) {
      value dj = value::object();
      dj.set("name", d);
      dj.set("source", "sysfs (built without rdma-core: ports not queried)");
      rdma.push(dj);
      summary += (summary.empty() ? "" : ", ") + d;
    }
  } else {
    std::vector<net::verbs::device_info> devs;
    try {
      devs = vp->devices(vp->self);
    } catch (const std::exception& e) {
      t.lines.push_back(std::string("rdma: listing devices failed: ") + e.what());
    }
    for (const net::verbs::device_info& d : devs) {
      value dj = value::object();
      dj.set("name", d.name);
      dj.set("source", vp->name);
      value& ports = dj.set("ports", value::array());
      std::string ps;
      try {
        net::verbs::handle ctx = vp->open(vp->self, d.name);
        for (int port = 1; port <= d.nports; ++port) {
          const net::verbs::port_info pi = vp->query_port(ctx, port, 0);
          value pj = value::object();
          pj.set("port", port);
          pj.set("active", pi.active);
          pj.set("link_layer", pi.ethernet ? "ethernet" : "infiniband");
          pj.set("lid", int(pi.lid));
          pj.set("mtu", double(pi.mtu));
          ports.push(pj);
          ps += (ps.empty() ? "" : ", ") + std::to_string(port) + (pi.active ? " active " : " down ") +
                (pi.ethernet ? "RoCE" : "IB lid " + std::to_string(pi.lid));
        }
        vp->close(ctx);
      } catch (const std::exception& e) {
        dj.set("error", e.what());
        ps = std::string("not opened: ") + e.what();
      }
      rdma.push(dj);
      summary += (summary.empty() ? "" : "; ") + d.name + " (port " + ps + ")";
    }
  }
  t.lines.push_back("rdma: " + (summary.empty() ? std::string("none") : summary));
}

/// The provider look() asks about RDMA devices: rdma-core's where the probe
/// was built with it (collx::ibverbs), else none.
inline const net::verbs::provider* rdma_provider() {
#if COLLX_HAVE_IBVERBS
  return &net::verbs::system_provider();
#else
  return nullptr;
#endif
}

inline topology look() {
  using tune::json::value;
  topology t;
  t.machine = tune::this_machine();
  const tune::machine_info& m = t.machine;
  value& mj = t.json.set("machine", value::object());
  mj.set("hostname", m.hostname);
  mj.set("cpu", m.cpu);
  mj.set("cpus", m.cpus);
  mj.set("numa_nodes", m.numa_nodes);
  t.lines.push_back("host " + m.hostname + ": " + m.topology());

  value& cpu = t.json.set("cpu_topology", value::object());
#if COLLX_PROBE_HWLOC
  cpu.set("source", "hwloc " HWLOC_VERSION);
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
    auto count = [&](hwloc_obj_type_t ty) { return hwloc_get_nbobjs_by_type(topo, ty); };
    cpu.set("packages", count(HWLOC_OBJ_PACKAGE));
    cpu.set("numa_nodes", count(HWLOC_OBJ_NUMANODE));
    cpu.set("cores", count(HWLOC_OBJ_CORE));
    cpu.set("hardware_threads", count(HWLOC_OBJ_PU));
    value& caches = cpu.set("caches_kib", value::object());
    std::string cl;
    for (auto [ty, n] : {std::pair{HWLOC_OBJ_L1CACHE, "L1d"}, std::pair{HWLOC_OBJ_L2CACHE, "L2"},
                         std::pair{HWLOC_OBJ_L3CACHE, "L3"}}) {
      hwloc_obj_t o = hwloc_get_obj_by_type(topo, ty, 0);
      if (o == nullptr || o->attr == nullptr) continue;
      const double kib = double(o->attr->cache.size) / 1024;
      caches.set(n, kib);
      char b[64];
      std::snprintf(b, sizeof b, "%s%s %g KiB x%d", cl.empty() ? "" : ", ", n, kib, count(ty));
      cl += b;
    }
    // The last level: every instance of the deepest cache level present;
    // the near cache: every instance of the level below it.
    auto total = [&](hwloc_obj_type_t ty) {
      double sum = 0;
      for (int i = 0; i < count(ty); ++i)
        if (hwloc_obj_t o = hwloc_get_obj_by_type(topo, ty, unsigned(i)); o != nullptr && o->attr != nullptr)
          sum += double(o->attr->cache.size);
      return sum;
    };
    const hwloc_obj_type_t levels[] = {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L1CACHE};
    for (std::size_t l = 0; l + 1 < std::size(levels); ++l)
      if ((t.llc_bytes = total(levels[l])) > 0) {
        t.near_cache_bytes = total(levels[l + 1]);
        break;
      }
    cpu.set("llc_bytes", t.llc_bytes);
    cpu.set("near_cache_bytes", t.near_cache_bytes);
    char b[160];
    std::snprintf(b, sizeof b, "cpu (hwloc): %d package(s), %d NUMA node(s), %d cores, %d hardware threads",
                  count(HWLOC_OBJ_PACKAGE), count(HWLOC_OBJ_NUMANODE), count(HWLOC_OBJ_CORE),
                  count(HWLOC_OBJ_PU));
    t.lines.push_back(b);
    if (!cl.empty()) t.lines.push_back("caches: " + cl);
    hwloc_topology_destroy(topo);
  } else {
    t.lines.push_back("cpu: hwloc could not load the topology");
  }
#else
  cpu.set("source", "sysconf (built without hwloc)");
  cpu.set("hardware_threads", m.cpus);
  cpu.set("numa_nodes", m.numa_nodes);
  // One instance's size (glibc); taken as the whole last level.
  t.llc_bytes = double(std::max(0L, sysconf(_SC_LEVEL3_CACHE_SIZE)));
  cpu.set("llc_bytes", t.llc_bytes);
  t.lines.push_back("cpu: " + std::to_string(m.cpus) + " hardware threads, last-level cache " +
                    std::to_string(long(t.llc_bytes / 1024)) + " KiB (built without hwloc: no cores)");
#endif

  value& gpus = t.json.set("gpus", value::array());
  for (const std::string& g : look_detail::entries("/proc/driver/nvidia/gpus")) {
    std::string model;
    std::ifstream in("/proc/driver/nvidia/gpus/" + g + "/information");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("Model:", 0) == 0) model = line.substr(line.find_first_not_of(" \t", 6));
    value gj = value::object();
    gj.set("bus", g);
    gj.set("model", model);
    gpus.push(gj);
  }
  t.lines.push_back("gpus: " +
                    (gpus.items.empty() ? std::string("none found (no /proc/driver/nvidia/gpus)")
                                        : std::to_string(gpus.items.size()) + " NVIDIA") +
                    "; link matrix not probed (needs CUDA/NVML)");

  rdma_look(t, rdma_provider());

  value& nics = t.json.set("network", value::array());
  std::string nl;
  for (const std::string& n : look_detail::entries("/sys/class/net")) {
    if (n == "lo") continue;
    const std::string speed = look_detail::first_line("/sys/class/net/" + n + "/speed");
    value nj = value::object();
    nj.set("name", n);
    char* end = nullptr;
    const double mbps = std::strtod(speed.c_str(), &end);
    if (end != speed.c_str() && mbps > 0) nj.set("mbit_s", mbps);
    nics.push(nj);
    nl += (nl.empty() ? "" : ", ") + n + (end != speed.c_str() && mbps > 0 ? " " + speed + " Mb/s" : "");
  }
  t.lines.push_back("network: " + (nl.empty() ? std::string("no interfaces besides lo") : nl));
  return t;
}

}  // namespace collx::probe
