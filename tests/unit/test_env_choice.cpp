// detail::env_choice: an option overridden by one word of the environment
// (COLLX_GPU_SCOPE, COLLX_GPU_FENCE, COLLX_GPU_MULTICAST read it).
#include <collx/detail/env_choice.hpp>
#include <collx/error.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

using namespace collx;

namespace {
enum class mode { automatic, off, on };
mode read() {
  return detail::env_choice("COLLX_TEST_ENV_CHOICE",
                            {{"automatic", mode::automatic}, {"off", mode::off}, {"on", mode::on}},
                            mode::off);
}
}  // namespace

TEST_CASE("env_choice: the named value, the fallback when unset or empty, a clear error otherwise",
          "[env_choice]") {
  ::unsetenv("COLLX_TEST_ENV_CHOICE");
  CHECK(read() == mode::off);
  ::setenv("COLLX_TEST_ENV_CHOICE", "", 1);
  CHECK(read() == mode::off);
  ::setenv("COLLX_TEST_ENV_CHOICE", "on", 1);
  CHECK(read() == mode::on);
  ::setenv("COLLX_TEST_ENV_CHOICE", "automatic", 1);
  CHECK(read() == mode::automatic);
  ::setenv("COLLX_TEST_ENV_CHOICE", "On", 1);  // words are matched exactly
  try {
    (void)read();
    FAIL("an unknown word was accepted");
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_argument);
    CHECK(std::string(e.what()).find(
              "COLLX_TEST_ENV_CHOICE must be one of 'automatic', 'off', 'on', got 'On'") !=
          std::string::npos);
  }
  ::unsetenv("COLLX_TEST_ENV_CHOICE");
}
