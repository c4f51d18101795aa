// cancelled-launcher: a thread the program cancels with pthread_cancel while
// the shim holds it; its only cancellation point of its own is a
// pthread_testcancel after each launch. The program joins it and prints one
// JSON object. Under the shim, a cancellation acted on in the shim's waits
// aborted the program (the unwind met the shim's catch-all).
//   cancelled-launcher              1 ms kernels back to back: the thread is
//                                   cancelled in the in-flight bound
//   cancelled-launcher behind-stall a first thread's launch stalls in the
//                                   driver (SIMGPU_DEBUG_STALL_IN_DRIVER_MS)
//                                   holding the stream's pacing lock; a second
//                                   thread synchronising the same stream is
//                                   cancelled while it waits for that lock
//   cancelled-launcher in-driver    the thread is cancelled while its launch
//                                   sleeps in the driver (a cancellation
//                                   point of the driver's, under the shim's
//                                   noexcept launch path)
// With SIMGPU_DEBUG_STALL_MARKER set, the program waits for the stall to
// begin (the marker made) rather than for a guess of when it has.
#include <cuda.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "gpu_session.h"
#include "spin_kernel.h"

namespace {

struct Shared {
  const egpu::workload::SpinKernel* spin;
  CUstream stream = nullptr;
  std::atomic<std::uint64_t> launched{0};
  std::atomic<bool> failed{false};
};

void* launch_forever(void* arg) {
  auto* shared = static_cast<Shared*>(arg);
  for (;;) {
    shared->spin->launch(1'000'000);
    shared->launched.fetch_add(1);
    pthread_testcancel();
  }
  return nullptr;
}

// One launch, then the thread's cancellation point.
void* launch_once(void* arg) {
  auto* shared = static_cast<Shared*>(arg);
  try {
    shared->spin->launch(1'000'000);
    shared->launched.fetch_add(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cancelled-launcher: %s\n", e.what());
    shared->failed.store(true);
  }
  pthread_testcancel();
  return nullptr;
}

// One synchronisation, then the thread's cancellation point.
void* synchronize_once(void* arg) {
  auto* shared = static_cast<Shared*>(arg);
  if (cuStreamSynchronize(shared->stream) != CUDA_SUCCESS) shared->failed.store(true);
  pthread_testcancel();
  return nullptr;
}

// Until the first launch sleeps in the driver: its marker made (a minute
// at most), or 300 ms without one.
void wait_for_the_stall() {
  using namespace std::chrono_literals;
  const char* marker = std::getenv("SIMGPU_DEBUG_STALL_MARKER");
  if (marker == nullptr) {
    std::this_thread::sleep_for(300ms);
    return;
  }
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(5ms);
}

int cancelled_while_throttled(const egpu::workload::SpinKernel& spin) {
  Shared shared;
  shared.spin = &spin;
  pthread_t thread;
  if (pthread_create(&thread, nullptr, &launch_forever, &shared) != 0) return 2;
  // Well past the in-flight bound (20 ms alone): every launch now waits.
  while (shared.launched.load() < 100)
    sched_yield();
  pthread_cancel(thread);
  void* result = nullptr;
  pthread_join(thread, &result);
  std::printf("{\"cancelled\": %s, \"launched\": %llu}\n",
              result == PTHREAD_CANCELED ? "true" : "false",
              static_cast<unsigned long long>(shared.launched.load()));
  return result == PTHREAD_CANCELED ? 0 : 3;
}

int cancelled_behind_stalled_launch(const egpu::workload::SpinKernel& spin, CUstream stream) {
  using namespace std::chrono_literals;
  Shared shared;
  shared.spin = &spin;
  shared.stream = stream;
  pthread_t stalled, waiter;
  // The process's first kernel launch stalls in the driver, inside the
  // stream's pacing lock.
  if (pthread_create(&stalled, nullptr, &launch_once, &shared) != 0) return 2;
  wait_for_the_stall();
  if (pthread_create(&waiter, nullptr, &synchronize_once, &shared) != 0) return 2;
  std::this_thread::sleep_for(200ms);  // the waiter sleeps for the lock now
  pthread_cancel(waiter);
  void* waiter_result = nullptr;
  void* stalled_result = nullptr;
  pthread_join(waiter, &waiter_result);
  pthread_join(stalled, &stalled_result);
  const bool cancelled = waiter_result == PTHREAD_CANCELED;
  std::printf("{\"cancelled\": %s, \"launched\": %llu, \"failed\": %s}\n",
              cancelled ? "true" : "false", static_cast<unsigned long long>(shared.launched.load()),
              shared.failed.load() ? "true" : "false");
  return cancelled && !shared.failed.load() ? 0 : 3;
}

int cancelled_in_driver(const egpu::workload::SpinKernel& spin) {
  Shared shared;
  shared.spin = &spin;
  pthread_t stalled;
  if (pthread_create(&stalled, nullptr, &launch_once, &shared) != 0) return 2;
  wait_for_the_stall();  // its launch sleeps in the driver now
  pthread_cancel(stalled);
  void* result = nullptr;
  pthread_join(stalled, &result);
  const bool cancelled = result == PTHREAD_CANCELED;
  std::printf("{\"cancelled\": %s, \"launched\": %llu, \"failed\": %s}\n",
              cancelled ? "true" : "false", static_cast<unsigned long long>(shared.launched.load()),
              shared.failed.load() ? "true" : "false");
  return cancelled && !shared.failed.load() ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    egpu::workload::GpuSession session(0);
    const egpu::workload::SpinKernel spin(session.spin_function(), session.stream(), 1.0);
    const char* mode = argc > 1 ? argv[1] : "";
    const int rc = std::strcmp(mode, "behind-stall") == 0
                       ? cancelled_behind_stalled_launch(spin, session.stream())
                   : std::strcmp(mode, "in-driver") == 0 ? cancelled_in_driver(spin)
                                                         : cancelled_while_throttled(spin);
    session.synchronize();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cancelled-launcher: %s\n", e.what());
    return 1;
  }
}
