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

// The most sleepers one grant wakes. A job can park any number of its
// threads on its own grant word, and each costs the waker (the agent's only
// thread, which ticks every GPU) a wake-up inside FUTEX_WAKE: unbounded, the
// job chose how long each of its grants held up the node (10,000 parked
// threads: about 40 ms per grant; bounded, about 0.6 ms: scripts/bench
// --only grant-wake). An honest instance parks one thread per launching
// thread of its processes (64 processes with 4 each fit); sleepers past the
// bound wake at the next grant or at their timeout (shim/gate.h, 50 ms).
inline constexpr int kMaxWokenPerGrant = 256;

// Bumps the word and wakes up to kMaxWokenPerGrant of those sleeping on it;
// returns how many woke.
int wake_granted(std::atomic<uint32_t>* word);

}  // namespace egpu::shm
