// Test support: run a list of cases on P thread ranks of one communicator group.
#pragma once

#include "run_case.hpp"

#include <collx/communicator.hpp>

#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

namespace collx::test {

/// COLLX_TEST_SCALE=quick: sanitizer runs skip the largest sizes and rank counts.
inline bool quick_scale() {
  const char* s = std::getenv("COLLX_TEST_SCALE");
  return s != nullptr && std::string_view(s) == "quick";
}

/// Options of the thread-rank matrices. They keep process ranks' single-copy
/// threshold (256 KiB) unless COLLX_SINGLE_COPY_MIN sets one, so that they
/// cover the staged schedules below it and single copy above it; thread
/// ranks' own default (0: single copy wherever the model takes it) has tests
/// of its own (test_single_copy.cpp).
inline comm_options test_options() {
  comm_options o = comm_options::from_env();
  o.timeout = std::chrono::seconds(60);
  if (!o.single_copy_min_bytes) o.single_copy_min_bytes = o.single_copy_min_for(false);
  return o;
}

/// Runs every case, in order, on every rank; returns all failure descriptions.
inline std::vector<std::string> run_on_threads(int nranks, const std::vector<case_desc>& cases,
                                               const comm_options& opt = test_options()) {
  auto comms = communicator::create_thread_group(nranks, opt);
  std::vector<std::vector<std::string>> per_rank(static_cast<std::size_t>(nranks));
  shared_reference shared(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      for (const case_desc& c : cases) {
        std::string e = run_case(comms[static_cast<std::size_t>(r)], c, &shared);
        if (!e.empty()) per_rank[static_cast<std::size_t>(r)].push_back(std::move(e));
      }
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> all;
  for (auto& v : per_rank) all.insert(all.end(), v.begin(), v.end());
  return all;
}

}  // namespace collx::test
