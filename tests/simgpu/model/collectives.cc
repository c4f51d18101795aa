#include "model/collectives.h"

namespace egpu::simgpu {
namespace {

Rendezvous* find(CollectiveBoard& board, uint64_t key) {
  for (Rendezvous& r : board.entries) {
    if (r.key == key) return &r;
  }
  return nullptr;
}

const Rendezvous* find(const CollectiveBoard& board, uint64_t key) {
  for (const Rendezvous& r : board.entries) {
    if (r.key == key) return &r;
  }
  return nullptr;
}

// A free entry, else the stalest one unused for kStaleRendezvousNs.
Rendezvous* claim(CollectiveBoard& board, uint64_t now_ns) {
  Rendezvous* stalest = nullptr;
  for (Rendezvous& r : board.entries) {
    if (r.key == 0) return &r;
    if (now_ns >= r.last_arrival_ns + kStaleRendezvousNs &&
        (stalest == nullptr || r.last_arrival_ns < stalest->last_arrival_ns)) {
      stalest = &r;
    }
  }
  return stalest;
}

}  // namespace

void init_board(CollectiveBoard& board) {
  board.overflows = 0;
  for (Rendezvous& r : board.entries)
    r = Rendezvous{};
}

Arrival arrive(CollectiveBoard& board, uint64_t key, uint32_t size, uint64_t now_ns) {
  if (key == 0 || size == 0) return Arrival::kKeyReused;
  Rendezvous* r = find(board, key);
  if (r != nullptr && r->arrived >= r->size) return Arrival::kKeyReused;
  if (r == nullptr) {
    r = claim(board, now_ns);
    if (r == nullptr) {
      ++board.overflows;
      return Arrival::kBoardFull;
    }
    // The first member's size is the group's: the driver derives the key
    // from the communicator, so members that disagree are the program's bug.
    *r = Rendezvous{key, size, 0, 0, 0, now_ns, now_ns};
  }
  ++r->arrived;
  if (now_ns > r->last_arrival_ns) r->last_arrival_ns = now_ns;
  return Arrival::kArrived;
}

std::optional<uint64_t> released_at(const CollectiveBoard& board, uint64_t key) {
  const Rendezvous* r = find(board, key);
  if (r == nullptr || r->arrived < r->size) return std::nullopt;
  return r->last_arrival_ns;
}

void depart(CollectiveBoard& board, uint64_t key) {
  Rendezvous* r = find(board, key);
  if (r == nullptr) return;
  if (++r->departed >= r->size) *r = Rendezvous{};
}

void repair_board(CollectiveBoard& board) {
  for (Rendezvous& r : board.entries) {
    // arrive() writes a whole entry before counting; a keyless or sizeless
    // one can only be a torn write, and nobody can depart from it.
    if (r.key == 0 || r.size == 0) {
      r = Rendezvous{};
      continue;
    }
    if (r.arrived > r.size) r.arrived = r.size;
    if (r.departed >= r.size) r = Rendezvous{};
  }
}

uint32_t rendezvous_in_use(const CollectiveBoard& board) {
  uint32_t n = 0;
  for (const Rendezvous& r : board.entries)
    n += r.key != 0 ? 1 : 0;
  return n;
}

}  // namespace egpu::simgpu
