// The pure pieces under the NVML path: lanes -> bandwidth matrix, bandwidth ->
// link counts, PCI bus id spellings.
#include <gtest/gtest.h>

#include "core/topo/nvlink_matrix.h"
#include "core/topo/nvml_links.h"
#include "core/topo/pci_bus_id.h"

namespace egpu::topo {
namespace {

NvlinkLane to_gpu(const std::string& bus) {
  return {LaneRemote::kGpu, bus};
}
NvlinkLane to_switch(const std::string& bus) {
  return {LaneRemote::kSwitch, bus};
}

std::vector<NvlinkLane> repeat(const NvlinkLane& lane, int count) {
  return std::vector<NvlinkLane>(static_cast<size_t>(count), lane);
}

std::vector<NvlinkLane> concat(std::vector<std::vector<NvlinkLane>> parts) {
  std::vector<NvlinkLane> all;
  for (auto& part : parts)
    all.insert(all.end(), part.begin(), part.end());
  return all;
}

TEST(NvmlMatrix, DirectLanesBecomeSymmetricBandwidth) {
  std::vector<std::string> gpus = {"0000:06:00.0", "0000:07:00.0", "0000:0a:00.0"};
  std::vector<NvmlGpuLanes> nvml = {
      {"00000000:06:00.0",
       concat({repeat(to_gpu("00000000:07:00.0"), 2), {to_gpu("0000:0A:00.0")}})},
      {"00000000:07:00.0", repeat(to_gpu("00000000:06:00.0"), 2)},
      // GPU 2 reports nothing: its lane to GPU 0 still counts from GPU 0's side.
  };
  std::vector<uint64_t> m = nvlink_bandwidth_matrix(gpus, nvml);
  std::vector<uint64_t> expected = {0, 50000, 25000, 50000, 0, 0, 25000, 0, 0};
  EXPECT_EQ(m, expected);
}

TEST(NvmlMatrix, NvswitchLanesConnectEveryPairByTheSmallerLaneCount) {
  // HGX H100: 18 lanes over 4 switches (5+4+4+5); one GPU with 6 lanes down.
  std::vector<std::string> gpus;
  std::vector<NvmlGpuLanes> nvml;
  for (int i = 0; i < 4; ++i) {
    std::string bus = "0000:" + std::to_string(10 + i) + ":00.0";
    gpus.push_back(bus);
    int lanes_on_first = i == 3 ? 0 : 5;
    int lanes_on_last = i == 3 ? 0 : 5;
    nvml.push_back(
        {bus, concat({repeat(to_switch("0000:05:00.0"), lanes_on_first),
                      repeat(to_switch("0000:06:00.0"), 4), repeat(to_switch("0000:85:00.0"), 4),
                      repeat(to_switch("0000:86:00.0"), lanes_on_last)})});
  }
  std::vector<uint64_t> m = nvlink_bandwidth_matrix(gpus, nvml);
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 4; ++j) {
      uint64_t expected = i == j ? 0 : (i == 3 || j == 3 ? 8 : 18) * kLinkBandwidthMBs;
      EXPECT_EQ(m[i * 4 + j], expected) << i << "," << j;
    }
  }
}

TEST(NvmlMatrix, UnknownGpusAndNonGpuRemotesAreIgnored) {
  std::vector<std::string> gpus = {"0000:1b:00.0", "0000:43:00.0"};
  std::vector<NvmlGpuLanes> nvml = {
      {"0000:1b:00.0",
       {to_gpu("0000:99:00.0"),                // a GPU hwloc does not list
        {LaneRemote::kOther, "0000:00:01.0"},  // a CPU (IBM NPU)
        to_gpu("not a bus id"),
        to_gpu("0000:43:00.0")}},
      {"0000:77:00.0", repeat(to_gpu("0000:1b:00.0"), 3)},  // not in hwloc
  };
  std::vector<uint64_t> m = nvlink_bandwidth_matrix(gpus, nvml);
  EXPECT_EQ(m, (std::vector<uint64_t>{0, 25000, 25000, 0}));
}

TEST(NvmlMatrix, NoLanesGiveAnAllZeroMatrix) {
  std::vector<std::string> gpus = {"0000:01:00.0", "0000:41:00.0", "0000:81:00.0"};
  std::vector<NvmlGpuLanes> nvml = {{"0000:01:00.0", {}}, {"0000:41:00.0", {}}};
  EXPECT_EQ(nvlink_bandwidth_matrix(gpus, nvml), std::vector<uint64_t>(9, 0));
  EXPECT_TRUE(nvlink_bandwidth_matrix({}, {}).empty());
}

TEST(NvmlMatrix, BandwidthToLinks) {
  EXPECT_EQ(bandwidth_to_links(0), 0);
  EXPECT_EQ(bandwidth_to_links(25000), 1);
  EXPECT_EQ(bandwidth_to_links(450000), 18);
  EXPECT_EQ(bandwidth_to_links(300000), 12);
  EXPECT_EQ(bandwidth_to_links(20000), 1);  // NVLink 1 (P100): a lane is a link
  EXPECT_EQ(bandwidth_to_links(5), 1);      // any bandwidth is at least one link
  EXPECT_EQ(bandwidth_to_links(1000000), 40);
  EXPECT_EQ(bandwidth_to_links(UINT64_MAX / 2), 1023);  // Slurm's Links= ceiling
}

TEST(PciBusId, SpellingsNormalize) {
  EXPECT_EQ(normalize_pci_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("0000:1b:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("1b:00.1"), "0000:1b:00.1");
  EXPECT_EQ(normalize_pci_bus_id("00010002:c3:1f.7"), "10002:c3:1f.7");
  for (const char* bad : {"", "1b:00", "0000:1b:00.8", "0000:1b:20.0", "0000:1bb:00.0",
                          "000000000:1b:00.0", "zz:00.0", "0000:1b:00.0x", "0000::00.0"}) {
    EXPECT_FALSE(parse_pci_bus_id(bad)) << bad;
  }
  EXPECT_LT(*parse_pci_bus_id("0000:1b:00.0"), *parse_pci_bus_id("0000:43:00.0"));
  EXPECT_LT(*parse_pci_bus_id("0000:ff:00.0"), *parse_pci_bus_id("0001:00:00.0"));
}

}  // namespace
}  // namespace egpu::topo
