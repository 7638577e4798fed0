// collx/detail/env_choice.hpp — an option overridden by one word of the
// environment.
//
// env_choice("COLLX_GPU_SCOPE", {{"automatic", a}, {"system", s}}, fallback)
// returns the value named by the variable's word, or `fallback` where the
// variable is unset or empty. Any other word throws collx::error
// (invalid_argument) naming the variable, the word and every accepted one.
#pragma once

#include <collx/error.hpp>

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

namespace collx::detail {

template <class E>
E env_choice(const char* variable, std::initializer_list<std::pair<const char*, E>> words, E fallback) {
  const char* e = std::getenv(variable);
  if (e == nullptr || *e == '\0') return fallback;
  std::string accepted;
  for (const auto& [word, value] : words) {
    if (std::strcmp(e, word) == 0) return value;
    accepted += (accepted.empty() ? "'" : ", '") + std::string(word) + "'";
  }
  throw_error(status::invalid_argument,
              std::string(variable) + " must be one of " + accepted + ", got '" + e + "'");
}

}  // namespace collx::detail
