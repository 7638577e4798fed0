// collx/proto/list.hpp — the compiled protocols and their channel numbers.
//
// The order of this list is the order of a connection's channels in every
// transport and of the per-protocol tables in comm_options and tune::profile.
// Appending a protocol here is the only edit outside its own header.
#pragma once

#include <collx/proto/channel.hpp>
#include <collx/proto/ids.hpp>
#include <collx/proto/ll.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/proto/simple.hpp>
#include <collx/type_list.hpp>

#include <array>

namespace collx::proto {

using compiled = type_list<simple, ll, ll128>;

inline constexpr int channel_count = compiled::size;

/// The channel protocol P runs on.
template <class P>
inline constexpr int channel_of = index_in<P, compiled>::value;

/// The channel of the compiled protocol with id `id`, or -1 (not compiled).
constexpr int channel_of_id(proto_id id) {
  return []<class... Ps>(proto_id x, type_list<Ps...>) {
    int i = 0, found = -1;
    ((found = (found < 0 && Ps::id == x) ? i : found, ++i), ...);
    return found;
  }(id, compiled{});
}

/// Every channel's spec, in channel order.
inline constexpr std::array<channel_spec, channel_count> channels = []<class... Ps>(type_list<Ps...>) {
  return std::array<channel_spec, channel_count>{Ps::channel...};
}(compiled{});

/// Every channel's protocol name, in channel order (for messages).
inline constexpr std::array<const char*, channel_count> channel_names = []<class... Ps>(type_list<Ps...>) {
  return std::array<const char*, channel_count>{Ps::name...};
}(compiled{});

}  // namespace collx::proto
