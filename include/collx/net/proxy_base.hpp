// collx/net/proxy_base.hpp — what every proxy of a proxied communicator
// (transport/proxied.hpp) shares, whatever network it drives: the hooks into
// the rank's abort word, the one failure it reports and its text, the
// peers' departure flags, the wake-up the rank uses, the thread that runs
// the network's loop, and the forwarding of call records to the next rank.
//
// net/proxy.hpp (TCP) and net/ib_proxy.hpp (verbs) derive from it and add
// how bytes move. Thread-safety: failure_text() and departed() may be called
// from any thread (mu_ guards the text); the rest belongs to whichever
// thread holds work_mu_ (the proxy's loop, or the rank in try_progress).
#pragma once

#include <collx/bootstrap/socket.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/doorbell.hpp>
#include <collx/error.hpp>
#include <collx/transport/shm.hpp>

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace collx::net {

class proxy_base {
 public:
  /// `raise(why, peer)` raises the local abort word with that cause;
  /// `adopt(packed)` raises it with a cause received from a peer;
  /// `cause()` reads the local packed cause (0 when none).
  /// `bell`: the doorbell the rank sleeps on (null: its own memory's);
  /// `through_memory`: per rank, non-zero where steps go through shared
  /// memory (a peer on this host, transport/proxied.hpp): this proxy moves
  /// none of them and refuses any that peer sends.
  struct hooks {
    std::function<void(status, int)> raise;
    std::function<void(std::uint64_t)> adopt;
    std::function<std::uint64_t()> cause;
    detail::doorbell* bell = nullptr;
    std::vector<std::uint8_t> through_memory;
  };

  proxy_base(const proxy_base&) = delete;
  proxy_base& operator=(const proxy_base&) = delete;
  /// The derived proxy stops its thread in its own destructor (the loop uses its members).
  virtual ~proxy_base() = default;

  /// Sends what the rank posted, says goodbye to every peer, waits (at
  /// most `limit` in all) for the peers' goodbyes or end of stream, and
  /// joins the thread.
  void stop(std::chrono::milliseconds limit) { stop_thread(limit); }

  /// What the rank's view uses to wake the proxy (transport::proxied_view::published).
  std::uint32_t* idle_flag() { return &idle_; }
  /// Non-zero while the proxy holds back a credit or call record for a frame
  /// to ride (net/proxy.hpp); a rank waiting on a peer of its own host reads
  /// it (proxied_view::drive) and sends them, since a peer across the network
  /// may wait for them.
  const std::uint32_t* deferred_flag() const { return &deferred_; }
  int wake_fd() const { return wake_.get(); }

  /// Per rank: non-zero once it said goodbye (closed its communicator),
  /// stored after every step it sent was published (proxied_view::has_left).
  const std::uint32_t* left_flags() const { return left_.data(); }

  /// Steps this proxy has sent to its peers (data frames or RDMA writes), for
  /// tests and diagnostics; readable from any thread.
  std::uint64_t steps_sent() const { return steps_sent_.load(std::memory_order_relaxed); }
  /// Send system calls that carried frames (socket transport; 0 for ib),
  /// for tests and diagnostics: how many frames share a TCP segment.
  std::uint64_t sends() const { return sends_.load(std::memory_order_relaxed); }

  /// The rank waits for step `step` of channel ch from `rank`, which left:
  /// fails the communicator naming it (from the rank's thread).
  void departed(int rank, int ch, std::uint64_t step) {
    note_failure(rank, where_of(rank) +
                           ": closed its communicator (said goodbye) while this rank waits for its step " +
                           std::to_string(step) + " of channel " + std::to_string(ch));
    hooks_.raise(status::peer_dead, rank);
    detail::ring(bell_);
  }
  static void departed_of(const void* self, int rank, int ch, std::uint64_t step) {
    const_cast<proxy_base*>(static_cast<const proxy_base*>(self))->departed(rank, ch, step);
  }

  /// The text of the failure peer `rank` caused, or "".
  std::string failure_text(int rank) const {
    std::lock_guard<std::mutex> lock(mu_);
    return rank == failed_peer_ ? failure_ : std::string();
  }
  static std::string failure_text_of(const void* self, int rank) {
    return static_cast<const proxy_base*>(self)->failure_text(rank);
  }

 protected:
  proxy_base(transport::shm_view local, int self, std::uint32_t* step_bytes, std::uint64_t spin_ns, hooks h)
      : v_(local), self_(self), step_bytes_(step_bytes), spin_ns_(spin_ns), hooks_(std::move(h)) {
    nch_ = v_.layout.nchannels;
    bell_ = hooks_.bell != nullptr ? hooks_.bell : v_.doorbell(self_);
    hooks_.through_memory.resize(static_cast<std::size_t>(v_.nranks()), 0);
    left_.assign(static_cast<std::size_t>(v_.nranks()), 0u);
    wake_ = bootstrap::socket_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) bootstrap::detail::throw_errno("proxy: eventfd", errno);
  }

  static std::uint64_t now_ns() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
  }

  /// Whether steps to and from `rank` go through shared memory, not this proxy.
  bool through_memory(int rank) const { return hooks_.through_memory[static_cast<std::size_t>(rank)] != 0; }
  void count_step() { steps_sent_.fetch_add(1, std::memory_order_relaxed); }
  void count_send() { sends_.fetch_add(1, std::memory_order_relaxed); }

  /// "rank 3 (where it is)", for messages.
  virtual std::string where_of(int rank) const = 0;

  /// Keeps the first failure's peer and text.
  void note_failure(int rank, const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_peer_ < 0) {
      failed_peer_ = rank;
      failure_ = text;
    }
  }

  /// A failure peer `rank` caused: keeps the text, raises the abort word
  /// with `why`, wakes the rank.
  void fail(int rank, status why, const std::string& what) {
    note_failure(rank, where_of(rank) + ": " + what);
    failed_ = true;
    hooks_.raise(why, rank);
    detail::ring(bell_);
  }

  /// The bytes posted for step `step` of channel c to `peer`, at most the
  /// slot's (never read past it).
  std::uint32_t posted_bytes(int peer, std::uint32_t c, std::uint64_t step,
                             const transport::fifo_ref& out) const {
    const std::size_t i = (std::size_t(peer) * nch_ + c) * out.slots + step % out.slots;
    const std::uint32_t len = detail::load_relaxed(&step_bytes_[i]);
    return len > out.slot_bytes ? out.slot_bytes : len;
  }

  /// The oldest call record this rank published and has not forwarded yet:
  /// true with its (seq, signature, count), or false. The next one is
  /// normally in its own entry; only where the rank overwrote it before it
  /// was forwarded (more than call_history calls ahead of this proxy) are
  /// the entries searched for the oldest left.
  bool next_call(std::uint64_t& seq, std::uint64_t& sig, std::uint64_t& count) {
    const transport::rank_record* me = v_.record(self_);
    const std::uint64_t want = calls_sent_ + 1;
    std::uint64_t best = detail::load_acquire(&me->calls[want % transport::call_history].seq);
    std::size_t at = want % transport::call_history;
    if (best < want) return false;  // not published yet (or being written)
    if (best > want) {              // overwritten: the oldest still there
      for (std::size_t k = 0; k < transport::call_history; ++k) {
        const std::uint64_t q = detail::load_acquire(&me->calls[k].seq);
        if (q > calls_sent_ && q < best) best = q, at = k;
      }
    }
    const auto& e = me->calls[at];
    sig = detail::load_acquire(&e.signature);
    count = detail::load_acquire(&e.count);
    if (detail::load_relaxed(&e.seq) != best) return false;  // being rewritten: next time
    calls_sent_ = seq = best;
    return true;
  }

  /// Whether this rank published a call record not forwarded yet (its next
  /// call's entry holds that call or a later one).
  bool call_unsent() const {
    const auto* me = v_.record(self_);
    return detail::load_acquire(&me->calls[(calls_sent_ + 1) % transport::call_history].seq) > calls_sent_;
  }

  /// A call record of the previous rank: stored as that rank would store it
  /// in shared memory (comm/watch.hpp's publish_call: seq invalid while the
  /// fields change, seq last with release).
  void store_call(int rank, std::uint64_t seq, std::uint64_t sig, std::uint64_t count) {
    auto& e = v_.record(rank)->calls[seq % transport::call_history];
    detail::store_relaxed(&e.seq, std::uint64_t{0});
    detail::store_release(&e.signature, sig);
    detail::store_release(&e.count, count);
    detail::store_release(&e.seq, seq);
  }

  /// Marks `rank` as gone (said goodbye everywhere) for the rank's waits.
  void mark_left(int rank) {
    detail::store_release(&left_[static_cast<std::size_t>(rank)], 1u);
    detail::ring(bell_);  // a rank asleep waiting for its step looks again
  }

  /// Starts the thread running `loop`; a failure it did not foresee (no
  /// memory) still reaches the rank as an error instead of ending the process.
  template <class Loop>
  void start(Loop loop) {
    thread_ = std::thread([this, loop] {
      try {
        loop();
      } catch (const std::exception& e) {
        note_failure(self_, "rank " + std::to_string(self_) + ": the proxy thread failed: " + e.what());
        hooks_.raise(status::system_error, self_);
        detail::ring(bell_);
      }
    });
  }

  /// From a rank's thread, after it stored a request the loop reads: wakes
  /// the loop if it sleeps or is about to (it sets idle_, fences, and looks
  /// at the requests once more before sleeping; this fence orders the
  /// request before the load of idle_, so one side sees the other's store).
  void wake_if_idle() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::uint32_t one = 1;
    if (detail::load_relaxed(&idle_) != 0 && detail::compare_exchange(&idle_, one, 0u)) {
      const std::uint64_t n = 1;
      (void)!::write(wake_.get(), &n, sizeof n);
    }
  }

  /// Asks the loop to stop within `limit` and joins it.
  void stop_thread(std::chrono::milliseconds limit) {
    if (!thread_.joinable()) return;
    stop_deadline_ns_.store(now_ns() + static_cast<std::uint64_t>(limit.count()) * 1'000'000ull);
    stop_.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    thread_.join();
  }

  transport::shm_view v_;
  int self_;
  std::uint32_t nch_ = 0;
  std::uint32_t* step_bytes_;
  std::uint64_t spin_ns_;
  hooks hooks_;
  detail::doorbell* bell_ = nullptr;  // the rank's: rung when something it may wait for happened
  bootstrap::socket_fd wake_;
  std::uint32_t deferred_ = 0;       // see deferred_flag()
  std::uint32_t idle_ = 0;           // set while sleeping; the rank's published() clears it and writes wake_
  std::mutex work_mu_;               // held by whichever thread moves bytes: the proxy's loop or try_progress
  std::uint64_t calls_sent_ = 0;     // the last own call record forwarded
  std::vector<std::uint32_t> left_;  // per rank: said goodbye (read by the rank)
  bool failed_ = false, abort_sent_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> stop_deadline_ns_{0};
  std::atomic<std::uint64_t> steps_sent_{0}, sends_{0};

 private:
  mutable std::mutex mu_;
  int failed_peer_ = -1;
  std::string failure_;
  std::thread thread_;
};

}  // namespace collx::net
