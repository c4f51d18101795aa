// After a restart the agent reads each instance page's process slots back to
// find the processes it had. The page is its job's to write: a slot is a
// claim, and whatever it names must cost the restart nothing and gain the
// job nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/protocol/control_client.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/unique_fd.h"
#include "tests/agent/agent_fixture.h"
#include "tests/security/agent_checks.h"
#include "tests/security/tenants.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;

constexpr uid_t kStranger = 4545;  // a user with no job on the node

// A process forked as root that maps `page` (if given), splits a region into
// `mappings` mappings, then takes `uid`, and waits; killed and reaped with
// this object.
class Bystander {
 public:
  Bystander(const std::string& page, int mappings, uid_t uid) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      bool ok = true;
      std::optional<shm::Mapping> mapped;  // held until killed
      if (!page.empty()) {
        const int fd = open(page.c_str(), O_RDWR | O_CLOEXEC);
        auto m = shm::map_fd(fd, sizeof(shm::InstancePage), shm::Access::kReadWrite);
        ok = m.ok();
        if (ok) mapped.emplace(std::move(*m));
      }
      // Every other page of a region read-only: neighbours never merge.
      if (mappings > 0) {
        const long size = sysconf(_SC_PAGESIZE);
        auto* region = static_cast<char*>(mmap(nullptr, size * 2 * mappings, PROT_NONE,
                                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        ok = ok && region != MAP_FAILED;
        for (int i = 0; ok && i < mappings / 2; ++i)
          ok = mprotect(region + size * 2 * i, size, PROT_READ) == 0;
      }
      ok = ok && setgid(uid) == 0 && setuid(uid) == 0;
      const char c = ok ? 'y' : 'n';
      (void)!write(ready[1], &c, 1);
      for (;;)
        pause();
    }
    close(ready[1]);
    char c = 0;
    ready_ = pid_ > 0 && read(ready[0], &c, 1) == 1 && c == 'y';
    close(ready[0]);
  }
  ~Bystander() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Bystander(const Bystander&) = delete;
  Bystander& operator=(const Bystander&) = delete;
  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

std::string page_of(const AgentProcess& agent, uint64_t instance) {
  return agent.dir() + "/run/instance-" + std::to_string(instance) + ".d/page";
}

// Writes `pids` into the first slots of an instance's page, as its owner may.
bool forge(const std::string& page, const std::vector<pid_t>& pids) {
  UniqueFd fd(open(page.c_str(), O_RDWR | O_CLOEXEC));
  auto map = shm::map_fd(fd.get(), sizeof(shm::InstancePage), shm::Access::kReadWrite);
  if (!map) return false;
  for (size_t i = 0; i < pids.size() && i < shm::kMaxProcsPerInstance; ++i)
    map->as<shm::InstancePage>()->procs[i].pid.store(pids[i]);
  return true;
}

// Each instance's process count in root's status, by job.
std::map<uint64_t, int> processes_by_job(const AgentProcess& agent) {
  std::map<uint64_t, int> out;
  auto c = protocol::ControlClient::connect(agent.socket(), 30'000);  // for a hung agent
  if (!c) return out;
  const auto st = c->call(protocol::StatusRequest{0, 0});
  if (!st) return out;
  const auto status = nlohmann::json::parse(st->text);
  for (const auto& inst : status["gpus"][0]["instances"])
    out[inst.at("job").get<uint64_t>()] = inst.value("processes", -1);
  return out;
}

class ForgedSlots : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
  }
  AgentProcess agent;
};

// Slots that name another user's processes (init; a process that maps the
// page and is another user's) on a user's page are not adopted: an attach
// proved its process the user's, and only a privileged process takes another
// uid later.
TEST_F(ForgedSlots, AnotherUsersProcessOnAUsersPageIsNotAdopted) {
  ASSERT_TRUE(agent.start()) << agent.log();
  const auto created = agent.call(create_request(kMalloryJob, 50, kMallory));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  const std::string page = page_of(agent, created->instance_id);
  Bystander mapper(page, 0, kStranger);
  ASSERT_TRUE(mapper.ready()) << "no process of uid " << kStranger << " maps the page";
  ASSERT_TRUE(forge(page, {1, mapper.pid(), mapper.pid()}));
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_EQ(processes_by_job(agent)[kMalloryJob], 0);
  EXPECT_NE(agent.log().find("3 process slot(s) name a process not its user's (4242), such as "
                             "process 1 of uid 0: not adopted"),
            std::string::npos);
  EXPECT_TRUE(heartbeat_advances(agent));
}

// On root's page (root's to write) another uid's process that maps the page
// is a server that dropped its privileges after attaching: adopted. One that
// does not map it is not.
TEST_F(ForgedSlots, ARootServerThatDroppedItsPrivilegesIsAdopted) {
  ASSERT_TRUE(agent.start()) << agent.log();
  const auto created = agent.call(create_request(7, 50, 0));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  const std::string page = page_of(agent, created->instance_id);
  Bystander server(page, 0, kStranger);
  Bystander other("", 0, kStranger);
  ASSERT_TRUE(server.ready() && other.ready());
  ASSERT_TRUE(forge(page, {server.pid(), other.pid()}));
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_EQ(processes_by_job(agent)[7], 1);
  EXPECT_NE(agent.log().find("1 process slot(s) name a process not its user's (0), such as "
                             "process " +
                             std::to_string(other.pid()) +
                             " of uid 4545, that does not map "
                             "its page: not adopted"),
            std::string::npos);
}

// Every slot of twelve pages names a process with 60,000 mappings (under
// vm.max_map_count's 65,530 with a sanitizer's own): reading its maps costs
// about 30 ms, so the agent's start took 12 x 64 of them (over 20 s on an
// idle machine) before anyone was served.
TEST_F(ForgedSlots, SlotsNamingAProcessWithManyMappingsDoNotHoldUpARestart) {
  ASSERT_TRUE(agent.start()) << agent.log();
  Bystander heavy("", 60'000, kStranger);
  ASSERT_TRUE(heavy.ready()) << "no process with 60,000 mappings";
  std::vector<uint64_t> instances;
  for (uint64_t job = 1; job <= 12; ++job) {
    const auto created = agent.call(create_request(job, 8, kMallory));
    ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
    instances.push_back(created->instance_id);
  }
  for (const uint64_t id : instances)
    ASSERT_TRUE(forge(page_of(agent, id), std::vector<pid_t>(64, heavy.pid())));
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << "the agent did not come back:\n" << agent.log();
  const auto processes = processes_by_job(agent);
  EXPECT_EQ(processes.size(), 12u);
  for (const auto& [job, count] : processes)
    EXPECT_EQ(count, 0) << "job " << job;
  EXPECT_TRUE(heartbeat_advances(agent));
}

}  // namespace
}  // namespace egpu::test
