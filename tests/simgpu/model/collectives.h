// Collectives on the simulated GPUs, as pure functions on a CollectiveBoard
// (layout.h) with an explicit clock. The timeline (timeline.h) calls them
// while it runs a kCollective op, with the board's lock held by its caller.
//
// Model: a member arrives when its part first gets its device's engine; the
// group is complete when `size` members have arrived, at the last arrival's
// device time. Until then every arrived member holds its engine, spinning (as
// NCCL's kernels poll for their peers). A device learns of its peers'
// arrivals when it is next evaluated, so a member released in the past is
// credited the engine time it held since its release.
#pragma once

#include <cstdint>
#include <optional>

#include "model/layout.h"

namespace egpu::simgpu {

// A board entry unused this long is taken back when the board is full (a
// group whose member died never completes, like NCCL's).
inline constexpr uint64_t kStaleRendezvousNs = 60'000'000'000;

void init_board(CollectiveBoard& board);

enum class Arrival {
  kArrived,
  kBoardFull,  // no entry free: the part waits, spinning, and tries again
  kKeyReused,  // its group is already complete: a key must name one collective call
               // (communicator and sequence number); the part runs alone
};

// Records a member's arrival at `now_ns` (the board counts full-board tries
// in `overflows`).
Arrival arrive(CollectiveBoard& board, uint64_t key, uint32_t size, uint64_t now_ns);

// The device time the group completed at: its last member's arrival; none
// while members are missing (or the key is unknown).
std::optional<uint64_t> released_at(const CollectiveBoard& board, uint64_t key);

// A member's part completed; the last one frees the entry.
void depart(CollectiveBoard& board, uint64_t key);

// After a process died holding the board's lock: frees half-written entries
// and clamps counts, so that every entry is one a finished update could leave.
void repair_board(CollectiveBoard& board);

// Entries in use (tests, stats).
uint32_t rendezvous_in_use(const CollectiveBoard& board);

}  // namespace egpu::simgpu
