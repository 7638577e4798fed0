// collx/proto/ids.hpp — names of the protocols, for runtime selection.
#pragma once

#include <cstdint>

namespace collx {

enum class proto_id : std::uint8_t { simple, ll, ll128, automatic = 0xff };

constexpr const char* name(proto_id p) {
  switch (p) {
    case proto_id::simple: return "simple";
    case proto_id::ll: return "ll";
    case proto_id::ll128: return "ll128";
    case proto_id::automatic: return "auto";
  }
  return "invalid";
}

}  // namespace collx
