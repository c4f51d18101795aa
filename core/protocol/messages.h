// The control protocol between egpuctl / the SPANK plugin / the shim and the
// node agent, over a SOCK_SEQPACKET Unix socket: one message per packet, a fixed
// header and a fixed-size payload per type. Requests carry no strings or
// pointers, so validating one is checking a length and a few ranges. Replies may
// carry text (errors, JSON status), which only the agent produces.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "core/util/mode.h"

namespace egpu::protocol {

inline constexpr uint32_t kMagic = 0x55504745;  // "EGPU" little-endian
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kMaxRequestSize = 256;
inline constexpr size_t kMaxReplySize = 64 * 1024;  // a status reply is sent in chunks of this
inline constexpr size_t kMaxReplyFds = 4;           // descriptors (SCM_RIGHTS) one reply may carry
inline constexpr uint32_t kMaxGpus = 64;
inline constexpr uint32_t kUnitsPerGpu = 100;

enum class MessageType : uint16_t {
  kAttach = 1,     // shim: attach this process to its instance
  kCreate = 2,     // root (SPANK): create an instance for a step on a GPU
  kRemove = 3,     // root (SPANK): remove a step's instances
  kResize = 4,     // owner or root: change an instance's units and/or mode
  kStatus = 5,     // anyone: JSON of the GPUs and the instances the caller may see
  kShow = 6,       // owner or root: JSON of one instance in detail
  kObjective = 7,  // owner or root: set or clear an instance's latency objective
  kUsage = 8,      // owner or root: what a step's instances achieved so far
  kReply = 100,
};

// Mode fields carry mode_value(Mode) (core/util/mode.h); a resize may say
// kModeUnchanged instead. The decoder refuses any other number.
inline constexpr uint32_t kModeUnchanged = 0xffffffff;

// Step ids Slurm uses for its special steps (slurm.h SLURM_BATCH_SCRIPT etc.).
inline constexpr uint32_t kStepBatch = 0xfffffffb;
inline constexpr uint32_t kStepExtern = 0xfffffffc;
inline constexpr uint32_t kStepInteractive = 0xfffffffa;

// How Slurm names a step: "batch", "extern", "interactive" or its number.
inline std::string step_label(uint32_t step) {
  switch (step) {
    case kStepBatch:
      return "batch";
    case kStepExtern:
      return "extern";
    case kStepInteractive:
      return "interactive";
    default:
      return std::to_string(step);
  }
}

struct Header {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t length;  // whole message, header included
  uint32_t request_id;
};
static_assert(sizeof(Header) == 16);

struct AttachRequest {
  uint64_t job_id;
  uint32_t step_id;
  uint32_t gpu_index;
};
static_assert(sizeof(AttachRequest) == 16);

struct CreateRequest {
  uint64_t job_id;
  uint32_t step_id;
  uint32_t gpu_index;
  uint32_t uid;
  uint32_t gid;
  uint32_t units;      // this step's share of the GPU, 1..100
  uint32_t job_units;  // the job's allocation on this GPU: ceiling for its steps
  uint64_t mem_quota;  // bytes; 0 = units' share of the GPU's memory
  uint32_t mode;       // mode_value(Mode)
  uint32_t flags;      // kCreateUmbrella | kCreateEndsWithCaller | kCreateSpansNodes
};
static_assert(sizeof(CreateRequest) == 48);
// The batch or interactive step: it holds whatever part of the job's
// allocation its sibling steps do not.
inline constexpr uint32_t kCreateUmbrella = 1u << 0;
// The instance lives no longer than the process that asks for it (SPANK's
// slurmstepd, whose life is the step's): the agent frees it if that process
// ends without removing it. Instances made by egpuctl do not have it.
inline constexpr uint32_t kCreateEndsWithCaller = 1u << 1;
// The step runs on other nodes too (SPANK: the step's node count > 1): its
// instance here is a rank of a gang even alone on this node, and its window
// must sit where the other nodes put theirs (core/model/gang_plan.h).
inline constexpr uint32_t kCreateSpansNodes = 1u << 2;

struct RemoveRequest {
  uint64_t job_id;
  uint32_t step_id;  // kAllSteps: every step of the job
  uint32_t reserved;
};
static_assert(sizeof(RemoveRequest) == 16);
inline constexpr uint32_t kAllSteps = 0xffffffff;

// ResizeRequest.flags: root grows a job past the allocation Slurm gave it
// (Slurm does not learn of it; see InstanceRegistry::resize).
inline constexpr uint32_t kResizeForce = 1u << 0;

struct ResizeRequest {
  uint64_t instance_id;
  uint32_t units;  // 1..100, or 0 = unchanged
  uint32_t mode;   // mode_value(Mode), or kModeUnchanged
  uint32_t flags;  // kResizeForce
  uint32_t reserved;
};
static_assert(sizeof(ResizeRequest) == 24);

struct StatusRequest {
  uint32_t flags;  // reserved, must be 0
  uint32_t reserved;
};
static_assert(sizeof(StatusRequest) == 8);

struct ShowRequest {
  uint64_t instance_id;
};
static_assert(sizeof(ShowRequest) == 8);

// A latency objective (core/slo/latency_objective.h): the instance becomes
// latency-critical; percentile_milli 0 (and target_ns 0) clears it.
struct ObjectiveRequest {
  uint64_t instance_id;
  uint32_t percentile_milli;  // p99 = 99000; in (0, 100000), or 0 = off
  uint32_t reserved;          // 0
  int64_t target_ns;          // in [1 ms, 600 s], or 0 = off
};
static_assert(sizeof(ObjectiveRequest) == 24);

// What a running step's instances on this node achieved so far (the reply:
// accounting::usage_to_json); SPANK checkpoints it into the job's record.
struct UsageRequest {
  uint64_t job_id;
  uint32_t step_id;  // kAllSteps: every step of the job
  uint32_t reserved;
};
static_assert(sizeof(UsageRequest) == 16);

using Request = std::variant<AttachRequest, CreateRequest, RemoveRequest, ResizeRequest,
                             StatusRequest, ShowRequest, ObjectiveRequest, UsageRequest>;

// Reply: a status code, a message or JSON text, and for an attach the instance
// coordinates (the page and event file descriptors travel as SCM_RIGHTS).
enum class ReplyStatus : int32_t {
  kOk = 0,
  kBadRequest = 1,       // malformed, truncated, oversized, unknown type, bad field
  kDenied = 2,           // SO_PEERCRED says the caller may not do this
  kNotFound = 3,         // no such instance / job / GPU
  kOverAllocation = 4,   // a resize or create beyond what Slurm allocated
  kExists = 5,           // the instance already exists
  kFull = 6,             // no free instance or process slot
  kVersionMismatch = 7,  // protocol version mismatch
  kInternal = 8,
};

struct ReplyFixed {
  int32_t status;
  uint32_t flags;  // kReplyMore: more chunks of text follow
  uint64_t instance_id;
  uint32_t gpu_slot;   // attach: the instance's slot on the GPU page
  uint32_t proc_slot;  // attach: this process's slot on the instance page
};
static_assert(sizeof(ReplyFixed) == 24);
inline constexpr uint32_t kReplyMore = 1u << 0;

struct Reply {
  ReplyStatus status = ReplyStatus::kOk;
  uint32_t flags = 0;
  uint64_t instance_id = 0;
  uint32_t gpu_slot = 0;
  uint32_t proc_slot = 0;
  std::string text;  // error message or JSON
};

const char* to_string(MessageType type);
const char* to_string(ReplyStatus status);

}  // namespace egpu::protocol
