// The two tenants the agent-level security tests play (root makes them):
// a hostile job and an honest one beside it, each of its own user, and the
// order of the descriptors an attach reply hands them.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace egpu::test {

inline constexpr uid_t kMallory = 4242;
inline constexpr uid_t kHonest = 4343;
inline constexpr uint64_t kMalloryJob = 1;
inline constexpr uint64_t kHonestJob = 2;

inline constexpr size_t kGpuPageFd = 0;
inline constexpr size_t kInstancePageFd = 1;
inline constexpr size_t kWakeFd = 2;

}  // namespace egpu::test
