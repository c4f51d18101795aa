// The bench reuses the test fixtures, which report harness problems (an agent
// that does not start, a workload that crashes) as GoogleTest failures. This
// listener replaces GoogleTest's printer, which writes to stdout, so those
// messages go to stderr and stdout keeps only the bench's JSON.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace egpu::bench {

class FailureListener : public ::testing::EmptyTestEventListener {
 public:
  // Installs one in place of GoogleTest's default printer; the returned
  // listener is owned by GoogleTest.
  static FailureListener& install();

  void OnTestPartResult(const ::testing::TestPartResult& result) override;
  // The failures so far, "file:line: message".
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  std::vector<std::string> failures_;
};

}  // namespace egpu::bench
