// Helpers shared by egpuctl commands: calling the agent, reading its status
// JSON, and resolving an INSTANCE argument (id, JOB.STEP or JOB.STEP@GPU).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/protocol/control_client.h"
#include "core/util/result.h"

namespace egpu::ctl {

Result<protocol::Reply> call_agent(const std::string& socket, const protocol::Request& request);
// The reply's text when ok; else an error naming the agent's status and message.
Result<std::string> call_for_text(const std::string& socket, const protocol::Request& request);
Result<nlohmann::json> fetch_status(const std::string& socket);

// A whole decimal number, nothing before or after it; `out` may be written
// even when it fails.
bool parse_u64(std::string_view s, uint64_t& out);

struct Selector {
  uint64_t id = 0;  // set when given as an id
  uint64_t job = 0;
  std::string step;  // "0", "batch", ...
  int gpu = -1;      // -1: any GPU
};
Result<Selector> parse_selector(const std::string& text);
// Instances of the status JSON that match; errors when none.
Result<std::vector<nlohmann::json>> resolve(const nlohmann::json& status, const Selector& sel);

}  // namespace egpu::ctl
