// Agent: the node agent. It wires the configuration, one GpuArbiter per GPU,
// the InstanceRegistry, the ProcessTracker, the control socket and the metrics
// endpoint into one libevent loop, and handles the control requests.
#pragma once

#include <event2/event.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/accounting/step_usage.h"
#include "core/config/egpu_config.h"
#include "core/faa/clock_watch.h"
#include "core/faa/gang_window.h"
#include "core/model/gang_offsets_codec.h"
#include "core/model/gang_plan.h"
#include "core/model/instance_registry.h"
#include "core/model/unmanaged_processes.h"
#include "core/protocol/messages.h"
#include "core/util/log_budget.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"
#include "nodeagent/control_server.h"
#include "nodeagent/event_handle.h"
#include "nodeagent/gpu_arbiter.h"
#include "nodeagent/latency_control.h"
#include "nodeagent/latency_memory_saver.h"
#include "nodeagent/process_tracker.h"
#include "nodeagent/step_reaper.h"
#include "nodeagent/unmanaged_process_scanner.h"
#include "nodeagent/user_sockets.h"

namespace egpu::agent {

class MetricsEndpoint;

class Agent {
 public:
  static Result<std::unique_ptr<Agent>> create(const config::EgpuConfig& config);
  // MonitorGroup's number (nullopt: none), looked up as at start; what
  // `egpu-agentd --check` asks beyond the file itself.
  static Result<std::optional<gid_t>> monitor_gid(const config::EgpuConfig& config);
  ~Agent();

  // Runs until SIGTERM or SIGINT; returns the exit code.
  int run();

  // For the status report and metrics.
  const model::InstanceRegistry& registry() const { return *registry_; }
  const std::vector<std::unique_ptr<GpuArbiter>>& arbiters() const { return arbiters_; }
  const config::EgpuConfig& config() const { return config_; }
  uint64_t epoch() const { return epoch_; }
  int64_t started_ns() const { return started_ns_; }
  const ControlServer* control() const { return control_.get(); }
  const LatencyControl& latency() const { return latency_; }
  // None when MetricsAddress is unset.
  const MetricsEndpoint* metrics() const { return metrics_.get(); }
  const model::GangPlan& gangs() const { return gangs_; }
  // Whether RuntimeDir is a mount point (see on_own_filesystem in agent.cpp).
  bool runtime_dir_own_filesystem() const { return runtime_dir_own_filesystem_; }
  // This node's clock now (clock_quality.h), and whether a multi-node step's
  // windows open with its other nodes' (the ClockWatch's verdict, re-judged
  // every second; an error saying why not).
  faa::ClockQuality clock() const;
  Status clock_alignment() const;
  // Processes found using a GPU without the shim (UnmanagedProcesses=).
  const model::UnmanagedProcessWatch& unmanaged() const { return unmanaged_; }
  uint64_t unmanaged_killed() const { return unmanaged_killed_; }

 private:
  explicit Agent(const config::EgpuConfig& config);
  Status init();
  Status recover(uint32_t gpu, const std::vector<model::Instance>& recovered);
  void remove_orphan_pages();

  std::vector<Outgoing> handle(const PeerCred& peer, std::span<const uint8_t> bytes);
  Outgoing reply(const protocol::Reply& r, uint32_t request_id, std::vector<int> fds = {});
  std::vector<Outgoing> handle_attach(const PeerCred& peer, const protocol::AttachRequest& r,
                                      uint32_t id);
  std::vector<Outgoing> handle_create(const PeerCred& peer, const protocol::CreateRequest& r,
                                      uint32_t id);
  std::vector<Outgoing> handle_remove(const PeerCred& peer, const protocol::RemoveRequest& r,
                                      uint32_t id);
  std::vector<Outgoing> handle_resize(const PeerCred& peer, const protocol::ResizeRequest& r,
                                      uint32_t id);
  std::vector<Outgoing> handle_objective(const PeerCred& peer, const protocol::ObjectiveRequest& r,
                                         uint32_t id);
  std::vector<Outgoing> handle_usage(const PeerCred& peer, const protocol::UsageRequest& r,
                                     uint32_t id);
  std::vector<Outgoing> handle_status(const PeerCred& peer, uint32_t id);
  std::vector<Outgoing> handle_show(const PeerCred& peer, const protocol::ShowRequest& r,
                                    uint32_t id);
  std::vector<Outgoing> text_chunks(const std::string& text, uint32_t request_id);

  // The FAA target of every instance on a GPU (fractions summing to <= 1).
  std::map<uint64_t, std::pair<double, Mode>> targets(uint32_t gpu) const;
  // Applies targets() and the memory limits to the GPU's arbiter after a
  // create, remove or resize.
  Status retarget(uint32_t gpu);
  // Plans the node's gangs and hands every GPU its members' windows; after
  // any change of instances or shares (a gang spans GPUs). agent_gangs.cpp.
  void apply_gangs();
  // The multi-node gangs' offsets a previous agent kept (gangs_ then keeps
  // them), and keeping them after each plan that changed them.
  void restore_gang_offsets();
  void save_gang_offsets();
  Status start_clock_watch();
  static void on_clock_timer(evutil_socket_t fd, short what, void* arg);
  // Rewrites every instance's record in the GPU page from the registry.
  void write_records(uint32_t gpu);
  // Job memory (agent_memory.cpp). What the job's umbrella on the GPU holds
  // now (0: none), before a step's quota is taken out of the job's pool.
  uint64_t umbrella_memory_used(uint64_t job_id, uint32_t gpu) const;
  // Publishes every instance's memory limit on the GPU.
  void publish_memory(uint32_t gpu);
  // After the limits of a job shrank for step `step_instance_id`: the
  // umbrella may have allocated meanwhile; the step gives up what it took.
  // False when the step's --egpu-mem cannot shrink (the caller undoes it).
  // `by`: who asked (its lines are logged within its budget).
  bool settle_job_memory(uint32_t gpu, uint64_t step_instance_id, uid_t by);
  // `slack`: may be taken up to kTickSlackNs late with another GPU's look.
  void schedule_tick(uint32_t gpu, int64_t at, bool slack = true);
  void tick(uint32_t gpu);
  // Watches (or stops watching) an instance's wake channel.
  Status watch_kicks(uint32_t gpu, uint64_t instance_id);
  void unwatch_kicks(uint32_t gpu, uint64_t instance_id);
  void on_process_exit(const Attachment& a);
  // Its step's slurmstepd ended without removing it (see StepReaper).
  void on_step_gone(uint64_t instance_id);
  // What removing instances takes besides the registry; returns what each
  // achieved (also logged: a step the reaper ends has no one to hand it to).
  std::vector<accounting::StepUsage> drop(const std::vector<model::Instance>& removed);

  // Starts the latency control's periodic timer if a GPU needs it and it is
  // not running; the timer stops itself when none does (no wake-ups without
  // objectives).
  void schedule_latency_control();
  // The latency control of a GPU as a previous agent left it (its loans and
  // models); and keeping it for the next one (agent_latency.cpp).
  void restore_latency_control(uint32_t gpu);
  void save_latency_control(uint32_t gpu);
  static void on_latency_timer(evutil_socket_t, short, void* arg);
  // The users' own sockets follow who owns instances: from the loop, never
  // within a request (whose connection may be on a socket it would close).
  void sync_user_sockets_soon();
  static void on_user_sockets_sync(evutil_socket_t, short, void* arg);
  // UnmanagedProcesses= (agent_unmanaged.cpp): takes the last /proc scan's
  // result, acts on the processes it makes due, and starts the next scan.
  Status start_unmanaged_watch();
  static void on_unmanaged_timer(evutil_socket_t, short, void* arg);
  void watch_unmanaged(int64_t now);
  void act_on_unmanaged(const model::UnmanagedProcess& p);
  static void on_tick_timer(evutil_socket_t, short, void* arg);
  static void on_kick(evutil_socket_t, short, void* arg);
  static void on_heartbeat(evutil_socket_t, short, void* arg);
  // What jobs grew their pages by, taken back on every GPU (GpuArbiter);
  // the number of pages that had grown.
  // `now_or_never`: pages in their back-off too (a create found no room).
  int trim_grown_pages(int64_t now, bool now_or_never = false);
  static void on_signal(evutil_socket_t, short, void* arg);

  config::EgpuConfig config_;
  uint64_t epoch_ = 0;
  UniqueFd runtime_lock_;  // flock: one agent per RuntimeDir
  bool runtime_dir_own_filesystem_ = false;
  int64_t started_ns_ = 0;
  EventBaseHandle base_;
  std::unique_ptr<model::InstanceRegistry> registry_;
  std::vector<std::unique_ptr<GpuArbiter>> arbiters_;
  struct GpuEvents;
  // One instance's wake channel in the loop. A channel that kicks again
  // within kMinKickGapNs of its last kick is not watched until its GPU's next
  // tick: a flooding job gets a drain or two per tick. (Pausing after every
  // kick cost two epoll_ctl calls per handover.)
  struct KickWatch {
    GpuEvents* gpu_events;
    uint64_t instance_id;
    EventHandle ev;
    int64_t last_kick_ns = 0;
    bool paused = false;
    bool closed = false;  // shut down by its user: never watched again
  };
  struct GpuEvents {
    Agent* agent;
    uint32_t gpu;
    EventHandle tick_timer;
    std::map<uint64_t, std::unique_ptr<KickWatch>> kicks;  // by instance id
    int64_t scheduled = 0;
    int64_t last_kick_tick = 0;  // when a kick last made this GPU tick
  };
  std::vector<std::unique_ptr<GpuEvents>> gpu_events_;
  std::unique_ptr<ProcessTracker> tracker_;
  std::unique_ptr<StepReaper> reaper_;
  std::unique_ptr<ControlServer> control_;
  std::unique_ptr<ControlServer> root_control_;  // root_socket_path: root's alone
  std::unique_ptr<UserSockets> user_sockets_;    // user_socket_path: each user's own (as root)
  EventHandle user_sockets_sync_;
  std::unique_ptr<MetricsEndpoint> metrics_;
  EventHandle heartbeat_;
  int64_t pages_trimmed_ns_ = 0;  // when the heartbeat last looked at page lengths
  LatencyControl latency_;
  EventHandle latency_timer_;
  bool latency_timer_on_ = false;
  int64_t latency_last_ns_ = 0;
  LatencyMemorySaver latency_saver_;         // its memory, written off the loop
  LogBudget latency_save_log_{1, 1.0 / 60};  // failed saves of its memory
  std::vector<EventHandle> signals_;
  model::GangPlan gangs_;
  model::GangOffsets saved_gang_offsets_;  // what the runtime directory's file holds
  bool recovering_ = false;                // init's recovery: gangs are planned after it
  // Lines a user's requests log (resize, objective): a user looping them
  // must not flood the journal (core/util/log_budget.h).
  static constexpr double kUserLogBurst = 20;
  static constexpr double kUserLogPerSecond = 1;
  // `budgets`: the user's changes' (log_budgets_), or the lines about its
  // processes without the shim (unmanaged_log_budgets_), which its own
  // requests must not use up.
  using LogBudgets = std::unordered_map<uid_t, LogBudget>;
  LogBudget::Verdict log_budget(uid_t uid, LogBudgets& budgets);
  LogBudget::Verdict log_budget(uid_t uid) { return log_budget(uid, log_budgets_); }
  LogBudgets log_budgets_;
  LogBudgets unmanaged_log_budgets_;
  faa::ClockWatch clock_watch_{faa::ClockWatch::Settings{}};
  EventHandle clock_timer_;
  faa::Nanos gang_epoch_ = 0;  // the epoch the gang windows were placed on
  // Shared by the GPUs' policies: a gang holds or skips its windows on all
  // of its GPUs at once (core/faa/gang_grants.h).
  std::shared_ptr<faa::GangGrants> gang_grants_ = std::make_shared<faa::GangGrants>();
  model::UnmanagedProcessWatch unmanaged_;
  UnmanagedProcessScanner unmanaged_scanner_;
  // The shim's files seen at ShimLibrary since the agent started (an upgrade
  // replaces it while processes map the one before).
  DeviceFile shim_file_;  // ShimLibrary as the agent started (newer ones: by path)
  EventHandle unmanaged_timer_;
  uint64_t unmanaged_killed_ = 0;
  int64_t unmanaged_judged_from_ns_ = 0;  // after the quiet start, when one is needed
  LogBudget unmanaged_stuck_log_{1, 1.0 / 300};
};

}  // namespace egpu::agent
