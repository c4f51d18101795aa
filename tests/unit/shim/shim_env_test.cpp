#include "shim/shim_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/env/egpu_env_names.h"

namespace egpu::shim {
namespace {

std::map<std::string, std::string> g_env;

const char* fake_getenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

ShimEnv parse(std::map<std::string, std::string> env) {
  g_env = std::move(env);
  return parse_shim_env(&fake_getenv);
}

TEST(ShimEnv, NoJobIdIsUnmanaged) {
  const ShimEnv e = parse({{EGPU_ENV_GPU_INDICES, "0"}});
  EXPECT_FALSE(e.managed);
  EXPECT_TRUE(e.problem.empty());
}

TEST(ShimEnv, FullEnvironment) {
  const ShimEnv e = parse({{EGPU_ENV_JOB_ID, "123"},
                           {EGPU_ENV_STEP_ID, "4294967291"},
                           {EGPU_ENV_GPU_INDICES, "2,0,5"},
                           {EGPU_ENV_SOCKET, "/tmp/a.sock"},
                           {EGPU_ENV_FAIL_MODE, "closed"},
                           {EGPU_ENV_DEBUG, "1"}});
  EXPECT_TRUE(e.managed);
  EXPECT_TRUE(e.problem.empty()) << e.problem;
  EXPECT_EQ(e.job_id, 123u);
  EXPECT_EQ(e.step_id, 4294967291u);
  EXPECT_EQ(e.gpu_indices, (std::vector<uint32_t>{2, 0, 5}));
  EXPECT_EQ(e.socket_path, "/tmp/a.sock");
  ASSERT_TRUE(e.fail_mode.has_value());
  EXPECT_EQ(*e.fail_mode, FailMode::kClosed);
  EXPECT_TRUE(e.debug);
}

TEST(ShimEnv, DefaultsSocketAndFailMode) {
  const ShimEnv e =
      parse({{EGPU_ENV_JOB_ID, "1"}, {EGPU_ENV_STEP_ID, "0"}, {EGPU_ENV_GPU_INDICES, "0"}});
  EXPECT_EQ(e.socket_path, "/run/egpu/agent.sock");
  EXPECT_FALSE(e.fail_mode.has_value());
  EXPECT_FALSE(e.debug);
}

TEST(ShimEnv, BadValuesAreProblemsThatNameTheVariable) {
  EXPECT_NE(parse({{EGPU_ENV_JOB_ID, "12x"}, {EGPU_ENV_STEP_ID, "0"}, {EGPU_ENV_GPU_INDICES, "0"}})
                .problem.find(EGPU_ENV_JOB_ID),
            std::string::npos);
  EXPECT_NE(parse({{EGPU_ENV_JOB_ID, "0"}, {EGPU_ENV_STEP_ID, "0"}, {EGPU_ENV_GPU_INDICES, "0"}})
                .problem.find(EGPU_ENV_JOB_ID),
            std::string::npos);
  EXPECT_NE(
      parse({{EGPU_ENV_JOB_ID, "1"}, {EGPU_ENV_GPU_INDICES, "0"}}).problem.find(EGPU_ENV_STEP_ID),
      std::string::npos);
  for (const char* bad : {"", "0,", ",1", "1,,2", "a", "64", "-1"}) {
    EXPECT_NE(parse({{EGPU_ENV_JOB_ID, "1"}, {EGPU_ENV_STEP_ID, "0"}, {EGPU_ENV_GPU_INDICES, bad}})
                  .problem.find(EGPU_ENV_GPU_INDICES),
              std::string::npos)
        << bad;
  }
}

TEST(ShimEnv, UnknownFailModeIsAWarningNotAProblem) {
  const ShimEnv e = parse({{EGPU_ENV_JOB_ID, "1"},
                           {EGPU_ENV_STEP_ID, "0"},
                           {EGPU_ENV_GPU_INDICES, "0"},
                           {EGPU_ENV_FAIL_MODE, "ajar"}});
  EXPECT_TRUE(e.problem.empty());
  EXPECT_FALSE(e.fail_mode.has_value());
  EXPECT_NE(e.warning.find("ajar"), std::string::npos);
}

TEST(ShimEnv, DebugZeroIsOff) {
  EXPECT_FALSE(parse({{EGPU_ENV_DEBUG, "0"}}).debug);
  EXPECT_TRUE(parse({{EGPU_ENV_DEBUG, "yes"}}).debug);
}

}  // namespace
}  // namespace egpu::shim
