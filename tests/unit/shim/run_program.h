// Runs a program with a given environment and collects its exit status, stdout
// and stderr (bounded by a timeout), for the shim tests that need a real
// process with the shim preloaded.
#pragma once

#include <string>
#include <vector>

namespace egpu::shim::testing {

struct ProgramRun {
  int exit_code = -1;  // -1: did not exit normally (signal or timeout)
  bool timed_out = false;
  std::string out;
  std::string err;
};

ProgramRun run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       int timeout_ms = 30'000);

// Occurrences of `needle` in `text`.
int count_of(const std::string& text, const std::string& needle);

}  // namespace egpu::shim::testing
