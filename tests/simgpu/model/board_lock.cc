#include "model/board_lock.h"

#include <pthread.h>

#include <cerrno>

#include "model/collectives.h"

namespace egpu::simgpu {

bool init_shared_board(CollectiveBoard& board) {
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0) return false;
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  const int rc = pthread_mutex_init(&board.mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  if (rc != 0) return false;
  init_board(board);
  return true;
}

BoardLock::BoardLock(CollectiveBoard& board) : board_(board) {
  int rc = pthread_mutex_lock(&board_.mutex);
  if (rc == EOWNERDEAD) {
    // Like the device lock: updates are ordered so a prefix is harmless;
    // what a torn one leaves is cleaned here.
    repair_board(board_);
    pthread_mutex_consistent(&board_.mutex);
    rc = 0;
  }
  held_ = rc == 0;
}

BoardLock::~BoardLock() {
  if (held_) pthread_mutex_unlock(&board_.mutex);
}

}  // namespace egpu::simgpu
