// Latency objectives through the agent's control socket: who may set them,
// which modes may have them, that they outlive a restart, and that an
// instance at risk borrows from its lend neighbour (never from a guaranteed
// one) through the agent's own latency control, fed by latency counts
// written into the instance page as a shim does.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/shm/pages.h"
#include "core/slo/latency_histogram.h"
#include "nodeagent/instance_runtime.h"
#include "tests/agent/agent_fixture.h"
#include "tests/agent/latency_report.h"

namespace egpu::test {
namespace {

using nlohmann::json;
using protocol::ObjectiveRequest;
using protocol::ReplyStatus;
constexpr uid_t kAlice = 4242;
constexpr uid_t kBob = 4343;
using namespace std::chrono_literals;
// How long a wait for what the control must do may last: for a broken
// agent, not a measure of a busy host (about a second on an idle one).
constexpr std::chrono::seconds kPatience = 60s;
const ObjectiveRequest kP99At40(uint64_t id) {
  return {id, 99'000, 0, 40'000'000};
}

class AgentLatency : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(agent.start()) << agent.log(); }
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
  }
  uint64_t create(uint64_t job, uint32_t units, uid_t uid, Mode mode) {
    protocol::CreateRequest r = create_request(job, units, uid);
    r.mode = mode_value(mode);
    auto reply = agent.call(r);
    EXPECT_TRUE(reply.ok());
    EXPECT_EQ(reply->status, ReplyStatus::kOk) << reply->text;
    return reply->instance_id;
  }
  // Every 50 ms, 50 requests of 100 ms (far past 40 ms) into `id`'s page,
  // up to `rounds` times or until `enough` of its show: the last show.
  // Writes 100 ms requests into `id`'s page every 50 ms until `enough` holds
  // for its show, or `limit` has passed; the last show.
  json report_slow_until(uint64_t id, std::chrono::seconds limit,
                         const std::function<bool(const json&)>& enough) {
    json s;
    for (const auto end = std::chrono::steady_clock::now() + limit;
         std::chrono::steady_clock::now() < end;) {
      report_latency(agent.dir() + "/run", id, 100'000'000, 50);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      s = show(id);
      if (enough(s)) break;
    }
    return s;
  }
  // A latency-critical step (job 1, 20 units, p99:40ms) and its lend
  // neighbour (job 2, 50 units), with a process each that take the GPU in
  // turns: the ids of the two.
  std::pair<uint64_t, uint64_t> serve_beside_lender() {
    const uint64_t serve = create(1, 20, kAlice, Mode::kBurst);
    const uint64_t lender = create(2, 50, kBob, Mode::kLend);
    EXPECT_EQ(agent.call(kP99At40(serve))->status, ReplyStatus::kOk);
    waiting.add(agent, 1, serve, kAlice);
    waiting.add(agent, 2, lender, kBob);
    return {serve, lender};
  }
  json show(uint64_t id) {
    auto r = agent.call(protocol::ShowRequest{id});
    EXPECT_EQ(r->status, ReplyStatus::kOk) << r->text;
    return json::parse(r->text);
  }
  AgentProcess agent;
  GateWaiters waiting;
};

TEST_F(AgentLatency, OwnerOrRootSetsAnObjectiveOnBurstOnlyAndItOutlivesARestart) {
  const uint64_t serve = create(1, 30, kAlice, Mode::kBurst);
  const uint64_t capped = create(2, 30, kAlice, Mode::kCap);
  const uint64_t lender = create(3, 30, kAlice, Mode::kLend);
  const std::string sock = agent.socket();
  EXPECT_EQ(run_as(kBob,
                   [&] {
                     auto c = protocol::ControlClient::connect(sock);
                     return c && c->call(kP99At40(serve))->status == ReplyStatus::kDenied ? 0 : 1;
                   }),
            0);
  EXPECT_EQ(run_as(kAlice,
                   [&] {
                     auto c = protocol::ControlClient::connect(sock);
                     return c && c->call(kP99At40(serve))->status == ReplyStatus::kOk ? 0 : 1;
                   }),
            0);
  EXPECT_EQ(show(serve)["objective"], "p99:40ms");
  auto r = agent.call(kP99At40(capped));
  EXPECT_EQ(r->status, ReplyStatus::kBadRequest);
  EXPECT_NE(r->text.find("cap mode, which never goes above its share"), std::string::npos)
      << r->text;
  r = agent.call(kP99At40(lender));
  EXPECT_EQ(r->status, ReplyStatus::kBadRequest);
  EXPECT_NE(r->text.find("cannot borrow for a latency objective as well"), std::string::npos)
      << r->text;
  // An instance with an objective keeps burst mode until it is cleared.
  r = agent.call(protocol::ResizeRequest{serve, 0, mode_value(Mode::kCap), 0, 0});
  EXPECT_EQ(r->status, ReplyStatus::kBadRequest);
  EXPECT_NE(r->text.find("clear it first (egpuctl slo " + std::to_string(serve) + " off)"),
            std::string::npos)
      << r->text;
  EXPECT_EQ(agent.call(ObjectiveRequest{404, 99'000, 0, 40'000'000})->status,
            ReplyStatus::kNotFound);

  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_EQ(show(serve)["objective"], "p99:40ms");
  ASSERT_EQ(agent.call(ObjectiveRequest{serve, 0, 0, 0})->status, ReplyStatus::kOk);
  EXPECT_TRUE(show(serve)["objective"].is_null());
  EXPECT_EQ(agent.call(protocol::ResizeRequest{serve, 0, mode_value(Mode::kCap), 0, 0})->status,
            ReplyStatus::kOk);
}

TEST_F(AgentLatency, AnInstanceAtRiskBorrowsFromItsLendNeighbourOnlyAndGivesBackWhenCleared) {
  const auto [serve, lender] = serve_beside_lender();
  const uint64_t guaranteed = create(3, 30, kBob, Mode::kBurst);
  // Far past the objective: the agent borrows within a few periods; the
  // bound is only how long to keep trying.
  const json s = report_slow_until(serve, kPatience,
                                   [](const json& v) { return v.value("borrowed_units", 0) > 0; });
  ASSERT_GT(s.value("borrowed_units", 0), 0) << s.dump();
  EXPECT_GT(s["latency_ms"].get<double>(), 40.0);
  // Both sides of the loan from one status (one moment: a control period
  // between two calls could move it).
  auto st = json::parse(agent.call(protocol::StatusRequest{0, 0})->text);
  EXPECT_EQ(st["gpus"][0]["allocated_units"], 100);
  const auto in_status = [&](uint64_t id) {
    for (const json& inst : st["gpus"][0]["instances"])
      if (inst.value("id", uint64_t{0}) == id) return inst;
    ADD_FAILURE() << "instance " << id << " is not in " << st.dump();
    return json::object();
  };
  const json now_serving = in_status(serve);
  const json l = in_status(lender);
  const int borrowed = now_serving.value("borrowed_units", 0);
  EXPECT_GT(borrowed, 0) << now_serving.dump();
  EXPECT_EQ(l.value("borrowed_units", 0), -borrowed);
  EXPECT_NEAR(l.value("target_pct", -1.0), 50.0 - borrowed, 1e-6);
  EXPECT_NEAR(now_serving.value("target_pct", -1.0), 20.0 + borrowed, 1e-6);
  EXPECT_NEAR(in_status(guaranteed).value("target_pct", -1.0), 30.0, 1e-6);

  ASSERT_EQ(agent.call(ObjectiveRequest{serve, 0, 0, 0})->status, ReplyStatus::kOk);
  json back;
  for (const auto end = std::chrono::steady_clock::now() + kPatience;
       std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    back = show(lender);
    if (back.value("target_pct", 0.0) == 50.0) break;
  }
  EXPECT_NEAR(back["target_pct"].get<double>(), 50.0, 1e-6) << back.dump();
  EXPECT_NEAR(show(serve)["target_pct"].get<double>(), 20.0, 1e-6);
}

// A job that set itself an objective and wrote slow requests into its page
// took all its lend neighbour could give, for as long as it liked (found by
// a review). Its requests never waited for the GPU: more share would not
// make them faster, and it gets none. The lender is busy throughout.
TEST_F(AgentLatency, AReporterThatNeverWaitsForTheGpuBorrowsNothing) {
  const uint64_t serve = create(1, 20, kAlice, Mode::kBurst);
  const uint64_t lender = create(2, 80, kBob, Mode::kLend);
  ASSERT_EQ(agent.call(kP99At40(serve))->status, ReplyStatus::kOk);
  waiting.add(agent, 2, lender, kBob);
  // Far past the objective for 6 s (60 periods on an idle host) and until
  // more than 20 were judged, however long a busy host takes (kPatience
  // only ends a broken case); one that waited borrows within a few (the
  // test above).
  const auto six_seconds = std::chrono::steady_clock::now() + 6s;
  const json s = report_slow_until(serve, kPatience, [&](const json& v) {
    EXPECT_EQ(v.value("borrowed_units", 0), 0) << v.dump();
    const bool enough =
        std::chrono::steady_clock::now() >= six_seconds && v.value("slo_windows_judged", 0) > 20;
    return v.value("borrowed_units", 0) != 0 || enough;
  });
  EXPECT_GT(s.value("slo_windows_judged", 0), 20) << s.dump();  // judged, and found not held back
  EXPECT_NEAR(show(lender)["target_pct"].get<double>(), 80.0, 1e-6);
}

// Saves of the control's memory come with every loan change and every 5 s;
// while they fail (RuntimeDir full, which a job can keep it) each one was a
// warning. Once a minute now. Here the file's name is a directory.
TEST_F(AgentLatency, FailedSavesOfItsMemoryAreLoggedOnceAMinute) {
  const auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(mkdir((agent.dir() + "/run/latency-gpu0.json").c_str(), 0700), 0);
  const auto [serve, lender] = serve_beside_lender();
  // Until it has borrowed all it can (a save at each change), then past
  // the next periodic save.
  const json s = report_slow_until(
      serve, kPatience, [](const json& v) { return v.value("borrowed_units", 0) >= 49; });
  ASSERT_EQ(s.value("borrowed_units", 0), 49) << s.dump();
  (void)report_slow_until(serve, 6s, [](const json&) { return false; });
  const std::string log = agent.log();
  size_t lines = 0;
  for (size_t at = 0;
       (at = log.find("cannot keep the latency control's memory", at)) != std::string::npos; ++at)
    ++lines;
  // One, and one more for each minute a slow machine took (about 7 s here).
  const auto minutes =
      std::chrono::duration_cast<std::chrono::minutes>(std::chrono::steady_clock::now() - started)
          .count();
  EXPECT_GE(lines, 1u) << log;
  EXPECT_LE(lines, 1u + static_cast<size_t>(minutes)) << log;
}

// A step on two GPUs serves each request with both, and a server reports
// its latency through one of them: each GPU's control judges the step's
// requests, so the instance that saw none borrows too.
TEST_F(AgentLatency, AStepOnTwoGpusIsJudgedByAllItsRequests) {
  protocol::CreateRequest on0 = create_request(1, 20, kAlice);
  protocol::CreateRequest on1 = on0;
  on1.gpu_index = 1;
  const uint64_t serve0 = agent.call(on0)->instance_id;
  const uint64_t serve1 = agent.call(on1)->instance_id;
  ASSERT_NE(serve1, 0u);
  // On each GPU the step and its lender take turns.
  for (uint32_t gpu : {0u, 1u}) {
    protocol::CreateRequest lend = create_request(2, 50, kBob);
    lend.gpu_index = gpu;
    lend.mode = mode_value(Mode::kLend);
    const auto l = agent.call(lend);
    ASSERT_EQ(l->status, ReplyStatus::kOk);
    waiting.add(agent, 1, gpu == 0 ? serve0 : serve1, kAlice, gpu);
    waiting.add(agent, 2, l->instance_id, kBob, gpu);
  }
  // Another step of the same job with the same objective is not of the
  // step: it must not be judged by those requests.
  protocol::CreateRequest other = create_request(1, 10, kAlice);
  other.step_id = 1;
  other.gpu_index = 1;
  other.job_units = 30;
  const auto o = agent.call(other);
  ASSERT_EQ(o->status, ReplyStatus::kOk) << o->text;
  for (uint64_t id : {serve0, serve1, o->instance_id})
    ASSERT_EQ(agent.call(kP99At40(id))->status, ReplyStatus::kOk);
  json s0 = json::object(), s1 = json::object();
  for (const auto end = std::chrono::steady_clock::now() + kPatience;
       std::chrono::steady_clock::now() < end;) {
    report_latency(agent.dir() + "/run", serve0, 100'000'000, 50);  // GPU 0's page only
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s0 = show(serve0);
    s1 = show(serve1);
    if (s0.value("borrowed_units", 0) > 0 && s1.value("borrowed_units", 0) > 0) break;
  }
  EXPECT_GT(s0.value("borrowed_units", 0), 0) << s0.dump();
  EXPECT_GT(s1.value("borrowed_units", 0), 0) << s1.dump();
  EXPECT_TRUE(s1["latency_ms"].is_number() && s1["latency_ms"].get<double>() > 40.0) << s1.dump();
  const json t = show(o->instance_id);
  EXPECT_EQ(t.value("borrowed_units", 0), 0) << t.dump();
  EXPECT_TRUE(t["latency_ms"].is_null()) << t.dump();
}

// A killed agent (a crash, an upgrade) is followed by one that goes on with
// its loans and record: the instance at risk keeps what it borrowed through
// the restart instead of falling back to its own units until it has been
// judged again.
TEST_F(AgentLatency, LoansAndTheirRecordOutliveAKilledAgent) {
  const auto [serve, lender] = serve_beside_lender();
  const std::string run = agent.dir() + "/run";
  json s = json::object();
  for (const auto end = std::chrono::steady_clock::now() + kPatience;
       s.value("borrowed_units", 0) == 0 && std::chrono::steady_clock::now() < end;) {
    report_latency(run, serve, 100'000'000, 50);  // far past 40 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s = show(serve);
  }
  ASSERT_GT(s.value("borrowed_units", 0), 0) << s.dump();
  // Then 30 ms, every 50 ms throughout (so it is never idle): above
  // return_at x 40 ms, below raise_at x 40 ms, where nothing moves. Wait
  // until the loan has held for a second.
  // A jthread: stopped and joined however the test ends.
  std::jthread reporter([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      report_latency(run, serve, 30'000'000, 50);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto stop_reporting = [&] {
    reporter.request_stop();
    reporter.join();
  };
  int held = 0, borrowed = 0;
  for (const auto end = std::chrono::steady_clock::now() + kPatience;
       held < 20 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int now = show(serve).value("borrowed_units", 0);
    held = now == borrowed ? held + 1 : 0;
    borrowed = now;
  }
  ASSERT_GE(held, 20) << "the loan never settled: " << show(serve).dump();
  ASSERT_GT(borrowed, 0);

  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  // At once: 30 ms alone would never make the new agent borrow.
  s = show(serve);
  EXPECT_EQ(s.value("borrowed_units", 0), borrowed) << s.dump();
  EXPECT_NEAR(s["target_pct"].get<double>(), 20.0 + borrowed, 1e-6) << s.dump();
  // Its record as of the loan's last change (kept then, and every 5 s).
  EXPECT_GT(s.value("slo_windows_judged", uint64_t{0}), 0u) << s.dump();
  const json l = show(lender);
  EXPECT_EQ(l.value("borrowed_units", 0), -borrowed) << l.dump();
  EXPECT_NEAR(l["target_pct"].get<double>(), 50.0 - borrowed, 1e-6) << l.dump();
  EXPECT_NE(agent.log().find("GPU 0: the latency control goes on with 2 loan(s) and 1 instance(s)"),
            std::string::npos);
  // And the new agent's own control keeps it.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  s = show(serve);
  EXPECT_EQ(s.value("borrowed_units", 0), borrowed) << s.dump();
  // An agent stopped cleanly keeps its record as it stood.
  const uint64_t judged = s["slo_windows_judged"];
  ASSERT_TRUE(agent.stop()) << agent.log();
  ASSERT_TRUE(agent.start()) << agent.log();
  s = show(serve);
  stop_reporting();
  EXPECT_GE(s.value("slo_windows_judged", uint64_t{0}), judged) << s.dump();
  EXPECT_EQ(s.value("borrowed_units", 0), borrowed) << s.dump();
}

// The memory file is the agent's own, but may be damaged: a new agent says
// what is wrong with it and starts the control afresh.
TEST_F(AgentLatency, ADamagedMemoryIsNamedAndControlStartsAfresh) {
  const uint64_t serve = create(1, 20, kAlice, Mode::kBurst);
  const uint64_t lender = create(2, 50, kBob, Mode::kLend);
  ASSERT_EQ(agent.call(kP99At40(serve))->status, ReplyStatus::kOk);
  agent.kill_hard();
  const std::string file = agent.dir() + "/run/latency-gpu0.json";
  {
    const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    const std::string text =
        "{\"version\":2,\"loans\":{\"" + std::to_string(serve) + "\":20},\"instances\":[]}";
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_NE(agent.log().find("GPU 0: the latency control starts afresh: " + file +
                             ": instances: missing or not an object"),
            std::string::npos)
      << agent.log();
  EXPECT_NEAR(show(serve)["target_pct"].get<double>(), 20.0, 1e-6);
  EXPECT_NEAR(show(lender)["target_pct"].get<double>(), 50.0, 1e-6);
  // Set aside, so the next start does not warn of it again.
  EXPECT_NE(access(file.c_str(), F_OK), 0);
  EXPECT_EQ(access((file + ".bad").c_str(), F_OK), 0);
  // A file others could read or write is not read at all.
  agent.kill_hard();
  {
    const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  ASSERT_EQ(chmod(file.c_str(), 0644), 0);
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_NE(agent.log().find(file + ": not a file this agent wrote (type, owner or mode)"),
            std::string::npos)
      << agent.log();
}

// Samples written while no objective was set are history, not a period's
// latency: an objective set again later judges only what comes after it.
TEST_F(AgentLatency, AnObjectiveSetAgainIgnoresWhatCameBeforeIt) {
  const uint64_t serve = create(1, 20, kAlice, Mode::kBurst);
  const uint64_t lender = create(2, 80, kBob, Mode::kLend);
  ASSERT_EQ(agent.call(kP99At40(serve))->status, ReplyStatus::kOk);
  for (const auto end = std::chrono::steady_clock::now() + kPatience;
       !show(serve).contains("borrowed_units") && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(show(serve).contains("borrowed_units")) << "the latency control never looked";
  ASSERT_EQ(agent.call(ObjectiveRequest{serve, 0, 0, 0})->status, ReplyStatus::kOk);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));     // its loop stops
  report_latency(agent.dir() + "/run", serve, 100'000'000, 1000);  // far past 40 ms, but old
  ASSERT_EQ(agent.call(kP99At40(serve))->status, ReplyStatus::kOk);
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(show(serve).value("borrowed_units", 0), 0) << show(serve).dump();
  }
  EXPECT_NEAR(show(lender)["target_pct"].get<double>(), 80.0, 1e-6);
}

TEST(AgentLatencyMetrics, LatencyAttainmentAndLoansAreExported) {
  AgentProcess agent("MetricsAddress=127.0.0.1:19467\n");
  ASSERT_TRUE(agent.start()) << agent.log();
  protocol::CreateRequest serve = create_request(1, 20, kAlice);
  protocol::CreateRequest lend = create_request(2, 80, kBob);
  lend.mode = mode_value(Mode::kLend);
  const uint64_t s = agent.call(serve)->instance_id;
  const uint64_t l = agent.call(lend)->instance_id;
  ASSERT_EQ(agent.call(kP99At40(s))->status, ReplyStatus::kOk);
  GateWaiters waiting;  // the two take the GPU in turns
  waiting.add(agent, 1, s, kAlice);
  waiting.add(agent, 2, l, kBob);
  // Requests go on while the test scrapes (a scrape may wait for the
  // agent's next render).
  std::atomic<bool> scraped{false};
  std::thread server([&] {
    while (!scraped) {
      report_latency(agent.dir() + "/run", s, 100'000'000, 50);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      t.join();
    }
  } join{scraped, server};
  std::string body;
  for (const auto end = std::chrono::steady_clock::now() + kPatience;
       std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    body = fetch_metrics(19467);
    if (body.find(
            "egpu_instance_borrowed_share{gpu=\"0\",slurm_job=\"1\",step=\"0\",egpu_instance=\"" +
            std::to_string(s) + "\"} 0.") != std::string::npos) {
      break;
    }
  }
  const std::string labels =
      "{gpu=\"0\",slurm_job=\"1\",step=\"0\",egpu_instance=\"" + std::to_string(s) + "\"} ";
  // 100 ms requests: the bucket holding them is read as its upper edge.
  const std::size_t p99 = body.find("egpu_instance_latency_p99_seconds" + labels);
  ASSERT_NE(p99, std::string::npos) << body;
  EXPECT_NEAR(std::stod(body.substr(p99 + std::strlen("egpu_instance_latency_p99_seconds") +
                                    labels.size())),
              0.1, 0.013);
  EXPECT_NE(body.find("egpu_instance_slo_attainment_ratio" + labels + "0\n"), std::string::npos)
      << body;
  EXPECT_NE(body.find("egpu_instance_borrowed_share" + labels + "0."), std::string::npos) << body;
  EXPECT_NE(
      body.find(
          "egpu_instance_borrowed_share{gpu=\"0\",slurm_job=\"2\",step=\"0\",egpu_instance=\"" +
          std::to_string(l) + "\"} -0."),
      std::string::npos)
      << body;
  EXPECT_NE(body.find("# TYPE egpu_instance_slo_attainment_ratio gauge"), std::string::npos);
  // Gangs and the clock their windows align on are exported beside them.
  EXPECT_NE(body.find("egpu_instance_gang_window_share" + labels + "0\n"), std::string::npos)
      << body;
  EXPECT_NE(body.find("\negpu_clock_synchronized "), std::string::npos) << body;
  EXPECT_NE(body.find("\negpu_clock_error_seconds "), std::string::npos) << body;
  // Without gangs (GangPeriodMs unset) there are no windows to align.
  EXPECT_EQ(body.find("egpu_clock_windows_aligned"), std::string::npos) << body;
}

}  // namespace
}  // namespace egpu::test
