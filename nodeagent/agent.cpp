#include "nodeagent/agent.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "core/protocol/control_client.h"
#include "core/util/clock.h"
#include "core/util/log.h"
#include "core/util/trusted_paths.h"
#include "nodeagent/event_loop.h"
#include "nodeagent/gpu_inventory.h"
#include "nodeagent/metrics_endpoint.h"
#include "nodeagent/page_chores.h"
#include "nodeagent/passed_descriptors.h"
#include "nodeagent/slo_memory_file.h"
#include "nodeagent/status_report.h"
#include "nodeagent/user_page_guard.h"

namespace egpu::agent {
namespace {

using protocol::Reply;
using protocol::ReplyStatus;

// The most often kicks make one GPU decide (a decision a shim asks for waits
// at most this long; a job that floods its channel costs no more).
constexpr int64_t kMinKickGapNs = 100'000;
// How late a timed look may be to share another GPU's wake-up (see
// schedule_tick); FAA charges what ran, so a slice that ends late costs
// nobody share.
constexpr int64_t kTickSlackNs = 500'000;
// A user's requests (RequestBudget): a token each, and one per 4 KB of
// reply. The burst lets 64 processes (an instance's most) attach to each of
// 8 GPUs at once, twice over (a restarted agent); then 200 a second: a shim
// attaches once per GPU, egpuctl sends one or two requests, and a status of
// hundreds of instances (about 300 KB, a few milliseconds to build) costs
// 75 tokens.
constexpr double kUserRequestBurst = 1024;
constexpr double kUserRequestsPerSecond = 200;

Status make_runtime_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Error{"cannot create runtime directory " + dir + ": " + std::strerror(errno)};
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error{"runtime directory " + dir + " is not a directory"};
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    return Error{"runtime directory " + dir +
                 " must be owned by the agent's user and writable by it alone"};
  }
  // Nor may anyone else rename a directory above it and put one of theirs in
  // its place: the agent creates its pages and sockets here by path.
  if (Status s = check_trusted_directory(dir, ::geteuid()); !s) {
    return Error{"runtime directory " + dir + ": " + s.error()};
  }
  // Nobody else lists it: getdents holds the directory's lock while it
  // copies into the caller's buffer, which a user can back with a FUSE file
  // that never answers, and every create here would wait. Reaching the
  // socket and the pages by name needs only x.
  if ((st.st_mode & 0044) != 0 && ::chmod(dir.c_str(), st.st_mode & 07711) != 0) {
    return Error{"cannot make runtime directory " + dir + " unlistable: " + std::strerror(errno)};
  }
  return {};
}

// A filesystem of its own (a mount point, such as run-egpu.mount's tmpfs):
// what jobs grow their pages by until the next look takes room from the
// agent's files alone, not from everything else in /run.
bool on_own_filesystem(const std::string& dir) {
  struct stat here {
  }, parent{};
  return ::stat(dir.c_str(), &here) == 0 && ::stat((dir + "/..").c_str(), &parent) == 0 &&
         here.st_dev != parent.st_dev;
}

// A group's number: given as one, or looked up by name (NSS: files, LDAP).
Result<gid_t> group_id(const std::string& name) {
  gid_t gid = 0;
  const char* end = name.data() + name.size();
  if (const auto [at, why] = std::from_chars(name.data(), end, gid);
      why == std::errc() && at == end)
    return gid;
  std::vector<char> buf(16384);
  group entry{};
  group* found = nullptr;
  int rc = 0;
  while ((rc = ::getgrnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 24))
    buf.resize(buf.size() * 2);
  if (rc != 0) return Error{std::string("cannot look the group up: ") + std::strerror(rc)};
  if (found == nullptr) return Error{"no such group"};
  return found->gr_gid;
}

uint64_t random_epoch() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = static_cast<uint64_t>(monotonic_ns());
  return v | 1;
}

}  // namespace

Agent::Agent(const config::EgpuConfig& config)
    : config_(config),
      latency_saver_(
          [dir = config.runtime_dir](uint32_t gpu, const std::optional<slo::SloMemory>& memory) {
            if (memory) return SloMemoryFile::save(dir, gpu, *memory);
            return SloMemoryFile::remove(dir, gpu);
          }) {}

Agent::~Agent() {
  // Members holding events go before the base.
  metrics_.reset();
  root_control_.reset();
  control_.reset();
  tracker_.reset();
  reaper_.reset();
  gpu_events_.clear();
  heartbeat_.reset();
  latency_timer_.reset();
  unmanaged_timer_.reset();
  signals_.clear();
  arbiters_.clear();
}

Result<std::unique_ptr<Agent>> Agent::create(const config::EgpuConfig& config) {
  std::unique_ptr<Agent> agent(new Agent(config));
  if (Status s = agent->init(); !s) return Error{s.error()};
  return agent;
}

Result<std::optional<gid_t>> Agent::monitor_gid(const config::EgpuConfig& config) {
  if (config.monitor_group.empty()) return std::optional<gid_t>();
  auto gid = group_id(config.monitor_group);
  if (!gid) return Error{"MonitorGroup=" + config.monitor_group + ": " + gid.error()};
  return std::optional<gid_t>(*gid);
}

Status Agent::init() {
  started_ns_ = monotonic_ns();
  epoch_ = random_epoch();
  // Before any page of a job is mapped (see UserPageGuard).
  if (Status s = UserPageGuard::install(); !s) return s;
  auto monitor_or = monitor_gid(config_);
  if (!monitor_or) return Error{monitor_or.error()};
  const std::optional<gid_t> monitor = *monitor_or;
  if (Status s = make_runtime_dir(config_.runtime_dir); !s) return s;
  runtime_dir_own_filesystem_ = on_own_filesystem(config_.runtime_dir);
  if (!runtime_dir_own_filesystem_) {
    EGPU_LOG_WARN(
        "RuntimeDir %s shares its filesystem with its parent: a job that grows its page takes "
        "room there from everything else until the agent takes it back (within a second). Mount "
        "a tmpfs of its own there (run-egpu.mount)",
        config_.runtime_dir.c_str());
  }
  // One agent per runtime directory: a second one (started by hand) would
  // take the socket and the pages from under the first.
  const std::string lock_path = config_.runtime_dir + "/agent.lock";
  runtime_lock_.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!runtime_lock_.valid()) return Error{lock_path + ": " + std::strerror(errno)};
  if (::flock(runtime_lock_.get(), LOCK_EX | LOCK_NB) != 0) {
    return Error{errno == EWOULDBLOCK ? "another egpu-agentd runs on " + config_.runtime_dir +
                                            " (it holds " + lock_path + ")"
                                      : lock_path + ": " + std::strerror(errno)};
  }
  auto inventory = discover_gpus(config_);
  if (!inventory) return Error{inventory.error()};
  auto base = make_agent_event_base();
  if (!base) return Error{base.error()};
  base_ = std::move(*base);
  registry_ = std::make_unique<model::InstanceRegistry>(
      inventory->memory_bytes, static_cast<uint32_t>(config_.max_instances_per_gpu));
  tracker_ = std::make_unique<ProcessTracker>(base_.get(),
                                              [this](const Attachment& a) { on_process_exit(a); });
  reaper_ = std::make_unique<StepReaper>(base_.get(), [this](uint64_t id) { on_step_gone(id); });
  ArbiterSettings settings;
  settings.runtime_dir = config_.runtime_dir;
  settings.policy.faa.slice = static_cast<int64_t>(config_.slice_ms) * 1'000'000;
  // Achieved shares decay with half the window: they then track every
  // window closely (measured on simgpu, ml-like pair at 70/30: worst 500 ms
  // window 1.3-1.4 pp, against 1.6-3.6 pp with a time constant of a whole
  // window), and a resize settles sooner.
  settings.policy.faa.tau = static_cast<int64_t>(config_.window_ms) * 1'000'000 / 2;
  settings.policy.faa.preempt_threshold = config_.preempt_threshold_pct / 100.0;
  settings.policy.faa.min_hold = static_cast<int64_t>(config_.min_hold_us) * 1000;
  settings.heartbeat_timeout_ns = static_cast<int64_t>(config_.heartbeat_timeout_ms) * 1'000'000;
  settings.policy.inflight_limit_ns = static_cast<int64_t>(config_.inflight_us) * 1000;
  settings.policy.inflight_alone_ns = static_cast<int64_t>(config_.inflight_alone_us) * 1000;
  settings.policy.handover_tail_ns = static_cast<int64_t>(config_.handover_tail_us) * 1000;
  settings.fail_mode = config_.fail_mode;
  settings.epoch = epoch_;
  settings.max_slots = static_cast<uint32_t>(config_.max_instances_per_gpu);
  if (config_.max_instances_per_gpu < 200) {
    EGPU_LOG_WARN(
        "MaxInstancesPerGpu=%d: 100 one-unit jobs with a step each are 200 instances; with "
        "fewer slots a GPU can be full while Slurm still places units on it",
        config_.max_instances_per_gpu);
  }
  // Judged before recovery places the recovered steps' gang windows.
  if (Status s = start_clock_watch(); !s) return s;
  if (!start_disposal()) return Error{"cannot start the thread that closes clients' sockets"};
  if (!PageChores::start()) return Error{"cannot start the thread that changes jobs' pages"};
  restore_gang_offsets();  // before recovery places the recovered steps' gangs
  // Gangs are planned once every GPU is recovered: a plan of the GPUs so far
  // would drop (and save without) the kept offsets of steps on later ones.
  recovering_ = true;
  for (uint32_t gpu = 0; gpu < inventory->memory_bytes.size(); ++gpu) {
    std::vector<model::Instance> recovered;
    auto arb = GpuArbiter::open(gpu, inventory->memory_bytes[gpu], settings, &recovered);
    if (!arb) return Error{"GPU " + std::to_string(gpu) + ": " + arb.error()};
    (*arb)->share_gang_grants(gang_grants_);
    arbiters_.push_back(std::move(*arb));
    auto ev = std::make_unique<GpuEvents>();
    ev->agent = this;
    ev->gpu = gpu;
    ev->tick_timer.reset(evtimer_new(base_.get(), &Agent::on_tick_timer, ev.get()));
    if (!on_data_plane(ev->tick_timer.get())) {
      return Error{"cannot add GPU " + std::to_string(gpu) + " to the event loop"};
    }
    gpu_events_.push_back(std::move(ev));
    if (Status s = recover(gpu, recovered); !s) return s;
  }
  recovering_ = false;
  apply_gangs();  // also drops kept offsets of steps that ended meanwhile
  remove_orphan_pages();
  // Each user's requests, over the public socket and its own together;
  // root's (create, remove) are never held.
  ControlLimits public_limits;
  public_limits.request_budget =
      std::make_shared<RequestBudget>(kUserRequestBurst, kUserRequestsPerSecond);
  auto control = ControlServer::listen(
      base_.get(), config_.socket_path,
      [this](const PeerCred& p, std::span<const uint8_t> b) { return handle(p, b); },
      public_limits);
  if (!control) return Error{control.error()};
  control_ = std::move(*control);
  control_->set_tenant_check([this](uid_t uid) { return registry_->owns_any(uid); });
  if (monitor) control_->set_monitor_group(*monitor);
  // Root's own socket: a user flooding the public one's backlog cannot keep
  // slurmstepd's create and remove out of this one (control_server.h).
  ControlLimits root_limits;
  root_limits.root_only = true;
  auto root = ControlServer::listen(
      base_.get(), protocol::root_socket_path(config_.socket_path),
      [this](const PeerCred& p, std::span<const uint8_t> b) { return handle(p, b); }, root_limits,
      0600);
  if (!root) {
    EGPU_LOG_WARN("no root-only socket (%s): root is served on %s alone", root.error().c_str(),
                  config_.socket_path.c_str());
  } else {
    root_control_ = std::move(*root);
  }
  // Each user's own socket (only root can give a socket to a user).
  UserSockets::remove_left(config_.socket_path);
  if (::geteuid() == 0) {
    user_sockets_ = std::make_unique<UserSockets>(
        base_.get(), config_.socket_path,
        [this](const PeerCred& p, std::span<const uint8_t> b) { return handle(p, b); },
        public_limits.request_budget);
    user_sockets_sync_.reset(evtimer_new(base_.get(), &Agent::on_user_sockets_sync, this));
    if (!user_sockets_sync_) return Error{"cannot add the users' sockets to the event loop"};
    sync_user_sockets_soon();  // the recovered instances' users
  }
  if (!config_.metrics_address.empty()) {
    // A port already taken (by anyone: see MetricsEndpoint) is tried again
    // later; the agent starts either way.
    auto m = MetricsEndpoint::open(base_.get(), config_.metrics_host(), config_.metrics_port(),
                                   [this] { return metrics_text(*this); });
    if (!m) return Error{m.error()};
    metrics_ = std::move(*m);
  }
  latency_timer_.reset(event_new(base_.get(), -1, EV_PERSIST, &Agent::on_latency_timer, this));
  if (!latency_timer_) return Error{"cannot add the latency control to the event loop"};
  schedule_latency_control();  // objectives recovered from the pages
  if (Status s = start_unmanaged_watch(); !s) return s;
  heartbeat_.reset(event_new(base_.get(), -1, EV_PERSIST, &Agent::on_heartbeat, this));
  timeval hb{config_.heartbeat_ms / 1000, (config_.heartbeat_ms % 1000) * 1000};
  if (!on_data_plane(heartbeat_.get()) || event_add(heartbeat_.get(), &hb) != 0)
    return Error{"cannot start the heartbeat"};
  for (int sig : {SIGTERM, SIGINT}) {
    EventHandle ev(evsignal_new(base_.get(), sig, &Agent::on_signal, this));
    if (!on_data_plane(ev.get()) || event_add(ev.get(), nullptr) != 0)
      return Error{"cannot handle signals"};
    signals_.push_back(std::move(ev));
  }
  ::signal(SIGPIPE, SIG_IGN);
  EGPU_LOG_INFO("serving %zu GPU(s) on %s (slice %d ms, window %d ms, fail mode %s)",
                arbiters_.size(), config_.socket_path.c_str(), config_.slice_ms, config_.window_ms,
                to_string(config_.fail_mode));
  return {};
}

int Agent::run() {
  for (uint32_t gpu = 0; gpu < arbiters_.size(); ++gpu)
    tick(gpu);
  // -1: the event loop itself failed (not a stop request).
  const int dispatched = event_base_dispatch(base_.get());
  for (uint32_t gpu = 0; gpu < arbiters_.size(); ++gpu)
    save_latency_control(gpu);
  latency_saver_.wait_idle();
  if (const auto failure = latency_saver_.take_failure()) {
    EGPU_LOG_WARN("cannot keep the latency control's memory: %s", failure->c_str());
  }
  for (auto& arb : arbiters_)
    arb->shutdown();
  if (dispatched < 0) {
    EGPU_LOG_ERROR("the event loop failed; stopped");
    return 1;
  }
  EGPU_LOG_INFO("stopped");
  return 0;
}

std::map<uint64_t, std::pair<double, Mode>> Agent::targets(uint32_t gpu) const {
  return registry_->faa_targets(gpu, latency_.loans(gpu));
}

Status Agent::retarget(uint32_t gpu) {
  publish_memory(gpu);
  Status s = arbiters_[gpu]->retarget(targets(gpu));
  apply_gangs();
  return s;
}

void Agent::schedule_tick(uint32_t gpu, int64_t at, bool slack) {
  GpuEvents& ev = *gpu_events_[gpu];
  if (at == std::numeric_limits<int64_t>::max()) {
    evtimer_del(ev.tick_timer.get());
    ev.scheduled = 0;
    return;
  }
  // Timer slack: a look due within kTickSlackNs before another GPU's is
  // taken with it, so one wake-up of the agent serves both. On a busy node
  // the GPUs' looks fall into step and the agent wakes once for all of them
  // (a wake-up, not the look, is most of the agent's cost). Only timed looks
  // are delayed; a kick is not.
  for (std::size_t i = 0; slack && i < gpu_events_.size(); ++i) {
    const int64_t other = gpu_events_[i]->scheduled;
    if (i != gpu && other >= at && other - at <= kTickSlackNs) {
      at = other;
      break;
    }
  }
  const int64_t delay = std::max<int64_t>(0, at - monotonic_ns());
  const timeval tv = timeval_from_ns(delay);
  evtimer_add(ev.tick_timer.get(), &tv);
  ev.scheduled = at;
}

void Agent::tick(uint32_t gpu) {
  schedule_tick(gpu, arbiters_[gpu]->tick(monotonic_ns()), !arbiters_[gpu]->has_gangs());
  // Channels that kicked are watched again once the GPU has looked.
  for (auto& [id, k] : gpu_events_[gpu]->kicks) {
    if (k->paused && !k->closed && event_add(k->ev.get(), nullptr) == 0) k->paused = false;
  }
}

Status Agent::watch_kicks(uint32_t gpu, uint64_t instance_id) {
  GpuEvents& g = *gpu_events_[gpu];
  auto k = std::make_unique<KickWatch>();
  k->gpu_events = &g;
  k->instance_id = instance_id;
  k->ev.reset(event_new(base_.get(), arbiters_[gpu]->wake_fd(instance_id), EV_READ | EV_PERSIST,
                        &Agent::on_kick, k.get()));
  // On the control plane: a job writes its wake channel as often as it
  // likes, and a flood of them must not keep the control plane from running
  // (the data plane always runs first). The tick a kick asks for is on the
  // data plane, at most one per kMinKickGapNs per GPU.
  if (!k->ev || event_add(k->ev.get(), nullptr) != 0) {
    return Error{"cannot watch the wake channel of instance " + std::to_string(instance_id)};
  }
  g.kicks[instance_id] = std::move(k);
  return {};
}

void Agent::unwatch_kicks(uint32_t gpu, uint64_t instance_id) {
  gpu_events_[gpu]->kicks.erase(instance_id);
}

void Agent::on_tick_timer(evutil_socket_t, short, void* arg) {
  auto* ev = static_cast<GpuEvents*>(arg);
  ev->agent->tick(ev->gpu);
}

void Agent::on_kick(evutil_socket_t, short, void* arg) {
  auto* k = static_cast<KickWatch*>(arg);
  GpuEvents& g = *k->gpu_events;
  Agent& self = *g.agent;
  const int64_t now = monotonic_ns();
  if (now - k->last_kick_ns < kMinKickGapNs) {
    event_del(k->ev.get());  // a flood: until the GPU's next tick (see KickWatch)
    k->paused = true;
  }
  k->last_kick_ns = now;
  const auto drained = self.arbiters_[g.gpu]->drain_wake(k->instance_id);
  if (drained == WakeChannel::Drained::kClosed) {
    EGPU_LOG_WARN(
        "instance %llu: its wake channel was shut down or sent descriptors; no longer "
        "watched",
        static_cast<unsigned long long>(k->instance_id));
    k->closed = true;
    event_del(k->ev.get());
    return;
  }
  if (drained == WakeChannel::Drained::kNothing) {
    // Readable, yet nothing read (an error other than EAGAIN): not watched
    // until the next tick, or the loop would spin on it.
    if (!k->paused && event_del(k->ev.get()) == 0) k->paused = true;
    return;
  }
  // A kick asks for a decision now, but at most one per kMinKickGapNs per GPU:
  // kicks are how waiting is said quickly, not a way to buy the agent's time.
  if (now - g.last_kick_tick >= kMinKickGapNs) {
    g.last_kick_tick = now;
    self.tick(g.gpu);
    return;
  }
  const int64_t at = g.last_kick_tick + kMinKickGapNs;
  // `scheduled` is the pending tick, or one that already fired (<= now).
  if (g.scheduled <= now || g.scheduled > at) self.schedule_tick(g.gpu, at, /*slack=*/false);
}

void Agent::on_heartbeat(evutil_socket_t, short, void* arg) {
  auto* self = static_cast<Agent*>(arg);
  const int64_t now = monotonic_ns();
  for (auto& arb : self->arbiters_)
    arb->heartbeat(now);
  // A grown page holds room on RuntimeDir's filesystem until it is taken
  // back: once a second (an fstat per instance).
  if (now - self->pages_trimmed_ns_ >= 1'000'000'000) self->trim_grown_pages(now);
}

int Agent::trim_grown_pages(int64_t now, bool now_or_never) {
  pages_trimmed_ns_ = now;
  int grown = 0;
  for (auto& arb : arbiters_)
    grown += arb->trim_grown_pages(now, now_or_never);
  return grown;
}

void Agent::on_signal(evutil_socket_t sig, short, void* arg) {
  auto* self = static_cast<Agent*>(arg);
  EGPU_LOG_INFO("signal %d: stopping", static_cast<int>(sig));
  event_base_loopbreak(self->base_.get());
}

void Agent::on_process_exit(const Attachment& a) {
  EGPU_LOG_DEBUG("process %d of instance %llu exited", a.pid,
                 static_cast<unsigned long long>(a.instance_id));
  if (a.gpu >= arbiters_.size()) return;
  arbiters_[a.gpu]->reclaim(a.instance_id, a.proc_slot, a.pid);
  tick(a.gpu);
}

void Agent::sync_user_sockets_soon() {
  if (user_sockets_sync_) event_active(user_sockets_sync_.get(), EV_TIMEOUT, 0);
}

void Agent::on_user_sockets_sync(evutil_socket_t, short, void* arg) {
  auto* self = static_cast<Agent*>(arg);
  std::set<uid_t> owners;
  for (const model::Instance* inst : self->registry_->all()) {
    if (inst->uid != 0) owners.insert(inst->uid);
  }
  self->user_sockets_->sync(owners);
}

}  // namespace egpu::agent
