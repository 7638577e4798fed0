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
// n·(1 + samples) calls run the model's n best candidates in turn (round
// robin, so that a change of state reaches every candidate alike); the first
// round is untimed (pages, connections, caches). Each rank times its calls;
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
  static constexpr std::uint32_t samples = comm_options::tune_online_samples;

  variant_choice candidate[max_candidates]{};
  std::uint32_t candidates = 0;
  std::uint32_t calls = 0;               // exploration calls made
  double us[max_candidates][samples]{};  // timed calls, per candidate
  bool decided = false;
  variant_choice chosen{};

  /// The calls an exploration takes: one untimed and `samples` timed per candidate.
  constexpr std::uint32_t exploration_calls() const { return candidates * (1 + samples); }

  /// The candidate the next exploration call runs, and whether it is timed.
  struct turn {
    std::uint32_t candidate = 0;
    bool timed = false;
  };
  constexpr turn next_turn() const { return {calls % candidates, calls / candidates >= 1}; }

  /// Records a finished exploration call of turn t (µs; ignored when untimed).
  /// Returns whether that was the last: the ranks then agree.
  constexpr bool record(turn t, double call_us) {
    if (t.timed) us[t.candidate][calls / candidates - 1] = call_us;
    ++calls;
    return calls == exploration_calls();
  }

  /// This rank's median per candidate (out[0..candidates)).
  void medians(double* out) const {
    for (std::uint32_t c = 0; c < candidates; ++c) {
      double v[samples];
      std::copy(us[c], us[c] + samples, v);
      std::sort(v, v + samples);
      out[c] = samples % 2 ? v[samples / 2] : (v[samples / 2 - 1] + v[samples / 2]) / 2;
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
