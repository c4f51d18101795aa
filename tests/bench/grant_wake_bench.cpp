// grant_wake_bench: what one grant costs the waker (the agent's only thread)
// when a job parks many threads on its grant word: the wake as the agent
// does it (wake_granted, bounded by kMaxWokenPerGrant) and, for comparison,
// one that wakes every sleeper. Prints one JSON object:
//   {"grant_wake_us": {"parked_256": .., "parked_10000": .., "parked_10000_unbounded": ..}}
// (median of 15 wakes, each with every sleeper back asleep first).
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/shm/grant_futex.h"
#include "tests/support/thread_state.h"

namespace {

using Clock = std::chrono::steady_clock;

class Sleepers {
 public:
  explicit Sleepers(int n) : tids_(n) {
    try {
      for (int i = 0; i < n; ++i) {
        threads_.emplace_back([this, i] {
          tids_[i].store(static_cast<pid_t>(::syscall(SYS_gettid)));
          while (!stop_.load())
            egpu::shm::sleep_until_granted(&word_, word_.load(), 60'000'000'000);
        });
      }
    } catch (const std::system_error& e) {
      // Fewer tasks allowed than asked (TasksMax, a container): no figure.
      std::fprintf(stderr, "grant_wake_bench: %zu of %d threads: %s\n", threads_.size(), n,
                   e.what());
    }
  }
  bool all_started() const { return threads_.size() == tids_.size(); }
  ~Sleepers() {
    stop_.store(true);
    word_.fetch_add(1);
    while (std::any_of(threads_.begin(), threads_.end(), [](auto& t) { return t.joinable(); })) {
      ::syscall(SYS_futex, &word_, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
      for (auto& t : threads_)
        if (t.joinable()) t.join();
    }
  }
  // False when they did not all sleep within a minute.
  bool wait_all_asleep() const {
    const auto give_up = Clock::now() + std::chrono::minutes(1);
    for (const auto& tid : tids_) {
      while (tid.load() == 0 || !egpu::test::thread_asleep(tid.load())) {
        if (Clock::now() > give_up) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    return true;
  }
  std::atomic<uint32_t>* word() { return &word_; }

 private:
  std::atomic<uint32_t> word_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::atomic<pid_t>> tids_;
  std::vector<std::thread> threads_;
};

// Median microseconds of one wake; -1 when the sleepers did not settle.
double median_wake_us(int parked, bool bounded) {
  Sleepers s(parked);
  if (!s.all_started()) return -1;
  std::vector<double> us;
  for (int round = 0; round < 15; ++round) {
    if (!s.wait_all_asleep()) return -1;
    const auto start = Clock::now();
    if (bounded) {
      egpu::shm::wake_granted(s.word());
    } else {
      s.word()->fetch_add(1);
      ::syscall(SYS_futex, s.word(), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    }
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main() {
  const double p256 = median_wake_us(256, true);
  const double p10k = median_wake_us(10000, true);
  const double p10k_all = median_wake_us(10000, false);
  std::printf(
      "{\"grant_wake_us\": {\"parked_256\": %.0f, \"parked_10000\": %.0f, "
      "\"parked_10000_unbounded\": %.0f}}\n",
      p256, p10k, p10k_all);
  return p256 < 0 || p10k < 0 || p10k_all < 0 ? 1 : 0;
}
