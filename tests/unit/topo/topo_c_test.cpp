// The C interface the Slurm GRES plugin uses (topo_c.h).
#include "core/topo/topo_c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "topo_test_data.h"

extern "C" int topo_c_describe_first_gpu(const char* xml_path, char* out, size_t outlen);

namespace {

using egpu::topo::test::topology_xml;

struct TopoFree {
  void operator()(egpu_topo_t* topo) const { egpu_topo_free(topo); }
};
using TopoPtr = std::unique_ptr<egpu_topo_t, TopoFree>;

TopoPtr load(const std::string& path) {
  egpu_topo_t* topo = nullptr;
  char err[256] = "untouched";
  EXPECT_EQ(egpu_topo_load(path.c_str(), &topo, err, sizeof err), 0) << err;
  return TopoPtr(topo);
}

TEST(TopoC, LoadsCountsAndStrings) {
  TopoPtr topo = load(topology_xml("dgx-h100-nvswitch.xml"));
  ASSERT_NE(topo, nullptr);
  ASSERT_EQ(egpu_topo_gpu_count(topo.get()), 8);
  EXPECT_STREQ(egpu_topo_gpu_pci_bus_id(topo.get(), 0), "0000:1b:00.0");
  EXPECT_STREQ(egpu_topo_gpu_pci_bus_id(topo.get(), 7), "0000:df:00.0");
  EXPECT_STREQ(egpu_topo_gpu_uuid(topo.get(), 1), "GPU-5eed0001-0000-4000-8000-000000000043");
  EXPECT_STREQ(egpu_topo_gpu_model(topo.get(), 2), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(egpu_topo_gpu_memory_bytes(topo.get(), 3), 83201024ull * 1024);
  EXPECT_STREQ(egpu_topo_gpu_cores(topo.get(), 0), "0-7");
  EXPECT_STREQ(egpu_topo_gpu_cores(topo.get(), 4), "8-15");
  EXPECT_STREQ(egpu_topo_gpu_links(topo.get(), 0), "-1,18,18,18,18,18,18,18");
  EXPECT_STREQ(egpu_topo_gpu_links(topo.get(), 3), "18,18,18,-1,18,18,18,18");
}

TEST(TopoC, CubeMeshLinksAndNumaGroupCores) {
  TopoPtr mesh = load(topology_xml("v100-cubemesh8.xml"));
  EXPECT_STREQ(egpu_topo_gpu_links(mesh.get(), 6), "0,0,1,0,1,2,-1,2");
  TopoPtr a100 = load(topology_xml("dgx-a100-like.xml"));
  EXPECT_STREQ(egpu_topo_gpu_cores(a100.get(), 2), "2-3");
  EXPECT_STREQ(egpu_topo_gpu_socket_cores(a100.get(), 2), "0-7");
  EXPECT_STREQ(egpu_topo_gpu_socket_cores(a100.get(), 6), "8-15");
}

TEST(TopoC, OutOfRangeAndNullAreSafe) {
  TopoPtr topo = load(topology_xml("l40s-pcie4.xml"));
  EXPECT_EQ(egpu_topo_gpu_count(topo.get()), 4);
  EXPECT_EQ(egpu_topo_gpu_pci_bus_id(topo.get(), 4), nullptr);
  EXPECT_EQ(egpu_topo_gpu_links(topo.get(), -1), nullptr);
  EXPECT_EQ(egpu_topo_gpu_cores(topo.get(), 99), nullptr);
  EXPECT_EQ(egpu_topo_gpu_memory_bytes(topo.get(), 4), 0u);
  EXPECT_EQ(egpu_topo_gpu_count(nullptr), 0);
  EXPECT_EQ(egpu_topo_gpu_uuid(nullptr, 0), nullptr);
  EXPECT_EQ(egpu_topo_gpu_model(nullptr, 0), nullptr);
  egpu_topo_free(nullptr);  // like free(NULL)
}

TEST(TopoC, ErrorsComeBackAsMessages) {
  egpu_topo_t* topo = reinterpret_cast<egpu_topo_t*>(0x1);
  char err[256] = "";
  std::string missing = topology_xml("does-not-exist.xml");
  EXPECT_EQ(egpu_topo_load(missing.c_str(), &topo, err, sizeof err), -1);
  EXPECT_EQ(topo, nullptr);
  EXPECT_NE(std::string(err).find(missing), std::string::npos) << err;

  std::string no_gpu = topology_xml("no-nvidia-gpu.xml");
  EXPECT_EQ(egpu_topo_load(no_gpu.c_str(), &topo, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("no NVIDIA GPU"), std::string::npos) << err;

  // A short buffer gets a truncated, terminated message.
  char tiny[8];
  EXPECT_EQ(egpu_topo_load(missing.c_str(), &topo, tiny, sizeof tiny), -1);
  EXPECT_EQ(std::string(tiny).size(), 7u);
  // No buffer at all, no out pointer: still just -1.
  EXPECT_EQ(egpu_topo_load(missing.c_str(), &topo, nullptr, 0), -1);
  EXPECT_EQ(egpu_topo_load(missing.c_str(), nullptr, err, sizeof err), -1);
}

TEST(TopoC, WorksFromAPlainCCaller) {
  char text[256];
  ASSERT_EQ(
      topo_c_describe_first_gpu(topology_xml("v100-cubemesh4.xml").c_str(), text, sizeof text), 0)
      << text;
  EXPECT_STREQ(text, "4 0000:1b:00.0 Cores=0-7 Links=-1,1,1,2");
  std::string missing = topology_xml("nope.xml");
  EXPECT_EQ(topo_c_describe_first_gpu(missing.c_str(), text, sizeof text), -1);
  EXPECT_NE(std::string(text).find("nope.xml"), std::string::npos) << text;
}

TEST(TopoC, LiveLoadLogsThroughTheCallback) {
  // On this host: GPUs or not, a NULL/empty path means "live", and nothing
  // goes to the callback unless NVML is concerned.
  std::vector<std::string> lines;
  egpu_topo_t* topo = nullptr;
  char err[256] = "";
  int rc = egpu_topo_load_ex(
      "",
      [](const char* line, void* ctx) {
        static_cast<std::vector<std::string>*>(ctx)->push_back(line);
      },
      &lines, &topo, err, sizeof err);
  if (rc == 0) {
    EXPECT_GT(egpu_topo_gpu_count(topo), 0);
    egpu_topo_free(topo);
  } else {
    EXPECT_NE(std::string(err).find("no NVIDIA GPU on this host"), std::string::npos) << err;
    EXPECT_TRUE(lines.empty());
  }
}

}  // namespace
