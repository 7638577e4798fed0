// collx/cuda/multicast_plan.hpp — whether process ranks try a multicast
// object: each rank's vote, and what every rank makes of all of them alike.
//
// Host code with no CUDA header (tested on CPUs: tests/unit/
// test_multicast_plan.cpp). collx/cuda/process.hpp fills a rank's vote from
// its GPU (multicast offered, its granularity) and the group (a GPU of its
// own, device regions, multicast not off), exchanges the votes through the
// bootstrap, and calls agree_multicast() on every rank.
#pragma once

#include <collx/error.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace collx::gpu {

/// One rank's vote (trivially copyable: it travels through the bootstrap).
struct multicast_vote {
  std::uint64_t align = 0;  // the alignment its GPU needs of a bound buffer (0 where it refuses)
  std::uint8_t ok = 0;      // 1: this rank can join
  std::uint8_t on = 0;      // 1: this rank asked for multicast (multicast_mode::on)
  char why[190] = {};       // why it cannot ("" where ok)
};

/// A vote: `why` empty where the rank can join, with alignment `align`.
inline multicast_vote make_multicast_vote(bool asked_on, std::uint64_t align, const std::string& why) {
  multicast_vote v;
  v.ok = why.empty() ? 1 : 0;
  v.align = why.empty() ? align : 0;
  v.on = asked_on ? 1 : 0;
  std::snprintf(v.why, sizeof v.why, "%s", why.c_str());
  return v;
}

/// What the ranks agreed: `align` the largest alignment any rank needs (0:
/// no multicast, `why` naming the first refusing rank and its reason);
/// `required` where some rank asked for multicast.
struct multicast_plan {
  std::uint64_t align = 0;
  bool required = false;
  std::string why;
};

/// Every rank's votes, by rank, to the plan every rank reaches alike. Where
/// some rank asked for multicast and some rank refused, every rank throws
/// not_supported naming `op`, the refusing rank and its reason.
inline multicast_plan agree_multicast(const std::vector<multicast_vote>& votes, const char* op) {
  multicast_plan out;
  std::uint64_t align = 0;
  for (std::size_t q = 0; q < votes.size(); ++q) {
    const multicast_vote& v = votes[q];
    out.required |= v.on != 0;
    align = std::max(align, v.align);  // powers of two: the largest is a multiple of every other
    if (!v.ok && out.why.empty())
      out.why = "rank " + std::to_string(q) + ": " + std::string(v.why, strnlen(v.why, sizeof v.why));
  }
  if (votes.empty()) out.why = "no ranks";
  if (out.why.empty()) out.align = align;
  else if (out.required)
    throw_error(status::not_supported, std::string(op) + ": multicast is on, but " + out.why);
  return out;
}

}  // namespace collx::gpu
