// The node agent's control socket, driven as egpuctl, SPANK and shims drive
// it: creation, authorisation by SO_PEERCRED, malformed input, attach.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/protocol/codec.h"
#include "core/shm/pages.h"
#include "core/util/subprocess.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
constexpr uid_t kAlice = 4242;
constexpr uid_t kBob = 4343;
// How long an egpuctl that must finish may take: for a hung one, not a
// measure of a busy host.
constexpr int kRunLimitMs = 60'000;

class AgentControl : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(agent.start()) << agent.log(); }
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
  }
  uint64_t create(uint64_t job, uint32_t units, uid_t uid, uint32_t gpu = 0) {
    auto r = agent.call(create_request(job, units, uid, gpu));
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, ReplyStatus::kOk) << r->text;
    return r->instance_id;
  }
  AgentProcess agent;
};

// egpuctl sends shrinks before grows: two values for one instance ended at
// the larger whatever their order ("12=40 12=30" left it at 40).
TEST_F(AgentControl, EgpuctlRefusesAnInstanceNamedTwiceInOneResize) {
  const uint64_t a = create(1, 25, 0);
  const std::string id = std::to_string(a);
  auto run = run_processes({{EGPU_EGPUCTL_PATH, "--socket", agent.socket(), "--local", "resize",
                             id + "=40", id + "=30"}},
                           kRunLimitMs)
                 .front();
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(
      run.err.find("instance " + id + " is named twice ('" + id + "=40' and '" + id + "=30')"),
      std::string::npos)
      << run.err;
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(nlohmann::json::parse(st->text)["gpus"][0]["allocated_units"], 25) << "it changed";
  // Nothing to change, and no instance 0: refused before the agent is asked.
  run = run_processes(
            {{EGPU_EGPUCTL_PATH, "--socket", agent.socket(), "--local", "resize", id + "="}},
            kRunLimitMs)
            .front();
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("'" + id + "=' gives neither units nor a mode"), std::string::npos)
      << run.err;
  run = run_processes({{EGPU_EGPUCTL_PATH, "--socket", agent.socket(), "--local", "show", "0"}},
                      kRunLimitMs)
            .front();
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("'0' is not an instance id (ids start at 1)"), std::string::npos)
      << run.err;
  // A socket path that names a directory is said to be one (--socket may
  // follow the command).
  run = run_processes({{EGPU_EGPUCTL_PATH, "--local", "status", "--socket", agent.dir()}},
                      kRunLimitMs)
            .front();
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("it is a directory, not a socket"), std::string::npos) << run.err;
  // --job goes through Slurm: with --local it was ignored.
  run = run_processes(
            {{EGPU_EGPUCTL_PATH, "--socket", agent.socket(), "--local", "status", "--job", "1"}},
            kRunLimitMs)
            .front();
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("status --job goes through Slurm"), std::string::npos) << run.err;
  // Without Slurm's commands, usage says so, not that no command knows the job.
  const std::vector<std::string> no_slurm{"PATH=/nonexistent"};
  run = run_processes({{EGPU_EGPUCTL_PATH, "usage", "12"}}, kRunLimitMs, &no_slurm).front();
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("usage needs Slurm's sacct or squeue, and neither can be run here"),
            std::string::npos)
      << run.err;
}

TEST_F(AgentControl, CreateStatusResizeRemove) {
  const uint64_t a = create(1, 70, kAlice);
  const uint64_t b = create(2, 30, kBob);
  EXPECT_NE(a, b);
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st.ok());
  auto j = nlohmann::json::parse(st->text);
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["allocated_units"], 100);
  EXPECT_EQ(j["gpus"][0]["instances"].size(), 2u);
  auto refused = agent.call(protocol::ResizeRequest{b, 70, protocol::kModeUnchanged, 0, 0});
  EXPECT_EQ(refused->status, ReplyStatus::kOverAllocation) << refused->text;
  EXPECT_EQ(agent.call(protocol::ResizeRequest{a, 30, protocol::kModeUnchanged, 0, 0})->status,
            ReplyStatus::kOk);
  // Job 2 has 30 units from Slurm: root grows it past them only with force.
  auto unforced = agent.call(protocol::ResizeRequest{b, 70, 1, 0, 0});
  EXPECT_EQ(unforced->status, ReplyStatus::kOverAllocation) << unforced->text;
  EXPECT_NE(unforced->text.find("--force"), std::string::npos) << unforced->text;
  EXPECT_EQ(agent.call(protocol::ResizeRequest{b, 70, 1, 2, 0})->status,
            ReplyStatus::kBadRequest);  // a flag no one knows
  auto grown = agent.call(protocol::ResizeRequest{b, 70, 1, protocol::kResizeForce, 0});
  ASSERT_EQ(grown->status, ReplyStatus::kOk) << grown->text;
  auto shown = nlohmann::json::parse(grown->text);
  EXPECT_EQ(shown["units"], 70);
  EXPECT_EQ(shown["job_units"], 70);
  EXPECT_EQ(shown["granted_units"], 30);
  EXPECT_EQ(shown["mode"], "cap");
  EXPECT_DOUBLE_EQ(shown["target_pct"].get<double>(), 70.0);
  EXPECT_EQ(agent.call(protocol::RemoveRequest{1, protocol::kAllSteps, 0})->status,
            ReplyStatus::kOk);
  EXPECT_EQ(agent.call(protocol::RemoveRequest{1, protocol::kAllSteps, 0})->status,
            ReplyStatus::kNotFound);
  EXPECT_EQ(agent.call(protocol::ShowRequest{a})->status, ReplyStatus::kNotFound);
  // The removed instance's page and its directory go (on a chore worker:
  // the deadline only ends a failing case); the other's remain.
  const std::string gone = agent.dir() + "/run/instance-" + std::to_string(a) + ".d";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (access(gone.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(access(gone.c_str(), F_OK), 0);
  EXPECT_EQ(access((agent.dir() + "/run/instance-" + std::to_string(b) + ".d/page").c_str(), F_OK),
            0);
}

TEST_F(AgentControl, PagesAreOwnedByTheJobUserAndPrivate) {
  const uint64_t a = create(1, 50, kAlice);
  struct stat st {};
  // The page is Alice's, in a directory of its own that only root writes.
  ASSERT_EQ(stat((agent.dir() + "/run/instance-" + std::to_string(a) + ".d/page").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kAlice);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((agent.dir() + "/run/instance-" + std::to_string(a) + ".d").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
  // Nor is RuntimeDir listable by others (a listing can hold its lock).
  ASSERT_EQ(stat((agent.dir() + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
  ASSERT_EQ(stat((agent.dir() + "/run/gpu0").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Bob can open neither Alice's page nor the GPU page (shims get it at attach).
  const std::string inst_path = agent.dir() + "/run/instance-" + std::to_string(a) + ".d/page";
  const std::string gpu_path = agent.dir() + "/run/gpu0";
  EXPECT_EQ(
      run_as(kBob,
             [&] {
               return (open(inst_path.c_str(), O_RDONLY) < 0 && open(gpu_path.c_str(), O_RDWR) < 0)
                          ? 0
                          : 1;
             }),
      0);
}

TEST_F(AgentControl, OnlyRootCreatesAndRemoves) {
  const std::string sock = agent.socket();
  const int rc = run_as(kAlice, [&] {
    auto c = protocol::ControlClient::connect(sock);
    if (!c) return 10;
    auto r = c->call(create_request(9, 10, kAlice));
    if (!r || r->status != ReplyStatus::kDenied) return 11;
    auto rm = c->call(protocol::RemoveRequest{9, protocol::kAllSteps, 0});
    if (!rm || rm->status != ReplyStatus::kDenied) return 12;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST_F(AgentControl, AnotherUserCannotAttachResizeOrReadDetails) {
  const uint64_t a = create(1, 40, kAlice);
  const std::string sock = agent.socket();
  const int bob = run_as(kBob, [&] {
    auto c = protocol::ControlClient::connect(sock);
    if (!c) return 10;
    if (c->call(protocol::ResizeRequest{a, 10, protocol::kModeUnchanged, 0, 0})->status !=
        ReplyStatus::kDenied)
      return 11;
    if (c->call(protocol::ResizeRequest{a, 0, 1, 0, 0})->status != ReplyStatus::kDenied) return 12;
    if (c->call(protocol::ShowRequest{a})->status != ReplyStatus::kDenied) return 13;
    if (c->call(protocol::UsageRequest{1, 0, 0})->status != ReplyStatus::kDenied) return 17;
    auto st = c->call(protocol::StatusRequest{0, 0});
    auto j = nlohmann::json::parse(st->text);
    if (!j["gpus"][0]["instances"].empty()) return 14;
    if (j["gpus"][0]["other_users_instances"] != 1) return 15;
    auto att = attach(sock, 1, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kDenied || !att->fds.empty()) return 16;
    return 0;
  });
  EXPECT_EQ(bob, 0);
  const int alice = run_as(kAlice, [&] {
    auto c = protocol::ControlClient::connect(sock);
    if (c->call(protocol::ShowRequest{a})->status != ReplyStatus::kOk) return 20;
    if (c->call(protocol::UsageRequest{1, 0, 0})->status != ReplyStatus::kOk) return 23;
    // The owner cannot raise its share past what Slurm allocated...
    if (c->call(protocol::ResizeRequest{a, 41, protocol::kModeUnchanged, 0, 0})->status !=
        ReplyStatus::kOverAllocation) {
      return 21;
    }
    // ...but may lower it and choose its mode.
    if (c->call(protocol::ResizeRequest{a, 20, 1, 0, 0})->status != ReplyStatus::kOk) return 22;
    return 0;
  });
  EXPECT_EQ(alice, 0);
}

TEST_F(AgentControl, MalformedTruncatedAndOversizedMessagesGetErrorsAndServingContinues) {
  auto client = protocol::ControlClient::connect(agent.socket());
  ASSERT_TRUE(client.ok());
  auto good = protocol::encode_request(create_request(5, 10, kAlice), 3);
  // Truncated.
  auto r = client->call_raw(std::vector<uint8_t>(good.begin(), good.begin() + 20), 3);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, ReplyStatus::kBadRequest);
  EXPECT_NE(r->text.find("received 20"), std::string::npos) << r->text;
  // Oversized.
  std::vector<uint8_t> big(4096, 0xab);
  std::memcpy(big.data(), good.data(), 16);
  r = client->call_raw(big, 3);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, ReplyStatus::kBadRequest);
  // Wrong version.
  auto old = good;
  old[4] = 9;
  r = client->call_raw(old, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, ReplyStatus::kVersionMismatch);
  // A field out of range.
  auto bad = create_request(5, 10, kAlice);
  bad.units = 500;
  r = client->call(bad);
  EXPECT_EQ(r->status, ReplyStatus::kBadRequest);
  // Random garbage on fresh connections; the agent answers every one.
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> junk(1 + rng() % 300);
    for (auto& b : junk)
      b = static_cast<uint8_t>(rng());
    auto c = protocol::ControlClient::connect(agent.socket());
    ASSERT_TRUE(c.ok());
    auto jr = c->call_raw(junk, protocol::peek_request_id(junk));
    ASSERT_TRUE(jr.ok()) << "no reply to junk " << i << ": " << jr.error();
    EXPECT_NE(jr->status, ReplyStatus::kOk);
  }
  // Still serving, and nothing was created by the junk.
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(nlohmann::json::parse(st->text)["gpus"][0]["allocated_units"], 0);
  EXPECT_EQ(agent.call(create_request(5, 10, kAlice))->status, ReplyStatus::kOk);
}

TEST_F(AgentControl, AttachHandsOutPagesAndReclaimsADeadProcess) {
  const uint64_t a = create(1, 50, kAlice);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    if (setresgid(kAlice, kAlice, kAlice) != 0 || setresuid(kAlice, kAlice, kAlice) != 0) _exit(99);
    auto att = attach(agent.socket(), 1, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() != 3) _exit(10);
    auto* gpu = static_cast<shm::GpuPage*>(
        mmap(nullptr, sizeof(shm::GpuPage), PROT_READ, MAP_SHARED, att->fds[0], 0));
    auto* inst = static_cast<shm::InstancePage*>(mmap(
        nullptr, sizeof(shm::InstancePage), PROT_READ | PROT_WRITE, MAP_SHARED, att->fds[1], 0));
    if (gpu == MAP_FAILED || inst == MAP_FAILED) _exit(11);
    // The GPU page descriptor is read-only: no writable mapping of it.
    if (mmap(nullptr, sizeof(shm::GpuPage), PROT_READ | PROT_WRITE, MAP_SHARED, att->fds[0], 0) !=
        MAP_FAILED) {
      _exit(12);
    }
    if (gpu->magic != shm::kGpuPageMagic || inst->instance_id != a) _exit(13);
    const uint32_t slot = att->reply.proc_slot;
    if (inst->procs[slot].pid.load() != getpid()) _exit(14);
    inst->procs[slot].mem_bytes.store(1 << 30);  // as the shim would after an allocation
    char c = 1;
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  auto shown = nlohmann::json::parse(agent.call(protocol::ShowRequest{a})->text);
  EXPECT_EQ(shown["processes"], 1);
  EXPECT_EQ(shown["memory_used_bytes"], 1 << 30);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  bool reclaimed = false;
  for (int i = 0; i < 3000 && !reclaimed; ++i) {  // 30 s
    usleep(10000);
    shown = nlohmann::json::parse(agent.call(protocol::ShowRequest{a})->text);
    reclaimed = shown["processes"] == 0 && shown["memory_used_bytes"] == 0;
  }
  EXPECT_TRUE(reclaimed) << shown.dump();
  close(ready[0]);
  close(ready[1]);
}

TEST_F(AgentControl, AgentRestartRecoversInstancesAndKeepsIdsUnique) {
  const uint64_t a = create(1, 30, kAlice);
  const uint64_t b = create(2, 20, kBob, 1);
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  auto j = nlohmann::json::parse(agent.call(protocol::StatusRequest{0, 0})->text);
  EXPECT_EQ(j["gpus"][0]["instances"][0]["id"], a);
  EXPECT_EQ(j["gpus"][0]["instances"][0]["units"], 30);
  EXPECT_EQ(j["gpus"][1]["instances"][0]["id"], b);
  EXPECT_EQ(j["gpus"][0]["allocated_units"], 30);
  const uint64_t c = create(3, 10, kAlice);
  EXPECT_GT(c, b);
  EXPECT_NE(agent.log().find("recovered instance"), std::string::npos);
}

// A step on both GPUs is a gang: its instances get the same window, of
// their smaller share of the period; a step on one GPU gets none. The gang
// survives a restart and a resize moves its window; the status says how far
// the node's clock lets windows align with other nodes.
TEST_F(AgentControl, WithoutGangPeriodAStepOnTwoGpusIsNoGang) {
  const uint64_t rank0 = create(7, 50, kAlice, 0);
  create(7, 40, kAlice, 1);
  auto shown = agent.call(protocol::ShowRequest{rank0});
  EXPECT_TRUE(nlohmann::json::parse(shown->text)["gang"].is_null()) << shown->text;
}

// The GPU's record page keeps each instance's mode as a number across a
// restart: a number that is no mode (a damaged page) loses that instance,
// named in the log.
TEST_F(AgentControl, RestartReadsModesFromThePageAndRefusesUnknownOnes) {
  protocol::CreateRequest capped = create_request(1, 30, kAlice);
  capped.mode = mode_value(Mode::kCap);
  ASSERT_EQ(agent.call(capped)->status, ReplyStatus::kOk);
  const uint64_t damaged = create(2, 20, kAlice);
  agent.kill_hard();
  {
    const int fd = ::open((agent.dir() + "/run/gpu0.records").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    void* m = mmap(nullptr, sizeof(shm::GpuRecordPage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ASSERT_NE(m, MAP_FAILED);
    auto* page = static_cast<shm::GpuRecordPage*>(m);
    for (auto& slot : page->records) {
      if (slot.instance_id.load() == damaged) slot.mode.store(7);
    }
    munmap(m, sizeof(shm::GpuRecordPage));
  }
  ASSERT_TRUE(agent.start()) << agent.log();
  auto j = nlohmann::json::parse(agent.call(protocol::StatusRequest{0, 0})->text);
  ASSERT_EQ(j["gpus"][0]["instances"].size(), 1u) << j.dump();
  EXPECT_EQ(j["gpus"][0]["instances"][0]["mode"], "cap");
  EXPECT_NE(agent.log().find("mode 7 is not burst, cap or lend; instance " +
                             std::to_string(damaged) + " not recovered"),
            std::string::npos)
      << agent.log();
}

TEST_F(AgentControl, StepsInsideABatchJobShareItsAllocationAndSurviveARestart) {
  // egpu:100 batch job; steps of 40 and 60 start inside it.
  protocol::CreateRequest batch = create_request(9, 100, kAlice);
  batch.step_id = protocol::kStepBatch;
  batch.flags = protocol::kCreateUmbrella;
  ASSERT_EQ(agent.call(batch)->status, ReplyStatus::kOk);
  protocol::CreateRequest s0 = create_request(9, 40, kAlice);
  protocol::CreateRequest s1 = create_request(9, 60, kAlice);
  s1.step_id = 1;
  auto r0 = agent.call(s0);
  ASSERT_EQ(r0->status, ReplyStatus::kOk) << r0->text;
  auto r1 = agent.call(s1);
  ASSERT_EQ(r1->status, ReplyStatus::kOk) << r1->text;
  auto shares = [&] {
    std::map<std::string, double> out;
    auto j = nlohmann::json::parse(agent.call(protocol::StatusRequest{0, 0})->text);
    for (const auto& i : j["gpus"][0]["instances"])
      out[i["step"]] = i["target_pct"];
    return out;
  };
  auto before = shares();
  EXPECT_NEAR(before["0"], 40, 0.1);
  EXPECT_NEAR(before["1"], 60, 0.1);
  EXPECT_LT(before["batch"], 1.0);
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  auto after = shares();
  EXPECT_NEAR(after["0"], 40, 0.1);
  EXPECT_NEAR(after["1"], 60, 0.1);
  EXPECT_EQ(after.size(), 3u);
}

TEST_F(AgentControl, StopsCleanlyOnSigterm) {
  create(1, 30, kAlice);
  EXPECT_TRUE(agent.stop());
  EXPECT_NE(agent.log().find("stopped"), std::string::npos);
  EXPECT_NE(access(agent.socket().c_str(), F_OK), 0);
}

TEST(AgentMetrics, ServesPrometheusTextOnLoopback) {
  AgentProcess with_port("MetricsAddress=127.0.0.1:19466\n");
  ASSERT_TRUE(with_port.start()) << with_port.log();
  protocol::CreateRequest r = create_request(7, 25, kAlice);
  ASSERT_EQ(with_port.call(r)->status, ReplyStatus::kOk);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(19466);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
  ASSERT_EQ(write(fd, req, sizeof req - 1), static_cast<ssize_t>(sizeof req - 1));
  std::string body;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    body.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_NE(body.find("200 OK"), std::string::npos);
  EXPECT_NE(body.find("egpu_agent_up 1"), std::string::npos);
  EXPECT_NE(body.find("egpu_instance_target_share{gpu=\"0\",slurm_job=\"7\",step=\"0\""),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("egpu_gpu_allocated_units{gpu=\"0\"} 25"), std::string::npos) << body;
}

}  // namespace
}  // namespace egpu::test
