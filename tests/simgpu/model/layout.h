// The shared-memory layout of the simulated GPUs. Every struct here lives in
// one POSIX shm segment mapped by all processes using simgpu, so it holds only
// fixed-size plain data (no pointers: each process maps at its own address).
// Zero bytes are a valid "free/empty" state wherever possible, so a freshly
// ftruncate'd segment needs little initialisation.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace egpu::simgpu {

inline constexpr uint64_t kSegmentMagic = 0x53494d4750555347ull;  // "SIMGPUSG"
inline constexpr uint32_t kLayoutVersion = 6;  // 5: collectives, 6: their board and fabric
inline constexpr uint32_t kMaxDevices = 16;
inline constexpr uint32_t kMaxContexts = 64;        // per device; slot sets are uint64_t bitmasks
inline constexpr uint32_t kQueueDepth = 1024;       // ops per context, like a bounded pushbuffer
inline constexpr uint32_t kEventSlots = 2048;       // event timestamps per context
inline constexpr uint32_t kMaxAllocations = 16384;  // live allocations per device
inline constexpr uint32_t kLabelBytes = 32;
inline constexpr uint32_t kDeviceNameBytes = 96;
inline constexpr uint32_t kMaxRendezvous = 256;   // collectives in flight, all devices
inline constexpr uint32_t kFabricNameBytes = 64;  // shm name of a shared board, NUL included

// Device addresses: device d allocates from [(d + 1) << 40, (d + 2) << 40);
// virtual-address reservations (cuMemAddressReserve) from kVaBase upwards.
inline constexpr uint64_t kDeviceRangeShift = 40;
inline constexpr uint64_t kVaBase = uint64_t{kMaxDevices + 2} << kDeviceRangeShift;
inline constexpr uint64_t kVaLimit = uint64_t{kMaxDevices + 6} << kDeviceRangeShift;

enum class OpKind : uint32_t {
  kKernel = 1,       // runs for remaining_ns of device time
  kCopy = 2,         // memcpy/memset: timed like a kernel
  kEventRecord = 3,  // stamps events[ref_slot] with the device time it completes at
  kWait = 4,         // blocks the queue until context ref_slot reaches wait_seq
  // A collective's part (an NCCL kernel's, say): once it has the engine it
  // arrives at its group's rendezvous, then holds the engine, spinning,
  // until every member of the group (on any device, of any segment sharing
  // the board) has arrived; then it runs remaining_ns.
  kCollective = 5,
};

enum class CollectivePhase : uint32_t {
  kNotArrived = 0,
  kWaiting = 1,   // arrived; spinning until the group is complete
  kReleased = 2,  // the group is complete (or it had no board): runs like a kernel
};

struct Op {
  uint64_t seq;             // per-context sequence number, first op is 1
  uint64_t remaining_ns;    // device time still to run (kKernel, kCopy)
  uint64_t wait_seq;        // kWait: the sequence number the other context must complete
  uint32_t kind;            // OpKind
  uint32_t stream_tag;      // which stream of the owning process queued it
  uint32_t ref_slot;        // kEventRecord: event slot; kWait: context slot waited for
  uint32_t ref_generation;  // kWait: generation of that context slot
  // kCollective: its group's rendezvous key (never 0), the group's size,
  // its CollectivePhase, and since when it has held the engine spinning.
  uint64_t group;
  uint32_t group_size;
  uint32_t group_phase;
  uint64_t spin_since_ns;
};

struct EventStamp {
  uint64_t seq;        // sequence number of the record op that wrote it
  uint64_t device_ns;  // device time at which that op completed
};

// A process's identity that survives pid reuse: pid plus its start time
// (clock ticks since boot, /proc/<pid>/stat field 22; 0 when unknown).
struct ProcessIdentity {
  int32_t pid;
  uint32_t reserved;
  uint64_t start_time;
};

enum class ContextState : uint32_t {
  kFree = 0,     // never used
  kActive = 1,   // owned by a live process
  kRetired = 2,  // destroyed or owner died; kept for its statistics until reused
};

struct ContextSlot {
  uint32_t state;       // ContextState
  uint32_t generation;  // bumped on every claim, so stale references are detected
  ProcessIdentity owner;
  char label[kLabelBytes];
  uint64_t busy_ns;        // cumulative device time this context ran
  uint64_t next_seq;       // sequence number the next op gets
  uint64_t completed_seq;  // every op with seq <= this has completed
  uint64_t head;           // ring indices, ever increasing: op i is ops[i % kQueueDepth]
  uint64_t tail;
  uint64_t created_ns;
  uint64_t retired_ns;
  Op ops[kQueueDepth];
  EventStamp events[kEventSlots];
};

struct DeviceTimeline {
  uint64_t now_ns;         // device clock (CLOCK_MONOTONIC) the state is valid at
  uint64_t busy_ns;        // cumulative device time any context ran
  uint64_t timeslice_ns;   // hardware time slice between contexts with work
  uint64_t slice_used_ns;  // how much of its slice the running context has used
  uint64_t pending_mask;   // bit i: contexts[i] has queued ops (derived, repairable)
  int32_t running;         // slot holding the engine, -1 none
  uint32_t reserved;
  ContextSlot contexts[kMaxContexts];
};

// One collective in flight: who of its group has arrived, and when the last
// did (device time is CLOCK_MONOTONIC on every device, so arrivals on
// different devices compare).
struct Rendezvous {
  uint64_t key;  // 0: free
  uint32_t size;
  uint32_t arrived;
  uint32_t departed;  // members whose part completed; the entry is freed when all have
  uint32_t reserved;
  uint64_t first_arrival_ns;
  uint64_t last_arrival_ns;
};

// Where collectives meet: in the device segment (one simulated node), or in
// a segment of its own that several nodes' segments share.
struct CollectiveBoard {
  pthread_mutex_t mutex;  // process-shared, robust; taken inside a device lock, never around one
  uint64_t overflows;     // collectives that found the board full and ran alone
  Rendezvous entries[kMaxRendezvous];
};

enum class AllocationKind : uint32_t {
  kFree = 0,
  kDevice = 1,   // cuMemAlloc
  kPitch = 2,    // cuMemAllocPitch
  kManaged = 3,  // cuMemAllocManaged
  kAsync = 4,    // cuMemAllocAsync / cuMemAllocFromPoolAsync
  kVmm = 5,      // cuMemCreate
  kArray = 6,    // cuArrayCreate / cuArray3DCreate
  kMipmappedArray = 7,
  kContextLimit = 8,  // cuCtxSetLimit: heap, printf FIFO, stack beyond the defaults
  // Imports: another process's allocation mapped here. Each keeps its target
  // (the exporter's entry) alive and is not charged itself: the device
  // memory is the target's, counted once.
  kIpcImport = 9,    // cuIpcOpenMemHandle, until cuIpcCloseMemHandle
  kPoolImport = 10,  // cuMemPoolImportPointer, until cuMemFree(Async)
  kVmmImport = 11,   // cuMemImportFromShareableHandle, until released and unmapped
  kGraphPool = 12,   // backing of graph allocations, kept until cuDeviceGraphMemTrim
  kPoolCache = 13,   // what a memory pool keeps of freed allocations (driver/pool_cache.h)
};

struct Allocation {
  uint64_t address;
  uint64_t size;
  uint64_t target;     // imports: address of the entry kept alive
  uint32_t kind;       // AllocationKind; kFree marks an unused entry
  int32_t owner_slot;  // -1: orphaned (freed by its owner, alive for its imports)
  uint32_t owner_generation;
  int32_t owner_pid;
  uint32_t import_refs;  // live import entries targeting this one
  uint32_t reserved;
};

struct DeviceMemory {
  uint64_t total_bytes;
  uint64_t used_bytes;    // sum of live entries (derived, repairable)
  uint64_t next_address;  // bump pointer: addresses are never reused
  uint64_t address_limit;
  uint32_t high_water;  // entries [0, high_water) may be in use
  uint32_t reserved;
  Allocation entries[kMaxAllocations];
};

struct DeviceShared {
  pthread_mutex_t mutex;  // process-shared, robust: guards everything below
  int32_t lock_holder_pid;
  uint32_t reserved;
  uint64_t last_liveness_check_ns;
  DeviceTimeline timeline;
  DeviceMemory memory;
};

struct SegmentConfig {
  uint32_t device_count;
  uint32_t shm_mode;      // of the segment, and of the fabric it creates
  uint64_t memory_bytes;  // per device
  uint64_t timeslice_ns;
  char device_name[kDeviceNameBytes];
  uint8_t pci_bus[kMaxDevices];
  // SIMGPU_FABRIC of the creator: the shm name of the board collectives meet
  // on, shared with other segments (simulated nodes); empty: the segment's own.
  // In the segment, so every process of it (stats too) uses the same board.
  char fabric_name[kFabricNameBytes];
};

struct SegmentHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t initialised;  // set last by the creator (release); others wait for it
  int32_t creator_pid;
  uint32_t reserved;
  uint64_t total_bytes;
  uint64_t devices_offset;
  uint64_t created_ns;
  uint64_t next_va;       // bump pointer for address reservations (atomic)
  uint64_t board_offset;  // of this node's CollectiveBoard, after the devices
  SegmentConfig config;
};

// A segment holding only a board (SIMGPU_FABRIC), created like the device
// segment: the creator sets `initialised` last, others wait for it.
inline constexpr uint64_t kFabricMagic = 0x53494d4746414252ull;  // "SIMGFABR"

struct FabricHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t initialised;
  int32_t creator_pid;
  uint32_t reserved;
  CollectiveBoard board;
};

static_assert(std::is_trivially_copyable_v<Op>);
static_assert(std::is_trivially_copyable_v<Rendezvous>);
static_assert(std::is_trivially_copyable_v<ContextSlot>);
static_assert(std::is_trivially_copyable_v<DeviceMemory>);
static_assert(kMaxContexts <= 64, "slot sets are 64-bit masks");

}  // namespace egpu::simgpu
