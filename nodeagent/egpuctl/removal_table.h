// What `egpuctl remove` prints without --json: how many instances went and,
// per instance, what it achieved (the agent's reply is JSON, for scripts).
#pragma once

#include <string>
#include <string_view>

#include "core/util/result.h"

namespace egpu::ctl {

// The table for the agent's remove reply; an error names what is wrong with
// the reply.
Result<std::string> removal_table(std::string_view reply);

}  // namespace egpu::ctl
