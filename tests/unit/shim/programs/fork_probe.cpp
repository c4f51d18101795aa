// fork_probe: forks while another thread is inside the shim, and reports
// whether the child got through its own driver calls and exit. Only the
// forking thread exists in a child: whatever lock another thread held at
// the fork stays held there for ever. Run with
// SIMGPU_DEBUG_STALL_AT=ipc-open, SIMGPU_DEBUG_STALL_IN_DRIVER_MS and
// SIMGPU_DEBUG_STALL_MARKER: a thread's cuIpcOpenMemHandle stalls in the
// driver, the main thread forks once it has begun, and the child calls
// cuIpcCloseMemHandle, launches on its per-thread default stream and exits
// through exit() (its thread-local destructors and atexit handlers run).
// A child still there after 20 s is killed by its alarm. Prints
// {"child_exit":N} (N < 0: the signal that ended it).
#include <cuda.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <thread>

#include "gpu_session.h"
#include "spin_kernel.h"

int main() try {
  const char* marker = std::getenv("SIMGPU_DEBUG_STALL_MARKER");
  if (marker == nullptr) {
    std::fprintf(stderr, "fork_probe: set SIMGPU_DEBUG_STALL_MARKER\n");
    return 2;
  }
  egpu::workload::GpuSession session(0);  // the primary context, current
  CUcontext ctx = nullptr;
  if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return 2;
  // The forking thread has a per-thread default stream of its own.
  const egpu::workload::SpinKernel spin(session.spin_function(), CU_STREAM_PER_THREAD, 1.0);
  spin.launch(100'000);
  if (cuStreamSynchronize(CU_STREAM_PER_THREAD) != CUDA_SUCCESS) return 2;

  std::thread opener([ctx] {
    (void)cuCtxSetCurrent(ctx);
    CUipcMemHandle handle{};  // no exporter's: refused, once the stall ends
    CUdeviceptr ptr = 0;
    (void)cuIpcOpenMemHandle(&ptr, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    // What the driver answers in a child does not matter; that it answers does.
    (void)cuIpcCloseMemHandle(0x1000);
    try {
      spin.launch(100'000);
    } catch (const std::exception&) {
      // Refused in a child: an answer all the same.
    }
    std::exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  opener.join();
  std::printf("{\"child_exit\":%d}\n", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "fork_probe: %s\n", e.what());
  return 2;
}
