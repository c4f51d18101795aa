// The shim preloaded into real driver-API programs on the simulated GPU, with
// no agent: pass-through without a job, the fail modes without an agent, and
// every way a program can reach cuLaunchKernel landing in the shim's wrapper.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "child_process.h"
#include "core/protocol/unix_address.h"

namespace egpu::shim::testing {
namespace {

constexpr int kLaunches = 10;

// What a probe run left: its exit code, whether it ran out of time, its output.
struct ProgramRun {
  int exit_code = -1;  // -1: did not exit normally (signal or timeout)
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs `argv` with `env` ("NAME=value") as its whole environment, so nothing
// of the test's own (an enclosing job's EGPU_*, say) reaches the shim; a run
// past `timeout_ms` is killed.
ProgramRun run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       int timeout_ms = 30'000) {
  test_child::ChildOptions options;
  options.argv = argv;
  options.inherit_env = false;
  for (const std::string& entry : env) {
    const size_t equals = entry.find('=');
    options.env[entry.substr(0, equals)] =
        equals == std::string::npos ? "" : entry.substr(equals + 1);
  }
  options.stdout_mode = test_child::OutputMode::kCapture;
  options.stderr_mode = test_child::OutputMode::kCapture;
  ProgramRun run;
  try {
    test_child::ChildProcess child(options);
    auto status = child.wait_for(std::chrono::milliseconds(timeout_ms));
    if (!status) {
      run.timed_out = true;
      child.kill(SIGKILL);
      status = child.wait();
    }
    if (status->exited) run.exit_code = status->code;
    run.out = child.stdout_text();
    run.err = child.stderr_text();
  } catch (const std::system_error& error) {
    run.err = error.what();
  }
  return run;
}

// Occurrences of `needle` in `text`.
int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

class ShimProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    shm_name_ =
        "/egpu-shim-test-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
  }
  void TearDown() override { shm_unlink(shm_name_.c_str()); }

  std::vector<std::string> base_env(bool preload = true) const {
    std::vector<std::string> env = {std::string("LD_LIBRARY_PATH=") + EGPU_TEST_SIMGPU_LIB_DIR,
                                    "SIMGPU_SHM=" + shm_name_};
    if (preload) env.push_back(std::string("LD_PRELOAD=") + EGPU_TEST_SHIM_PATH);
    return env;
  }

  static std::string probe(bool dlopen_only) {
    return std::string(EGPU_TEST_PROGRAM_DIR) + (dlopen_only ? "/shim_probe_dl" : "/shim_probe");
  }

  // Runs the probe and returns its JSON summary (the last line of stdout).
  nlohmann::json run_probe(const std::string& path, std::vector<std::string> env,
                           bool dlopen_only = false, ProgramRun* run_out = nullptr,
                           std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{probe(dlopen_only), "--path", path, "--launches",
                                  std::to_string(kLaunches)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProgramRun run = run_program(argv, env);
    if (run_out != nullptr) *run_out = run;
    EXPECT_EQ(run.exit_code, 0) << "stderr: " << run.err;
    const size_t start = run.out.rfind('{');
    if (start == std::string::npos) return nlohmann::json::object();
    return nlohmann::json::parse(run.out.substr(start), nullptr, false);
  }

  std::string shm_name_;
};

TEST_F(ShimProcess, WithoutJobIdPassesThroughAndSaysSoOnce) {
  ProgramRun run;
  const auto summary = run_probe("direct", base_env(), false, &run);
  EXPECT_EQ(summary.value("launches", 0), kLaunches);
  EXPECT_EQ(count_of(run.err, "not in an egpu job, passing through"), 1) << run.err;
  EXPECT_EQ(count_of(run.err, "egpu-shim["), 1) << run.err;
}

// The shim's log goes to stderr; a stderr whose reader is gone (a closed
// pipe) must not kill with SIGPIPE a program that never writes there itself.
TEST_F(ShimProcess, ALogIntoABrokenPipeDoesNotKillTheProgram) {
  ProgramRun run;
  const auto summary = run_probe("direct", base_env(), false, &run, {"--broken-stderr", "1"});
  EXPECT_EQ(summary.value("launches", 0), kLaunches);
}

TEST_F(ShimProcess, WithoutAnAgentFailModeOpenRunsAndSaysWhy) {
  auto env = base_env();
  env.insert(env.end(), {"EGPU_JOB_ID=4242", "EGPU_STEP_ID=0", "EGPU_GPU_INDICES=0",
                         "EGPU_SOCKET=/nonexistent/egpu/agent.sock"});
  ProgramRun run;
  const auto summary = run_probe("direct", env, false, &run);
  EXPECT_EQ(summary.value("launches", 0), kLaunches);
  EXPECT_EQ(count_of(run.err, "cannot attach to the egpu agent"), 1) << run.err;
  EXPECT_EQ(count_of(run.err, "fail mode open"), 1) << run.err;
  EXPECT_NE(run.err.find("/nonexistent/egpu/agent.sock"), std::string::npos) << run.err;
}

// Issue 10, finding 8: closed means closed. A process that cannot attach
// ran unenforced under FailMode=closed too; now it does not reach the GPU.
TEST_F(ShimProcess, WithoutAnAgentFailModeClosedRefusesLaunchesAndAllocations) {
  auto env = base_env();
  env.insert(env.end(), {"EGPU_JOB_ID=4242", "EGPU_STEP_ID=4294967291", "EGPU_GPU_INDICES=0",
                         "EGPU_SOCKET=/nonexistent/egpu/agent.sock", "EGPU_FAIL_MODE=closed"});
  ProgramRun launches = run_program({probe(false), "--path", "direct", "--launches", "3"}, env);
  EXPECT_NE(launches.exit_code, 0) << launches.out;
  EXPECT_NE(launches.err.find("cuLaunchKernel failed: 800"), std::string::npos) << launches.err;
  EXPECT_EQ(count_of(launches.err, "fail mode closed: launches and allocations are refused"), 1)
      << launches.err;
  ProgramRun alloc =
      run_program({probe(false), "--path", "direct", "--launches", "0", "--alloc-mb", "64"}, env);
  EXPECT_EQ(alloc.exit_code, 0) << alloc.err;
  EXPECT_NE(alloc.out.find("\"alloc_result\":2"), std::string::npos) << alloc.out;
}

// An agent whose socket accepts and never answers (stopped, or wedged): the
// attach for the first GPU waits out its timeout, and the others are not
// tried now, each for as long, but with it later. Launches run under the
// fail mode meanwhile.
TEST_F(ShimProcess, AStalledAgentCostsCuInitOneTimeoutNotOnePerGpu) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("egpu-stalled-agent-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/agent.sock";
  const int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  const auto addr = protocol::UnixAddress::of(path);
  ASSERT_TRUE(addr.ok()) << addr.error();
  ASSERT_EQ(bind(listener, addr->get(), addr->size()), 0);
  ASSERT_EQ(listen(listener, 16), 0);  // the kernel accepts; nobody reads
  auto env = base_env();
  env.insert(env.end(), {"EGPU_JOB_ID=4242", "EGPU_STEP_ID=0", "EGPU_GPU_INDICES=0,1,2,3",
                         "EGPU_SOCKET=" + path});
  ProgramRun run;
  const auto summary = run_probe("direct", env, false, &run);
  close(listener);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(summary.value("launches", 0), kLaunches);
  EXPECT_EQ(count_of(run.err, "cannot attach to the egpu agent"), 1) << run.err;
  EXPECT_EQ(count_of(run.err, "the egpu agent did not answer for GPU 0"), 3) << run.err;
  EXPECT_EQ(count_of(run.err, "fail mode open"), 4) << run.err;
}

TEST_F(ShimProcess, UnusableEnvironmentPassesThrough) {
  auto env = base_env();
  env.insert(env.end(), {"EGPU_JOB_ID=not-a-number", "EGPU_STEP_ID=0", "EGPU_GPU_INDICES=0"});
  ProgramRun run;
  const auto summary = run_probe("direct", env, false, &run);
  EXPECT_EQ(summary.value("launches", 0), kLaunches);
  EXPECT_EQ(count_of(run.err, "EGPU_JOB_ID='not-a-number' is not a job id: passing through"), 1)
      << run.err;
}

TEST_F(ShimProcess, AllocationsAndMemoryQueriesPassThroughUnmanaged) {
  ProgramRun run = run_program({probe(false), "--path", "direct", "--alloc-mb", "64"}, base_env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\"alloc_result\":0"), std::string::npos) << run.out;
}

// Each way of reaching cuLaunchKernel, proven by the shim's own call counters
// (EGPU_DEBUG=1 turns them on).
struct PathCase {
  const char* path;
  bool dlopen_only;
  const char* wrapper;  // the wrapper the launches must reach
};

class Interposition : public ShimProcess, public ::testing::WithParamInterface<PathCase> {};

TEST_P(Interposition, LaunchesReachTheShimsWrapper) {
  const PathCase& c = GetParam();
  auto env = base_env();
  env.push_back("EGPU_DEBUG=1");
  const auto summary = run_probe(c.path, env, c.dlopen_only);
  EXPECT_EQ(summary.value(c.wrapper, -1LL), kLaunches) << summary.dump();
  const std::string other =
      std::string(c.wrapper) == "cuLaunchKernel" ? "cuLaunchKernel_ptsz" : "cuLaunchKernel";
  EXPECT_EQ(summary.value(other, -1LL), 0) << summary.dump();
  if (std::string(c.path).rfind("procaddr", 0) == 0) {
    EXPECT_GE(summary.value("cuGetProcAddress_v2", -1LL) + summary.value("cuGetProcAddress", 0LL),
              1)
        << summary.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Interposition,
                         ::testing::Values(PathCase{"direct", false, "cuLaunchKernel"},
                                           PathCase{"procaddr0", false, "cuLaunchKernel"},
                                           PathCase{"procaddr2", false, "cuLaunchKernel_ptsz"},
                                           PathCase{"procaddr-v1", false, "cuLaunchKernel"},
                                           PathCase{"procaddr-self", true, "cuLaunchKernel"},
                                           PathCase{"dlsym-procaddr", true, "cuLaunchKernel"},
                                           PathCase{"dlsym-launch", true, "cuLaunchKernel"},
                                           PathCase{"procaddr2", true, "cuLaunchKernel_ptsz"},
                                           PathCase{"rtld-default", false, "cuLaunchKernel"}),
                         [](const ::testing::TestParamInfo<PathCase>& param_info) {
                           std::string name = std::string(param_info.param.path) +
                                              (param_info.param.dlopen_only ? "_dl" : "");
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// Stream capture reached the runtime's way (cuGetProcAddress) goes through
// the shim's wrappers, and a graph captured and replayed under it works:
// the captured launches reach the launch wrapper too (and pass through).
TEST_F(ShimProcess, CaptureThroughProcAddressReachesTheShimAndTheGraphReplays) {
  auto env = base_env();
  env.push_back("EGPU_DEBUG=1");
  const auto summary = run_probe("dlsym-launch", env, true, nullptr, {"--capture", "1"});
  EXPECT_EQ(summary.value("cuStreamBeginCapture_v2", -1LL), 1) << summary.dump();
  EXPECT_EQ(summary.value("cuStreamEndCapture", -1LL), 1) << summary.dump();
  EXPECT_EQ(summary.value("cuGraphLaunch", -1LL), 2) << summary.dump();
  EXPECT_EQ(summary.value("cuLaunchKernel", -1LL), kLaunches) << summary.dump();
}

// Memsets reached the runtime's way (cuGetProcAddress, with either default
// stream) go through the shim's wrappers, which pace and charge them.
TEST_F(ShimProcess, MemsetsThroughProcAddressReachTheShim) {
  auto env = base_env();
  env.push_back("EGPU_DEBUG=1");
  const auto summary = run_probe("dlsym-launch", env, true, nullptr, {"--memset", "1"});
  EXPECT_EQ(summary.value("cuMemsetD32Async", -1LL), 1) << summary.dump();
  EXPECT_EQ(summary.value("cuMemsetD8_v2_ptds", -1LL), 1) << summary.dump();
}

// The pre-CUDA-4 launches, reached either way, go through the shim's
// wrappers: a job cannot launch around the gate with them.
TEST_F(ShimProcess, LegacyLaunchesReachTheShim) {
  auto env = base_env();
  env.push_back("EGPU_DEBUG=1");
  const auto summary = run_probe("dlsym-launch", env, true, nullptr, {"--legacy", "1"});
  EXPECT_EQ(summary.value("cuLaunch", -1LL), 1) << summary.dump();
  EXPECT_EQ(summary.value("cuLaunchGrid", -1LL), 1) << summary.dump();
  EXPECT_EQ(summary.value("cuLaunchGridAsync", -1LL), 1) << summary.dump();
}

TEST_F(ShimProcess, WithoutTheShimNothingIsCounted) {
  // The control: the same program without LD_PRELOAD has no shim to count.
  const auto summary = run_probe("dlsym-launch", base_env(/*preload=*/false), true);
  EXPECT_EQ(summary.value("cuLaunchKernel", 0LL), -1) << summary.dump();
}

TEST_F(ShimProcess, ForkedChildOfAManagedProcessRunsUnharmed) {
  auto env = base_env();
  env.insert(env.end(), {"EGPU_JOB_ID=4242", "EGPU_STEP_ID=0", "EGPU_GPU_INDICES=0",
                         "EGPU_SOCKET=/nonexistent/egpu/agent.sock"});
  ProgramRun run = run_program({probe(false), "--path", "direct", "--fork", "1"}, env, 20'000);
  EXPECT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("{\"child_exit\":0}"), std::string::npos) << run.out << run.err;
}

// A fork while another thread is inside the shim (its IPC open stalled in
// the driver, the shim's table of open IPC pointers locked around it): the
// child's own IPC close, launch and exit must not wait on what that thread
// held. The child hung in the close before.
TEST_F(ShimProcess, AChildForkedWhileAThreadIsInTheShimRunsUnharmed) {
  char dir[] = "/tmp/egpu-fork-probe-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string marker = std::string(dir) + "/stalled";
  auto env = base_env();
  env.insert(env.end(),
             {"EGPU_JOB_ID=4242", "EGPU_STEP_ID=0", "EGPU_GPU_INDICES=0",
              "EGPU_SOCKET=/nonexistent/egpu/agent.sock", "SIMGPU_DEBUG_STALL_AT=ipc-open",
              "SIMGPU_DEBUG_STALL_IN_DRIVER_MS=3000", "SIMGPU_DEBUG_STALL_MARKER=" + marker});
  ProgramRun run =
      run_program({std::string(EGPU_TEST_PROGRAM_DIR) + "/shim_fork_probe"}, env, 60'000);
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("{\"child_exit\":0}"), std::string::npos)
      << "-14: the child hung until its alarm\n"
      << run.out << run.err;
}

TEST_F(ShimProcess, RtldNextStaysRelativeToTheCaller) {
  auto env = base_env();
  ProgramRun run = run_program({std::string(EGPU_TEST_PROGRAM_DIR) + "/shim_next_probe"}, env);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "102\n");
}

// RTLD_DEFAULT searches the caller's scope: a library opened RTLD_LOCAL
// finds its own dependencies' functions through it, with the shim as
// without (the shim once looked them up from its own scope, and got NULL).
TEST_F(ShimProcess, RtldDefaultSearchesTheCallersScope) {
  const std::vector<std::string> argv{std::string(EGPU_TEST_PROGRAM_DIR) + "/shim_default_probe",
                                      EGPU_TEST_DEFAULT_PROBE_LIB};
  ProgramRun without = run_program(argv, base_env(/*preload=*/false));
  EXPECT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(without.out, "7 absent\n");
  ProgramRun with = run_program(argv, base_env());
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out, "7 absent\n") << "7: found through the caller's scope; absent: cuInit "
                                       "without the driver loaded";
}

}  // namespace
}  // namespace egpu::shim::testing
