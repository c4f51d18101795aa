// Collectives through the real exported API: member processes on different
// simulated devices (of one segment, or of several sharing a fabric) launch
// collective kernels of one communicator. A member's part holds its device,
// spinning, until every member has launched; other communicators are not
// held up by it. Waiting is judged on device time and on what cannot happen
// before a peer launches, never on wall-clock guesses.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
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

constexpr uint64_t kMs = 1'000'000;

class CollectivesAcrossProcesses : public ::testing::Test {
 protected:
  // One member (tests/programs/sim_collective.cc) on segment `shm`.
  std::unique_ptr<ChildProcess> member(const std::string& shm, const std::string& label,
                                       const std::vector<std::string>& args,
                                       const std::string& fabric = "") {
    ChildOptions options;
    options.argv = {std::string(SIMGPU_TEST_PROGRAM_DIR) + "/sim_collective"};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = {{"SIMGPU_SHM", shm},
                   {"LD_LIBRARY_PATH", SIMGPU_TEST_LIB_DIR},
                   {"SIMGPU_MEMORY_MB", "1024"},
                   {"SIMGPU_DEVICES", "4"},
                   {"SIMGPU_LABEL", label}};
    if (!fabric.empty()) options.env["SIMGPU_FABRIC"] = fabric;
    options.unset_env = {"CUDA_VISIBLE_DEVICES", "SIMGPU_FABRIC"};
    options.stdin_pipe = true;  // it stays alive until its stdin closes
    options.stdout_mode = OutputMode::kPipe;
    return std::make_unique<ChildProcess>(options);
  }

  // Reads "done <device-us>"; nullopt if it did not come within `timeout`.
  static std::optional<long long> done_us(ChildProcess& child, std::chrono::milliseconds timeout) {
    const auto line = child.read_line(timeout);
    long long us = -1;
    if (!line || std::sscanf(line->c_str(), "done %lld", &us) != 1) return std::nullopt;
    return us;
  }

  static void finish(ChildProcess& child) {
    child.close_stdin();
    EXPECT_EQ(child.wait_for(10s), ExitStatus::exited_with(0));
  }

  std::unique_ptr<StatsReader> stats(const std::string& shm) {
    std::string error;
    auto reader = StatsReader::open(shm, &error);
    EXPECT_TRUE(reader) << error;
    return reader;
  }

  ScopedSegmentName name_{"coll"};
};

TEST_F(CollectivesAcrossProcesses, FirstMemberSpinsUntilTheLastLaunches) {
  // Three all-reduces of 1 ms each: the k-th of one member meets the other's k-th.
  auto rank0 =
      member(name_.name(), "rank0",
             {"--device", "0", "--comm", "11", "--size", "2", "--count", "3", "--api", "module"});
  ASSERT_EQ(rank0->read_line(10s), "launched");
  auto reader = stats(name_.name());
  ASSERT_TRUE(reader);

  // Its part holds device 0, spinning: all of a window is busy device time.
  const StatsSample first = reader->sample();
  std::this_thread::sleep_for(200ms);
  const StatsSample second = reader->sample();
  const double window = static_cast<double>(second.device_clock_ns - first.device_clock_ns);
  const double busy =
      static_cast<double>(second.busy_ns_of_label("rank0", 0) - first.busy_ns_of_label("rank0", 0));
  EXPECT_NEAR(busy / window, 1.0, 0.01);
  EXPECT_FALSE(done_us(*rank0, 0ms)) << "completed without its peer";

  // Another communicator on two other devices meets and completes meanwhile.
  auto other0 = member(name_.name(), "other0",
                       {"--device", "2", "--comm", "12", "--size", "2", "--api", "module"});
  auto other1 = member(name_.name(), "other1",
                       {"--device", "3", "--comm", "12", "--size", "2", "--api", "extra"});
  EXPECT_EQ(other0->read_line(10s), "launched");
  EXPECT_EQ(other1->read_line(10s), "launched");
  const auto other0_us = done_us(*other0, 20s);
  const auto other1_us = done_us(*other1, 20s);
  ASSERT_TRUE(other0_us && other1_us);
  EXPECT_GE(*other0_us, 1000);
  EXPECT_GE(*other1_us, 1000);
  EXPECT_FALSE(done_us(*rank0, 0ms)) << "completed without its peer";
  const StatsSample during = reader->sample();
  EXPECT_EQ(during.busy_ns_of_label("rank0", 2) + during.busy_ns_of_label("rank0", 3), 0u);
  EXPECT_EQ(during.busy_ns_of_label("other0", 0), 0u);

  // The last member launches: both complete.
  auto rank1 =
      member(name_.name(), "rank1",
             {"--device", "1", "--comm", "11", "--size", "2", "--count", "3", "--api", "library"});
  EXPECT_EQ(rank1->read_line(10s), "launched");
  const auto rank0_us = done_us(*rank0, 20s);
  const auto rank1_us = done_us(*rank1, 20s);
  ASSERT_TRUE(rank0_us && rank1_us);
  std::printf("[ elapsed  ] rank0 %lld us, rank1 %lld us\n", *rank0_us, *rank1_us);
  // Rank 0 waited at least across the window above; rank 1, arriving last,
  // ran its own three parts.
  EXPECT_GE(*rank0_us, 200'000 + 3000);
  EXPECT_GE(*rank1_us, 3000);
  const StatsSample after = reader->sample();
  EXPECT_GE(after.busy_ns_of_label("rank0", 0), 200 * kMs + 3 * kMs);  // spinning is busy time
  // Rank 1 arrived last: it spun at most while rank 0's device had not yet
  // seen a release (a poll), far less than rank 0 spun.
  EXPECT_GE(after.busy_ns_of_label("rank1", 1), 3 * kMs);
  EXPECT_LT(after.busy_ns_of_label("rank1", 1), after.busy_ns_of_label("rank0", 0));
  for (auto* child : {rank0.get(), rank1.get(), other0.get(), other1.get()})
    finish(*child);
}

TEST_F(CollectivesAcrossProcesses, WithoutPeersOrCommunicatorItIsAPlainKernel) {
  auto alone = member(name_.name(), "alone", {"--device", "0", "--comm", "5", "--size", "1"});
  auto no_comm = member(name_.name(), "nocomm", {"--device", "1", "--comm", "0", "--size", "2"});
  EXPECT_EQ(alone->read_line(10s), "launched");
  EXPECT_EQ(no_comm->read_line(10s), "launched");
  EXPECT_TRUE(done_us(*alone, 20s));
  EXPECT_TRUE(done_us(*no_comm, 20s));
  finish(*alone);
  finish(*no_comm);
}

// Two simulated nodes (segments of their own) whose creator named one fabric.
TEST_F(CollectivesAcrossProcesses, MembersOfDifferentSegmentsMeetOnAFabric) {
  const ScopedSegmentName node1("coll-node1");
  const ScopedSegmentName fabric("coll-fabric");
  const std::vector<std::string> args = {"--device", "0", "--comm", "21", "--size", "2"};
  auto rank0 = member(name_.name(), "node0", args, fabric.name());
  ASSERT_EQ(rank0->read_line(10s), "launched");
  auto reader = stats(name_.name());
  ASSERT_TRUE(reader);
  reader->sample();  // evaluates device 0: rank 0 has arrived
  EXPECT_FALSE(done_us(*rank0, 0ms)) << "completed without its peer";
  auto rank1 = member(node1.name(), "node1", args, fabric.name());
  EXPECT_EQ(rank1->read_line(10s), "launched");
  const auto rank0_us = done_us(*rank0, 20s);
  const auto rank1_us = done_us(*rank1, 20s);
  ASSERT_TRUE(rank0_us && rank1_us);
  EXPECT_GE(*rank0_us, 1000);
  EXPECT_GE(*rank1_us, 1000);
  // Each node's device 0 ran only its own member.
  EXPECT_EQ(reader->sample().busy_ns_of_label("node1"), 0u);
  finish(*rank0);
  finish(*rank1);
}

}  // namespace
}  // namespace egpu::simgpu
