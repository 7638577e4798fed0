// collx/net/host_id.hpp — which ranks share a host: each rank's host id
// (COLLX_HOSTID, else host name and boot id, so that two containers of one
// machine count as one host and a rebooted host as another) and its 64-bit
// hash. Network communicators count the ranks of their own host with it
// (oversubscription is a per-host matter); hierarchical ones group nodes.
#pragma once

#include <collx/coll.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace collx::net {

/// This host's id: COLLX_HOSTID, else host name and boot id.
inline std::string host_id() {
  if (const char* v = std::getenv("COLLX_HOSTID"); v != nullptr && *v != '\0') return v;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string id = host;
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {};
    if (std::fgets(boot, sizeof boot, f) != nullptr) id += std::string("/") + boot;
    std::fclose(f);
  }
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

/// FNV-1a of a host id: equal ids, equal hashes.
inline std::uint64_t host_hash(const std::string& id) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// Ranks per host when the ranks' host hashes (by rank) fill M >= 2 hosts
/// of L >= 2 ranks each, numbered host by host (ranks nL .. nL + L − 1 on
/// host n, no host twice), as collxrun --nnodes and torchrun number them: L.
/// Else 0 (one host, one rank per host, unequal hosts or another numbering).
inline int ranks_per_host(const std::vector<std::uint64_t>& hosts) {
  const int P = static_cast<int>(hosts.size());
  int L = 0;
  while (L < P && hosts[static_cast<std::size_t>(L)] == hosts[0]) ++L;
  if (!fills_nodes(P, L)) return 0;
  for (int r = 0; r < P; ++r) {
    const std::uint64_t h = hosts[static_cast<std::size_t>(r)];
    if (h != hosts[static_cast<std::size_t>(r / L * L)]) return 0;  // a host's block is one host
    if (r % L == 0)
      for (int q = 0; q < r; q += L)
        if (hosts[static_cast<std::size_t>(q)] == h) return 0;  // and no host has two blocks
  }
  return L;
}

}  // namespace collx::net
