#include "failure_listener.h"

#include <cstdio>

namespace egpu::bench {

FailureListener& FailureListener::install() {
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  auto* listener = new FailureListener;
  listeners.Append(listener);
  return *listener;
}

void FailureListener::OnTestPartResult(const ::testing::TestPartResult& result) {
  if (!result.failed()) return;
  std::string where = result.file_name() != nullptr ? result.file_name() : "?";
  where += ":" + std::to_string(result.line_number());
  failures_.push_back(where + ": " + result.message());
  std::fprintf(stderr, "egpu-bench: harness failure at %s\n%s\n", where.c_str(), result.message());
}

}  // namespace egpu::bench
