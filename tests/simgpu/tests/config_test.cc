#include "model/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "model/device_identity.h"

namespace egpu::simgpu {
namespace {

std::optional<SimConfig> parse(const std::map<std::string, std::string>& env, std::string* error) {
  return parse_config(
      [&env](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      error);
}

TEST(Config, DefaultsAreOneH100) {
  std::string error;
  const auto c = parse({}, &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->shm_name, default_shm_name());
  EXPECT_EQ(c->device_count, 1u);
  EXPECT_EQ(c->memory_bytes, uint64_t{81559} << 20);
  EXPECT_EQ(c->timeslice_ns, 2'000'000u);
  EXPECT_EQ(c->device_name, "NVIDIA H100 80GB HBM3 (simulated)");
  ASSERT_EQ(c->pci_bus.size(), 1u);
  EXPECT_EQ(c->pci_bus[0], 0x1b);
}

TEST(Config, ReadsEveryVariable) {
  std::string error;
  const auto c = parse({{"SIMGPU_SHM", "/simgpu-x"},
                        {"SIMGPU_DEVICES", "4"},
                        {"SIMGPU_MEMORY_MB", "1024"},
                        {"SIMGPU_TIMESLICE_US", "500"},
                        {"SIMGPU_DEVICE_NAME", "Test GPU"},
                        {"SIMGPU_PCI_BUSES", "18,3b"},
                        {"SIMGPU_SHM_MODE", "0666"}},
                       &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->shm_name, "/simgpu-x");
  EXPECT_EQ(c->device_count, 4u);
  EXPECT_EQ(c->memory_bytes, uint64_t{1024} << 20);
  EXPECT_EQ(c->timeslice_ns, 500'000u);
  EXPECT_EQ(c->device_name, "Test GPU");
  EXPECT_EQ(c->shm_mode, 0666u);
  // Listed buses first, then the defaults of the remaining indices.
  EXPECT_EQ(c->pci_bus, (std::vector<uint8_t>{0x18, 0x3b, 0x52, 0x61}));
}

TEST(Config, RejectsOutOfRangeAndMalformedValues) {
  const std::map<std::string, std::string> bad[] = {
      {{"SIMGPU_DEVICES", "0"}},
      {{"SIMGPU_DEVICES", "17"}},
      {{"SIMGPU_DEVICES", "two"}},
      {{"SIMGPU_DEVICES", "-1"}},
      {{"SIMGPU_MEMORY_MB", "0"}},
      {{"SIMGPU_TIMESLICE_US", "1x"}},
      {{"SIMGPU_SHM", "no-slash"}},
      {{"SIMGPU_SHM", "/a/b"}},
      {{"SIMGPU_PCI_BUSES", "1g"}},
      {{"SIMGPU_PCI_BUSES", "100"}},
      {{"SIMGPU_DEVICE_NAME", std::string(200, 'n')}},
  };
  for (const auto& env : bad) {
    std::string error;
    EXPECT_FALSE(parse(env, &error)) << env.begin()->first << "=" << env.begin()->second;
    EXPECT_NE(error.find(env.begin()->first), std::string::npos) << error;
  }
}

TEST(Config, SegmentCopyKeepsTheValues) {
  std::string error;
  const auto c = parse({{"SIMGPU_DEVICES", "2"}, {"SIMGPU_DEVICE_NAME", "X"}}, &error);
  ASSERT_TRUE(c);
  const SegmentConfig s = to_segment_config(*c);
  EXPECT_EQ(s.device_count, 2u);
  EXPECT_STREQ(s.device_name, "X");
  EXPECT_EQ(s.pci_bus[1], 0x43);
}

TEST(Config, FabricNameIsCheckedAndKeptInTheSegment) {
  std::string error;
  const auto c = parse({{"SIMGPU_FABRIC", "/simgpu-fabric-a"}}, &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->fabric_name, "/simgpu-fabric-a");
  EXPECT_STREQ(to_segment_config(*c).fabric_name, "/simgpu-fabric-a");
  EXPECT_STREQ(to_segment_config(*parse({}, &error)).fabric_name, "");
  for (const char* bad : {"no-slash", "/a/b", "/"}) {
    EXPECT_FALSE(parse({{"SIMGPU_FABRIC", bad}}, &error)) << bad;
    EXPECT_NE(error.find("SIMGPU_FABRIC"), std::string::npos);
  }
  EXPECT_FALSE(parse({{"SIMGPU_FABRIC", "/" + std::string(kFabricNameBytes, 'x')}}, &error));
}

TEST(DeviceIdentity, MatchesTheEmulatedTopologies) {
  EXPECT_EQ(uuid_string(0, 0x1b), "GPU-5eed0000-0000-4000-8000-00000000001b");
  EXPECT_EQ(uuid_string(7, 0xdf), "GPU-5eed0007-0000-4000-8000-0000000000df");
  EXPECT_EQ(pci_bus_id_string(0x9d), "0000:9d:00.0");
}

}  // namespace
}  // namespace egpu::simgpu
