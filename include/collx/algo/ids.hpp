// collx/algo/ids.hpp — ids and names of the algorithms, for runtime selection.
//
// Every policy has an id of its own, so a variant named at run time
// (last_variant(), the per-call mismatch check, COLLX_ALGO) is exactly one
// schedule. The name here is the only spelling: each algorithm's `name` is
// name(id). Ids are bit positions in selection masks (below 32), and new ones
// go at the end so recorded ids keep their meaning. What cost() returns is
// defined in algo/cost.hpp.
#pragma once

#include <cstdint>

namespace collx {

enum class algo_id : std::uint8_t {
  ring,
  tree,
  rhd,
  rabenseifner,
  bruck,  // Bruck's all_gather
  nvls,
  direct,  // all_reduce one-shot or two-shot by size
  bruck_a2a,
  direct_one_shot,
  direct_two_shot,
  automatic = 0xff
};

constexpr const char* name(algo_id a) {
  switch (a) {
    case algo_id::ring: return "ring";
    case algo_id::tree: return "tree";
    case algo_id::rhd: return "rhd";
    case algo_id::rabenseifner: return "rabenseifner";
    case algo_id::bruck: return "bruck";
    case algo_id::nvls: return "nvls";
    case algo_id::direct: return "direct";
    case algo_id::bruck_a2a: return "bruck_a2a";
    case algo_id::direct_one_shot: return "direct_one_shot";
    case algo_id::direct_two_shot: return "direct_two_shot";
    case algo_id::automatic: return "auto";
  }
  return "invalid";
}

/// The algorithm a policy is a form of: itself, or the one whose name also
/// selects it in COLLX_ALGO (Bruck's all_to_all is a form of bruck; direct's
/// forced all_reduce flavours are forms of direct).
constexpr algo_id family(algo_id a) {
  switch (a) {
    case algo_id::bruck_a2a: return algo_id::bruck;
    case algo_id::direct_one_shot:
    case algo_id::direct_two_shot: return algo_id::direct;
    default: return a;
  }
}

}  // namespace collx
