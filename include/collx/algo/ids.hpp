// collx/algo/ids.hpp — names of the algorithms, for runtime selection.
#pragma once

#include <cstdint>

namespace collx {

enum class algo_id : std::uint8_t { ring, tree, rhd, rabenseifner, bruck, nvls, direct, automatic = 0xff };

constexpr const char* name(algo_id a) {
  switch (a) {
    case algo_id::ring: return "ring";
    case algo_id::tree: return "tree";
    case algo_id::rhd: return "rhd";
    case algo_id::rabenseifner: return "rabenseifner";
    case algo_id::bruck: return "bruck";
    case algo_id::nvls: return "nvls";
    case algo_id::direct: return "direct";
    case algo_id::automatic: return "auto";
  }
  return "invalid";
}

}  // namespace collx
