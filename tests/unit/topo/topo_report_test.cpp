// The gres.conf lines and the GPU table, checked against the XML files, and
// the small formatters they are made of.
#include "core/topo/topo_report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/topo/int_list.h"
#include "topo_test_data.h"

namespace egpu::topo {
namespace {

Topology load(std::string_view name) {
  LoadResult result = load_from_xml(test::topology_xml(name));
  EXPECT_TRUE(result.ok()) << result.error;
  return result.ok() ? *result.topology : Topology{};
}

TEST(GresConf, DgxH100LinesCarryTypeFileCoresAndLinks) {
  GresConf conf = format_gres_conf(load("dgx-h100-nvswitch.xml"));
  ASSERT_TRUE(conf.error.empty()) << conf.error;
  ASSERT_EQ(conf.lines.size(), 8u);
  EXPECT_EQ(conf.lines[0],
            "Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-7 Links=-1,18,18,18,18,18,18,18");
  EXPECT_EQ(conf.lines[7],
            "Name=gpu Type=h100 File=/dev/nvidia7 Cores=8-15 Links=18,18,18,18,18,18,18,-1");
}

TEST(GresConf, V100CubeMeshLinksAndFilePattern) {
  GresConfOptions options;
  options.file_pattern = "/dev/fake/gpu%d";
  options.with_type = false;
  GresConf conf = format_gres_conf(load("v100-cubemesh8.xml"), options);
  ASSERT_EQ(conf.lines.size(), 8u);
  EXPECT_EQ(conf.lines[0], "Name=gpu File=/dev/fake/gpu0 Cores=0-7 Links=-1,1,1,2,2,0,0,0");
  EXPECT_EQ(conf.lines[5], "Name=gpu File=/dev/fake/gpu5 Cores=8-15 Links=0,2,0,0,1,-1,2,1");
  options.file_pattern = "/dev/nvidia";  // no %d: the index is appended
  EXPECT_EQ(format_gres_conf(load("v100-cubemesh4.xml"), options).lines[3].substr(0, 29),
            "Name=gpu File=/dev/nvidia3 Co");
}

TEST(GresConf, DgxA100CoresAreTheNumaGroupOrWholeSockets) {
  Topology topology = load("dgx-a100-like.xml");
  GresConf own = format_gres_conf(topology);
  EXPECT_EQ(own.lines[0],
            "Name=gpu Type=a100 File=/dev/nvidia0 Cores=6-7 "
            "Links=-1,12,12,12,12,12,12,12");
  EXPECT_EQ(own.lines[4].find("Cores=14-15 "), 37u) << own.lines[4];
  GresConfOptions sockets;
  sockets.whole_sockets = true;
  GresConf widened = format_gres_conf(topology, sockets);
  EXPECT_NE(widened.lines[0].find(" Cores=0-7 "), std::string::npos) << widened.lines[0];
  EXPECT_NE(widened.lines[4].find(" Cores=8-15 "), std::string::npos) << widened.lines[4];
}

TEST(GresConf, EveryTestTopologyPassesSlurmsLinksRules) {
  for (const char* name :
       {"dgx-a100-like.xml", "dgx-h100-like.xml", "dgx-h100-nvswitch.xml", "l40s-pcie4.xml",
        "t4-pcie8.xml", "v100-cubemesh4.xml", "v100-cubemesh8.xml", "flat-single-gpu.xml"}) {
    SCOPED_TRACE(name);
    Topology topology = load(name);
    GresConf conf = format_gres_conf(topology);
    EXPECT_TRUE(conf.error.empty()) << conf.error;
    ASSERT_EQ(conf.lines.size(), topology.gpus.size());
    for (const Gpu& gpu : topology.gpus) {
      EXPECT_EQ(validate_links(gpu.links, topology.gpus.size(), gpu.index), "");
    }
  }
  EXPECT_EQ(format_gres_conf(load("t4-pcie8.xml")).lines[2],
            "Name=gpu Type=t4 File=/dev/nvidia2 Cores=0-7 Links=0,0,-1,0,0,0,0,0");
  EXPECT_EQ(format_gres_conf(load("flat-single-gpu.xml")).lines[0],
            "Name=gpu Type=gpu File=/dev/nvidia0 Cores=0-3 Links=-1");
}

TEST(GresConf, InvalidLinksAreRefused) {
  EXPECT_NE(validate_links({-1, 2}, 3, 0), "");      // count != GPUs
  EXPECT_NE(validate_links({-1, -1, 0}, 3, 0), "");  // two selves
  EXPECT_NE(validate_links({0, 2, 1}, 3, 0), "");    // no self
  EXPECT_NE(validate_links({-1, 1024, 0}, 3, 0), "");
  EXPECT_NE(validate_links({-1, -3, 0}, 3, 0), "");
  EXPECT_NE(validate_links({0, -1, 0}, 3, 0), "");  // -1 not at the GPU's index
  EXPECT_EQ(validate_links({-1, -2, 1023}, 3, 0), "");
  Topology broken = load("v100-cubemesh4.xml");
  broken.gpus[1].links.pop_back();
  GresConf conf = format_gres_conf(broken);
  EXPECT_TRUE(conf.lines.empty());
  EXPECT_NE(conf.error.find("GPU 1"), std::string::npos) << conf.error;
}

TEST(GpuTable, ShowsEveryGpuWithLocalityAndLinks) {
  std::string table = format_gpu_table(load("dgx-a100-like.xml"));
  EXPECT_NE(table.find("8 GPU(s), 16 cores in 2 socket(s), NVLink matrix present"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("GPU  BUS ID        MODEL                  MEMORY    CORES  NUMA  LINKS\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("0    0000:07:00.0  NVIDIA A100-SXM4-80GB  79.7 GiB  6-7    3     "
                       "-1,12,12,12,12,12,12,12\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 10);  // summary, header, 8 GPUs
  std::string pcie = format_gpu_table(load("l40s-pcie4.xml"));
  EXPECT_NE(pcie.find("NVLink not known (links 0)"), std::string::npos) << pcie;
  EXPECT_NE(format_gpu_table(load("flat-single-gpu.xml")).find("unknown"), std::string::npos);
}

TEST(Formatting, ShortModelNames) {
  EXPECT_EQ(short_model_name("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(short_model_name("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(short_model_name("Tesla V100-SXM2-32GB"), "v100");
  EXPECT_EQ(short_model_name("Tesla T4"), "t4");
  EXPECT_EQ(short_model_name("NVIDIA L40S"), "l40s");
  EXPECT_EQ(short_model_name("NVIDIA RTX A6000"), "rtx_a6000");
  EXPECT_EQ(short_model_name("NVIDIA GeForce RTX 4090"), "rtx_4090");
  EXPECT_EQ(short_model_name("NVIDIA H200"), "h200");
  EXPECT_EQ(short_model_name(""), "gpu");
}

TEST(Formatting, RangedLists) {
  EXPECT_EQ(format_ranged_list({}), "");
  EXPECT_EQ(format_ranged_list({5}), "5");
  EXPECT_EQ(format_ranged_list({3, 0, 1, 2, 48, 49, 50, 7, 7}), "0-3,7,48-50");
  EXPECT_EQ(parse_ranged_list("0-23,48-71")->size(), 48u);
  EXPECT_EQ(*parse_ranged_list("0-3,7"), (std::vector<int>{0, 1, 2, 3, 7}));
  EXPECT_FALSE(parse_ranged_list("3-1"));
  EXPECT_FALSE(parse_ranged_list("1,,2"));
  EXPECT_FALSE(parse_ranged_list("a"));
  std::vector<int> cores = {0, 1, 2, 9, 10, 31};
  EXPECT_EQ(*parse_ranged_list(format_ranged_list(cores)), cores);
  EXPECT_EQ(join_comma({-1, 18, 0}), "-1,18,0");
  EXPECT_EQ(format_memory(0), "unknown");
  EXPECT_EQ(format_memory(80ull << 30), "80.0 GiB");
}

}  // namespace
}  // namespace egpu::topo
