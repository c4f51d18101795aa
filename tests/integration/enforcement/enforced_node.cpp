#include "enforced_node.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "core/env/egpu_env_names.h"
#include "core/util/mode.h"

namespace egpu::integration {

std::string memory_probe_path() {
  return EGPU_MEMORY_PROBE_PATH;
}
std::string shim_path() {
  return EGPU_SHIM_PATH;
}
harness::WorkloadOptions greedy(const std::string& label) {
  return harness::WorkloadOptions{
      "greedy", {"--duration-s", "0", "--iters-per-us", "1"}, label, {}};
}
std::string cancelled_launcher_path() {
  return EGPU_CANCELLED_LAUNCHER_PATH;
}

std::string exec_while_waiting_path() {
  return EGPU_EXEC_WHILE_WAITING_PATH;
}

EnforcedNode::EnforcedNode(const std::string& tag, NodeOptions options) {
  gpu_ = std::make_unique<harness::SimGpu>(tag,
                                           harness::SimGpuConfig{.devices = options.gpus,
                                                                 .memory_mb = options.memory_mb,
                                                                 .shared_by_users = options.users});
  // The files simgpu maps as the driver maps /dev/nvidiaN, and the shim the
  // jobs preload: how the agent tells which processes use a GPU and which of
  // them are managed (UnmanagedProcesses=).
  const std::string config = "GpuDeviceFiles=" + gpu_->device_file_pattern() +
                             "\nShimLibrary=" + shim_path() + "\n" + options.agent_config;
  agent_ = std::make_unique<test::AgentProcess>(config, options.gpus,
                                                static_cast<uint64_t>(options.memory_mb));
  EXPECT_TRUE(agent_->start()) << agent_->log();
}

EnforcedNode::~EnforcedNode() {
  if (::testing::Test::HasFailure())
    std::fprintf(stderr, "--- agent log ---\n%s\n", agent_->log().c_str());
}

uint64_t EnforcedNode::create(uint64_t job, uint32_t units, const std::string& mode, uint32_t gpu,
                              uint64_t mem_quota, uid_t uid) {
  protocol::CreateRequest r{};
  r.job_id = job;
  r.step_id = 0;
  r.gpu_index = gpu;
  r.uid = uid;
  r.gid = uid;
  r.units = units;
  r.job_units = units;
  r.mem_quota = mem_quota;
  const Result<Mode> parsed = parse_mode(mode);
  EXPECT_TRUE(parsed.ok()) << parsed.error();
  if (!parsed.ok()) return 0;
  r.mode = mode_value(*parsed);
  auto reply = agent_->call(r);
  EXPECT_TRUE(reply.ok()) << (reply.ok() ? "" : reply.error());
  if (!reply.ok()) return 0;
  EXPECT_EQ(reply->status, protocol::ReplyStatus::kOk) << reply->text;
  return reply->instance_id;
}

std::map<std::string, std::string> EnforcedNode::job_env(uint64_t job, uint32_t gpu) const {
  return {{"LD_PRELOAD", shim_path()},
          {EGPU_ENV_SOCKET, agent_->socket()},
          {EGPU_ENV_JOB_ID, std::to_string(job)},
          {EGPU_ENV_STEP_ID, "0"},
          {EGPU_ENV_GPU_INDICES, std::to_string(gpu)},
          // The process sees only its GPU, as under Slurm.
          {"CUDA_VISIBLE_DEVICES", std::to_string(gpu)}};
}

std::unique_ptr<test_child::ChildProcess> EnforcedNode::start(uint64_t job,
                                                              harness::WorkloadOptions w,
                                                              uint32_t gpu) {
  for (const auto& [k, v] : job_env(job, gpu))
    w.extra_env[k] = v;
  return harness::start_workload(*gpu_, w);
}

std::unique_ptr<test_child::ChildProcess> EnforcedNode::start_program(
    uint64_t job, std::vector<std::string> argv, uint32_t gpu,
    std::map<std::string, std::string> env, std::optional<uid_t> run_as) {
  test_child::ChildOptions o;
  o.argv = std::move(argv);
  o.run_as = run_as;
  o.nice = harness::kWorkloadNice;
  o.env = gpu_->environment();
  for (const auto& [k, v] : job_env(job, gpu))
    o.env[k] = v;
  for (const auto& [k, v] : env)
    o.env[k] = v;
  o.stdout_mode = test_child::OutputMode::kCapture;
  o.stderr_mode = test_child::OutputMode::kCapture;
  return std::make_unique<test_child::ChildProcess>(o);
}

CtlResult EnforcedNode::egpuctl(const std::vector<std::string>& args) const {
  test_child::ChildOptions o;
  o.argv = {EGPU_EGPUCTL_PATH, "--socket", agent_->socket()};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.stdout_mode = test_child::OutputMode::kCapture;
  o.stderr_mode = test_child::OutputMode::kCapture;
  test_child::ChildProcess p(o);
  auto st = p.wait_for(std::chrono::seconds(20));
  CtlResult r;
  if (st && st->exited) r.code = st->code;
  r.out = p.stdout_text();
  r.err = p.stderr_text();
  return r;
}

harness::ShareSampler::Source EnforcedNode::source() const {
  return harness::simgpu_usage_source(gpu_->shm_name());
}

harness::ShareReport measure_shares(EnforcedNode& node, const std::vector<std::string>& labels,
                                    std::chrono::milliseconds warmup,
                                    std::chrono::milliseconds measure, int device,
                                    const std::function<void()>& at_edges) {
  harness::ShareSampler sampler(node.source(), std::chrono::milliseconds(50));
  EXPECT_TRUE(sampler.wait_until(harness::labels_busy(labels), std::chrono::seconds(20)))
      << "workloads did not all start";
  std::this_thread::sleep_for(warmup);
  if (at_edges) at_edges();
  const auto from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(measure);
  const auto to = std::chrono::steady_clock::now();
  if (at_edges) at_edges();
  sampler.stop();
  return harness::compute_shares(harness::samples_between(sampler.samples(), from, to), device,
                                 harness::GroupBy::kLabel, std::chrono::milliseconds(500));
}

nlohmann::json finish(test_child::ChildProcess& child, std::chrono::seconds timeout) {
  auto st = child.wait_for(timeout);
  if (!st) {
    ADD_FAILURE() << "workload " << child.pid() << " hung; killing it";
    child.kill(SIGKILL);
    return {};
  }
  EXPECT_TRUE(st->success()) << "workload " << child.pid() << ": " << st->describe() << "\n"
                             << child.stderr_text();
  try {
    return harness::parse_summary(child.stdout_text());
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    return {};
  }
}

nlohmann::json stop(test_child::ChildProcess& child, std::chrono::seconds timeout) {
  child.kill(SIGTERM);
  return finish(child, timeout);
}

}  // namespace egpu::integration
