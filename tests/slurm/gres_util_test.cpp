// Unit tests of the Slurm-independent parts of gres/: the egpu.conf key
// reader and the TRES request parser used by job_submit/egpu.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "egpu_conf.h"
#include "egpu_request.h"

namespace {

std::string Find(const char* text, const char* key) {
  char out[256];
  int rc = egpu_conf_find(text, key, out, sizeof(out));
  if (rc < 0) return "<overflow>";
  return rc ? std::string(out) : std::string("<absent>");
}

TEST(EgpuConf, FindsKeyCaseInsensitiveWithBlanksCommentsAndQuotes) {
  EXPECT_EQ(Find("TopologyXml=/a/b.xml\n", "TopologyXml"), "/a/b.xml");
  EXPECT_EQ(Find("  topologyxml =  /a/b.xml  # test node\n", "TopologyXml"), "/a/b.xml");
  EXPECT_EQ(Find("TopologyXml=\"/with space.xml\"", "TopologyXml"), "/with space.xml");
  EXPECT_EQ(Find("# TopologyXml=/commented.xml\nSliceMs=10\n", "TopologyXml"), "<absent>");
  EXPECT_EQ(Find("TopologyXmlExtra=/x\n", "TopologyXml"), "<absent>");
}

TEST(EgpuConf, LastOccurrenceWins) {
  EXPECT_EQ(Find("TopologyXml=/first\nTopologyXml=/second\n", "TopologyXml"), "/second");
}

TEST(EgpuConf, ReportsOverflowInsteadOfTruncating) {
  char out[4];
  EXPECT_EQ(egpu_conf_find("K=12345\n", "K", out, sizeof(out)), -1);
}

TEST(EgpuConf, ReadsFileAndTreatsMissingFileAsAbsent) {
  auto path = std::filesystem::temp_directory_path() / "egpu_conf_test.conf";
  {
    std::ofstream f(path);
    f << "# egpu.conf\nTopologyXml = /data/topo.xml\n";
  }
  char out[64];
  EXPECT_EQ(egpu_conf_file_find(path.c_str(), "TopologyXml", out, sizeof(out)), 1);
  EXPECT_STREQ(out, "/data/topo.xml");
  std::filesystem::remove(path);
  EXPECT_EQ(egpu_conf_file_find(path.c_str(), "TopologyXml", out, sizeof(out)), 0);
}

uint64_t Units(const char* tres, egpu_request_status_t want) {
  uint64_t units = 12345;
  EXPECT_EQ(egpu_request_units(tres, &units), want) << tres;
  return units;
}

TEST(EgpuRequest, ReadsBothReleasesFormats) {
  EXPECT_EQ(Units("gres/egpu:30", EGPU_REQUEST_FOUND), 30u);  // 24.11
  EXPECT_EQ(Units("gres:egpu:30", EGPU_REQUEST_FOUND), 30u);  // 22.05
  EXPECT_EQ(Units("gres/egpu:v100:70", EGPU_REQUEST_FOUND), 70u);
  EXPECT_EQ(Units("gres/egpu", EGPU_REQUEST_FOUND), 1u);
  EXPECT_EQ(Units("gres/egpu:v100", EGPU_REQUEST_FOUND), 1u);
  EXPECT_EQ(Units("gres/egpu:0", EGPU_REQUEST_FOUND), 0u);
  EXPECT_EQ(Units("gres/egpu:2k", EGPU_REQUEST_FOUND), 2048u);
}

TEST(EgpuRequest, IgnoresOtherGresAndSumsEgpuEntries) {
  Units("gres/gpu:2", EGPU_REQUEST_NONE);
  Units("gres/egpux:2", EGPU_REQUEST_NONE);
  Units("", EGPU_REQUEST_NONE);
  Units(nullptr, EGPU_REQUEST_NONE);
  EXPECT_EQ(Units("gres/gpu:1,gres/egpu:40", EGPU_REQUEST_FOUND), 40u);
  EXPECT_EQ(Units("gres/egpu:a:40,gres/egpu:b:80", EGPU_REQUEST_FOUND), 120u);
}

TEST(EgpuRequest, RejectsUnreadableCounts) {
  Units("gres/egpu:v100:x", EGPU_REQUEST_BAD);
  Units("gres/egpu:a:b:3", EGPU_REQUEST_BAD);
  Units("gres/egpu:v100:12q", EGPU_REQUEST_BAD);
}

}  // namespace
