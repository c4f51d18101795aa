// A step's instances on several GPUs of a node, and on several nodes, form
// a gang: one window for all of them, aligned to a shared clock epoch where
// the node's clock allows (issue 13, item 2).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
constexpr uid_t kAlice = 4242;
constexpr uid_t kBob = 4343;

TEST(AgentGangs, AStepOnTwoGpusIsAGangWithOneWindow) {
  AgentProcess agent("GangPeriodMs=20\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  auto create = [&](uint64_t job, uint32_t units, uid_t uid, uint32_t gpu) {
    auto r = agent.call(create_request(job, units, uid, gpu));
    EXPECT_EQ(r->status, ReplyStatus::kOk) << r->text;
    return r->instance_id;
  };
  const uint64_t rank0 = create(7, 50, kAlice, 0);
  const uint64_t rank1 = create(7, 40, kAlice, 1);
  const uint64_t alone = create(8, 30, kBob, 0);
  auto gang_of = [&](uint64_t id) {
    auto shown = agent.call(protocol::ShowRequest{id});
    EXPECT_EQ(shown->status, ReplyStatus::kOk) << shown->text;
    return nlohmann::json::parse(shown->text)["gang"];
  };
  const auto g0 = gang_of(rank0);
  const auto g1 = gang_of(rank1);
  ASSERT_FALSE(g0.is_null()) << agent.log();
  EXPECT_EQ(g0, g1);
  EXPECT_DOUBLE_EQ(g0["period_ms"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(g0["length_ms"].get<double>(), 8.0);  // 40% of 20 ms
  EXPECT_TRUE(gang_of(alone).is_null());
  auto st = nlohmann::json::parse(agent.call(protocol::StatusRequest{0, 0})->text);
  EXPECT_TRUE(st["clock"]["within_tolerance"].is_boolean());
  EXPECT_EQ(st["clock"]["reason"].is_null(), st["clock"]["within_tolerance"].get<bool>());

  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_EQ(gang_of(rank0), g0);
  ASSERT_EQ(agent.call(protocol::ResizeRequest{rank1, 50, protocol::kModeUnchanged, 0, 0})->status,
            ReplyStatus::kOverAllocation);  // its job has 40 units on GPU 1
  ASSERT_EQ(agent.call(protocol::ResizeRequest{rank0, 20, protocol::kModeUnchanged, 0, 0})->status,
            ReplyStatus::kOk);
  EXPECT_DOUBLE_EQ(gang_of(rank1)["length_ms"].get<double>(), 4.0);
  EXPECT_EQ(gang_of(rank0), gang_of(rank1));
}

// A rank of job 7's step 0 that runs on other nodes too (SPANK's
// kCreateSpansNodes), at 50 units of GPU 0; its instance id.
uint64_t create_rank_across_nodes(AgentProcess& agent) {
  protocol::CreateRequest req = create_request(7, 50, kAlice, 0);
  req.flags = protocol::kCreateSpansNodes;
  auto created = agent.call(req);
  EXPECT_EQ(created->status, ReplyStatus::kOk) << created->text;
  return created->instance_id;
}

// A step on several nodes (SPANK's kCreateSpansNodes) is a gang even with
// one GPU here, when this node's clock lets its windows open with the other
// nodes' (a disciplined clock, as the clock fixture reads it; the host's own
// may change between two looks), and the flag and the gang survive a
// restart. A clock that does not allow it: the test after next.
TEST(AgentGangs, AStepOnSeveralNodesIsAGangHereWhenTheClockAllows) {
  const std::string clock_file =
      std::string(::testing::TempDir()) + "egpu-clock-gang-" + std::to_string(getpid());
  std::ofstream(clock_file) << "1 120 3000\n";  // maxerror 3 ms: disciplined lately
  AgentProcess agent("GangPeriodMs=20\n");
  agent.set_env("EGPU_TEST_CLOCK", clock_file);
  agent.set_env("LD_PRELOAD", EGPU_CLOCK_FIXTURE);
  ASSERT_TRUE(agent.start()) << agent.log();
  const uint64_t rank = create_rank_across_nodes(agent);
  auto show = [&]() {
    auto shown = agent.call(protocol::ShowRequest{rank});
    EXPECT_EQ(shown->status, ReplyStatus::kOk) << shown->text;
    return nlohmann::json::parse(shown->text);
  };
  auto st = nlohmann::json::parse(agent.call(protocol::StatusRequest{0, 0})->text);
  ASSERT_TRUE(st["clock"]["within_tolerance"].get<bool>()) << st["clock"].dump();
  EXPECT_TRUE(show()["spans_nodes"].get<bool>());
  ASSERT_FALSE(show()["gang"].is_null()) << agent.log();
  EXPECT_DOUBLE_EQ(show()["gang"]["length_ms"].get<double>(), 10.0);  // 50% of 20 ms
  EXPECT_DOUBLE_EQ(show()["gang"]["offset_ms"].get<double>(), 0.0);
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_TRUE(show()["spans_nodes"].get<bool>());
  EXPECT_FALSE(show()["gang"].is_null()) << agent.log();
  // A flag the protocol does not know is still refused.
  protocol::CreateRequest req = create_request(8, 50, kAlice, 0);
  req.flags = 1u << 7;
  EXPECT_EQ(agent.call(req)->status, ReplyStatus::kBadRequest);
  std::remove(clock_file.c_str());
}

// Nodes that share one clock (GangClock=shared: the testbed's simulated
// nodes, containers of one host) align whatever adjtimex says.
TEST(AgentGangs, ASharedClockAlignsAMultiNodeStep) {
  AgentProcess agent("GangPeriodMs=20\nGangClock=shared\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  auto shown = agent.call(protocol::ShowRequest{create_rank_across_nodes(agent)});
  const auto gang = nlohmann::json::parse(shown->text)["gang"];
  ASSERT_FALSE(gang.is_null()) << agent.log();
  EXPECT_DOUBLE_EQ(gang["length_ms"].get<double>(), 10.0);
  auto st = nlohmann::json::parse(agent.call(protocol::StatusRequest{0, 0})->text);
  EXPECT_TRUE(st["clock"]["within_tolerance"].get<bool>()) << st["clock"].dump();
}

// The clock is judged while steps run, not only when they start: when the
// discipline is lost a multi-node step's windows here stop opening with its
// other nodes' (and the agent says why), and after good readings they do
// again. A step's gang of this node's GPUs is no business of the clock.
TEST(AgentGangs, AMultiNodeStepFollowsTheClockWhileItRuns) {
  const std::string clock_file =
      std::string(::testing::TempDir()) + "egpu-clock-" + std::to_string(getpid());
  auto set_clock = [&](const char* reading) {
    std::ofstream(clock_file + ".new") << reading << "\n";
    ASSERT_EQ(std::rename((clock_file + ".new").c_str(), clock_file.c_str()), 0);
  };
  set_clock("1 120 3000");  // maxerror 3 ms: the discipline updated it lately
  AgentProcess agent("GangPeriodMs=20\nMetricsAddress=127.0.0.1:19466\n");
  agent.set_env("EGPU_TEST_CLOCK", clock_file);
  agent.set_env("LD_PRELOAD", EGPU_CLOCK_FIXTURE);
  ASSERT_TRUE(agent.start()) << agent.log();
  const uint64_t across = create_rank_across_nodes(agent);
  protocol::CreateRequest local0 = create_request(8, 40, kBob, 0);
  protocol::CreateRequest local1 = create_request(8, 40, kBob, 1);
  const uint64_t here = agent.call(local0)->instance_id;
  const uint64_t here1 = agent.call(local1)->instance_id;
  auto gang_of = [&](uint64_t id) {
    return nlohmann::json::parse(agent.call(protocol::ShowRequest{id})->text)["gang"];
  };
  auto clock = [&] {
    return nlohmann::json::parse(agent.call(protocol::StatusRequest{0, 0})->text)["clock"];
  };
  // Polled, not timed: the agent reads the clock every second.
  auto eventually = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 600; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  auto gauge = [] {
    const std::string m = fetch_metrics(19466);
    const size_t at = m.find("\negpu_clock_windows_aligned ");
    return at == std::string::npos ? std::string("absent") : m.substr(at + 28, 1);
  };
  ASSERT_FALSE(gang_of(across).is_null()) << agent.log();
  // The node-local gang stays one (its windows may move when the other
  // gang leaves or comes back: placement is first fit).
  auto local_gang_holds = [&] {
    const auto g = gang_of(here);
    return !g.is_null() && g == gang_of(here1) && g["length_ms"].get<double>() == 8.0;
  };
  EXPECT_TRUE(clock()["windows_aligned"].get<bool>()) << clock().dump();
  EXPECT_DOUBLE_EQ(clock()["max_error_us"].get<double>(), 3000.0);
  EXPECT_EQ(gauge(), "1");

  set_clock("0 120");
  ASSERT_TRUE(eventually([&] { return gang_of(across).is_null(); })) << agent.log();
  EXPECT_TRUE(local_gang_holds()) << gang_of(here) << gang_of(here1);
  const auto lost = clock();
  EXPECT_FALSE(lost["windows_aligned"].get<bool>()) << lost.dump();
  EXPECT_EQ(gauge(), "0");
  EXPECT_NE(lost["windows_reason"].get<std::string>().find("not synchronized"), std::string::npos)
      << lost.dump();
  EXPECT_NE(agent.log().find("the clock is not synchronized (no chrony, ntpd or PTP discipline): "
                             "multi-node steps' windows no longer open with their other nodes'"),
            std::string::npos)
      << agent.log();

  set_clock("1 120");
  ASSERT_TRUE(eventually([&] { return !gang_of(across).is_null(); })) << agent.log();
  EXPECT_DOUBLE_EQ(gang_of(across)["length_ms"].get<double>(), 10.0);
  EXPECT_TRUE(local_gang_holds()) << gang_of(here) << gang_of(here1);
  EXPECT_TRUE(clock()["windows_aligned"].get<bool>()) << clock().dump();
  EXPECT_NE(agent.log().find("the clock agrees with the other nodes' again"), std::string::npos)
      << agent.log();

  // The wall clock is stepped by 7 ms: windows move to its new boundaries.
  set_clock("1 120 0 7000");
  ASSERT_TRUE(eventually([&] {
    return agent.log().find("the wall clock was stepped") != std::string::npos;
  })) << agent.log();
  EXPECT_FALSE(gang_of(across).is_null());
  std::remove(clock_file.c_str());
}

// A multi-node step's gang window offset on GPU 0 (-1 when it has none).
double offset_ms(AgentProcess& agent, uint64_t instance) {
  auto shown = agent.call(protocol::ShowRequest{instance});
  if (!shown || shown->status != ReplyStatus::kOk) return -2;
  const auto gang = nlohmann::json::parse(shown->text)["gang"];
  return gang.is_null() ? -1 : gang["offset_ms"].get<double>();
}

// Multi-node steps keep their windows' offsets across an agent restart:
// their ranks on the other nodes keep theirs. Job 8's step came first (offset
// 0) and job 7's fitted around it (6 ms, after job 8's 30 % of 20 ms); placed
// afresh, in (job, step) order, a restarted agent put job 7 first and moved
// job 8 here only, and each of its collectives then waited for the other
// nodes' windows. The steps are on GPU 1 with another job on GPU 0: a plan
// made while only GPU 0 was recovered dropped GPU 1's kept offsets.
TEST(AgentGangs, MultiNodeStepsKeepTheirOffsetsAcrossARestart) {
  AgentProcess agent("GangPeriodMs=20\nGangClock=shared\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_EQ(agent.call(create_request(3, 20, kAlice, 0))->status, ReplyStatus::kOk);
  const auto create = [&](uint64_t job, uid_t owner) {
    protocol::CreateRequest req = create_request(job, 30, owner, 1);
    req.flags = protocol::kCreateSpansNodes;
    auto created = agent.call(req);
    EXPECT_EQ(created->status, ReplyStatus::kOk) << created->text;
    return created->instance_id;
  };
  const uint64_t first = create(8, kAlice);
  const uint64_t later = create(7, kBob);
  ASSERT_DOUBLE_EQ(offset_ms(agent, first), 0.0) << agent.log();
  ASSERT_DOUBLE_EQ(offset_ms(agent, later), 6.0) << agent.log();
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_DOUBLE_EQ(offset_ms(agent, first), 0.0) << agent.log();
  EXPECT_DOUBLE_EQ(offset_ms(agent, later), 6.0) << agent.log();
  // Once the steps are gone, so is what is kept of them.
  const std::string file = agent.dir() + "/run/gang-offsets.json";
  struct stat st {};
  EXPECT_EQ(::stat(file.c_str(), &st), 0);
  ASSERT_EQ(agent.call(protocol::RemoveRequest{8, 0, 0})->status, ReplyStatus::kOk);
  ASSERT_EQ(agent.call(protocol::RemoveRequest{7, 0, 0})->status, ReplyStatus::kOk);
  EXPECT_NE(::stat(file.c_str(), &st), 0);
}

// The offsets file is the agent's own; one it cannot use (damaged, or not
// root's 0600) is set aside with a warning that names it and what is wrong,
// and the agent starts and serves instead of failing.
TEST(AgentGangs, AnOffsetsFileItCannotUseIsSetAside) {
  AgentProcess agent("GangPeriodMs=20\nGangClock=shared\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_TRUE(agent.stop());
  const std::string file = agent.dir() + "/run/gang-offsets.json";
  struct Case {
    std::string text;
    mode_t mode;
    std::string why;
  };
  const std::string head = R"({"version":1,"period_ns":20000000,"gangs":)";
  for (const Case& c :
       {Case{head + R"([{"job":7,"step":0,"offset_ns":20000000}]})", 0600, "offset_ns"},
        Case{head + "[]}", 0644, "owner or mode"}}) {
    ::unlink((file + ".bad").c_str());
    { std::ofstream(file) << c.text; }
    ASSERT_EQ(::chmod(file.c_str(), c.mode), 0);
    const std::size_t logged = agent.log().size();
    ASSERT_TRUE(agent.start()) << agent.log();
    struct stat st {};
    EXPECT_EQ(::stat((file + ".bad").c_str(), &st), 0) << "not set aside: " << c.text;
    EXPECT_NE(::stat(file.c_str(), &st), 0);
    const std::string said = agent.log().substr(logged);
    EXPECT_NE(said.find(file), std::string::npos) << said;
    EXPECT_NE(said.find(c.why), std::string::npos) << said;
    EXPECT_EQ(agent.call(protocol::StatusRequest{0, 0})->status, ReplyStatus::kOk);
    ASSERT_TRUE(agent.stop());
  }
}

}  // namespace
}  // namespace egpu::test
