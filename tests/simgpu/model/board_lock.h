// Holding a CollectiveBoard: its robust process-shared mutex, and recovery
// when a process died holding it. Taken inside a device lock, never around
// one, so devices and the board cannot deadlock.
#pragma once

#include "model/layout.h"

namespace egpu::simgpu {

// Initialises the board's mutex (process-shared, robust) and empties it;
// false if the mutex cannot be initialised. Only its segment's creator calls it.
bool init_shared_board(CollectiveBoard& board);

class BoardLock {
 public:
  // Blocks until held; repairs the board first if its holder died (EOWNERDEAD).
  explicit BoardLock(CollectiveBoard& board);
  ~BoardLock();
  BoardLock(const BoardLock&) = delete;
  BoardLock& operator=(const BoardLock&) = delete;

  bool held() const { return held_; }

 private:
  CollectiveBoard& board_;
  bool held_ = false;
};

}  // namespace egpu::simgpu
