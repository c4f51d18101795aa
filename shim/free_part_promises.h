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
  // An admission to `pool` begins: of `free_part` bytes free in it, what it
  // may count on (what no other admission in flight counts on), up to
  // `want`. It is in flight until unpromise() gives that back.
  uint64_t promise(uint64_t pool, uint64_t free_part, uint64_t want);
  void unpromise(uint64_t pool, uint64_t bytes);
  // An admission to `pool` is in flight (its quota is reserved apart from
  // the pool's charge: settling the pool without it would count it twice).
  bool in_flight(uint64_t pool) const;

 private:
  struct Pool {
    uint64_t promised = 0;
    int admissions = 0;
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Pool> pools_;
};

}  // namespace egpu::shim
