// The futex protocol of a grant: the agent bumps the new holder's grant word
// (InstancePage::grant_word) and wakes it; that instance's waiting processes
// sleep on it. Two reasons it is the instance page's word, not one per GPU:
// - a handover wakes the processes of one instance, not every waiter on the
//   GPU (who went back to sleep: a quarter of the agent's CPU with 64
//   instances, try_to_wake_up per waiter inside its FUTEX_WAKE);
// - only the instance's owner can map its page (0600), so no other user can
//   FUTEX_WAKE its waiters: the GPU page is readable by every job on the node,
//   and a job spinning FUTEX_WAKE on it would make every waiter spin too.
#pragma once

#include <atomic>
#include <cstdint>

namespace egpu::shm {

// Sleeps while *word == expected, at most timeout_ns (CLOCK_MONOTONIC), until
// the agent bumps the word. Spurious returns are possible: re-check.
void sleep_until_granted(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);

// Bumps the word and wakes a few of those sleeping on it (kAgentWakes);
// returns how many woke. The agent calls it on its only thread, and the
// number of sleepers is the job's to choose: each one woken costs the agent
// time under the futex lock. The woken wake the rest (pass_on_grant).
inline constexpr int kAgentWakes = 8;
int wake_granted(std::atomic<uint32_t>* word);

// Called by a sleeper that woke to a bumped word: wakes every other sleeper
// of its instance, on the job's time.
void pass_on_grant(const std::atomic<uint32_t>* word);

// Sleeps like sleep_until_granted, then passes a grant it woke to on.
void sleep_and_pass_on(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);

}  // namespace egpu::shm
