// Launches, streams, events, graphs and copies through the exported API. A
// process alone on its device gets all of it, so device-time results are
// exact for work queued behind a hold (ApiTest::hold: host timing drops out).
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stop_token>
#include <thread>

#include "api_fixture.h"
#include "thread_state.h"

namespace egpu::simgpu::testing {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr float kExact = 1e-5f;  // float rounding of device-time differences

class Events {
 public:
  Events() {
    EXPECT_EQ(cuEventCreate(&start, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    EXPECT_EQ(cuEventCreate(&stop, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  }
  ~Events() {
    cuEventDestroy(start);
    cuEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  CUevent start = nullptr;
  CUevent stop = nullptr;
};

TEST_F(ApiTest, EventsMeasureKernelsInDeviceTime) {
  const Events ev;
  hold();
  ASSERT_EQ(cuEventRecord(ev.start, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(launch(2 * kMs), CUDA_SUCCESS);
  ASSERT_EQ(launch(3 * kMs), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(ev.stop, nullptr), CUDA_SUCCESS);
  release();
  EXPECT_NEAR(elapsed_ms(ev.start, ev.stop), 5.0f, kExact);
}

TEST_F(ApiTest, QueriesReportNotReadyUntilTheWorkIsDone) {
  const Events ev;
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, ev.start, ev.stop), CUDA_ERROR_INVALID_HANDLE);  // unrecorded
  EXPECT_EQ(cuEventQuery(ev.stop), CUDA_SUCCESS);
  hold(stream);  // not done, however late the host asks
  ASSERT_EQ(cuEventRecord(ev.start, stream), CUDA_SUCCESS);
  ASSERT_EQ(launch(200 * kMs, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(ev.stop, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(stream), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuEventQuery(ev.stop), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuEventElapsedTime(&ms, ev.start, ev.stop), CUDA_ERROR_NOT_READY);
  const auto before = std::chrono::steady_clock::now();
  release();  // the 200 ms kernel starts after this
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  EXPECT_GT(waited, 0.1);  // it really waited for the device
  EXPECT_EQ(cuStreamQuery(stream), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(ev.stop), CUDA_SUCCESS);
  EXPECT_GE(elapsed_ms(ev.start, ev.stop), 200.0f);
  EXPECT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(stream), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(ApiTest, LaunchExAndParameterBuffersCarryTheDuration) {
  const Events ev;
  hold();
  ASSERT_EQ(cuEventRecord(ev.start, nullptr), CUDA_SUCCESS);
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  unsigned long long ns = 1 * kMs;
  void* params[] = {&ns};
  ASSERT_EQ(cuLaunchKernelEx(&config, spin_, params, nullptr), CUDA_SUCCESS);
  unsigned long long buffer[2] = {4 * kMs, 0};
  size_t size = sizeof buffer;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  ASSERT_EQ(cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchCooperativeKernel(spin_, 1, 1, 1, 1, 1, 1, 0, nullptr, params), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(ev.stop, nullptr), CUDA_SUCCESS);
  release();
  EXPECT_NEAR(elapsed_ms(ev.start, ev.stop), 6.0f, kExact);  // 1 + 4 + 0 (no params) + 1
}

TEST_F(ApiTest, FullQueueBlocksLaunchesWithoutLosingWork) {
  const Events ev;
  hold();
  ASSERT_EQ(cuEventRecord(ev.start, nullptr), CUDA_SUCCESS);
  // Released once this thread sleeps in a launch, waiting for room in the
  // full queue (nothing else puts it to sleep here), however long a busy
  // host took to fill it; a helper's release, as this thread is blocked.
  const auto launcher = static_cast<pid_t>(::syscall(SYS_gettid));
  std::jthread releaser([&](std::stop_token stop) {
    while (!stop.stop_requested() && !egpu::test::thread_asleep(launcher))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!stop.stop_requested()) release();
  });
  // > 1024 queued; each 0.5 ms, so once released a full queue is 0.5 s of
  // device time ahead of a host that waits for room.
  for (int i = 0; i < 1500; ++i)
    ASSERT_EQ(launch(500'000), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(ev.stop, nullptr), CUDA_SUCCESS);
  EXPECT_NEAR(elapsed_ms(ev.start, ev.stop), 750.0f, 1e-3f);
}

TEST_F(ApiTest, ContextSynchronizeWaitsForEveryStream) {
  CUstream a = nullptr;
  CUstream b = nullptr;
  ASSERT_EQ(cuStreamCreate(&a, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreateWithPriority(&b, 0, -3), CUDA_SUCCESS);
  int priority = 0;
  EXPECT_EQ(cuStreamGetPriority(b, &priority), CUDA_SUCCESS);
  EXPECT_EQ(priority, -3);
  ASSERT_EQ(launch(5 * kMs, a), CUDA_SUCCESS);
  ASSERT_EQ(launch(5 * kMs, b), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(a), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(b), CUDA_SUCCESS);
  CUcontext owner = nullptr;
  EXPECT_EQ(cuStreamGetCtx(a, &owner), CUDA_SUCCESS);
  EXPECT_EQ(owner, ctx_);
  cuStreamDestroy(a);
  cuStreamDestroy(b);
}

// A wait on another context's event holds this context's queue back.
TEST_F(ApiTest, StreamWaitEventOrdersWorkAcrossContexts) {
  CUcontext other = nullptr;
  ASSERT_EQ(cuCtxCreate(&other, nullptr, 0, 0), CUDA_SUCCESS);  // current: other
  CUevent other_done = nullptr;
  ASSERT_EQ(cuEventCreate(&other_done, 0), CUDA_SUCCESS);
  hold();
  ASSERT_EQ(cuEventRecord(other_done, nullptr), CUDA_SUCCESS);
  CUcontext popped = nullptr;
  ASSERT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);  // back to ctx_
  CUevent mine = nullptr;
  ASSERT_EQ(cuEventCreate(&mine, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(nullptr, other_done, 0), CUDA_SUCCESS);
  ASSERT_EQ(launch(1 * kMs), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(mine, nullptr), CUDA_SUCCESS);
  release();
  // Without the wait, time-slicing would finish the 1 ms kernel first.
  EXPECT_NEAR(elapsed_ms(other_done, mine), 1.0f, kExact);
  cuEventDestroy(mine);
  EXPECT_EQ(cuCtxDestroy(other), CUDA_SUCCESS);
}

TEST_F(ApiTest, CopiesAreTimedByBandwidth) {
  const Events ev;
  CUdeviceptr device = 0;
  ASSERT_EQ(cuMemAlloc(&device, 64 * kMiB), CUDA_SUCCESS);
  hold();
  ASSERT_EQ(cuEventRecord(ev.start, nullptr), CUDA_SUCCESS);
  // 25 MB over PCIe at 25 GB/s = 1 ms; 3 MB device-to-device at 1.5 TB/s = 2 us;
  // 4 MB memset at 2 TB/s = 2 us.
  ASSERT_EQ(cuMemcpyHtoDAsync(device, nullptr, 25'000'000, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoDAsync(device, device + 1024, 3'000'000, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32Async(device, 0, 1'000'000, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(ev.stop, nullptr), CUDA_SUCCESS);
  release();
  EXPECT_NEAR(elapsed_ms(ev.start, ev.stop), 1.004f, kExact);
  // Synchronous copies return when done; host memory is left untouched.
  char host[16] = "untouched";
  EXPECT_EQ(cuMemcpyDtoH(host, device, sizeof host), CUDA_SUCCESS);
  EXPECT_STREQ(host, "untouched");
  EXPECT_EQ(cuMemsetD8(device, 1, 4096), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(device), CUDA_SUCCESS);
}

TEST_F(ApiTest, CapturedGraphRunsAsOneOpOfItsKernelsDuration) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  EXPECT_EQ(cuStreamIsCapturing(stream, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_EQ(launch(1 * kMs, stream), CUDA_SUCCESS);
  ASSERT_EQ(launch(2 * kMs, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(stream), CUDA_SUCCESS);  // nothing ran during capture
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);

  const Events ev;
  hold(stream);
  ASSERT_EQ(cuEventRecord(ev.start, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(ev.stop, stream), CUDA_SUCCESS);
  release();
  EXPECT_NEAR(elapsed_ms(ev.start, ev.stop), 6.0f, kExact);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  cuStreamDestroy(stream);
}

TEST_F(ApiTest, GraphOfKernelNodesSumsTheirDurations) {
  CUgraph graph = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  unsigned long long ns[2] = {3 * kMs, 4 * kMs};
  void* first[] = {&ns[0]};
  void* second[] = {&ns[1]};
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = spin_;
  params.gridDimX = params.gridDimY = params.gridDimZ = 1;
  params.blockDimX = params.blockDimY = params.blockDimZ = 1;
  params.kernelParams = first;
  CUgraphNode a = nullptr;
  CUgraphNode b = nullptr;
  ASSERT_EQ(cuGraphAddKernelNode(&a, graph, nullptr, 0, &params), CUDA_SUCCESS);
  params.kernelParams = second;
  ASSERT_EQ(cuGraphAddKernelNode(&b, graph, &a, 1, &params), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  const Events ev;
  hold();
  ASSERT_EQ(cuEventRecord(ev.start, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(ev.stop, nullptr), CUDA_SUCCESS);
  release();
  EXPECT_NEAR(elapsed_ms(ev.start, ev.stop), 7.0f, kExact);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
}

TEST_F(ApiTest, ProcAddressFindsVersionsAndVariants) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  ASSERT_EQ(cuGetProcAddress("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuLaunchKernel));
  ASSERT_EQ(cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuMemAlloc));  // cuMemAlloc_v2
  EXPECT_EQ(cuGetProcAddress("cuMemAlloc", &fn, 1000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(cuGetProcAddress("cuTexRefCreate", &fn, 13000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(cuGetProcAddress(nullptr, &fn, 13000, 0, &status), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace egpu::simgpu::testing
