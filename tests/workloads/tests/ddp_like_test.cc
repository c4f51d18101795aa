// ddp-like on the simulated driver: two ranks, each a process on its own
// device, run a fixed number of iterations whose all-reduces meet, and each
// prints its summary.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.h"

namespace {

using namespace std::chrono_literals;
using egpu::test_child::ChildOptions;
using egpu::test_child::ChildProcess;
using egpu::test_child::ExitStatus;

// A simgpu segment of its own, removed at the end.
class ScopedShm {
 public:
  ScopedShm() : name_("/simgpu-test-ddp-" + std::to_string(::getpid())) {
    ::shm_unlink(name_.c_str());
  }
  ~ScopedShm() { ::shm_unlink(name_.c_str()); }
  ScopedShm(const ScopedShm&) = delete;
  ScopedShm& operator=(const ScopedShm&) = delete;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

std::unique_ptr<ChildProcess> start_rank(const std::string& shm, int device,
                                         const std::vector<std::string>& args) {
  ChildOptions options;
  options.argv = {std::string(EGPU_TEST_WORKLOAD_DIR) + "/ddp-like", "--device",
                  std::to_string(device), "--label", "rank" + std::to_string(device)};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = {{"LD_LIBRARY_PATH", SIMGPU_TEST_LIB_DIR},
                 {"SIMGPU_SHM", shm},
                 {"SIMGPU_DEVICES", "2"},
                 {"EGPU_DDP_COMM", "42"}};
  options.unset_env = {"CUDA_VISIBLE_DEVICES", "SIMGPU_LABEL", "SIMGPU_FABRIC"};
  return std::make_unique<ChildProcess>(options);
}

TEST(DdpLike, TwoRanksOnTwoDevicesRunTheirIterations) {
  const ScopedShm shm;
  const std::vector<std::string> args = {"--duration-s",      "0",   "--iters-per-us", "1",
                                         "--iterations",      "20",  "--ranks",        "2",
                                         "--compute-kernels", "4",   "--compute-us",   "500",
                                         "--allreduce-us",    "300", "--cpu-us",       "100"};
  auto rank0 = start_rank(shm.name(), 0, args);
  auto rank1 = start_rank(shm.name(), 1, args);
  for (auto* rank : {rank0.get(), rank1.get()}) {
    ASSERT_EQ(rank->wait_for(60s), ExitStatus::exited_with(0));
    const auto summary = nlohmann::json::parse(rank->stdout_text(), nullptr, false);
    ASSERT_TRUE(summary.is_object()) << rank->stdout_text();
    EXPECT_EQ(summary.value("workload", ""), "ddp-like");
    EXPECT_EQ(summary.value("stopped_by", ""), "count");
    EXPECT_EQ(summary.value("iterations", 0), 20);
    EXPECT_EQ(summary.value("ranks", 0), 2);
    EXPECT_EQ(summary.value("comm", 0), 42);  // from EGPU_DDP_COMM
    EXPECT_EQ(summary.value("kernels", 0), 20 * 5);
    EXPECT_NEAR(summary.value("device_time_s", 0.0), 20 * (4 * 500 + 300) * 1e-6, 1e-9);
    EXPECT_GT(summary.value("throughput", 0.0), 0.0);
    EXPECT_EQ(summary.value("throughput_unit", ""), "iterations/s");
    // An iteration waits for its own work at least.
    EXPECT_GE(summary["iteration_ms"].value("p50", 0.0), 2.3);
  }
}

}  // namespace
