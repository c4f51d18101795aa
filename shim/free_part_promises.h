// FreePartPromises: the part of each device memory pool's free memory that
// admissions in flight count on, so that two threads never both count on
// the same free memory. Keyed by the pool (a device ordinal for a graph
// pool, the CUmemoryPool for a stream-ordered one). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

namespace egpu::shim {

class FreePartPromises {
 public:
  // Of `free_part` bytes free in `pool`, what one more admission may count
  // on (what no other admission in flight counts on), up to `want`;
  // counted until unpromise().
  uint64_t promise(uint64_t pool, uint64_t free_part, uint64_t want);
  void unpromise(uint64_t pool, uint64_t bytes);

 private:
  std::mutex mu_;
  std::map<uint64_t, uint64_t> promised_;
};

}  // namespace egpu::shim
