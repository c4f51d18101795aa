// Several processes sharing simulated GPUs through the real exported API
// (helper programs linked against the toolkit's driver stub, run with
// LD_LIBRARY_PATH pointing at simgpu). Shares are measured in device time.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "child_process.h"
#include "simgpu_stats.h"
#include "test_segment_name.h"

namespace egpu::simgpu {
namespace {

using namespace std::chrono_literals;
using test_child::ChildOptions;
using test_child::ChildProcess;
using test_child::ExitStatus;
using test_child::OutputMode;
using testing::ScopedSegmentName;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kMemoryMb = 4096;

class MultiProcess : public ::testing::Test {
 protected:
  std::unique_ptr<ChildProcess> spawn(const std::string& program,
                                      const std::vector<std::string>& args,
                                      std::map<std::string, std::string> extra_env = {}) {
    ChildOptions options;
    options.argv = {std::string(SIMGPU_TEST_PROGRAM_DIR) + "/" + program};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = {
        {"SIMGPU_SHM", name_.name()},
        {"LD_LIBRARY_PATH", SIMGPU_TEST_LIB_DIR},
        {"SIMGPU_MEMORY_MB", std::to_string(kMemoryMb)},
        {"SIMGPU_DEVICES", "4"},
    };
    // The devices a test sees are its own choice, not the caller's.
    options.unset_env = {"CUDA_VISIBLE_DEVICES"};
    for (auto& [k, v] : extra_env)
      options.env[k] = v;
    options.stdin_pipe = true;  // `hold` runs until its stdin closes
    options.stdout_mode = OutputMode::kPipe;
    return std::make_unique<ChildProcess>(options);
  }

  std::unique_ptr<StatsReader> stats() {
    std::string error;
    auto reader = StatsReader::open(name_.name(), &error);
    EXPECT_TRUE(reader) << error;
    return reader;
  }

  // Parses "free=<n> total=<n>".
  static std::pair<uint64_t, uint64_t> parse_info(const std::optional<std::string>& line) {
    unsigned long long free_bytes = 0;
    unsigned long long total = 0;
    if (!line || std::sscanf(line->c_str(), "free=%llu total=%llu", &free_bytes, &total) != 2) {
      ADD_FAILURE() << "bad info line: " << line.value_or("<none>");
    }
    return {free_bytes, total};
  }

  std::pair<uint64_t, uint64_t> memory_info() {
    auto info = spawn("sim_memory", {"info"});
    const auto result = parse_info(info->read_line(10s));
    EXPECT_EQ(info->wait_for(10s), ExitStatus::exited_with(0));
    return result;
  }

  // Runs one busy process per entry of `modes` on device 0 and returns each
  // one's share of device time over a window while all of them run.
  std::vector<double> measure_shares(const std::vector<std::string>& modes, double* device_busy) {
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<ChildProcess>> busy;
    for (size_t i = 0; i < modes.size(); ++i) {
      busy.push_back(spawn("sim_busy",
                           {"--kernel-us", "1000", "--seconds", "20", "--mode", modes[i]},
                           {{"SIMGPU_LABEL", "busy-" + std::to_string(i)}}));
    }
    for (auto& child : busy)
      EXPECT_EQ(child->read_line(10s), "ready");
    auto reader = stats();
    std::this_thread::sleep_for(300ms);
    const StatsSample first = reader->sample();
    std::this_thread::sleep_for(1500ms);
    const StatsSample second = reader->sample();
    const double window = static_cast<double>(second.device_clock_ns - first.device_clock_ns);
    *device_busy =
        static_cast<double>(second.devices[0].busy_ns - first.devices[0].busy_ns) / window;
    std::vector<double> shares;
    for (size_t i = 0; i < modes.size(); ++i) {
      const std::string label = "busy-" + std::to_string(i);
      shares.push_back(
          static_cast<double>(second.busy_ns_of_label(label) - first.busy_ns_of_label(label)) /
          window);
      std::printf("[ share    ] %s (%s): %.4f\n", label.c_str(), modes[i].c_str(), shares.back());
    }
    std::printf("[ share    ] device busy: %.4f\n", *device_busy);
    const double ran_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    for (auto& child : busy) {
      child->kill(SIGKILL);
    }
    for (size_t i = 0; i < busy.size(); ++i) {
      busy[i]->wait_for(10s);
      // Waiting for the device sleeps; it must not burn a core.
      const double cpu = busy[i]->cpu_seconds() / ran_s;
      std::printf("[ cpu      ] busy-%zu: %.1f%% of a core\n", i, 100 * cpu);
      EXPECT_LT(cpu, 0.5);
    }
    return shares;
  }

  ScopedSegmentName name_{"mp"};
};

TEST_F(MultiProcess, TwoBusyProcessesShareTheDeviceEvenly) {
  double device_busy = 0;
  const auto shares = measure_shares({"greedy", "greedy"}, &device_busy);
  for (double s : shares)
    EXPECT_NEAR(s, 0.5, 0.02);
  EXPECT_GT(device_busy, 0.99);
}

TEST_F(MultiProcess, ThreeBusyProcessesShareTheDeviceEvenly) {
  double device_busy = 0;
  const auto shares = measure_shares({"greedy", "greedy", "greedy"}, &device_busy);
  for (double s : shares)
    EXPECT_NEAR(s, 1.0 / 3, 0.02);
  EXPECT_GT(device_busy, 0.99);
}

// Time-slicing, not launch order: a process that synchronizes after every
// kernel still gets the device between the greedy one's slices.
TEST_F(MultiProcess, SynchronizingProcessIsNotStarvedByAGreedyOne) {
  double device_busy = 0;
  const auto shares = measure_shares({"greedy", "sync"}, &device_busy);
  EXPECT_GT(shares[1], 0.20);
  EXPECT_LT(shares[1], 0.50);
  EXPECT_GT(device_busy, 0.95);
}

// Each device runs its own process's work, both at once. Judged only over a
// window in which both queues held more work than the window lasted, so the
// devices cannot have idled for lack of CPU (the launching processes or this
// test may be descheduled on a busy machine): a starved window is retaken.
TEST_F(MultiProcess, ProcessesOnDifferentDevicesDoNotShare) {
  constexpr uint64_t kKernelNs = 1'000'000;
  auto a = spawn("sim_busy", {"--kernel-us", "1000", "--seconds", "60", "--device", "0"},
                 {{"SIMGPU_LABEL", "dev0"}});
  auto b = spawn("sim_busy", {"--kernel-us", "1000", "--seconds", "60", "--device", "1"},
                 {{"SIMGPU_LABEL", "dev1"}});
  ASSERT_EQ(a->read_line(10s), "ready");
  ASSERT_EQ(b->read_line(10s), "ready");
  auto reader = stats();
  auto queued_ns = [&](const StatsSample& s, int device) {
    uint64_t ops = 0;
    for (const ContextSample& c : s.contexts)
      if (c.alive && static_cast<int>(c.device) == device) ops += c.queued_ops;
    return ops * kKernelNs;
  };
  bool judged = false;
  for (int attempt = 0; attempt < 200 && !judged; ++attempt) {
    const StatsSample first = reader->sample();
    const uint64_t covered = std::min(queued_ns(first, 0), queued_ns(first, 1));
    if (covered < 300 * kKernelNs) {  // queues still filling
      std::this_thread::sleep_for(50ms);
      continue;
    }
    std::this_thread::sleep_for(100ms);
    const StatsSample second = reader->sample();
    const uint64_t window = second.device_clock_ns - first.device_clock_ns;
    if (window >= covered) continue;  // this test slept longer than the queued work
    judged = true;
    for (int d = 0; d < 2; ++d) {
      const std::string own = "dev" + std::to_string(d);
      const std::string other = "dev" + std::to_string(1 - d);
      const double share =
          static_cast<double>(second.busy_ns_of_label(own, d) - first.busy_ns_of_label(own, d)) /
          static_cast<double>(window);
      EXPECT_NEAR(share, 1.0, 0.01) << own;
      EXPECT_EQ(second.busy_ns_of_label(other, d), 0u) << other << " ran on device " << d;
    }
  }
  EXPECT_TRUE(judged) << "the queues never covered a window";
  a->kill(SIGKILL);
  b->kill(SIGKILL);
}

TEST_F(MultiProcess, MemoryInfoReflectsOtherProcessesAllocations) {
  auto holder = spawn("sim_memory", {"hold", "1000"});
  ASSERT_EQ(holder->read_line(10s), "allocated");
  const auto [free_bytes, total] = memory_info();
  EXPECT_EQ(total, kMemoryMb * kMiB);
  EXPECT_EQ(free_bytes, (kMemoryMb - 1000) * kMiB);
  const StatsSample sample = stats()->sample();
  EXPECT_EQ(sample.devices[0].memory_used_bytes, 1000 * kMiB);

  auto too_much = spawn("sim_memory", {"alloc", "3500"});
  EXPECT_EQ(too_much->read_line(10s), "result=CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(too_much->wait_for(10s), ExitStatus::exited_with(0));

  holder->close_stdin();  // a normal exit frees its memory
  EXPECT_EQ(holder->wait_for(10s), ExitStatus::exited_with(0));
  EXPECT_EQ(memory_info().first, kMemoryMb * kMiB);
}

TEST_F(MultiProcess, KilledProcessesMemoryIsFreed) {
  auto holder = spawn("sim_memory", {"hold", "2000"});
  ASSERT_EQ(holder->read_line(10s), "allocated");
  holder->kill(SIGKILL);
  ASSERT_TRUE(holder->wait_exited_unreaped(10s));  // a zombie counts as dead
  EXPECT_EQ(memory_info().first, kMemoryMb * kMiB);
}

TEST_F(MultiProcess, ProcessKilledInsideTheDriverDoesNotStallOthers) {
  const std::string marker = "/tmp/egpu-simgpu-stall-" + std::to_string(::getpid());
  std::remove(marker.c_str());
  auto victim = spawn("sim_memory", {"stall", "1500"},
                      {{"SIMGPU_DEBUG_STALL_IN_DRIVER_MS", "60000"},
                       {"SIMGPU_DEBUG_STALL_MARKER", marker},
                       {"SIMGPU_LABEL", "victim"}});
  ASSERT_EQ(victim->read_line(10s), "launching");
  // Until it is asleep holding the device lock.
  for (int i = 0; i < 6000 && ::access(marker.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(::access(marker.c_str(), F_OK), 0) << "the victim never stalled in the driver";
  std::remove(marker.c_str());
  auto probe = spawn("sim_memory", {"probe"});
  // The probe needs the device lock, so it waits for the victim.
  EXPECT_FALSE(probe->read_line(500ms).has_value());
  victim->kill(SIGKILL);
  ASSERT_TRUE(victim->wait_exited_unreaped(10s));
  const auto killed_at = std::chrono::steady_clock::now();
  const auto [free_bytes, total] = parse_info(probe->read_line(20s));
  const double recovery_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  std::printf("[ recovery ] probe finished %.3f s after the kill\n", recovery_s);
  EXPECT_EQ(free_bytes, total);  // the victim's 1500 MiB are gone
  EXPECT_EQ(probe->wait_for(10s), ExitStatus::exited_with(0));
  const StatsSample sample = stats()->sample();
  bool found = false;
  for (const ContextSample& c : sample.contexts) {
    if (c.label == "victim") {
      found = true;
      EXPECT_FALSE(c.alive);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(victim->wait_for(10s), ExitStatus::killed_by(SIGKILL));
}

TEST_F(MultiProcess, ProcAddressReturnsWorkingFunctionsAndVariants) {
  auto program = spawn("sim_proc_address", {});
  const std::string output = program->read_rest(20s);
  EXPECT_EQ(program->wait_for(20s), ExitStatus::exited_with(0)) << output;
  EXPECT_NE(output.find("done failures=0"), std::string::npos) << output;
}

TEST_F(MultiProcess, ProcessesStartingTogetherShareOneSegment) {
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int i = 0; i < 6; ++i) {
    children.push_back(
        spawn("sim_memory", {"devices"}, {{"SIMGPU_DEVICES", std::to_string(i + 1)}}));
  }
  std::string first_count;
  for (auto& child : children) {
    const auto line = child->read_line(10s);
    ASSERT_TRUE(line);
    if (first_count.empty()) first_count = *line;
    EXPECT_EQ(*line, first_count);  // the creator's device count, for everyone
    EXPECT_EQ(child->wait_for(10s), ExitStatus::exited_with(0));
  }
}

TEST_F(MultiProcess, CudaVisibleDevicesSelectsAndOrdersDevices) {
  const auto devices = [&](const std::string& visible) {
    auto child = spawn("sim_memory", {"devices"}, {{"CUDA_VISIBLE_DEVICES", visible}});
    std::string out = child->read_rest(10s);
    child->wait_for(10s);
    return out;
  };
  EXPECT_EQ(devices("2,0"), "count=2\ndevice 0 0000:52:00.0\ndevice 1 0000:1b:00.0\n");
  EXPECT_EQ(devices("GPU-5eed0003"), "count=1\ndevice 0 0000:61:00.0\n");
  EXPECT_EQ(devices("1,9,0"), "count=1\ndevice 0 0000:43:00.0\n");
}

}  // namespace
}  // namespace egpu::simgpu
