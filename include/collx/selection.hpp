// collx/selection.hpp — which algorithms and protocols each collective may use
// (COLLX_ALGO / COLLX_PROTO, in NCCL's list syntax): the allow-set the
// automatic choice (tune/select.hpp) takes as an input. Parsing only.
//
// Syntax, for both variables (names case-insensitive, blanks ignored):
//   "ring,tree"                    only these, for every collective
//   "^nvls,bruck"                  all but these, for every collective
//   "allreduce:tree;allgather:ring"   per collective (clauses separated by ';');
//                                  collectives not named keep everything
//   "^tree;allreduce:tree"         clauses apply left to right
// Collective names are NCCL's (allreduce, allgather, reducescatter, broadcast,
// reduce) or collx's (all_reduce, …). Algorithm names are those of the compiled
// algorithms (collx::algorithms; name(algo_id)); a family's name also names its
// forms ("bruck" is bruck and bruck_a2a, as it was before bruck_a2a had an id of
// its own). An unknown name, an algorithm composed explicitly only
// (direct_one_shot, direct_two_shot), an empty list, or an algorithm named for a
// collective it cannot serve throws collx::error (status::invalid_argument)
// naming the variable.
//
// COLLX_PROTO chooses the wire format of algorithms that move data through
// connections. Algorithms on peer memory (nvls) have none (variants.hpp: no
// protocol axis): COLLX_PROTO neither allows nor excludes them, and their
// variant names Simple whatever it says; COLLX_ALGO=^nvls excludes them.
#pragma once

#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/error.hpp>
#include <collx/proto/ids.hpp>
#include <collx/variants.hpp>

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace collx {

/// Per-collective sets of allowed algorithm and protocol ids (bit i = id i).
struct selection {
  std::uint32_t algos[coll_count];
  std::uint32_t protos[coll_count];

  /// Everything allowed.
  static constexpr selection all() {
    selection s{};
    for (int c = 0; c < coll_count; ++c) s.algos[c] = s.protos[c] = ~0u;
    return s;
  }
  constexpr bool allows(coll c, algo_id a) const {
    return (algos[static_cast<int>(c)] >> static_cast<int>(a)) & 1u;
  }
  constexpr bool allows(coll c, proto_id p) const {
    return (protos[static_cast<int>(c)] >> static_cast<int>(p)) & 1u;
  }
  /// Applies an algorithm list (COLLX_ALGO syntax) on top of this selection.
  COLLX_COLD void restrict_algos(std::string_view spec, const char* var = "COLLX_ALGO") {
    apply<algo_id>(spec, var, algos);
  }
  /// Applies a protocol list (COLLX_PROTO syntax) on top of this selection.
  COLLX_COLD void restrict_protos(std::string_view spec, const char* var = "COLLX_PROTO") {
    apply<proto_id>(spec, var, protos);
  }

 private:
  COLLX_COLD static std::string canon(std::string_view s) {
    std::string out;
    for (char ch : s)
      if (!std::isspace(static_cast<unsigned char>(ch)))
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return out;
  }
  static std::string no_underscores(std::string s) {
    std::string out;
    for (char ch : s)
      if (ch != '_') out += ch;
    return out;
  }
  COLLX_COLD static int find_coll(const std::string& n) {
    for (int c = 0; c < coll_count; ++c)
      if (no_underscores(name(static_cast<coll>(c))) == no_underscores(n)) return c;
    return -1;
  }
  static bool known(std::string_view id_name) { return id_name != "invalid"; }
  // The ids a name stands for, as a mask (0: none). Protocols: the one so
  // named. Algorithms: each compiled one whose name, or whose family's name
  // (algo/ids.hpp), it is.
  static std::uint32_t find_ids(const std::string& n, proto_id) {
    for (int i = 0; i < 32; ++i)
      if (known(name(static_cast<proto_id>(i))) && name(static_cast<proto_id>(i)) == n) return 1u << i;
    return 0;
  }
  static std::uint32_t find_ids(const std::string& n, algo_id) {
    return []<class... As>(const std::string& want, type_list<As...>) {
      return ((want == As::name || want == name(family(As::id)) ? 1u << static_cast<int>(As::id) : 0u) | ...);
    }(n, algorithms{});
  }
  // Whether no compiled algorithm among the ids can serve c.
  static bool cannot_serve(std::uint32_t ids, coll c) {
    return []<class... As>(std::uint32_t m, coll k, type_list<As...>) {
      return !((((m >> static_cast<int>(As::id)) & 1u) && As::implements(k)) || ...);
    }(ids, c, algorithms{});
  }
  // Whether n names an algorithm that exists but is composed explicitly only.
  static bool explicit_only(const std::string& n) {
    for (int i = 0; i < 32; ++i)
      if (known(name(static_cast<algo_id>(i))) && name(static_cast<algo_id>(i)) == n) return true;
    return false;
  }

  template <class Id>
  COLLX_COLD static void apply(std::string_view spec, const char* var, std::uint32_t (&sets)[coll_count]) {
    const std::string all = canon(spec);
    auto bad = [&](const std::string& why) {
      throw_error(status::invalid_argument, std::string(var) + "='" + std::string(spec) + "': " + why);
    };
    if (all.empty()) bad("empty list");
    std::size_t pos = 0;
    while (pos <= all.size()) {
      const std::size_t end = all.find(';', pos);
      const std::string clause = all.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      pos = end == std::string::npos ? all.size() + 1 : end + 1;
      if (clause.empty()) bad("empty clause");
      int target = -1;  // -1: every collective
      std::string list = clause;
      if (const std::size_t colon = clause.find(':'); colon != std::string::npos) {
        target = find_coll(clause.substr(0, colon));
        if (target < 0) bad("unknown collective '" + clause.substr(0, colon) + "'");
        list = clause.substr(colon + 1);
      }
      const bool exclude = !list.empty() && list[0] == '^';
      if (exclude) list.erase(0, 1);
      if (list.empty()) bad("empty list in '" + clause + "'");
      std::uint32_t named = 0;
      std::size_t p = 0;
      while (p <= list.size()) {
        const std::size_t comma = list.find(',', p);
        const std::string n = list.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
        p = comma == std::string::npos ? list.size() + 1 : comma + 1;
        const std::uint32_t ids = n.empty() || n == "auto" ? 0u : find_ids(n, Id{});
        if constexpr (std::is_same_v<Id, algo_id>)
          if (ids == 0 && !n.empty() && explicit_only(n))
            bad("algorithm " + n + " is composed explicitly only (e.g. all_reduce<algo::" + n +
                ", proto::simple>(…)); the automatic choice does not offer it");
        if (ids == 0) bad("unknown name '" + n + "'");
        if constexpr (std::is_same_v<Id, algo_id>)
          if (target >= 0 && !exclude && cannot_serve(ids, static_cast<coll>(target)))
            bad("algorithm " + n + " cannot serve " + name(static_cast<coll>(target)));
        named |= ids;
      }
      for (int c = 0; c < coll_count; ++c)
        if (target < 0 || target == c) sets[c] = exclude ? (~0u & ~named) : named;
    }
  }
};

}  // namespace collx
