// collx/algo/ids.hpp — names of the algorithms, for runtime selection.
//
// Every algorithm's constexpr cost(coll, P, bytes) returns α-β-γ terms with one
// meaning (checked against the real schedules by tests/unit/test_cost.cpp):
//   steps          the Lamport depth of the schedule run with unbounded chunks:
//                  each message is stamped one more than the largest stamp its
//                  sender had received before sending it (in program order);
//                  steps is the largest stamp any rank receives — the number of
//                  message latencies (α) on the critical path;
//   bytes_sent     the most bytes any one rank sends (β term), headers and
//                  tokens included;
//   bytes_reduced  the most bytes any one rank combines with received data (γ).
// A message a rank sends itself (through its loopback FIFO) is a local copy:
// it carries its sender's stamp unchanged and is not a sent byte. Copies within
// a rank's own memory are not counted, so with one rank every term is 0.
// Algorithms on peer memory count loads and stores of other ranks' buffers as
// sent bytes and a barrier as a step (see nvls.hpp).
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
