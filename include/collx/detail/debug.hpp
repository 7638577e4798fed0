// collx/detail/debug.hpp — whether COLLX_DEBUG asks for diagnostics.
//
// COLLX_DEBUG set and not empty or "0": collx prints its decisions (the
// profile it loaded, contention changes, measured choices, why a GPU group
// excludes LL128, …) on stderr. Read on every call, so only cold paths
// (creation, decision points) ask; a hot path caches the answer.
#pragma once

#include <cstdlib>
#include <cstring>

namespace collx::detail {

inline bool debug_enabled() {
  const char* v = std::getenv("COLLX_DEBUG");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace collx::detail
