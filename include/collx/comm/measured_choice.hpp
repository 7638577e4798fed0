// collx/comm/measured_choice.hpp — the automatic choice by measurement: time
// the model's few best variants on a communicator's first calls of each size
// class, keep the fastest (comm_options::tune_online, COLLX_TUNE_ONLINE).
//
// Why: on a machine whose state moves (a virtual machine's cache-line
// latency, other tasks on the CPUs) the fastest variant at a size changes
// from run to run, and variants the model cannot tell apart differ by 10-30 %
// (bench/results/tuner_pick_ceiling_2026-12-05.md). The model ranks the
// candidates; the calls themselves, on this machine in its present state,
// decide among the best few.
//
// How: a class is (collective, requested variant, power-of-two size class of
// the call's bytes, contention share as agreed, in place, symmetric buffers):
// everything the model's choice depends on, sizes rounded to a power of two
// so that a program whose sizes vary does not explore forever. Its first
// calls run the model's n best candidates in three rounds (so that a drift of
// the machine's state reaches every candidate alike); in each round every
// candidate runs a block of consecutive calls, the first untimed (it follows
// another variant, whose lines are in the caches), then one timed call, or
// ten for calls up to 64 KiB (cheap, and noisy). Each rank times its calls;
// after the last one the ranks all_reduce (max) each candidate's median and
// every rank keeps the same argmin: the candidate whose slowest rank was
// fastest. Ties go to the model's order. From then on the class runs its
// choice, at the cost of the automatic choice's memo.
//
// The exploration's calls are user calls: every one gives the right result
// (each candidate is a complete variant), and all ranks run the same
// candidate on the same call (classes and turns are counted alike on every
// rank; the per-call check reports ranks whose calls differ). The agreement
// is one extra all_reduce of n doubles, a numbered call on every rank.
//
// This header holds the per-class bookkeeping, free of communicators and
// clocks; comm/dispatch.hpp times the calls and runs the agreement.
#pragma once

#include <collx/coll.hpp>
#include <collx/options.hpp>
#include <collx/variants.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <unordered_map>

namespace collx::comm {

/// One size class's exploration and, once agreed, its choice.
struct measured_class {
  static constexpr std::uint32_t max_candidates = comm_options::max_tune_online;
  /// Rounds over the candidates: a drift of the machine's state during the
  /// exploration reaches every candidate alike.
  static constexpr std::uint32_t rounds = 3;
  /// Timed calls per block: a block is consecutive calls of one candidate,
  /// the first untimed (it follows another variant's call, whose lines are
  /// in the caches). Small calls are cheap and noisy: ten timed calls per
  /// block up to small_bytes; one above.
  static constexpr std::uint32_t small_timed = 10, large_timed = 1;
  static constexpr double small_bytes = 64 * 1024;
  static constexpr std::uint32_t max_samples = rounds * small_timed;

  static constexpr std::uint32_t timed_per_block(double bytes) {
    return bytes <= small_bytes ? small_timed : large_timed;
  }
  /// The calls the exploration of n candidates at `bytes` takes.
  static constexpr std::uint32_t exploration_calls(std::uint32_t n, double bytes) {
    return rounds * n * (1 + timed_per_block(bytes));
  }

  variant_choice candidate[max_candidates]{};
  std::uint32_t candidates = 0;
  std::uint32_t timed = large_timed;         // timed calls per block (timed_per_block)
  std::uint32_t calls = 0;                   // exploration calls made
  double us[max_candidates][max_samples]{};  // timed calls, per candidate
  bool decided = false;
  variant_choice chosen{};

  constexpr std::uint32_t exploration_calls() const { return rounds * candidates * (1 + timed); }
  constexpr std::uint32_t samples() const { return rounds * timed; }

  /// The candidate the next exploration call runs, whether it is timed, and
  /// where its sample goes.
  struct turn {
    std::uint32_t candidate = 0;
    bool timed = false;
    std::uint32_t sample = 0;
  };
  constexpr turn next_turn() const {
    const std::uint32_t block = 1 + timed, round = calls / (candidates * block),
                        in = calls % (candidates * block);
    const std::uint32_t pos = in % block;
    return {in / block, pos > 0, pos > 0 ? round * timed + pos - 1 : 0};
  }

  /// Records a finished exploration call of turn t (µs; ignored when untimed).
  /// Returns whether that was the last: the ranks then agree.
  constexpr bool record(turn t, double call_us) {
    if (t.timed) us[t.candidate][t.sample] = call_us;
    ++calls;
    return calls == exploration_calls();
  }

  /// This rank's median per candidate (out[0..candidates)).
  void medians(double* out) const {
    const std::uint32_t n = samples();
    for (std::uint32_t c = 0; c < candidates; ++c) {
      double v[max_samples];
      std::copy(us[c], us[c] + n, v);
      std::sort(v, v + n);
      out[c] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
  }

  /// Keeps the candidate with the least of `slowest` (every rank's largest
  /// median, the same on every rank); the earlier on ties.
  constexpr variant_choice decide(const double* slowest) {
    std::uint32_t best = 0;
    for (std::uint32_t c = 1; c < candidates; ++c)
      if (slowest[c] < slowest[best]) best = c;
    chosen = candidate[best];
    decided = true;
    return chosen;
  }
};

/// What makes two calls one class (see the header comment).
struct measured_key {
  coll c = coll::all_reduce;
  variant_choice requested{};
  double bytes = 0;
  double contention = 0;
  bool in_place = false, mapped = false;

  /// The power-of-two class of `bytes`: [2^(k-1), 2^k) is class k, 0 bytes class 0.
  static constexpr std::uint32_t size_class(double bytes) {
    return bytes < 1 ? 0u : static_cast<std::uint32_t>(std::bit_width(static_cast<std::uint64_t>(bytes)));
  }
  constexpr std::uint64_t packed() const {
    const auto pm = static_cast<std::uint64_t>(contention * 1000 + 0.5);  // agreed in steps of 1/8
    return std::uint64_t(static_cast<std::uint8_t>(c)) |
           std::uint64_t(static_cast<std::uint8_t>(requested.algo)) << 8 |
           std::uint64_t(static_cast<std::uint8_t>(requested.proto)) << 16 |
           std::uint64_t(size_class(bytes)) << 24 | (pm & 0x3ff) << 32 | std::uint64_t(in_place) << 42 |
           std::uint64_t(mapped) << 43;
  }
};

/// A communicator's classes (state::measured).
struct measured_choices {
  std::unordered_map<std::uint64_t, measured_class> classes;
  bool agreeing = false;  // inside the agreement's own all_reduce: the model's pick

  /// The class of k, or nullptr before its first call. Stable: pointers stay
  /// valid while classes are added.
  measured_class* find(const measured_key& k) {
    const auto i = classes.find(k.packed());
    return i == classes.end() ? nullptr : &i->second;
  }
  measured_class& add(const measured_key& k) { return classes[k.packed()]; }
};

}  // namespace collx::comm
