// The grant word: a grant wakes the sleepers on that instance's word and no
// one else. Each case waits until its sleeping threads are in the kernel
// (their /proc state is 'S'), then reads how many a wake woke: exact counts,
// no timing.
#include "core/shm/grant_futex.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/thread_state.h"

namespace egpu::shm {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kLong = 60'000'000'000;  // far longer than any case

// A thread sleeping on `word` until told to stop (and woken).
class Sleeper {
 public:
  explicit Sleeper(std::atomic<uint32_t>* word)
      : thread_([this, word] {
          tid_.store(static_cast<pid_t>(::syscall(SYS_gettid)));
          while (!stop_.load())
            sleep_until_granted(word, word->load(), kLong);
          done_.store(true);
        }) {}
  ~Sleeper() { thread_.join(); }
  void wait_asleep() {
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (tid_.load() == 0 || !egpu::test::thread_asleep(tid_.load())) {
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the sleeper never slept";
      std::this_thread::sleep_for(1ms);
    }
  }
  void stop() { stop_.store(true); }
  bool done() const { return done_.load(); }

 private:
  std::atomic<pid_t> tid_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(GrantFutex, AGrantWakesOnlyTheGrantedInstancesSleepers) {
  std::atomic<uint32_t> instance_a{0};
  std::atomic<uint32_t> instance_b{0};
  Sleeper a1(&instance_a);
  Sleeper a2(&instance_a);
  Sleeper b(&instance_b);
  a1.wait_asleep();
  a2.wait_asleep();
  b.wait_asleep();
  EXPECT_EQ(wake_granted(&instance_a), 2) << "both processes of the granted instance run";
  EXPECT_EQ(instance_a.load(), 1u) << "the word moved, so a sleeper about to sleep does not";
  a1.wait_asleep();  // found nothing to do and slept again
  a2.wait_asleep();
  b.wait_asleep();  // never woken
  a1.stop();
  a2.stop();
  b.stop();
  EXPECT_EQ(wake_granted(&instance_a), 2);
  EXPECT_EQ(wake_granted(&instance_b), 1);
}

// A job parks more threads on its grant word than the bound: a grant wakes
// the bound, so what a grant costs the agent is not the job's to choose.
TEST(GrantFutex, AGrantWakesNoMoreThanTheBound) {
  std::atomic<uint32_t> word{0};
  std::vector<std::unique_ptr<Sleeper>> sleepers;
  for (int i = 0; i < kMaxWokenPerGrant + 8; ++i)
    sleepers.push_back(std::make_unique<Sleeper>(&word));
  for (auto& s : sleepers)
    s->wait_asleep();
  EXPECT_EQ(wake_granted(&word), kMaxWokenPerGrant);
  // Later grants wake the rest (as their timeouts would).
  for (auto& s : sleepers)
    s->stop();
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (!std::all_of(sleepers.begin(), sleepers.end(), [](auto& s) { return s->done(); })) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "sleepers never ended";
    EXPECT_LE(wake_granted(&word), kMaxWokenPerGrant);
    std::this_thread::sleep_for(1ms);
  }
}

TEST(GrantFutex, AMovedWordDoesNotSleep) {
  std::atomic<uint32_t> word{7};
  const auto start = std::chrono::steady_clock::now();
  sleep_until_granted(&word, 6, kLong);  // expected 6, word is 7: returns at once
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

}  // namespace
}  // namespace egpu::shm
