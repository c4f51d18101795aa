// exec-while-waiting: a thread waits for a long kernel in
// cuStreamSynchronize (the shim counts it busy on the process's page slot)
// while the main thread execs this program again. The new image, the same
// process, attaches to the same slot, runs one short kernel and says
// {"attached": true}, then idles until a file exists. Under the shim, the
// wait the exec cut short was still counted: the instance asked for the GPU
// for ever while it did nothing.
//   exec-while-waiting FILE             the first image
//   exec-while-waiting after-exec FILE  the second, idling until FILE exists
//                                       (5 minutes at most)
#include <cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "gpu_session.h"
#include "spin_kernel.h"

namespace {

int first_image(char* self, char* until) {
  using namespace std::chrono_literals;
  egpu::workload::GpuSession session(0);
  const egpu::workload::SpinKernel spin(session.spin_function(), session.stream(), 1.0);
  spin.launch(1'000'000);  // attached, with its first kernel run
  session.synchronize();
  std::thread waiter([&] {
    spin.launch(2'000'000'000);  // 2 s of device time
    (void)cuStreamSynchronize(session.stream());
  });
  std::this_thread::sleep_for(500ms);  // the waiter waits in the sync now
  char after[] = "after-exec";
  char* argv[] = {self, after, until, nullptr};
  execv("/proc/self/exe", argv);
  std::perror("exec-while-waiting: execv");
  std::_Exit(2);
}

int second_image(const char* until) {
  egpu::workload::GpuSession session(0);
  const egpu::workload::SpinKernel spin(session.spin_function(), session.stream(), 1.0);
  spin.launch(1'000'000);
  session.synchronize();
  std::printf("{\"attached\": true}\n");
  std::fflush(stdout);
  // Until the test has looked: no guess of how long that takes.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!std::filesystem::exists(until) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 2 && std::strcmp(argv[1], "after-exec") == 0) return second_image(argv[2]);
    if (argc != 2) {
      std::fprintf(stderr, "usage: exec-while-waiting FILE\n");
      return 2;
    }
    return first_image(argv[0], argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exec-while-waiting: %s\n", e.what());
    return 1;
  }
}
