// LatencyMemorySaver: saves run off the caller's thread, one per GPU at a
// time, the newest waiting one replacing older ones, and a removal after a
// save is never undone by that save. A writer the test holds stands in for
// a slow encode.
#include "nodeagent/latency_memory_saver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace egpu::agent {
namespace {

// Records what was written (a memory by its first loan's value, or
// "removed"), and holds each write until released.
class HeldWriter {
 public:
  LatencyMemorySaver::Write write() {
    return [this](uint32_t gpu, const std::optional<slo::SloMemory>& memory) -> Status {
      std::unique_lock lock(mu_);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_ > 0; });
      --released_;
      written_.push_back(std::to_string(gpu) + ":" +
                         (memory ? std::to_string(memory->loans.begin()->second) : "removed"));
      if (fail_) return Error{"disk full"};
      return {};
    };
  }
  void wait_entered(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return entered_ >= n; });
  }
  void release(int n = 1) {
    std::lock_guard lock(mu_);
    released_ += n;
    cv_.notify_all();
  }
  std::vector<std::string> written() {
    std::lock_guard lock(mu_);
    return written_;
  }
  void fail() {
    std::lock_guard lock(mu_);
    fail_ = true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  int released_ = 0;
  bool fail_ = false;
  std::vector<std::string> written_;
};

slo::SloMemory memory_with_loan(uint32_t units) {
  slo::SloMemory m;
  m.loans[1] = units;
  return m;
}

TEST(LatencyMemorySaver, SavesOffTheCallersThreadAndTheNewestWins) {
  HeldWriter writer;
  LatencyMemorySaver saver(writer.write());
  saver.save(0, memory_with_loan(10));  // returns while its write is held
  writer.wait_entered(1);
  saver.save(0, memory_with_loan(20));  // waits behind it...
  saver.save(0, memory_with_loan(30));  // ...and is replaced by this one
  saver.save(1, memory_with_loan(40));  // another GPU's goes on beside them
  writer.wait_entered(2);
  writer.release(3);
  saver.wait_idle();
  auto w = writer.written();
  std::sort(w.begin(), w.end());
  EXPECT_EQ(w, (std::vector<std::string>{"0:10", "0:30", "1:40"}));
}

TEST(LatencyMemorySaver, ARemovalAfterASaveIsTheLastWord) {
  HeldWriter writer;
  LatencyMemorySaver saver(writer.write());
  saver.save(0, memory_with_loan(10));
  writer.wait_entered(1);
  saver.remove(0);
  writer.release(2);
  saver.wait_idle();
  EXPECT_EQ(writer.written(), (std::vector<std::string>{"0:10", "0:removed"}));
}

TEST(LatencyMemorySaver, AFailureIsKeptForTheCallerOnce) {
  HeldWriter writer;
  writer.fail();
  LatencyMemorySaver saver(writer.write());
  saver.save(0, memory_with_loan(10));
  writer.release(1);
  saver.wait_idle();
  EXPECT_EQ(saver.take_failure(), std::optional<std::string>("disk full"));
  EXPECT_EQ(saver.take_failure(), std::nullopt);
}

}  // namespace
}  // namespace egpu::agent
