// collx/algo/cost.hpp — the α-β-γ terms every algorithm's cost() returns.
//
// Every algorithm's constexpr cost(coll, P, bytes) returns terms with one
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

namespace collx::algo {

/// α-β-γ terms on the critical path of one collective call (see above).
struct cost_terms {
  double steps, bytes_sent, bytes_reduced;
};

}  // namespace collx::algo
