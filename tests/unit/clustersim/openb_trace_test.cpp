// Reading the openb trace: the published files, and clear errors for bad ones.
#include "tools/clustersim/openb_trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>

namespace egpu::clustersim {
namespace {

const std::string kDir = EGPU_OPENB_DIR;

// In a directory of this process's own: ctest runs each case as a process
// of its own, in parallel, and the cases share file names.
std::string write_file(const std::string& name, const std::string& text) {
  const std::string dir = ::testing::TempDir() + "/openb-trace-test-" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0700);
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

const std::string kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

TEST(OpenbTrace, ReadsThePublishedNodes) {
  auto nodes = load_openb_nodes(kDir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes) << nodes.error();
  ASSERT_EQ(nodes->size(), 1213U);
  uint64_t gpus = 0;
  for (const NodeSpec& node : *nodes)
    gpus += node.gpus;
  EXPECT_EQ(gpus, 6212U);
  EXPECT_EQ(nodes->front().name, "openb-node-0000");
  EXPECT_EQ(nodes->front().cpu_milli, 64000U);
  EXPECT_EQ(nodes->front().model, "P100");
}

TEST(OpenbTrace, ReadsThePublishedTasks) {
  auto tasks = load_openb_tasks(kDir + "/openb_pod_list_default.csv");
  ASSERT_TRUE(tasks) << tasks.error();
  ASSERT_EQ(tasks->size(), 8152U);
  std::size_t gpu_tasks = 0, shares = 0, ls = 0, be = 0;
  for (const TaskSpec& task : *tasks) {
    gpu_tasks += task.gpus > 0;
    shares += task.shares_gpu();
    ls += task.gpus > 0 && task.qos == Qos::kLatencySensitive;
    be += task.gpus > 0 && task.qos == Qos::kBestEffort;
  }
  // The counts the trace's README gives (QoS among the GPU tasks).
  EXPECT_EQ(gpu_tasks, 7064U);
  EXPECT_EQ(shares, 3078U);
  EXPECT_EQ(ls, 4011U);
  EXPECT_EQ(be, 2948U);
  EXPECT_EQ(tasks->at(1).gpu_milli, 460U);
  EXPECT_EQ(tasks->at(1).creation_s, 427061);
}

TEST(OpenbTrace, ColumnsAreFoundByNameAndQuotesAreCsv) {
  const auto path = write_file("reordered.csv",
                               "model,gpu,sn,memory_mib,cpu_milli\n"
                               "\"V100M32\",8,\"node,a\",1024,96000\n");
  auto nodes = load_openb_nodes(path);
  ASSERT_TRUE(nodes) << nodes.error();
  ASSERT_EQ(nodes->size(), 1U);
  EXPECT_EQ(nodes->front().name, "node,a");
  EXPECT_EQ(nodes->front().gpus, 8U);
  EXPECT_EQ(nodes->front().cpu_milli, 96000U);
}

TEST(OpenbTrace, GpuSpecListsTheModelsATaskMayUse) {
  const auto path =
      write_file("spec.csv", kPodHeader + "p,1000,10,1,500,V100M16|V100M32,BE,,0,,\n");
  auto tasks = load_openb_tasks(path);
  ASSERT_TRUE(tasks) << tasks.error();
  EXPECT_EQ(tasks->front().gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(tasks->front().qos, Qos::kBestEffort);
}

struct BadFile {
  std::string text;
  std::string message;  // a part of the error
};
// Test names say the error, not the bytes of the struct (pointers included).
void PrintTo(const BadFile& f, std::ostream* os) {
  *os << f.message;
}

class OpenbTraceErrors : public ::testing::TestWithParam<BadFile> {};

TEST_P(OpenbTraceErrors, NameTheFileTheLineAndTheProblem) {
  const auto path = write_file("bad.csv", GetParam().text);
  auto tasks = load_openb_tasks(path);
  ASSERT_FALSE(tasks);
  EXPECT_NE(tasks.error().find(GetParam().message), std::string::npos) << tasks.error();
  EXPECT_NE(tasks.error().find(path), std::string::npos) << tasks.error();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OpenbTraceErrors,
    ::testing::Values(
        BadFile{"", "empty file"}, BadFile{"name,cpu_milli\np,1\n", "no column 'memory_mib'"},
        BadFile{kPodHeader + "p,12x,10,1,500,,LS,,0,,\n", "bad.csv:2: column 'cpu_milli' is '12x'"},
        BadFile{kPodHeader + "p,-5,10,1,500,,LS,,0,,\n", "column 'cpu_milli' is '-5'"},
        BadFile{kPodHeader + "p,1000,10,1,1500,,LS,,0,,\n", "gpu_milli 1500 is not in 1..1000"},
        BadFile{kPodHeader + "p,1000,10,2,500,,LS,,0,,\n", "several GPUs must be whole ones"},
        BadFile{kPodHeader + "p,1000,10\n", "bad.csv:2: 3 fields, the header has 11"},
        BadFile{kPodHeader + "p,\"1000,10,1,500,,LS,,0,,\n", "malformed CSV"},
        BadFile{kPodHeader, "no tasks"}));

TEST(OpenbTrace, AMissingFileIsNamed) {
  auto nodes = load_openb_nodes("/nonexistent/nodes.csv");
  ASSERT_FALSE(nodes);
  EXPECT_EQ(nodes.error(), "cannot read /nonexistent/nodes.csv");
}

}  // namespace
}  // namespace egpu::clustersim
