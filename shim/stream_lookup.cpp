#include "shim/stream_lookup.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "shim/after_fork.h"
#include "shim/log.h"

namespace egpu::shim {
namespace {

// The values of CU_STREAM_LEGACY and CU_STREAM_PER_THREAD (cuda.h casts them
// to CUstream, which a constant expression cannot undo).
constexpr uintptr_t kLegacyKey = 0x1;
constexpr uintptr_t kPerThreadHandle = 0x2;

struct CachedStream {
  const pacing::DevicePacer* pacer = nullptr;
  uint64_t epoch = 0;
  uint64_t key = 0;
  std::shared_ptr<pacing::StreamPacer> stream;
};

// A few recently used streams of this thread (one TLS object: its address is
// also the thread's token).
struct StreamCache {
  static constexpr int kEntries = 4;
  CachedStream entries[kEntries];
  int next = 0;
};
thread_local StreamCache t_cache;

// At thread exit, the thread's per-thread default streams end with it.
struct PerThreadStreams {
  std::vector<std::pair<pacing::DevicePacer*, uint64_t>> owned;
  ~PerThreadStreams() {
    for (auto& [pacer, key] : owned) {
      try {
        (void)pacer->retire(key);
      } catch (...) {
        // Nothing to do at thread exit: the events stay with the driver.
      }
    }
  }
};
thread_local PerThreadStreams t_per_thread;
// Whether this thread has touched t_per_thread: its first touch registers
// its destructor, which allocates, and a fork handler must not.
thread_local bool t_has_per_thread = false;

struct StreamKey {
  uint64_t key;
  pacing::StreamHandle record_on;
  uint64_t owner;
};

StreamKey key_of(CUstream stream, DefaultStream zero_means, uint64_t token) {
  uintptr_t handle = reinterpret_cast<uintptr_t>(stream);
  if (handle == 0) {
    handle = zero_means == DefaultStream::kPerThread ? kPerThreadHandle : kLegacyKey;
  }
  if (handle == kPerThreadHandle) return {token, handle, token};
  if (handle == kLegacyKey) return {kLegacyKey, handle, 0};
  return {handle, handle, 0};
}

}  // namespace

void forget_thread_streams_after_fork() noexcept {
  if (t_has_per_thread) t_per_thread.owned.clear();  // frees nothing: it keeps its storage
}

uint64_t thread_token() {
  return reinterpret_cast<uintptr_t>(&t_cache);
}

pacing::StreamPacer* find_stream_pacer(GpuBinding& b, CUstream stream, DefaultStream zero_means) {
  StreamCache& cache = t_cache;
  const StreamKey k = key_of(stream, zero_means, reinterpret_cast<uintptr_t>(&cache));
  pacing::DevicePacer& pacer = b.pacer();
  const uint64_t epoch = pacer.epoch();
  for (CachedStream& e : cache.entries) {
    if (e.pacer == &pacer && e.key == k.key && e.epoch == epoch) return e.stream.get();
  }
  std::shared_ptr<pacing::StreamPacer> found = pacer.stream(k.key, k.record_on, k.owner);
  if (found == nullptr) {
    EGPU_SHIM_LOG_ONCE("too many streams on one GPU: further streams are not paced");
    return nullptr;
  }
  if (k.owner != 0) {
    auto& owned = t_per_thread.owned;
    t_has_per_thread = true;
    const std::pair<pacing::DevicePacer*, uint64_t> entry{&pacer, k.key};
    if (std::find(owned.begin(), owned.end(), entry) == owned.end()) owned.push_back(entry);
  }
  CachedStream& slot = cache.entries[cache.next];
  cache.next = (cache.next + 1) % StreamCache::kEntries;
  slot = CachedStream{&pacer, epoch, k.key, std::move(found)};
  return slot.stream.get();
}

pacing::Charge retire_stream(GpuBinding& b, CUstream stream) {
  const uintptr_t handle = reinterpret_cast<uintptr_t>(stream);
  // The default streams are never destroyed.
  if (handle == 0 || handle == kLegacyKey || handle == kPerThreadHandle) {
    return {};
  }
  return b.pacer().retire(handle);
}

}  // namespace egpu::shim
