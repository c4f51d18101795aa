// egpuctl's relay through srun (nodeagent/egpuctl/slurm_relay.h): the
// environment the relay step is given.
#include "nodeagent/egpuctl/slurm_relay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace egpu::ctl {
namespace {

const char* const kRootsEnvironment[] = {"PATH=/usr/sbin:/usr/bin",
                                         "SLURM_CONF=/etc/slurm/slurm.conf",
                                         "SLURM_CPUS_PER_TASK=8",
                                         "SRUN_CPUS_PER_TASK=8",
                                         "LANG=C.UTF-8",
                                         "LC_TIME=en_GB.UTF-8",
                                         "VAULT_TOKEN=s.secret",
                                         "https_proxy=http://admin:password@proxy:3128",
                                         "HOME=/root",
                                         nullptr};

bool has(const std::vector<std::string>& env, const std::string& var) {
  return std::find(env.begin(), env.end(), var) != env.end();
}

// srun exports its environment to the relay step, whose processes are the
// job owner's (they can read /proc/PID/environ): root's variables were all
// handed to them but Slurm's.
TEST(SlurmRelay, AnotherUserGetsOnlyThePathSlurmConfAndLocale) {
  const auto env = relay_environment(kRootsEnvironment, /*for_another_user=*/true);
  EXPECT_EQ(env,
            (std::vector<std::string>{"PATH=/usr/sbin:/usr/bin", "SLURM_CONF=/etc/slurm/slurm.conf",
                                      "LANG=C.UTF-8", "LC_TIME=en_GB.UTF-8"}));
}

// A user's own relay keeps the user's environment, less the job's step
// options, which would shape the relay step like the job's.
TEST(SlurmRelay, TheCallersOwnRelayKeepsAllButSlurmsStepOptions) {
  const auto env = relay_environment(kRootsEnvironment, /*for_another_user=*/false);
  EXPECT_TRUE(has(env, "VAULT_TOKEN=s.secret"));
  EXPECT_TRUE(has(env, "HOME=/root"));
  EXPECT_TRUE(has(env, "SLURM_CONF=/etc/slurm/slurm.conf"));
  EXPECT_FALSE(has(env, "SLURM_CPUS_PER_TASK=8"));
  EXPECT_FALSE(has(env, "SRUN_CPUS_PER_TASK=8"));
  EXPECT_EQ(env.size(), 7u);
}

// The relayed answer is the job owner's output: nesting it 10^5 deep (200
// KB) overflowed root's stack in make_printable. It is refused like text
// that is not JSON; an agent's own answer still reads.
TEST(SlurmRelay, AnAnswerNestedPastAnyAgentsIsRefusedNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_TRUE(relayed_json(deep).is_discarded());
  const nlohmann::json agent_like = relayed_json(
      R"({"gpus":[{"instances":[{"id":1,"usage":{"device_s":1.5}}]}],"note":"a\u001b[2Jb"})");
  ASSERT_TRUE(agent_like.is_object());
  EXPECT_EQ(agent_like["gpus"][0]["instances"][0]["usage"]["device_s"], 1.5);
  EXPECT_EQ(agent_like["note"], "a?[2Jb");
}

}  // namespace
}  // namespace egpu::ctl
