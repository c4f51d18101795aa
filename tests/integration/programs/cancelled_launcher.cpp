// cancelled-launcher: a thread launches 1 ms kernels back to back (so the
// shim holds it in the in-flight bound most of the time) and is cancelled
// with pthread_cancel; its only cancellation point of its own is a
// pthread_testcancel after each launch. The program joins it and prints one
// JSON object. Under the shim, a cancellation acted on in the shim's waits
// aborted the program (the unwind met the shim's catch-all).
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "gpu_session.h"
#include "spin_kernel.h"

namespace {

struct Shared {
  const egpu::workload::SpinKernel* spin;
  std::atomic<std::uint64_t> launched{0};
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

}  // namespace

int main() {
  try {
    egpu::workload::GpuSession session(0);
    const egpu::workload::SpinKernel spin(session.spin_function(), session.stream(), 1.0);
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
    session.synchronize();
    std::printf("{\"cancelled\": %s, \"launched\": %llu}\n",
                result == PTHREAD_CANCELED ? "true" : "false",
                static_cast<unsigned long long>(shared.launched.load()));
    return result == PTHREAD_CANCELED ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cancelled-launcher: %s\n", e.what());
    return 1;
  }
}
