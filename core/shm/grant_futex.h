// The futex protocol of the GPU page's `grant_seq` word, shared by the agent
// (which bumps it and wakes) and the shims (which sleep on it).
//
// Waiters sleep with a bitset naming their slot, and a grant wakes only the
// new holder's bit: with N instances waiting on one GPU, each handover wakes
// the processes of one instance instead of all N (which then went back to
// sleep). That thundering herd was a quarter of the agent's CPU time with 64
// instances (try_to_wake_up per waiter inside its FUTEX_WAKE). Slots >= 32
// share a bit with slot - 32: a spurious wake is harmless, the waiter re-checks.
// Events every waiter must see (agent stop or restart) wake every bit.
#pragma once

#include <atomic>
#include <cstdint>

namespace egpu::shm {

// The futex bitset of `slot`.
constexpr uint32_t grant_bit(uint32_t slot) {
  return 1u << (slot % 32);
}

// Sleeps while *word == expected, at most timeout_ns (CLOCK_MONOTONIC), until
// a wake for `slot`'s bit (or for everyone). Spurious returns are possible.
void sleep_until_granted(const std::atomic<uint32_t>* word, uint32_t expected, uint32_t slot,
                         int64_t timeout_ns);

// Wakes the waiters of `slot` (the new holder); returns how many woke.
int wake_slot(std::atomic<uint32_t>* word, uint32_t slot);

// Wakes every waiter (the agent stops, or a restarted agent takes over);
// returns how many woke.
int wake_everyone(std::atomic<uint32_t>* word);

}  // namespace egpu::shm
