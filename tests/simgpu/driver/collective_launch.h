// Collective kernels: a kernel whose name starts with `ncclDevKernel` or
// `simgpu_collective` is launched as an OpKind::kCollective op, its part of a
// group that meets on the segment's board (model/collectives.h).
//
// Parameters: [0] duration ns (uint64, as for every kernel), [1] communicator
// id (uint64), [2] group size (uint32); in a CU_LAUNCH_PARAM_BUFFER_POINTER
// buffer at offsets 0, 8 and 16. A collective kernel must be given all three
// (kernelParams is read up to [2], as the driver reads a kernel's declared
// parameters). A zero communicator or a size below 2 launches a plain kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace egpu::simgpu::driver {

bool is_collective_kernel_name(std::string_view name);

struct CollectiveArgs {
  uint64_t communicator = 0;
  uint32_t size = 0;
};

// The collective's communicator and size; none when it runs as a plain kernel.
std::optional<CollectiveArgs> collective_args(void** kernel_params, void** extra);

// A launch's parameter buffer (CU_LAUNCH_PARAM_BUFFER_POINTER in `extra`) and
// its size; {nullptr, 0} when there is none.
std::pair<const char*, size_t> param_buffer(void** extra);

// The rendezvous key of this process's next collective of `communicator` on
// device `physical`: a non-zero mix of (communicator, sequence number), so the
// k-th collective of every member meets the others' k-th. Counted per
// device too, so one process driving several devices of a communicator
// (NCCL's single-process mode) keeps one count per rank.
uint64_t next_group_key(uint64_t communicator, uint32_t physical);

}  // namespace egpu::simgpu::driver
