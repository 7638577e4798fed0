// collx/comm/p2p_group.hpp — per-peer plans: the transfers of a send/recv
// group bucketed by peer, and an all_to_allv's layout scaled to bytes.
//
// A group's sends and receives are queued as p2p_op in issue order; at
// group_end they become a p2p_plan (coll.hpp): per peer, the messages to send
// and the messages to receive, each in issue order, sizes in bytes. The
// schedule (algo::direct's send_recv) matches messages between two ranks in
// that order. The arrays live in a peer_scratch the communicator keeps, so a
// warm call allocates nothing; it must not change while the plan is in use.
//
// Nothing here checks arguments (comm/validate.hpp does) or moves data; the
// *_detail functions turn a schedule's mismatch_report into the message of the
// status::mismatch error.
#pragma once

#include <collx/coll.hpp>
#include <collx/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collx::comm {

/// One queued send or recv of a group, as the caller issued it.
struct p2p_op {
  void* buf;
  std::size_t count;
  dtype dt;
  int peer;
  bool is_send;
};

/// [lo, hi) of one buffer as addresses, and which op or peer it belongs to:
/// what the overlap checks sort (comm/validate.hpp).
struct address_span {
  std::uintptr_t lo, hi;
  std::size_t owner;
};

/// Working memory of the calls with per-peer arrays (send/recv groups,
/// all_to_allv), kept in the communicator's state between calls: once its
/// vectors have grown to a call's size, the next such call allocates nothing.
struct peer_scratch {
  std::vector<p2p_op> ops;              // the group being run
  std::vector<std::uint32_t> begin[2];  // [0] sends, [1] receives: per-peer offsets into msgs
  std::vector<std::uint32_t> fill;      // per-peer next slot while bucketing
  std::vector<p2p_message> msgs[2];     // bucketed by peer, issue order within a peer
  std::vector<address_span> spans[2];   // the overlap checks' blocks
  std::vector<std::size_t> bytes;       // an all_to_allv's layout in bytes (byte_layout)
  std::vector<std::size_t> sizes;       // signed counts and displacements, converted
};

/// Buckets a group's transfers by peer (counts in bytes) into `w` and returns
/// the plan the send_recv schedule reads; it points into `w`, which must not
/// change until the call has run.
inline p2p_plan plan_group(const std::vector<p2p_op>& ops, int nranks, peer_scratch& w) {
  const std::size_t P = static_cast<std::size_t>(nranks);
  for (int side = 0; side < 2; ++side) {
    std::vector<std::uint32_t>& begin = w.begin[side];
    begin.assign(P + 1, 0);
    for (const p2p_op& o : ops)
      if (o.is_send == (side == 0)) ++begin[static_cast<std::size_t>(o.peer) + 1];
    for (std::size_t q = 0; q < P; ++q) begin[q + 1] += begin[q];
    w.msgs[side].resize(begin[P]);
    w.fill.assign(begin.begin(), begin.end() - 1);
    for (const p2p_op& o : ops) {
      if (o.is_send != (side == 0)) continue;
      const std::uint32_t at = w.fill[static_cast<std::size_t>(o.peer)]++;
      w.msgs[side][at] = p2p_message{o.buf, o.count * size_of(o.dt)};
    }
  }
  return p2p_plan{w.msgs[0].data(), w.begin[0].data(), w.msgs[1].data(), w.begin[1].data()};
}

/// A message whose ends disagree on reading it in place (mismatch_report::read_in_place).
inline std::string read_in_place_detail(const mismatch_report& report, int rank) {
  const auto q = std::to_string(report.peer), r = std::to_string(rank);
  return "message #" + std::to_string(report.message) + " from rank " + q + ": rank " + q +
         (report.got ? " offers it to be read in place" : " sends it through the FIFOs") + ", rank " + r +
         (report.expected ? " reads it in place" : " expects it through the FIFOs") +
         " (single-copy thresholds or contention settings differ between the ranks)";
}

/// The message of a status::mismatch a send_recv schedule reported on `rank`.
inline std::string p2p_mismatch_detail(const mismatch_report& report, int rank) {
  const auto q = std::to_string(report.peer);
  const auto r = std::to_string(rank);
  if (report.read_in_place) return read_in_place_detail(report, rank);
  if (report.messages)
    return "rank " + q + " sends " + std::to_string(report.got) + " message(s) to rank " + r +
           " in this group, rank " + r + " posted " + std::to_string(report.expected) + " recv(s) from it";
  return "recv #" + std::to_string(report.message) + " from rank " + q + " (in issue order) posted " +
         std::to_string(report.expected) + " bytes, but rank " + q + " sends " + std::to_string(report.got) +
         " bytes";
}

/// One side of an all_to_allv: buffer, per-peer counts and displacements
/// (elements), and the buffer's length in elements where the caller gave it.
struct buffer_desc {
  static constexpr std::size_t unknown_length = ~std::size_t(0);
  const void* buf;
  const std::size_t* counts;
  const std::size_t* displs;
  std::size_t length;
};

/// An all_to_allv's counts and displacements in bytes: data movement runs on
/// bytes whatever the element type.
/// The arrays live in `storage` (a peer_scratch's `bytes`), which must not
/// change while the layout is in use.
class byte_layout {
 public:
  byte_layout(const buffer_desc& sb, const buffer_desc& rb, dtype dt, int nranks,
              std::vector<std::size_t>& storage)
      : esz_(size_of(dt)) {
    const std::size_t P = static_cast<std::size_t>(nranks);
    storage.resize(4 * P);
    std::size_t* b = storage.data();
    for (std::size_t j = 0; j < P; ++j) {
      b[j] = sb.counts[j] * esz_;
      b[P + j] = sb.displs[j] * esz_;
      b[2 * P + j] = rb.counts[j] * esz_;
      b[3 * P + j] = rb.displs[j] * esz_;
    }
    layout_ = peer_layout{b, b + P, b + 2 * P, b + 3 * P};
  }
  byte_layout(const byte_layout&) = delete;
  byte_layout& operator=(const byte_layout&) = delete;

  const peer_layout& layout() const { return layout_; }

  /// The message of a status::mismatch the all_to_allv schedule reported on `rank`.
  std::string mismatch_detail(const mismatch_report& report, int rank) const {
    const auto r = std::to_string(rank), q = std::to_string(report.peer);
    if (report.read_in_place) return read_in_place_detail(report, rank);
    if (report.peer == rank)
      return "send_counts[" + r + "] = " + std::to_string(report.got / esz_) + " but recv_counts[" + r +
             "] = " + std::to_string(report.expected / esz_) + " (the block a rank sends itself)";
    return "recv_counts[" + q + "] = " + std::to_string(report.expected / esz_) + " on this rank, but rank " +
           q + " sends " + std::to_string(report.got / esz_) + " elements (its send_counts[" + r + "])";
  }

 private:
  std::size_t esz_;
  peer_layout layout_{};
};

}  // namespace collx::comm
