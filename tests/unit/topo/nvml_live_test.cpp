// load_live(): hwloc as Debian shows a live host (PCI devices only, from a
// *-pcionly.xml) plus NVML, here a fake libnvidia-ml, through dlopen.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "core/topo/topology.h"
#include "topo_test_data.h"

namespace egpu::topo {
namespace {

using test::all_to_all;
using test::topology_xml;

class LiveTopology : public ::testing::Test {
 protected:
  void SetUp() override {
    // Holding our own reference keeps the fake's state across the loader's
    // dlopen/dlclose, so the test can ask it whether NVML was shut down.
    fake_ = dlopen(test::fake_nvml_library().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(fake_, nullptr) << dlerror();
    open_sessions_ = reinterpret_cast<int (*)()>(dlsym(fake_, "fake_nvml_open_sessions"));
    ASSERT_NE(open_sessions_, nullptr);
    unsetenv("EGPU_FAKE_NVML_NO_REMOTE_TYPE");
  }
  void TearDown() override {
    unsetenv("EGPU_FAKE_NVML_SCENARIO");
    unsetenv("EGPU_FAKE_NVML_NO_REMOTE_TYPE");
    if (fake_) dlclose(fake_);
  }

  LoadResult load(const std::string& xml, const std::string& library) {
    LiveOptions options;
    options.hwloc_xml = topology_xml(xml);
    options.nvml_library = library;
    options.log = [this](std::string_view line) { log_.emplace_back(line); };
    return load_live(options);
  }

  std::vector<std::vector<int>> links(const Topology& topology) {
    std::vector<std::vector<int>> matrix;
    for (const Gpu& gpu : topology.gpus)
      matrix.push_back(gpu.links);
    return matrix;
  }

  void* fake_ = nullptr;
  int (*open_sessions_)() = nullptr;
  std::vector<std::string> log_;
};

TEST_F(LiveTopology, NvmlNvswitchLanesGive18LinksBetweenEveryPair) {
  setenv("EGPU_FAKE_NVML_SCENARIO", "h100-nvswitch", 1);
  LoadResult result = load("dgx-h100-pcionly.xml", test::fake_nvml_library());
  ASSERT_TRUE(result.ok()) << result.error;
  const Topology& topology = *result.topology;
  EXPECT_EQ(topology.source, "live");
  EXPECT_TRUE(topology.has_nvlink);
  EXPECT_EQ(links(topology), all_to_all(8, 18));
  EXPECT_TRUE(log_.empty()) << log_.front();
  EXPECT_EQ(open_sessions_(), 0);  // nvmlShutdown ran
  // Identity and memory from NVML, matched by bus id ("00000000:C3:00.0").
  const Gpu& gpu = topology.gpus[5];
  EXPECT_EQ(gpu.pci_bus_id, "0000:c3:00.0");
  EXPECT_EQ(gpu.uuid, "GPU-fa4e0000-0000-4000-8000-000000000005");
  EXPECT_EQ(gpu.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.memory_bytes, 85520809984ull);
  EXPECT_EQ(gpu.numa_nodes, std::vector<int>{1});
}

TEST_F(LiveTopology, NvmlDirectLanesGiveTheCubeMeshEvenInAnotherOrder) {
  // The fake enumerates GPUs in reverse bus order and adds a lane to a CPU.
  setenv("EGPU_FAKE_NVML_SCENARIO", "v100-cubemesh8", 1);
  LoadResult result = load("v100-cubemesh8-pcionly.xml", test::fake_nvml_library());
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(links(*result.topology), test::kV100CubeMesh8);
  EXPECT_EQ(result.topology->gpus[0].uuid, "GPU-fa4e0100-0000-4000-8000-000000000000");
  EXPECT_EQ(result.topology->gpus[0].model, "Tesla V100-SXM2-32GB");
}

TEST_F(LiveTopology, WithoutRemoteDeviceTypeLanesAreClassifiedByBusId) {
  // Older drivers lack nvmlDeviceGetNvLinkRemoteDeviceType.
  setenv("EGPU_FAKE_NVML_NO_REMOTE_TYPE", "1", 1);
  setenv("EGPU_FAKE_NVML_SCENARIO", "v100-cubemesh8", 1);
  LoadResult mesh = load("v100-cubemesh8-pcionly.xml", test::fake_nvml_library());
  ASSERT_TRUE(mesh.ok()) << mesh.error;
  EXPECT_EQ(links(*mesh.topology), test::kV100CubeMesh8);
  setenv("EGPU_FAKE_NVML_SCENARIO", "h100-nvswitch", 1);
  LoadResult switched = load("dgx-h100-pcionly.xml", test::fake_nvml_library());
  ASSERT_TRUE(switched.ok()) << switched.error;
  EXPECT_EQ(links(*switched.topology), all_to_all(8, 18));
}

TEST_F(LiveTopology, AbsentNvmlMeansNoLinksAndOneLogLine) {
  LoadResult result = load("dgx-h100-pcionly.xml", "libnvidia-ml-absent-for-test.so.1");
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_FALSE(result.topology->has_nvlink);
  EXPECT_EQ(links(*result.topology), all_to_all(8, 0));
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find("NVML not available"), std::string::npos) << log_[0];
  EXPECT_NE(log_[0].find("libnvidia-ml-absent-for-test.so.1"), std::string::npos) << log_[0];
  // What hwloc alone knows: bus ids and locality, a model from the PCI ids.
  EXPECT_EQ(result.topology->gpus[0].pci_bus_id, "0000:1b:00.0");
  EXPECT_EQ(result.topology->gpus[0].uuid, "");
  EXPECT_EQ(result.topology->gpus[0].memory_bytes, 0u);
  EXPECT_EQ(result.topology->gpus[0].cores, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST_F(LiveTopology, FailingNvmlInitMeansNoLinksAndOneLogLine) {
  setenv("EGPU_FAKE_NVML_SCENARIO", "init-fails", 1);
  LoadResult result = load("dgx-h100-pcionly.xml", test::fake_nvml_library());
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(links(*result.topology), all_to_all(8, 0));
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find("Driver Not Loaded"), std::string::npos) << log_[0];
  EXPECT_EQ(open_sessions_(), 0);
}

TEST_F(LiveTopology, AnExistingNvlinkMatrixIsKept) {
  // hwloc with its NVML backend already has the matrix (the cube mesh); NVML's
  // lanes (here: all on one switch, which would read 6 everywhere) are not
  // added over it.
  setenv("EGPU_FAKE_NVML_SCENARIO", "v100-switched", 1);
  LoadResult result = load("v100-cubemesh8.xml", test::fake_nvml_library());
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(links(*result.topology), test::kV100CubeMesh8);
  EXPECT_EQ(result.topology->gpus[2].model, "Tesla V100-SXM3-32GB");  // NVML still names them
  // Without the XML's matrix the same lanes do give 6 between every pair.
  LoadResult bare = load("v100-cubemesh8-pcionly.xml", test::fake_nvml_library());
  ASSERT_TRUE(bare.ok()) << bare.error;
  EXPECT_EQ(links(*bare.topology), all_to_all(8, 6));
  EXPECT_TRUE(log_.empty());
}

TEST_F(LiveTopology, NvmlGpusHwlocDoesNotListAreLogged) {
  setenv("EGPU_FAKE_NVML_SCENARIO", "h100-nvswitch", 1);
  LoadResult result = load("v100-cubemesh8-pcionly.xml", test::fake_nvml_library());
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(links(*result.topology), all_to_all(8, 0));
  ASSERT_EQ(log_.size(), 8u);
  EXPECT_NE(log_[0].find("0000:1b:00.0 is not in the hwloc topology"), std::string::npos)
      << log_[0];
}

TEST_F(LiveTopology, ThisHostsOwnHardwareLoadsOrSaysWhy) {
  // The build host: either it has NVIDIA GPUs or the error says there are none.
  LiveOptions options;
  options.nvml_library = "libnvidia-ml-absent-for-test.so.1";
  options.log = [this](std::string_view line) { log_.emplace_back(line); };
  LoadResult result = load_live(options);
  if (result.ok()) {
    EXPECT_FALSE(result.topology->gpus.empty());
    EXPECT_EQ(log_.size(), 1u);
  } else {
    EXPECT_NE(result.error.find("no NVIDIA GPU on this host"), std::string::npos) << result.error;
  }
}

}  // namespace
}  // namespace egpu::topo
