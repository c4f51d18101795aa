// The grant word wakes only the new holder's waiters. Each case waits until
// its sleeping threads are in the kernel (their /proc state is 'S'), then
// reads how many each wake woke: exact counts, no timing.
#include "core/shm/grant_futex.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace egpu::shm {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kLong = 60'000'000'000;  // far longer than any case

// True once thread `tid` of this process is asleep (state S).
bool asleep(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'S';
}

class Sleeper {
 public:
  Sleeper(std::atomic<uint32_t>* word, uint32_t slot)
      : thread_([this, word, slot] {
          tid_.store(static_cast<pid_t>(::syscall(SYS_gettid)));
          while (!stop_.load()) sleep_until_granted(word, word->load(), slot, kLong);
        }) {}
  ~Sleeper() { thread_.join(); }
  // Returns once the thread sleeps in the futex (bounded: fails the case).
  void wait_asleep() {
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (tid_.load() == 0 || !asleep(tid_.load())) {
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the waiter never slept";
      std::this_thread::sleep_for(1ms);
    }
  }
  void stop() { stop_.store(true); }

 private:
  std::atomic<pid_t> tid_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(GrantFutex, AGrantWakesOnlyTheNewHoldersWaiters) {
  std::atomic<uint32_t> word{0};
  Sleeper three(&word, 3);
  Sleeper four(&word, 4);
  three.wait_asleep();
  four.wait_asleep();
  EXPECT_EQ(wake_slot(&word, 5), 0) << "a grant to slot 5 woke waiters of 3 and 4";
  EXPECT_EQ(wake_slot(&word, 3), 1);
  three.wait_asleep();  // it found nothing changed and slept again
  EXPECT_EQ(wake_slot(&word, 4), 1);
  four.wait_asleep();
  three.stop();
  four.stop();
  EXPECT_EQ(wake_everyone(&word), 2) << "stopping the agent must wake every waiter";
}

TEST(GrantFutex, SlotsThirtyTwoApartShareABit) {
  // A spurious wake (a waiter re-checks) is the price of 64 slots in 32 bits.
  std::atomic<uint32_t> word{0};
  Sleeper one(&word, 1);
  one.wait_asleep();
  one.stop();
  EXPECT_EQ(wake_slot(&word, 33), 1);
  EXPECT_EQ(grant_bit(1), grant_bit(33));
  EXPECT_NE(grant_bit(1), grant_bit(2));
}

TEST(GrantFutex, AChangedWordDoesNotSleep) {
  std::atomic<uint32_t> word{7};
  const auto start = std::chrono::steady_clock::now();
  sleep_until_granted(&word, 6, 0, kLong);  // expected 6, word is 7: returns at once
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

}  // namespace
}  // namespace egpu::shm
