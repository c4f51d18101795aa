// GangOffsets: the offsets of a node's multi-node gangs (GangPlan's
// across_offsets), kept by the agent across a restart in a root-only file of
// its runtime directory. Their ranks on other nodes hold their windows at
// these offsets: a restarted agent that placed them afresh, in (job, step)
// order, could put a running step elsewhere on this node only. The file is
// only ever the agent's own, but it may be damaged or from another version:
// decoding checks every field and names what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/faa/types.h"
#include "core/util/result.h"

namespace egpu::model {

struct GangOffsets {
  static constexpr int kVersion = 1;
  // Far above a node's steps (256 instances per GPU); a damaged file cannot
  // make the agent build more.
  static constexpr std::size_t kMaxGangs = 4096;
  faa::Nanos period = 0;                                        // the period the offsets are in
  std::map<std::pair<uint64_t, uint32_t>, faa::Nanos> offsets;  // by (job, step)
  bool operator==(const GangOffsets&) const = default;
};

std::string encode_gang_offsets(const GangOffsets& offsets);
// The error names the field at fault ("gangs[3]: offset_ns: ...").
Result<GangOffsets> decode_gang_offsets(std::string_view text);

}  // namespace egpu::model
