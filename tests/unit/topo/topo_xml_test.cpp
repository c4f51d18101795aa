// core/topo on the hwloc XML files in tests/data/topologies: the list
// (DGX H100 in both matrix shapes, DGX A100 NPS4 locality, V100 cube mesh,
// PCIe-only boxes, and the error cases).
#include <gtest/gtest.h>

#include <numeric>

#include "core/topo/topology.h"
#include "topo_test_data.h"

namespace egpu::topo {
namespace {

using test::all_to_all;
using test::topology_xml;

std::vector<std::vector<int>> link_matrix(const Topology& topology) {
  std::vector<std::vector<int>> matrix;
  for (const Gpu& gpu : topology.gpus)
    matrix.push_back(gpu.links);
  return matrix;
}

Topology load_ok(std::string_view name) {
  LoadResult result = load_from_xml(topology_xml(name));
  EXPECT_TRUE(result.ok()) << result.error;
  return result.ok() ? *result.topology : Topology{};
}

std::string load_error(const std::string& path) {
  std::vector<std::string> log;
  LoadResult result =
      load_from_xml(path, XmlOptions{[&](std::string_view l) { log.emplace_back(l); }});
  EXPECT_FALSE(result.ok());
  EXPECT_TRUE(log.empty());
  return result.error;
}

TEST(XmlTopology, DgxH100GpuMatrixHas18LinksBetweenEveryPair) {
  Topology topology = load_ok("dgx-h100-like.xml");
  ASSERT_EQ(topology.gpus.size(), 8u);
  EXPECT_TRUE(topology.has_nvlink);
  EXPECT_EQ(link_matrix(topology), all_to_all(8, 18));
}

TEST(XmlTopology, DgxH100NvswitchShapeHas18LinksBetweenEveryPair) {
  // GPU<->NVSwitch entries only (5+4+4+5 lanes per GPU), as NVML reports them.
  Topology topology = load_ok("dgx-h100-nvswitch.xml");
  ASSERT_EQ(topology.gpus.size(), 8u);  // the 4 NVSwitch PCI devices are not GPUs
  EXPECT_EQ(link_matrix(topology), all_to_all(8, 18));
}

TEST(XmlTopology, DgxA100Nps4LocalityIsTheNumaGroup) {
  Topology topology = load_ok("dgx-a100-like.xml");
  ASSERT_EQ(topology.gpus.size(), 8u);
  EXPECT_EQ(link_matrix(topology), all_to_all(8, 12));
  // 2 packages x 4 NUMA groups x 2 cores x 2 PUs; GPUs come in pairs per group.
  // Bus order (07, 0f, 47, 4e, 87, 90, b7, bd) differs from hwloc's tree order.
  struct Expected {
    const char* bus_id;
    std::vector<int> numa;
    std::vector<int> cores;
    std::vector<int> cpus;
  };
  const Expected expected[] = {
      {"0000:07:00.0", {3}, {6, 7}, {6, 7, 22, 23}},
      {"0000:0f:00.0", {3}, {6, 7}, {6, 7, 22, 23}},
      {"0000:47:00.0", {1}, {2, 3}, {2, 3, 18, 19}},
      {"0000:4e:00.0", {1}, {2, 3}, {2, 3, 18, 19}},
      {"0000:87:00.0", {7}, {14, 15}, {14, 15, 30, 31}},
      {"0000:90:00.0", {7}, {14, 15}, {14, 15, 30, 31}},
      {"0000:b7:00.0", {5}, {10, 11}, {10, 11, 26, 27}},
      {"0000:bd:00.0", {5}, {10, 11}, {10, 11, 26, 27}},
  };
  for (size_t i = 0; i < 8; ++i) {
    const Gpu& gpu = topology.gpus[i];
    SCOPED_TRACE("GPU " + std::to_string(i));
    EXPECT_EQ(gpu.index, static_cast<int>(i));
    EXPECT_EQ(gpu.pci_bus_id, expected[i].bus_id);
    EXPECT_EQ(gpu.numa_nodes, expected[i].numa);
    EXPECT_EQ(gpu.cores, expected[i].cores);
    EXPECT_EQ(gpu.cpus, expected[i].cpus);
    // nvml<i> sits under the i-th GPU in bus order: the UUIDs encode i.
    EXPECT_EQ(gpu.uuid.substr(0, 12), "GPU-5eed000" + std::to_string(i));
  }
  EXPECT_EQ(topology.core_count, 16);
  ASSERT_EQ(topology.socket_cores.size(), 2u);
  EXPECT_EQ(topology.socket_cores[1].front(), 8);
}

TEST(XmlTopology, V100CubeMeshHasExact210Pattern) {
  Topology eight = load_ok("v100-cubemesh8.xml");
  EXPECT_EQ(link_matrix(eight), test::kV100CubeMesh8);
  for (const Gpu& gpu : eight.gpus) {
    // A V100 has 6 NVLink lanes, all in use in a DGX-1.
    EXPECT_EQ(std::accumulate(gpu.links.begin(), gpu.links.end(), 0) + 1, 6) << gpu.index;
  }
  Topology four = load_ok("v100-cubemesh4.xml");
  std::vector<std::vector<int>> expected4 = {
      {-1, 1, 1, 2}, {1, -1, 2, 1}, {1, 2, -1, 2}, {2, 1, 2, -1}};
  EXPECT_EQ(link_matrix(four), expected4);
}

TEST(XmlTopology, PcieOnlyBoxesHaveNoLinks) {
  for (const char* name : {"l40s-pcie4.xml", "t4-pcie8.xml"}) {
    SCOPED_TRACE(name);
    Topology topology = load_ok(name);
    ASSERT_FALSE(topology.gpus.empty());
    EXPECT_FALSE(topology.has_nvlink);
    EXPECT_EQ(link_matrix(topology), all_to_all(topology.gpus.size(), 0));
  }
  EXPECT_EQ(load_ok("l40s-pcie4.xml").gpus.size(), 4u);
  EXPECT_EQ(load_ok("t4-pcie8.xml").gpus.size(), 8u);
}

TEST(XmlTopology, MalformedXmlIsAClearError) {
  std::string path = topology_xml("malformed-truncated.xml");
  std::string error = load_error(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("malformed"), std::string::npos) << error;

  error = load_error(topology_xml("not-hwloc.xml"));
  EXPECT_NE(error.find("not an hwloc topology"), std::string::npos) << error;
  error = load_error(topology_xml("empty.xml"));
  EXPECT_NE(error.find("is empty"), std::string::npos) << error;
  error = load_error(topology_xml("hwloc3-format.xml"));
  EXPECT_NE(error.find("hwloc 3.x"), std::string::npos) << error;
}

TEST(XmlTopology, MissingFileIsAClearError) {
  std::string path = topology_xml("does-not-exist.xml");
  std::string error = load_error(path);
  // Not the live host's topology: hwloc would fall back to it silently.
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  EXPECT_FALSE(load_error("").empty());
}

TEST(XmlTopology, XmlWithoutGpusIsAClearError) {
  // An AMD GPU, an InfiniBand HCA and an NVIDIA audio function: no NVIDIA GPU.
  std::string path = topology_xml("no-nvidia-gpu.xml");
  std::string error = load_error(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("no NVIDIA GPU"), std::string::npos) << error;
}

TEST(XmlTopology, IdentityAndMemoryComeFromNvmlAndCudaOsDevices) {
  Topology topology = load_ok("dgx-h100-nvswitch.xml");
  const Gpu& gpu = topology.gpus[4];
  EXPECT_EQ(gpu.pci_bus_id, "0000:9d:00.0");
  EXPECT_EQ(gpu.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.uuid, "GPU-5eed0004-0000-4000-8000-00000000009d");
  EXPECT_EQ(gpu.memory_bytes, 83201024ull * 1024);  // CUDAGlobalMemorySize is in KiB
  // Second package: cores 8-15, PUs 8-15 and their hyperthreads 24-31, NUMA 1.
  EXPECT_EQ(gpu.cores, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(gpu.numa_nodes, std::vector<int>{1});
  EXPECT_EQ(gpu.cpus.size(), 16u);
  EXPECT_EQ(gpu.cpus.front(), 8);
  EXPECT_EQ(gpu.cpus.back(), 31);
  EXPECT_EQ(topology.source, topology_xml("dgx-h100-nvswitch.xml"));
}

TEST(XmlTopology, GpuWithoutOsDevicesOnAFlatMachine) {
  // No Package or Core objects, the GPU hangs off the Machine, no NVML/CUDA info.
  Topology topology = load_ok("flat-single-gpu.xml");
  ASSERT_EQ(topology.gpus.size(), 1u);
  const Gpu& gpu = topology.gpus[0];
  EXPECT_EQ(gpu.pci_bus_id, "0000:65:00.0");
  EXPECT_EQ(gpu.model, "NVIDIA GPU [10de:1eb8]");
  EXPECT_EQ(gpu.uuid, "");
  EXPECT_EQ(gpu.memory_bytes, 0u);
  EXPECT_EQ(gpu.links, std::vector<int>{-1});
  EXPECT_EQ(gpu.cores, (std::vector<int>{0, 1, 2, 3}));  // PUs stand in for cores
  EXPECT_EQ(topology.core_count, 4);
  ASSERT_EQ(topology.socket_cores.size(), 1u);
  EXPECT_EQ(topology.socket_cores[0], (std::vector<int>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace egpu::topo
