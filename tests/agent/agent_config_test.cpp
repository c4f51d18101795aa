// The agent's configuration as it starts: what stops it, and that it says
// why (systemd's ExecStartPre runs `egpu-agentd --check`).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "core/util/subprocess.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

// How long a check that must finish may take: for a hung one, not a
// measure of a busy host.
constexpr int kRunLimitMs = 60'000;

TEST(AgentConfig, BadConfigurationExitsWithAClearMessage) {
  AgentProcess agent("SliceMs=500\n");
  EXPECT_FALSE(agent.start());
  EXPECT_NE(agent.log().find("SliceMs=500: must be between 1 and 50"), std::string::npos)
      << agent.log();
}

TEST(AgentConfig, AnUnknownMonitorGroupIsAClearError) {
  AgentProcess agent("MonitorGroup=egpu-no-such-group\n");
  EXPECT_FALSE(agent.start());
  EXPECT_NE(agent.log().find("MonitorGroup=egpu-no-such-group: no such group"), std::string::npos)
      << agent.log();
}

// Between the agent's bind and its chmod, a user who may rename in the
// socket's directory could put a symlink to /etc/shadow in the socket's
// place; one who may rename above RuntimeDir could swap it for a directory
// of theirs. Such directories are refused, named.
TEST(AgentConfig, DirectoriesOtherUsersMayChangeAreRefused) {
  AgentProcess agent;
  const std::string open = agent.dir() + "/open";
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  ASSERT_EQ(mkdir((open + "/run").c_str(), 0755), 0);
  std::ofstream(agent.config_path()) << "RuntimeDir=" << agent.dir() << "/run\nSocketPath=" << open
                                     << "/agent.sock\nGpuCount=1\nGpuMemory=1024M\n";
  EXPECT_FALSE(agent.start());
  const std::string who = " (owner uid " + std::to_string(geteuid()) + ", group " +
                          std::to_string(getegid()) + ", mode 0777)";
  EXPECT_NE(agent.log().find("socket " + open + "/agent.sock: " + open + who +
                             " can be changed by another user"),
            std::string::npos)
      << agent.log();
  std::ofstream(agent.config_path())
      << "RuntimeDir=" << open << "/run\nSocketPath=" << agent.socket()
      << "\nGpuCount=1\nGpuMemory=1024M\n";
  EXPECT_FALSE(agent.start());
  EXPECT_NE(agent.log().find("runtime directory " + open + "/run: " + open + who),
            std::string::npos)
      << agent.log();
}

// systemd runs `egpu-agentd --check` before the agent (ExecStartPre): what
// would stop the agent at start fails there, named.
TEST(AgentConfig, CheckFindsWhatWouldStopTheAgent) {
  AgentProcess agent;
  const auto check = [&](const std::string& config) {
    std::ofstream(agent.config_path()) << config;
    return run_processes({{EGPU_AGENTD_PATH, "--check", "-f", agent.config_path()}}, kRunLimitMs)
        .front();
  };
  auto run = check("MonitorGroup=egpu-no-such-group\n");
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find(agent.config_path() + ": MonitorGroup=egpu-no-such-group: no such group"),
            std::string::npos)
      << run.err;
  const std::string open = agent.dir() + "/open";
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  run = check("SocketPath=" + open + "/agent.sock\n");
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find(open + " (owner uid"), std::string::npos) << run.err;
  run = check("MonitorGroup=\n");  // empty: none
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, agent.config_path() + ": ok\n");
  // A directory read as an empty file: the defaults, said to be fine.
  run = run_processes({{EGPU_AGENTD_PATH, "--check", "-f", agent.dir()}}, kRunLimitMs).front();
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("is not a regular file (a directory)"), std::string::npos) << run.err;
}

TEST(AgentConfig, MissingGpuMemoryIsAClearError) {
  AgentProcess agent;
  // A topology without memory sizes (no NVML on this node) and no GpuMemory=.
  std::ofstream(agent.config_path())
      << "RuntimeDir=" << agent.dir() << "/run\nSocketPath=" << agent.socket()
      << "\nTopologyXml=" << EGPU_TEST_DATA_DIR << "/topologies/flat-single-gpu.xml\n";
  EXPECT_FALSE(agent.start());
  EXPECT_NE(agent.log().find("memory size of GPU 0 is unknown"), std::string::npos) << agent.log();
  EXPECT_NE(agent.log().find("set GpuMemory="), std::string::npos) << agent.log();
}

}  // namespace
}  // namespace egpu::test
