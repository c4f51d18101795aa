// An agent started on pages another version of it wrote (an upgrade that
// changed the page layout): `egpu-agentd --check-pages` says so beforehand
// (the package's postinst then leaves the running agent alone); started
// anyway, it cannot take their instances over, says so,
// and starts on new files, leaving the old ones untouched to the shims that
// still map them, which then see their agent gone (FailMode) instead of
// reading a layout that is not theirs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/subprocess.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
// How long a check that must finish may take: for a hung one, not a
// measure of a busy host.
constexpr int kRunLimitMs = 60'000;

ino_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// postinst replaces a running agent only when --check-pages says yes: not
// when the new agent would not start (its unit's --check), whatever the
// pages (the working agent would be stopped for none).
TEST(AgentUpgrade, CheckPagesSaysNoWhenTheNewAgentWouldNotStart) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_EQ(agent.call(create_request(1, 40, 4242))->status, ReplyStatus::kOk);
  auto check =
      run_processes({{EGPU_AGENTD_PATH, "-f", agent.config_path(), "--check-pages"}}, kRunLimitMs);
  ASSERT_EQ(check.front().exit_code, 0) << check.front().out << check.front().err;
  std::ofstream(agent.config_path(), std::ios::app) << "MonitorGroup=egpu-no-such-group\n";
  check =
      run_processes({{EGPU_AGENTD_PATH, "-f", agent.config_path(), "--check-pages"}}, kRunLimitMs);
  EXPECT_EQ(check.front().exit_code, 2) << check.front().out << check.front().err;
  EXPECT_NE(check.front().err.find("MonitorGroup=egpu-no-such-group: no such group"),
            std::string::npos)
      << check.front().err;
}

TEST(AgentUpgrade, PagesOfAnotherLayoutAreLeftToTheirShimsNotTakenOver) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(1, 40, 4242));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  agent.kill_hard();

  // What the previous version left: its GPU page says layout N-1. A shim of
  // the running step maps it, as shims do (read-only).
  const std::string path = agent.dir() + "/run/gpu0";
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const uint32_t older = shm::kLayoutVersion - 1;
  ASSERT_EQ(::pwrite(fd, &older, sizeof older, offsetof(shm::GpuPage, version)),
            static_cast<ssize_t>(sizeof older));
  auto mapped = shm::map_fd(fd, sizeof(shm::GpuPage), shm::Access::kReadOnly);
  ::close(fd);
  ASSERT_TRUE(mapped) << mapped.error();
  const auto* old_page = mapped->as<const shm::GpuPage>();
  const ino_t old_inode = inode_of(path);
  const int64_t old_beat = old_page->heartbeat_ns.load();

  // What the package's postinst asks before it restarts the agent: no.
  auto check =
      run_processes({{EGPU_AGENTD_PATH, "-f", agent.config_path(), "--check-pages"}}, kRunLimitMs);
  EXPECT_EQ(check.front().exit_code, 3) << check.front().out << check.front().err;
  EXPECT_NE(check.front().err.find(path + " has page layout " + std::to_string(older) +
                                   ", this agent's is " + std::to_string(shm::kLayoutVersion)),
            std::string::npos)
      << check.front().err;

  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_NE(agent.log().find("page layout " + std::to_string(older) +
                             " (this one: " + std::to_string(shm::kLayoutVersion) + ")"),
            std::string::npos)
      << agent.log();
  EXPECT_NE(inode_of(path), old_inode);
  // Not taken over: the step's instance is not this agent's, and its page
  // file is gone from the runtime directory (its processes keep their map).
  EXPECT_EQ(agent.call(protocol::ShowRequest{created->instance_id})->status,
            ReplyStatus::kNotFound);
  const std::string instance_dir =
      agent.dir() + "/run/instance-" + std::to_string(created->instance_id) + ".d";
  EXPECT_EQ(inode_of(instance_dir + "/page"), 0u) << instance_dir;
  EXPECT_NE(agent.log().find("removing " + instance_dir + ": no agent holds instance"),
            std::string::npos)
      << agent.log();
  // The old page is as the previous agent left it: its shims read their own
  // layout, and a heartbeat that no longer moves.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(old_page->magic, shm::kGpuPageMagic);
  EXPECT_EQ(old_page->version, older);
  EXPECT_EQ(old_page->heartbeat_ns.load(), old_beat);
  // The new agent works on its new page, which the next one can take over.
  auto again = agent.call(create_request(2, 40, 4242));
  EXPECT_EQ(again->status, ReplyStatus::kOk) << again->text;
  check =
      run_processes({{EGPU_AGENTD_PATH, "-f", agent.config_path(), "--check-pages"}}, kRunLimitMs);
  EXPECT_EQ(check.front().exit_code, 0) << check.front().out << check.front().err;
}

// One agent per runtime directory: a second one started by hand is refused
// before it touches the first one's socket or pages.
TEST(AgentUpgrade, ASecondAgentOnTheSameRuntimeDirectoryIsRefused) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(1, 40, 4242));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  auto second = run_processes({{EGPU_AGENTD_PATH, "-f", agent.config_path()}}, 30'000);
  EXPECT_EQ(second.front().exit_code, 1) << second.front().err;
  EXPECT_NE(second.front().err.find("another egpu-agentd runs on"), std::string::npos)
      << second.front().err;
  // The first one serves on, its instance and page untouched.
  auto shown = agent.call(protocol::ShowRequest{created->instance_id});
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->status, ReplyStatus::kOk) << shown->text;
}

// Pages of an agent before page directories (RuntimeDir/instance-N): a
// restarted agent takes them over where they are. Their names go at the next
// start after their instances ended, not while the agent runs: an unlink in
// RuntimeDir that waits on a page's lock (its user can hold it) would hold
// RuntimeDir's, which every create takes.
TEST(AgentUpgrade, PagesOfTheLayoutBeforePageDirectoriesAreTakenOver) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(1, 50, 0));
  ASSERT_TRUE(created) << created.error();
  ASSERT_EQ(created->status, protocol::ReplyStatus::kOk) << created->text;
  const std::string id = std::to_string(created->instance_id);
  const std::string dir = agent.dir() + "/run/instance-" + id + ".d";
  const std::string legacy = agent.dir() + "/run/instance-" + id;
  agent.kill_hard();
  // Where the previous layout kept it.
  ASSERT_EQ(rename((dir + "/page").c_str(), legacy.c_str()), 0);
  ASSERT_EQ(rmdir(dir.c_str()), 0);
  const ino_t page_inode = inode_of(legacy);
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_EQ(agent.call(protocol::ShowRequest{created->instance_id})->status,
            protocol::ReplyStatus::kOk)
      << agent.log();
  // The same file, not a fresh page in a new directory.
  auto att = attach(agent.socket(), 1, 0, 0);
  ASSERT_TRUE(att) << att.error();
  ASSERT_EQ(att->reply.status, protocol::ReplyStatus::kOk) << att->reply.text;
  struct stat st {};
  ASSERT_GE(att->fds.size(), 2u);
  ASSERT_EQ(fstat(att->fds[1], &st), 0);
  EXPECT_EQ(st.st_ino, page_inode);
  EXPECT_NE(access(dir.c_str(), F_OK), 0);
  for (int fd : att->fds)
    close(fd);
  EXPECT_EQ(agent.call(protocol::RemoveRequest{1, protocol::kAllSteps, 0})->status,
            protocol::ReplyStatus::kOk);
  // A new step of the job gets a page directory, whatever the old name.
  auto next = agent.call(create_request(1, 50, 0));
  ASSERT_TRUE(next) << next.error();
  ASSERT_EQ(next->status, protocol::ReplyStatus::kOk) << next->text;
  EXPECT_EQ(
      access(
          (agent.dir() + "/run/instance-" + std::to_string(next->instance_id) + ".d/page").c_str(),
          F_OK),
      0);
  EXPECT_EQ(access(legacy.c_str(), F_OK), 0) << "unlinked in RuntimeDir while the agent runs";
  // The next start removes it (on a chore worker: the deadline only ends a
  // failing case).
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (access(legacy.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(access(legacy.c_str(), F_OK), 0);
}

// The default MaxInstancesPerGpu went from 64 to 256: an agent of the new
// default takes over the pages of one of the old (their slots past 64 were
// made free with them) instead of leaving their instances to FailMode. One
// of fewer slots than the pages' still cannot.
TEST(AgentUpgrade, AnAgentWithMoreSlotsTakesOverPagesOfFewer) {
  AgentProcess agent("MaxInstancesPerGpu=64\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(1, 40, 4242));
  ASSERT_TRUE(created) << created.error();
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  agent.kill_hard();
  // The agent's config with `line` for the MaxInstancesPerGpu it had.
  auto with = [&](const std::string& line) {
    std::ifstream in(agent.config_path());
    std::stringstream config;
    for (std::string l; std::getline(in, l);)
      config << (l.starts_with("MaxInstancesPerGpu=") ? line : l) << '\n';
    std::ofstream out(agent.config_path(), std::ios::trunc);
    out << config.str();
    return static_cast<bool>(out.flush());
  };
  ASSERT_TRUE(with("MaxInstancesPerGpu=256"));
  auto check =
      run_processes({{EGPU_AGENTD_PATH, "-f", agent.config_path(), "--check-pages"}}, kRunLimitMs);
  EXPECT_EQ(check.front().exit_code, 0) << check.front().out << check.front().err;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto shown = agent.call(protocol::ShowRequest{created->instance_id});
  ASSERT_TRUE(shown) << shown.error();
  EXPECT_EQ(shown->status, ReplyStatus::kOk) << agent.log();
  // Back to the old agent's count: no step used a slot past it, so the
  // pages still say 64 and are taken over.
  agent.kill_hard();
  ASSERT_TRUE(with("MaxInstancesPerGpu=64"));
  check =
      run_processes({{EGPU_AGENTD_PATH, "-f", agent.config_path(), "--check-pages"}}, kRunLimitMs);
  EXPECT_EQ(check.front().exit_code, 0) << check.front().out << check.front().err;
  // Fewer than the pages': not taken over, and --check-pages says so first.
  ASSERT_TRUE(with("MaxInstancesPerGpu=32"));
  check =
      run_processes({{EGPU_AGENTD_PATH, "-f", agent.config_path(), "--check-pages"}}, kRunLimitMs);
  EXPECT_EQ(check.front().exit_code, 3) << check.front().out << check.front().err;
}

}  // namespace
}  // namespace egpu::test
