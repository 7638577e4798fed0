// collx/comm/p2p_group.hpp — per-peer plans: the transfers of a send/recv
// group bucketed by peer, and an all_to_allv's layout scaled to bytes.
//
// A group's sends and receives are queued as p2p_op in issue order; at
// group_end they become a p2p_plan (coll.hpp): per peer, the messages to send
// and the messages to receive, each in issue order, sizes in bytes. The
// schedule (algo::direct's send_recv) matches messages between two ranks in
// that order. The arrays live in the p2p_group object, which must outlive the
// call that runs the plan.
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

/// The transfers of one group, bucketed by peer (counts in bytes).
class p2p_group {
 public:
  p2p_group(const std::vector<p2p_op>& ops, int nranks) {
    const std::size_t P = static_cast<std::size_t>(nranks);
    for (int side = 0; side < 2; ++side) {
      begin_[side].assign(P + 1, 0);
      for (const p2p_op& o : ops)
        if (o.is_send == (side == 0)) ++begin_[side][static_cast<std::size_t>(o.peer) + 1];
      for (std::size_t q = 0; q < P; ++q) begin_[side][q + 1] += begin_[side][q];
      msgs_[side].resize(begin_[side][P]);
      std::vector<std::uint32_t> fill(begin_[side].begin(), begin_[side].end() - 1);
      for (const p2p_op& o : ops) {
        if (o.is_send != (side == 0)) continue;
        const std::uint32_t at = fill[static_cast<std::size_t>(o.peer)]++;
        msgs_[side][at] = p2p_message{o.buf, o.count * size_of(o.dt)};
      }
    }
  }
  p2p_group(const p2p_group&) = delete;
  p2p_group& operator=(const p2p_group&) = delete;

  /// What the send_recv schedule reads; points into this object.
  p2p_plan plan() const {
    return p2p_plan{msgs_[0].data(), begin_[0].data(), msgs_[1].data(), begin_[1].data()};
  }

 private:
  std::vector<std::uint32_t> begin_[2];  // [0] sends, [1] receives: per-peer offsets into msgs_
  std::vector<p2p_message> msgs_[2];
};

/// The message of a status::mismatch a send_recv schedule reported on `rank`.
inline std::string p2p_mismatch_detail(const mismatch_report& report, int rank) {
  const auto q = std::to_string(report.peer);
  const auto r = std::to_string(rank);
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
class byte_layout {
 public:
  byte_layout(const buffer_desc& sb, const buffer_desc& rb, dtype dt, int nranks)
      : esz_(size_of(dt)), bytes_(4 * static_cast<std::size_t>(nranks)) {
    const std::size_t P = static_cast<std::size_t>(nranks);
    for (std::size_t j = 0; j < P; ++j) {
      bytes_[j] = sb.counts[j] * esz_;
      bytes_[P + j] = sb.displs[j] * esz_;
      bytes_[2 * P + j] = rb.counts[j] * esz_;
      bytes_[3 * P + j] = rb.displs[j] * esz_;
    }
    layout_ = peer_layout{bytes_.data(), bytes_.data() + P, bytes_.data() + 2 * P, bytes_.data() + 3 * P};
  }
  byte_layout(const byte_layout&) = delete;
  byte_layout& operator=(const byte_layout&) = delete;

  const peer_layout& layout() const { return layout_; }

  /// The message of a status::mismatch the all_to_allv schedule reported on `rank`.
  std::string mismatch_detail(const mismatch_report& report, int rank) const {
    const auto r = std::to_string(rank), q = std::to_string(report.peer);
    if (report.peer == rank)
      return "send_counts[" + r + "] = " + std::to_string(report.got / esz_) + " but recv_counts[" + r +
             "] = " + std::to_string(report.expected / esz_) + " (the block a rank sends itself)";
    return "recv_counts[" + q + "] = " + std::to_string(report.expected / esz_) + " on this rank, but rank " +
           q + " sends " + std::to_string(report.got / esz_) + " elements (its send_counts[" + r + "])";
  }

 private:
  std::size_t esz_;
  std::vector<std::size_t> bytes_;
  peer_layout layout_{};
};

}  // namespace collx::comm
