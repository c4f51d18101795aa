// core/config's C API (egpu_config_c.h), through which gres/egpu reads
// egpu.conf: the same text must mean the same to the plugin as to the agent
// (egpu_config.h), errors included.
#include "core/config/egpu_config_c.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/config/egpu_config.h"

namespace egpu::config {
namespace {

// What the plugin gets for a text: TopologyXml= or "error: <message>".
std::string through_c(const std::string& text) {
  egpu_conf_t* conf = nullptr;
  char err[512] = "";
  if (egpu_conf_parse(text.c_str(), "egpu.conf", &conf, err, sizeof(err)) != 0) {
    EXPECT_EQ(conf, nullptr);
    return std::string("error: ") + err;
  }
  std::string xml = egpu_conf_topology_xml(conf);
  egpu_conf_free(conf);
  return xml;
}

// What the agent gets for the same text.
std::string through_cpp(const std::string& text) {
  auto c = parse_egpu_config(text, "egpu.conf");
  return c.ok() ? c->topology_xml : "error: " + c.error();
}

struct Case {
  const char* text;
  const char* want;  // TopologyXml= exactly, or the start of "error: <message>"
};

class SameMeaning : public ::testing::TestWithParam<Case> {};

TEST_P(SameMeaning, ForThePluginAndTheAgent) {
  const std::string got = through_c(GetParam().text);
  EXPECT_EQ(got, through_cpp(GetParam().text));
  const std::string want = GetParam().want;
  if (want.rfind("error: ", 0) == 0) {
    EXPECT_EQ(got.substr(0, want.size()), want);
  } else {
    EXPECT_EQ(got, want);
  }
}

INSTANTIATE_TEST_SUITE_P(
    EgpuConfigC, SameMeaning,
    ::testing::Values(
        Case{"", ""}, Case{"SliceMs=5 TopologyXml=/x.xml", "/x.xml"},
        Case{"topologyxml=/x.xml", "/x.xml"},
        Case{"TopologyXml=\"/with space.xml\"", "/with space.xml"},
        Case{"TopologyXml=/x.xml # a test node", "/x.xml"},
        Case{"# TopologyXml=/commented.xml", ""},
        Case{"A=1 TopologyXml=/x.xml", "error: egpu.conf:1: unknown key 'A'"},
        Case{"TopologyXml = /x.xml", "error: egpu.conf:1: key 'TopologyXml' has no '='"},
        Case{"TopologyXml=relative.xml", "error: egpu.conf:1: TopologyXml=relative.xml: must be"},
        Case{"TopologyXml=/a.xml\ntopologyXML=/b.xml",
             "error: egpu.conf:2: key 'topologyXML' is set twice"},
        Case{"TopologyXml=\"/unterminated.xml", "error: egpu.conf:1: value of 'TopologyXml' has"},
        Case{"SliceMs=0\nTopologyXml=/x.xml", "error: egpu.conf:1: SliceMs=0: must be"}));

class EgpuConfigCFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const int fd = mkstemp(path_);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  void TearDown() override { std::remove(path_); }

  // TopologyXml= of the file at path, or "error: <message>".
  static std::string load(const char* path, unsigned flags) {
    egpu_conf_t* conf = nullptr;
    char err[512] = "";
    if (egpu_conf_load(path, flags, &conf, err, sizeof(err)) != 0)
      return std::string("error: ") + err;
    std::string xml = egpu_conf_topology_xml(conf);
    egpu_conf_free(conf);
    return xml;
  }

  char path_[32] = "/tmp/egpu-conf-c-XXXXXX";
};

TEST_F(EgpuConfigCFile, ReadsTheFileAndNamesItAndTheLineInErrors) {
  std::ofstream(path_) << "# test node\nTopologyXml=/data/topo.xml\n";
  EXPECT_EQ(load(path_, 0), "/data/topo.xml");
  std::ofstream(path_) << "SliceMs=3\nBogus=1\n";
  EXPECT_EQ(load(path_, EGPU_CONF_MISSING_IS_DEFAULTS)
                .rfind("error: " + std::string(path_) + ":2: unknown key 'Bogus'", 0),
            0u);
}

TEST_F(EgpuConfigCFile, AMissingFileIsTheDefaultsOnlyWhenAskedFor) {
  std::remove(path_);
  EXPECT_EQ(load(path_, EGPU_CONF_MISSING_IS_DEFAULTS), "");
  const std::string refused = load(path_, 0);
  EXPECT_EQ(refused.rfind("error: cannot read configuration file " + std::string(path_), 0), 0u)
      << refused;
  EXPECT_EQ(load(path_, 2).rfind("error: egpu_conf_load: unknown flags 2", 0), 0u);
}

TEST(EgpuConfigC, PackNodesIsOffUnlessSaidYes) {
  for (const auto& [text, want] :
       {std::pair{"", 0}, std::pair{"PackNodes=yes", 1}, std::pair{"PackNodes=no", 0}}) {
    egpu_conf_t* conf = nullptr;
    char err[256] = "";
    ASSERT_EQ(egpu_conf_parse(text, "egpu.conf", &conf, err, sizeof(err)), 0) << err;
    EXPECT_EQ(egpu_conf_pack_nodes(conf), want) << text;
    egpu_conf_free(conf);
  }
  EXPECT_EQ(egpu_conf_pack_nodes(nullptr), 0);
}

TEST(EgpuConfigC, LongErrorsAreCutNotOverrun) {
  egpu_conf_t* conf = nullptr;
  char err[8];
  ASSERT_EQ(egpu_conf_parse("Bogus=1", "egpu.conf", &conf, err, sizeof(err)), -1);
  EXPECT_STREQ(err, "egpu.co");
}

TEST(EgpuConfigC, PathIsEgpuConfElseTheDefault) {
  const char* saved = std::getenv(EGPU_ENV_CONF);
  const std::string restore = saved != nullptr ? saved : "";
  setenv(EGPU_ENV_CONF, "/srv/egpu.conf", 1);
  EXPECT_STREQ(egpu_conf_path(), "/srv/egpu.conf");
  setenv(EGPU_ENV_CONF, "", 1);
  EXPECT_STREQ(egpu_conf_path(), EGPU_CONF_DEFAULT_PATH);
  unsetenv(EGPU_ENV_CONF);
  EXPECT_STREQ(egpu_conf_path(), "/etc/egpu/egpu.conf");
  if (saved != nullptr) setenv(EGPU_ENV_CONF, restore.c_str(), 1);
}

}  // namespace
}  // namespace egpu::config
