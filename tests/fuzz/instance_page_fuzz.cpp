// libFuzzer target: what the node agent reads from pages its jobs can write.
// Each instance page is mapped read-write by the job's user, so every byte of
// it is hostile: the agent must not crash, hang or let it corrupt what the
// agent itself publishes. A real GpuArbiter over real page files (in a private
// runtime directory) arbitrates two or three instances on one GPU on simulated
// time, while the input rewrites, truncates and kicks their pages between
// ticks; the agent's latency control reads the latency counts the pages
// claim and moves share through the real InstanceRegistry. The input format
// is in instance_page_input.h.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/shm/page_file.h"
#include "core/shm/page_paths.h"
#include "core/shm/pages.h"
#include "core/util/clock.h"
#include "core/util/log.h"
#include "instance_page_input.h"
#include "nodeagent/gpu_arbiter.h"
#include "nodeagent/latency_control.h"
#include "nodeagent/page_chores.h"
#include "nodeagent/user_page_guard.h"

// A broken promise of the agent: says which, then traps (libFuzzer keeps the input).
#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "instance_page: invariant failed: %s (%s:%d)\n", #cond, __FILE__, \
                   __LINE__);                                                                \
      __builtin_trap();                                                                      \
    }                                                                                        \
  } while (0)

namespace egpu::fuzz::instance_page {
namespace {

using agent::GpuArbiter;

constexpr uint32_t kGpu = 0;
constexpr uint64_t kGpuMemory = 80ull << 30;
constexpr size_t kPageBytes = sizeof(shm::InstancePage);
constexpr int kMaxOps = 128;  // bounds the time one input takes
// FAA re-decides at a slice end, a drain poll or a cap refill: milliseconds.
// A next tick further out than this would leave a contended GPU stalled.
constexpr int64_t kMaxTickAheadNs = 60 * faa::kSecond;
constexpr slo::LatencyObjective kObjective{99'000, 5'000'000};

// Takes bytes from the front of the input; zeros once it is used up.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() {
    const uint16_t lo = u8();
    return static_cast<uint16_t>(lo | (u8() << 8));
  }
  std::span<const uint8_t> take(size_t len) {
    len = std::min(len, size_ - std::min(pos_, size_));
    std::span<const uint8_t> s(data_ + pos_, len);
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Created once per process: the agent installs the guard before it maps any
// page of a job, and the directory is its private RuntimeDir.
const char* runtime_dir() {
  static const char* dir = [] {
    log::set_threshold(log::Level::kError);  // repaired pages warn, by the thousand
    if (!agent::UserPageGuard::install()) std::abort();
    const char* tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/egpu-fuzz-XXXXXX";
    if (::mkdtemp(path.data()) == nullptr) std::abort();
    const char* d = ::strdup(path.c_str());
    std::atexit([] { ::rmdir(runtime_dir()); });
    return d;
  }();
  return dir;
}

// The chores an agent left (unlinks of removed or replaced pages) end with
// its process. This process is one agent after another on the same
// instance ids, so they are let finish before the next: nothing here holds
// a page's lock, so they do, in milliseconds.
void wait_for_chores() {
  for (int i = 0; i < 10'000 && agent::PageChores::pending() > 0; ++i)
    ::usleep(1000);
  CHECK(agent::PageChores::pending() == 0);
}

struct Attached {  // what the agent's process tracker would hold
  uint64_t instance_id;
  uint32_t slot;
  pid_t pid;
};

// What the agent reported last for an instance: all of it only grows.
struct Seen {
  uint64_t device_ns = 0;
  faa::Nanos charged = 0;
  faa::Nanos throttled = 0;
  faa::Nanos longest_wait = 0;
  uint64_t grants = 0;
};

class Run {
 public:
  explicit Run(Reader& in) : in_(in) {
    const uint8_t flags = in_.u8();
    const size_t count = (flags & 1) != 0 ? 3 : 2;
    settings_.runtime_dir = runtime_dir();
    settings_.policy.faa.slice = (1 + ((flags >> 1) & 0x3f) % 50) * faa::kMillisecond;
    const bool latency_roles = (flags & 0x80) != 0;
    settings_.policy.faa.tau = 250 * faa::kMillisecond;
    settings_.heartbeat_timeout_ns = faa::kSecond;
    settings_.policy.inflight_limit_ns = 2 * faa::kMillisecond;
    settings_.policy.inflight_alone_ns = 20 * faa::kMillisecond;
    settings_.fail_mode = FailMode::kOpen;
    settings_.epoch = 1;
    settings_.max_slots = 16;
    for (uint32_t i = 0; i < kHeaderBytes - 1; ++i) {
      const uint8_t b = in_.u8();
      if (i >= count) continue;
      model::Instance inst;
      inst.id = kFirstInstanceId + i;
      inst.job_id = 1000 + i;
      inst.gpu = kGpu;
      inst.slot = i;
      inst.uid = ::getuid();
      inst.gid = ::getgid();
      // Units may overbook the GPU, as a damaged page recovered after a
      // restart can: the targets are scaled down then (faa_targets).
      inst.units = 1 + (b & 0x7f) % 100;
      inst.job_units = inst.units;
      inst.mode = (b & 0x80) != 0 ? Mode::kCap : Mode::kBurst;
      if (latency_roles && inst.mode == Mode::kBurst && i == 0) inst.objective = kObjective;
      if (latency_roles && inst.mode == Mode::kBurst && i == 1) inst.mode = Mode::kLend;
      inst.mem_quota = kGpuMemory / 100 * inst.units;
      tenants_.push_back(inst);
      CHECK(registry_.restore(inst).ok());
    }
    plain_targets_ = registry_.faa_targets(kGpu, {});
    for (const auto& t : tenants_)
      targets_.push_back(plain_targets_.at(t.id).first);
  }

  void go() {
    const std::string gpu_page = shm::gpu_page_path(settings_.runtime_dir, kGpu);
    ::unlink(gpu_page.c_str());  // a crashed input's page must not be recovered
    open_agent(/*reopen=*/false);
    for (uint32_t i = 0; i < tenants_.size(); ++i)
      attach(tenants_[i].id, kFirstPid + static_cast<pid_t>(i));
    tick();
    for (int n = 0; n < kMaxOps && !in_.empty(); ++n) {
      const uint8_t op = in_.u8();
      // Time passes from sub-microseconds to minutes.
      const int64_t dt = in_.u16();
      const int shift = in_.u8() % 24;
      apply_op(op);
      now_ += dt << shift;
      tick();
    }
    // The jobs end: the holder is withdrawn and every slot freed.
    for (const auto& t : tenants_)
      arb_->remove(t.id);
    const auto* gpu = gpu_page_view();
    CHECK(gpu->holder.load() == shm::kNoHolder);
    for (uint32_t s = 0; s < settings_.max_slots; ++s)
      CHECK(gpu->slots[s].instance_id.load() == 0);
    CHECK(!arb_->holder());
    gpu_view_ = shm::Mapping();
    arb_.reset();
    wait_for_chores();
    ::unlink(gpu_page.c_str());
  }

 private:
  const shm::GpuPage* gpu_page_view() const { return gpu_view_.as<const shm::GpuPage>(); }

  // Opens the GPU as the agent does at start: fresh, or after a restart with
  // the instances the GPU page recorded and their pages as their users left them.
  void open_agent(bool reopen) {
    opened_at_ = monotonic_ns();
    std::vector<model::Instance> recovered;
    auto arb = GpuArbiter::open(kGpu, kGpuMemory, settings_, &recovered);
    CHECK(arb.ok());
    arb_ = std::move(*arb);
    // The GPU page is the agent's alone: it must recover every instance.
    CHECK(recovered.size() == (reopen ? tenants_.size() : 0));
    for (size_t i = 0; i < recovered.size(); ++i) {
      CHECK(recovered[i].id == tenants_[i].id && recovered[i].slot == tenants_[i].slot);
    }
    for (size_t i = 0; i < tenants_.size(); ++i)
      CHECK(arb_->add(tenants_[i], targets_[i], kGpuMemory / 100 * tenants_[i].units, reopen).ok());
    if (reopen) {
      recover_processes();
      // As Agent::recover: the recovered instances get their targets again.
      std::map<uint64_t, std::pair<double, Mode>> targets;
      for (size_t i = 0; i < tenants_.size(); ++i)
        targets[tenants_[i].id] = {targets_[i], tenants_[i].mode};
      CHECK(arb_->retarget(targets).ok());
    }
    // Simulated time starts at the agent's clock (which open and add read)
    // and never runs behind it: the agent's own clock never goes back.
    now_ = std::max(now_, monotonic_ns());
    // A new agent starts its latency control afresh (loans do not outlive it).
    latency_ = agent::LatencyControl();
    latency_last_ = now_;
    auto view =
        shm::map_fd(arb_->gpu_page_readonly_fd(), sizeof(shm::GpuPage), shm::Access::kReadOnly);
    CHECK(view.ok());
    gpu_view_ = std::move(*view);
    seen_.clear();
    gpu_grants_ = 0;
    preemptions_ = 0;
    last_holder_ = gpu_page_view()->holder.load();
    last_seq_ = gpu_page_view()->grant_seq.load();
  }

  // As Agent::recover: every pid a page names is looked up; the ones no
  // process tracker knows are dead and reclaimed.
  void recover_processes() {
    for (const auto& t : tenants_) {
      for (uint32_t slot = 0; slot < shm::kMaxProcsPerInstance; ++slot) {
        const pid_t pid = arb_->process_in_slot(t.id, slot);
        if (pid <= 0) continue;
        const bool known = std::any_of(attached_.begin(), attached_.end(), [&](const Attached& a) {
          return a.instance_id == t.id && a.slot == slot && a.pid == pid;
        });
        if (!known) arb_->reclaim(t.id, slot, pid);
      }
    }
    // Processes whose slots the page no longer names are not attached any more.
    std::erase_if(attached_, [&](const Attached& a) {
      return arb_->process_in_slot(a.instance_id, a.slot) != a.pid;
    });
  }

  void attach(uint64_t instance_id, pid_t pid) {
    const int slot = arb_->attach(instance_id, pid);
    CHECK(slot < static_cast<int>(shm::kMaxProcsPerInstance));
    if (slot >= 0) attached_.push_back({instance_id, static_cast<uint32_t>(slot), pid});
  }

  void apply_op(uint8_t op) {
    const model::Instance& t = tenants_[(op & 3) % tenants_.size()];
    const int fd = arb_->instance_page_fd(t.id);
    CHECK(fd >= 0);
    switch (static_cast<Op>((op >> 2) & 7)) {
      case kWrite0:
      case kWrite1:
      case kWrite2: {
        const size_t off = in_.u16() % kPageBytes;
        const auto data = in_.take(std::min<size_t>(in_.u16(), kPageBytes - off));
        // Through the file, as its user can; pwrite also works on a truncated page.
        (void)!::pwrite(fd, data.data(), data.size(), static_cast<off_t>(off));
        break;
      }
      case kAttach:
        attach(t.id, kFirstPid + in_.u8());
        break;
      case kExit:
        if (!attached_.empty()) {
          const size_t k = in_.u8() % attached_.size();
          const Attached a = attached_[k];
          attached_.erase(attached_.begin() + static_cast<std::ptrdiff_t>(k));
          arb_->reclaim(a.instance_id, a.slot, a.pid);
        }
        break;
      case kKick: {
        // Its processes hold the other end of the wake channel: any datagram,
        // or a shutdown.
        const int shim = arb_->shim_wake_fd(t.id);
        const uint8_t n = in_.u8();
        if (n == 0xff) {
          (void)::shutdown(shim, SHUT_WR);
        } else {
          const auto data = in_.take(n);
          (void)::send(shim, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        (void)arb_->drain_wake(t.id);
        break;
      }
      case kTruncate:
        (void)!::ftruncate(fd, static_cast<off_t>(in_.u16() % kPageBytes));
        break;
      case kRestart:
        gpu_view_ = shm::Mapping();
        arb_.reset();
        wait_for_chores();
        ++settings_.epoch;
        open_agent(/*reopen=*/true);
        break;
    }
  }

  // One turn of the agent's loop for this GPU: the tick, the heartbeat, and
  // what status and metrics read; then what the agent promises about them.
  void tick() {
    const int64_t next = arb_->tick(now_);
    arb_->heartbeat(now_);
    CHECK(next > now_);
    CHECK(next == faa::kNever || next - now_ <= kMaxTickAheadNs);

    const shm::GpuPage* gpu = gpu_page_view();
    CHECK(gpu->magic == shm::kGpuPageMagic && gpu->gpu_index == kGpu &&
          gpu->max_slots == settings_.max_slots);
    // Shims read the holder on every launch: nobody, or an instance of this GPU.
    const uint32_t holder = gpu->holder.load();
    const std::optional<uint64_t> published = arb_->holder();
    if (holder != shm::kNoHolder) {
      const auto it = std::find_if(tenants_.begin(), tenants_.end(),
                                   [&](const model::Instance& t) { return t.slot == holder; });
      CHECK(it != tenants_.end());
      CHECK(published && *published == it->id);
      CHECK(gpu->slots[holder].instance_id.load() == it->id);
    }
    if (published) {
      CHECK(std::any_of(tenants_.begin(), tenants_.end(),
                        [&](const model::Instance& t) { return t.id == *published; }));
    }
    // Waiters sleep on grant_seq: every holder change must bump it.
    const uint32_t seq = gpu->grant_seq.load();
    CHECK(holder == last_holder_ || seq != last_seq_);
    last_holder_ = holder;
    last_seq_ = seq;
    CHECK(gpu->waiters.load() <= tenants_.size());
    const int64_t bound = gpu->inflight_limit_ns.load();
    CHECK(bound == settings_.policy.inflight_limit_ns ||
          bound ==
              std::max(settings_.policy.inflight_alone_ns, settings_.policy.inflight_limit_ns));

    // Status and metrics: every instance has a view, and its counters only
    // grow. Reported device time is trimmed to the time that passed, so no
    // report can buy or sink an instance; a floor for the time the holder held
    // the slice adds at most as much again.
    faa::Nanos charged = 0;
    for (const auto& t : tenants_) {
      const auto v = arb_->view(t.id, now_);
      CHECK(v.has_value());
      Seen& s = seen_[t.id];
      CHECK(v->device_ns >= s.device_ns);
      CHECK(v->faa.charged >= s.charged);
      CHECK(v->faa.throttled >= s.throttled);
      CHECK(v->faa.longest_wait >= s.longest_wait);
      CHECK(v->faa.grants >= s.grants);
      s = Seen{v->device_ns, v->faa.charged, v->faa.throttled, v->faa.longest_wait, v->faa.grants};
      CHECK(v->faa.charged >= 0);
      charged += v->faa.charged;
    }
    CHECK(charged <= 2 * std::max<int64_t>(0, now_ - opened_at_));
    const faa::GpuStats stats = arb_->gpu_stats(now_);
    CHECK(stats.instances == tenants_.size());
    CHECK(stats.grants >= gpu_grants_ && stats.preemptions >= preemptions_);
    gpu_grants_ = stats.grants;
    preemptions_ = stats.preemptions;
    control_latency();
  }

  // As Agent::on_latency_timer, for this GPU: one period of the latency
  // control on what the pages claim, then its loans applied to FAA. Whatever
  // the pages say, only a lender gives, and only what it has above its floor;
  // only the latency-critical instance takes, and only what was given; a
  // guaranteed instance keeps its share.
  void control_latency() {
    const int64_t period = std::max<int64_t>(now_ - latency_last_, 1'000'000);
    latency_last_ = now_;
    if (!latency_.wanted(kGpu, registry_)) {
      latency_.forget(kGpu);
      CHECK(latency_.loans(kGpu).empty());
      return;
    }
    const bool changed = latency_.step(kGpu, registry_, *arb_, period);
    const std::map<uint64_t, int32_t>& loans = latency_.loans(kGpu);
    const uint32_t floor = slo::SloParams{}.lend_floor_units;
    int64_t borrowed = 0, lent = 0;
    for (const auto& [id, units] : loans) {
      const model::Instance* inst = registry_.find(id);
      CHECK(inst != nullptr && units != 0);
      if (units > 0) {
        CHECK(inst->latency_critical());
        borrowed += units;
      } else {
        CHECK(inst->mode == Mode::kLend && -units <= static_cast<int64_t>(inst->units) - floor);
        lent -= units;
      }
    }
    CHECK(borrowed == lent);
    const auto targets = registry_.faa_targets(kGpu, loans);
    double with = 0, without = 0;
    for (const auto& t : tenants_) {
      const double plain = plain_targets_.at(t.id).first;
      const double now = targets.at(t.id).first;
      with += now;
      without += plain;
      // Shares are doubles scaled by their sum: compare to rounding.
      if (!t.latency_critical() && t.mode != Mode::kLend) {
        CHECK(!loans.contains(t.id) && std::abs(now - plain) <= 1e-9);
      }
      if (t.mode == Mode::kLend) CHECK(now <= plain + 1e-9);
      if (t.latency_critical()) CHECK(now >= plain - 1e-9);
    }
    CHECK(std::abs(with - without) < 1e-9);
    if (changed) CHECK(arb_->retarget(targets).ok());
  }

  Reader& in_;
  agent::ArbiterSettings settings_{};
  std::vector<model::Instance> tenants_;
  std::vector<double> targets_;
  model::InstanceRegistry registry_{{kGpuMemory}, 16};
  std::map<uint64_t, std::pair<double, Mode>> plain_targets_;  // without loans
  agent::LatencyControl latency_;
  int64_t latency_last_ = 0;
  std::unique_ptr<GpuArbiter> arb_;
  shm::Mapping gpu_view_;  // the GPU page as shims map it (read-only)
  std::vector<Attached> attached_;
  int64_t now_ = 0;        // simulated CLOCK_MONOTONIC
  int64_t opened_at_ = 0;  // when the arbiter was opened: charges count from then
  std::map<uint64_t, Seen> seen_;
  uint64_t gpu_grants_ = 0;
  uint64_t preemptions_ = 0;
  uint32_t last_holder_ = shm::kNoHolder;
  uint32_t last_seq_ = 0;
};

}  // namespace
}  // namespace egpu::fuzz::instance_page

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  egpu::fuzz::instance_page::Reader in(data, size);
  egpu::fuzz::instance_page::Run(in).go();
  return 0;
}
